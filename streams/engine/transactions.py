"""Transaction calls on the producer, with librdkafka's error rules applied.

librdkafka marks every transactional error *retriable* (call the same API again: a timed-out
``commit_transaction`` or ``abort_transaction`` resumes the call in progress), *abortable*
(``txn_requires_abort``: abort, then begin anew) or *fatal* (the producer is unusable).
After a timed-out commit only a retried commit is allowed (an abort is refused while a commit
is in progress), so a commit is resumed until it succeeds, needs an abort, or its deadline
passes; then :class:`~streams.errors.TransactionUnresolved`, and the processor starts over
as a restart with the same transactional id would, whose initialisation completes or aborts
the transaction. Time the process spent stopped or starved does not use the deadline up:
after such a pause a call is resumed for :data:`AFTER_PAUSE_S` more, long enough to hear
how the broker resolved it.

A record the broker or the client will never accept (too large, invalid) is *unrecordable*:
the whole transaction is aborted as usual, and the processor isolates the input that made it
(:class:`Unrecordable` carries the reason).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from streams.engine.bounded import BoundedCalls, CallHung
from streams.errors import (
    FatalKafkaError,
    KafkaUnavailable,
    ProcessorFenced,
    TransactionUnresolved,
)

log = logging.getLogger("sluicegate.processor")

FENCED_CODES = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
UNRECORDABLE_CODES = frozenset(
    {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD}
)
STALE_GENERATION_CODES = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
    }
)


class Failure(enum.Enum):
    RETRY = "retry"
    ABORT = "abort"
    UNRECORDABLE = "unrecordable"
    FENCED = "fenced"
    FATAL = "fatal"


def classify(err: KafkaError) -> Failure:
    """What to do about ``err``; an unknown non-retriable error aborts the transaction."""
    if err.code() in FENCED_CODES:
        return Failure.FENCED
    if err.fatal():
        return Failure.FATAL
    if err.code() in UNRECORDABLE_CODES:
        return Failure.UNRECORDABLE
    if err.txn_requires_abort():
        return Failure.ABORT
    if err.retriable():
        return Failure.RETRY
    return Failure.ABORT


class Unrecordable(Exception):
    """A record of the transaction can never be produced; the transaction was aborted."""


def describe(err: KafkaError) -> str:
    """``CODE_NAME: message``: the reason a dead letter or an outcome carries."""
    return f"{err.name()}: {err.str()}"


PAUSED_S = 1.0
"""A call or a back-off that ends this much later than it was given: the process was stopped
or starved meanwhile (SIGSTOP, a frozen VM, swap), not waiting for the broker."""
AFTER_PAUSE_S = 10.0
"""How long a call is resumed after such a pause, however little of its deadline is left: the
broker has an answer by then (done, or fenced because the transaction expired), and a call
given the 0.1 s left of a deadline the pause used up would only time out again."""


HUNG_AFTER_S = 10.0
"""How long past the timeout it was given a call may take before it counts as hung."""
CALLS = BoundedCalls()
"""Where the calls that take a timeout run (``bounded.py``): librdkafka does not always keep
``send_offsets_to_transaction``'s timeout, and a call that never returns would wedge the
loop. A hung call is :class:`TransactionUnresolved`: the processor starts over."""


def _remaining(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


def _call(call: Callable[[float], object], given: float, what: str) -> None:
    """``call(given)``, waited for at most ``given`` + :data:`HUNG_AFTER_S`."""
    try:
        CALLS.call(lambda: call(given), given + HUNG_AFTER_S, what)
    except CallHung as e:
        raise TransactionUnresolved(
            f"{e}, though given {given:.1f} s (librdkafka does not always keep the timeout "
            "when the group coordinator went away): this transaction's outcome is unknown"
        ) from None


def _resume(call: Callable[[float], object], deadline: float, what: str) -> None:
    """Call ``call(timeout)`` until it succeeds; a retriable error resumes it until
    ``deadline`` (moved to :data:`AFTER_PAUSE_S` from the end of a pause, or from the start
    when it has passed already, if that is later), then :class:`TransactionUnresolved`. Any
    other error is raised."""
    backoff = 0.05
    if time.monotonic() >= deadline:
        # Only a process stopped or starved on its way here comes after its deadline.
        deadline = time.monotonic() + AFTER_PAUSE_S
    while True:
        given = _remaining(deadline)
        started = time.monotonic()
        try:
            _call(call, given, what)
            return
        except KafkaException as e:
            err = e.args[0]
            if classify(err) is not Failure.RETRY:
                raise
            deadline = _after_pause(deadline, started, given)
            if time.monotonic() >= deadline:
                raise TransactionUnresolved(
                    f"{what} did not complete in time (last: {err.str()}): its outcome is unknown"
                ) from e
            log.warning("%s: %s; resuming", what, err.str())
            started = time.monotonic()
            time.sleep(backoff)
            deadline = _after_pause(deadline, started, backoff)
            backoff = min(backoff * 2, 1.0)


def _after_pause(deadline: float, started: float, given: float) -> float:
    """``deadline``, or :data:`AFTER_PAUSE_S` from now if what began at ``started`` and was
    given ``given`` seconds ended more than :data:`PAUSED_S` late."""
    now = time.monotonic()
    if now - started > given + PAUSED_S:
        return max(deadline, now + AFTER_PAUSE_S)
    return deadline


def send_offsets(
    producer: Producer, offsets: Sequence[TopicPartition], metadata: object, deadline: float
) -> None:
    """Register ``offsets`` with the group metadata; retried with identical arguments.

    A retriable error past ``deadline`` is raised as it is (the transaction can still be
    aborted: no commit has started); a call that does not return is
    :class:`TransactionUnresolved` (no abort can be made while it runs).
    """
    backoff = 0.05
    positions = list(offsets)
    while True:
        try:
            _call(
                lambda timeout: producer.send_offsets_to_transaction(positions, metadata, timeout),
                _remaining(deadline),
                "sending the offsets to the transaction",
            )
            return
        except KafkaException as e:
            if classify(e.args[0]) is not Failure.RETRY or time.monotonic() >= deadline:
                raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)


def commit(producer: Producer, deadline: float) -> None:
    """Commit, resuming a timed-out commit until ``deadline`` (never aborting it)."""
    _resume(producer.commit_transaction, deadline, "committing the transaction")


def abort(producer: Producer, deadline: float, who: str) -> None:
    """Abort, resuming a timed-out abort. An abort librdkafka refuses (a commit is in
    progress) is :class:`TransactionUnresolved`: only a restart resolves it; one refused
    because ``who`` was fenced, or on a fatal error, is what :func:`translate` makes of it.

    Outstanding messages are flushed first: aborting while they are in flight purges them
    mid-request, which leaves the next transaction with skipped sequence numbers, or (if
    their partitions were not yet added to the transaction) fails the abort with a fatal
    ``INVALID_TXN_STATE``. That flush is where a fence met by a record still in flight (its
    partition being added to the transaction) surfaces: librdkafka's fatal error is raised
    from it, and is translated like the abort's own.
    """
    try:
        producer.flush(_remaining(deadline))
        _resume(producer.abort_transaction, deadline, "aborting the transaction")
    except KafkaException as e:
        if classify(e.args[0]) in (Failure.FENCED, Failure.FATAL):
            raise translate(e, who, "aborting the transaction") from e
        raise TransactionUnresolved(
            f"the transaction could not be aborted ({e.args[0].str()}): its outcome is unknown"
        ) from e


def translate(e: KafkaException, who: str, doing: str) -> Exception:
    """The Sluicegate error for a fenced, fatal or otherwise unrecoverable driver error."""
    err = e.args[0]
    if err.code() in FENCED_CODES:
        return ProcessorFenced(
            f"{who} was fenced while {doing} ({err.str()}): another instance took over; "
            "this one stops"
        )
    if err.fatal():
        return FatalKafkaError(f"fatal Kafka error while {doing}: {err.str()}")
    return KafkaUnavailable(f"Kafka error while {doing}: {err.str()}")
