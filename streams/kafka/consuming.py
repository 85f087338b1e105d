"""Taking records from a consumer without waiting for a full batch.

``Consumer.consume(n, timeout)`` returns only when it has ``n`` records or the timeout has
passed, so a lone record waits the whole timeout: on a signal's way to an order that is a
commit interval per hop. :func:`take` returns as soon as anything has arrived.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Message


def take(consumer: Consumer, limit: int, wait_s: float) -> list[Message]:
    """Up to ``limit`` records: what the consumer has already fetched, else the first to
    arrive within ``wait_s`` together with whatever came with it.

    Under load the batch is what has been fetched meanwhile, so it still grows with the
    backlog. Rebalance callbacks are served here, as in ``consume``.
    """
    messages: list[Message] = consumer.consume(limit, timeout=0)
    if messages or wait_s <= 0:
        return messages
    first = consumer.poll(wait_s)
    if first is None:
        return []
    if limit <= 1:
        return [first]
    return [first, *consumer.consume(limit - 1, timeout=0)]
