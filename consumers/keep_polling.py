"""Keep a consumer in its group while its thread runs a long handler.

librdkafka leaves the group when the application has not polled for
``max.poll.interval.ms`` (300 s by default), and the group then gives the partitions, with
the task being handled, to another member. :class:`KeepPolling` lends the consumer to a
helper thread while a handler runs on the worker's own thread (which keeps the handler's
thread-locals, signals and cost: nothing crosses threads while handlers are quick). Once a
handler has run :data:`KEEP_POLLING_AFTER_S`, the helper pauses every assigned partition
(so no task is delivered meanwhile) and polls every half second; rebalance callbacks run
there, on the helper thread. The partitions are resumed when the handler returns.

Whoever uses the consumer holds :attr:`KeepPolling.lock`: the worker's thread always, except
between :meth:`KeepPolling.lend` and :meth:`KeepPolling.take_back`; the helper only then.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer, Message

from consumers.branch_tasks import Task

log = logging.getLogger("sluicegate.worker")

KEEP_POLLING_AFTER_S = 1.0
"""A handler still running after this long has its worker's partitions paused and polled."""
POLL_EVERY_S = 0.5
SAY_STILL_RUNNING_EVERY_S = 60.0


class KeepPolling:
    """Polls ``consumer`` on a helper thread while a handler runs (see the module)."""

    def __init__(self, consumer: Consumer, *, name: str) -> None:
        self.consumer = consumer
        self.name = name
        self.lock = threading.Lock()
        """Held by whoever uses the consumer."""
        self.early: list[Message] = []
        """Tasks a poll returned while a handler ran (none while the partitions stay paused):
        the worker seeks back to them."""
        self.failed: BaseException | None = None
        self._running: tuple[Task, float] | None = None
        """What runs now and since when (monotonic)."""
        self._handler_runs = threading.Lock()
        self._paused = False
        self._said_at = 0.0
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def lend(self, task: Task) -> None:
        """Lend the consumer to the helper while ``task``'s handler runs on the caller's
        thread, which holds :attr:`lock` and gives it up here. Always followed by
        :meth:`take_back` (in a ``finally``)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._keep, name=f"keep-polling-{self.name}", daemon=True
            )
            self._thread.start()
        self._handler_runs.acquire()
        self._running = (task, time.monotonic())
        self.lock.release()

    def take_back(self) -> None:
        """The handler returned (or raised): hold :attr:`lock` again, once a poll the helper
        is in (and any rebalance callback it serves) has returned, and resume what the helper
        paused. An exception the helper met while polling is raised here."""
        self._running = None
        self._handler_runs.release()
        self.lock.acquire()
        if self._paused:
            self._paused = False
            self.consumer.resume(self.consumer.assignment())
        failed, self.failed = self.failed, None
        if failed is not None:
            raise failed

    def wait_for_handler(self) -> None:
        """Return once no handler runs (a rebalance callback on the helper waits here)."""
        with self._handler_runs:
            pass

    def close(self) -> None:
        """End the helper thread (it finishes a poll it is in first, up to 5 s)."""
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _keep(self) -> None:
        while not self._closed.wait(POLL_EVERY_S):
            running = self._running
            if running is None or time.monotonic() - running[1] < KEEP_POLLING_AFTER_S:
                continue
            if not self.lock.acquire(blocking=False):
                continue
            try:
                if self._running is running and self.failed is None:
                    self._poll(running)
            except BaseException as e:  # handed to the worker's thread
                self.failed = e
            finally:
                self.lock.release()

    def _poll(self, running: tuple[Task, float]) -> None:
        # Partitions assigned since the last round are paused too.
        self.consumer.pause(self.consumer.assignment())
        self._paused = True
        msg = self.consumer.poll(0)
        if msg is not None and msg.error() is None:
            self.early.append(msg)
        now = time.monotonic()
        if now - max(self._said_at, running[1]) >= SAY_STILL_RUNNING_EVERY_S:
            self._said_at = now
            log.warning(
                "the handler of run %s slot %s has run %.0f s; the worker keeps its "
                "partitions meanwhile",
                running[0].run_id,
                running[0].slot,
                now - running[1],
            )
