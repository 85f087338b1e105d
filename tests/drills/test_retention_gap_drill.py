"""A frozen processor whose next deliveries leave retention meanwhile: the gap is recorded.

SIGSTOP freezes ``sluicegate processor`` with every record it fetched decided. While it is
frozen, deliveries arrive and the oldest of them are deleted (``delete_records``, what
retention does to a processor frozen or behind for longer than the topic keeps records).
Resumed, it finds its fetch position gone. Before, librdkafka jumped to the partition's new
start by itself and the deleted deliveries got no outcome and no word; now each gap is a
dead letter naming the offsets, and every delivery still on the topic gets exactly one
outcome.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.codec import decode
from schemas.commands import AdmitDelivery
from streams.settings import Settings
from tests.integration.test_engine_poison import dead_letters
from tests.support.admission import AdmissionHarness, candle
from tests.support.component_process import ProcessorProcess
from tests.support.kafka import expire_records, read_topic, wait_until

pytestmark = [pytest.mark.drill, pytest.mark.timeout(240)]


def _offsets(settings: Settings) -> dict[str, int]:
    """Each delivery's offset on the one partition of ``deliveries``."""
    offsets = {}
    for m in read_topic(settings, settings.topic_named("deliveries")):
        delivery = decode(m.value() or b"")
        assert isinstance(delivery, AdmitDelivery)
        offsets[delivery.delivery_id] = m.offset() or 0
    return offsets


def _span(origin: bytes) -> tuple[int, int]:
    """The offsets ``topic[p]@first..last`` names."""
    first, _, last = origin.decode().rpartition("@")[2].partition("..")
    return int(first), int(last)


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=1)
    h.apply_workflow(branch_timeout="1h")
    yield h
    h.close()


def test_deliveries_deleted_while_the_processor_was_frozen_are_a_dead_letter(
    harness: AdmissionHarness, tmp_path: Path
) -> None:
    processor = ProcessorProcess(harness.settings, "frozen", tmp_path)
    processor.start()
    try:
        before = [harness.deliver(candle(instrument=f"A{n}USDT")) for n in range(3)]
        harness.wait_for_outcomes(3, timeout_s=120)

        processor.pause()
        wait_until(processor.stopped, timeout_s=10, what="SIGSTOP to take effect")
        during = [harness.deliver(candle(instrument=f"B{n}USDT")) for n in range(5)]
        at = _offsets(harness.settings)
        kept_from = at[during[3].delivery_id]
        expire_records(harness.settings, "deliveries", 0, before=kept_from)
        processor.resume()

        wait_until(lambda: len(dead_letters(harness.settings)) >= 1, timeout_s=60)
        letters = dead_letters(harness.settings)
        gap_first, gap_last = _span(letters[0][1]["sluicegate.origin"])
        lost = {d.delivery_id for d in during if gap_first <= at[d.delivery_id] <= gap_last}
        outcomes = harness.wait_for_outcomes(8 - len(lost), timeout_s=120)
    finally:
        processor.stop()
    log = processor.log_tail(20_000)

    # A fetch the broker held open when the process froze may still carry the first
    # delivery or so of the frozen time; every other delivery before the new start is gone.
    assert len(letters) == 1, letters
    assert at[during[0].delivery_id] <= gap_first <= gap_last == kept_from - 1, log
    assert 1 <= len(lost) <= 3
    for d in before + during:
        assert len(outcomes.outcome_for(d.delivery_id)) == (d.delivery_id not in lost), d
    reason = letters[0][1]["sluicegate.reason"]
    gone = f"left retention unread: offsets {gap_first} to {gap_last} ({gap_last - gap_first + 1})"
    assert reason.startswith(gone.encode())
    assert letters[0][1]["sluicegate.kind"] == b"unread"
    assert "left retention unread" in log
    assert f" expired={gap_last - gap_first + 1} " in log  # the closing line
    rejoined = log.count("assigned [0]") - 1
    print(
        f"\ndrill frozen past retention: {len(lost)} deliveries lost, one dead letter, "
        f"rejoined the group {rejoined}x",
        file=sys.stderr,
    )
