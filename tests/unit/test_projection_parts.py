"""Small pure parts of the projections: naming, time parsing, filters, metrics, merge rules."""

from __future__ import annotations

import pytest

from projections import batch_writer
from projections.compare import Difference
from projections.db import REBUILD_SUFFIX, schema_name
from projections.handlers import HANDLERS, Source, project, record_time_ms
from projections.metrics import render
from projections.migrate import migrations
from projections.model import TABLES, RowOp, reduce_rows, storable
from projections.rows import dead_letter
from schemas.events import (
    AdmissionRecordEvicted,
    BranchLaunched,
    DeliveryDeduplicated,
    DispatchRefused,
    JournalEvicted,
    RunStatusChanged,
)
from schemas.records import RECORD_CLASSES
from streams.adapters.replay import ReplayFilter, csv_columns, parse_time
from streams.errors import InvalidFilter
from tests.support.memory_projection import MemoryProjection


@pytest.mark.parametrize(
    ("dsn", "durable", "options"),
    [
        ("postgresql://u@h/db", True, "-c lock_timeout=10000"),
        ("postgresql://u@h/db", False, "-c lock_timeout=10000 -c synchronous_commit=off"),
        # The DSN's own options come after the lock wait, so its lock_timeout wins.
        (
            "host=h options='-c lock_timeout=60000'",
            False,
            "-c lock_timeout=10000 -c lock_timeout=60000 -c synchronous_commit=off",
        ),
    ],
)
def test_a_writer_session_bounds_its_lock_waits(dsn: str, durable: bool, options: str) -> None:
    assert batch_writer._options(dsn, durable=durable) == options


def test_schema_names_are_safe_identifiers_that_fit() -> None:
    assert schema_name("sluicegate.") == "sg_sluicegate_"
    assert schema_name("T-1a2b.") == "sg_t_1a2b_"
    long = schema_name("x" * 100)
    assert len(long + REBUILD_SUFFIX) <= 63
    assert long != schema_name("x" * 99)
    for prefix in ("a'b", 'a"b', "a;b", "ä"):
        assert all((c.isalnum() and c.isascii()) or c == "_" for c in schema_name(prefix))


def test_parse_time() -> None:
    assert parse_time("1780000000000") == 1_780_000_000_000
    assert parse_time("2026-11-30T12:00:00Z") == 1_796_040_000_000
    assert parse_time("2026-11-30T13:00:00+01:00") == 1_796_040_000_000
    assert parse_time("2026-11-30T12:00:00.250Z") == 1_796_040_000_250
    for bad in ("yesterday", "2026-11-30T12:00:00", "", "12:00", "1e3"):
        with pytest.raises(InvalidFilter):
            parse_time(bad)


def test_replay_filter() -> None:
    dedup = DeliveryDeduplicated("d", "btc/paper/x", "run-1", "in_flight", 1, 2)
    evicted = AdmissionRecordEvicted("btc/paper/x", ("run-1", "run-2"), 3)
    assert ReplayFilter(subscription="btc").keeps(dedup, "btc/paper/x", 10)
    assert not ReplayFilter(subscription="bt").keeps(dedup, "btc/paper/x", 10)
    assert ReplayFilter(run="run-2").keeps(evicted, None, 10)
    assert not ReplayFilter(run="run-3").keeps(evicted, None, 10)
    assert ReplayFilter(since_ms=10, until_ms=11).keeps(dedup, None, 10)
    assert not ReplayFilter(since_ms=10, until_ms=11).keeps(dedup, None, 11)
    assert not ReplayFilter(since_ms=10).keeps(dedup, None, None)
    assert not ReplayFilter(scope="s").keeps(dedup, None, 10)


def test_csv_columns_cover_every_field_once() -> None:
    columns = csv_columns()
    assert len(columns) == len(set(columns))
    for cls in RECORD_CLASSES:
        assert set(cls.__dataclass_fields__) <= set(columns)


def test_record_time_is_the_last_at_ms_field() -> None:
    launched = BranchLaunched("r", "k", "s", 1, 1, 100, 200, "{}", 50)
    assert record_time_ms(launched) == 50
    assert record_time_ms(RunStatusChanged("r", "k", "pending", "running", 7)) == 7


# The gate's records get their read model (scopes, gate counts) together with the gate's
# stream app; until then they reach only event_log. Remove each one as its handler lands.
AWAITING_READ_MODEL: frozenset[type] = frozenset()


def test_every_record_type_has_a_handler() -> None:
    # A new event type must be thought about: give it a handler (even one that returns []).
    assert set(RECORD_CLASSES) - set(HANDLERS) - AWAITING_READ_MODEL == set()
    # The exemption expires by itself: a type that got its handler must leave the list.
    assert set(RECORD_CLASSES) >= AWAITING_READ_MODEL
    assert not AWAITING_READ_MODEL & set(HANDLERS)


def test_every_table_is_created_by_a_migration() -> None:
    text = "\n".join(m.text for m in migrations())
    for spec in TABLES:
        assert f"CREATE TABLE {spec.name} (" in text


def test_reduce_and_merge_rules() -> None:
    low: RowOp = (
        "run_status",
        {"run_id": "r", "status": "a", "previous_status": None, "changed_at_ms": 1, "rank": (1,)},
    )
    high: RowOp = (
        "run_status",
        {"run_id": "r", "status": "b", "previous_status": "a", "changed_at_ms": 2, "rank": (2,)},
    )
    assert reduce_rows([high, low])["run_status"][0]["status"] == "b"
    memory = MemoryProjection()
    memory.apply([high])
    memory.apply([low])
    assert memory.tables["run_status"][("r",)]["status"] == "b"


def test_nul_characters_are_replaced_before_storing() -> None:
    assert storable("a\x00b") == "a\ufffdb"
    assert storable(("x\x00",)) == ["x\ufffd"]
    record = DeliveryDeduplicated("d\x00", "k", "r", "in\x00flight", 1, 2)
    memory = MemoryProjection()
    memory.apply(project(Source("runs", 0, 0), record))
    assert ("d\ufffd",) in memory.tables["delivery_outcomes"]
    assert memory.counters[("duplicates", "in\ufffdflight")] == 1
    assert "\\u0000" not in str(memory.tables["event_log"][("runs", 0, 0)]["record"])


def test_a_refused_dispatch_is_counted_once_and_an_eviction_keeps_every_row() -> None:
    refused = DispatchRefused(
        "run-1.entry", "run-1", "entry", "beyond_horizon", 5, None, 1, 4, 2, 3_600_004
    )
    memory = MemoryProjection()
    memory.apply(project(Source("journal", 0, 7), refused))
    memory.apply(project(Source("journal", 0, 9), refused))  # the same dispatch read again
    assert list(memory.tables["journal_refusals"]) == [("run-1.entry",)]
    assert memory.counters[("dispatches_refused", "")] == 1
    assert "action_status" not in memory.tables or not memory.tables["action_status"]
    evicted = JournalEvicted("run-1", ("run-1.entry=filled",), 4, 5, 7_200_000, 7_200_005)
    ops = project(Source("journal", 0, 10), evicted)
    assert [table for table, _ in ops] == ["event_log"]
    assert record_time_ms(evicted) == 7_200_005


def test_a_dead_letter_is_one_row_from_its_headers_whatever_their_form() -> None:
    source = Source("dead-letters", 0, 12, "k", 1_000)
    as_list = [
        ("sluicegate.reason", b"left retention unread"),
        ("sluicegate.origin", b"d[1]@3..4"),
        ("sluicegate.kind", b"unread"),
    ]
    as_dict = {
        "sluicegate.reason": "left retention unread",
        "sluicegate.origin": "d[1]@3..4",
        "sluicegate.kind": "unread",
    }
    expected = {
        "src_topic": "dead-letters",
        "src_partition": 0,
        "src_offset": 12,
        "key": "k",
        "kind": "unread",
        "reason": "left retention unread",
        "origin": "d[1]@3..4",
        "value": None,
        "kafka_ts_ms": 1_000,
    }
    assert dead_letter(source, list(as_list), None) == [("dead_letters", expected)]
    assert dead_letter(source, dict(as_dict), None) == [("dead_letters", expected)]
    # Written by some other producer: kept all the same, bytes included.
    (bare,) = dead_letter(source, None, b"\xff")
    assert bare[1]["reason"] == bare[1]["origin"] == bare[1]["kind"] == ""
    assert bare[1]["value"] == b"\xff"


def test_metrics_text() -> None:
    text = render(
        {"deliveries": 3, "duplicates": {'we"ird\\': 1}, "holds": 2},
        [{"topic": "runs", "partition": 0, "next_offset": 9}],
        parked=1,
        dead_letters={"unread": 3, "": 1},
    )
    assert "# TYPE sluicegate_deliveries_total counter\nsluicegate_deliveries_total 3" in text
    assert 'sluicegate_duplicates_total{reason="we\\"ird\\\\"} 1' in text
    assert "# TYPE sluicegate_holds gauge\nsluicegate_holds 2" in text
    assert 'sluicegate_projection_offset{topic="runs",partition="0"} 9' in text
    # Every kind has its series from the start; letters from before kinds were, their own.
    assert (
        "# TYPE sluicegate_dead_letters_total counter\n"
        'sluicegate_dead_letters_total{kind=""} 1\n'
        'sluicegate_dead_letters_total{kind="moved"} 0\n'
        'sluicegate_dead_letters_total{kind="undecodable"} 0\n'
        'sluicegate_dead_letters_total{kind="unread"} 3\n'
        'sluicegate_dead_letters_total{kind="unrecordable"} 0\n'
    ) in text
    assert 'sluicegate_dead_letters_total{kind="' in render({}, [], parked=0)
    hostile = render({}, [], parked=0, dead_letters={'x"\n': 2, "y" * 500: 3, "moved": 1})
    assert 'sluicegate_dead_letters_total{kind="other"} 5\n' in hostile
    assert 'sluicegate_dead_letters_total{kind="moved"} 1\n' in hostile
    assert text.endswith("\n")


def test_metrics_show_each_table_s_disk() -> None:
    text = render({}, [], parked=0, table_bytes={"runs": 8192, "event_log": 65536})
    assert (
        "# TYPE sluicegate_projection_table_bytes gauge\n"
        'sluicegate_projection_table_bytes{table="event_log"} 65536\n'
        'sluicegate_projection_table_bytes{table="runs"} 8192\n'
    ) in text


def test_difference_descriptions() -> None:
    changed = Difference("runs", {"run_id": "r"}, "changed", {"a": 1, "b": 2}, {"a": 1, "b": 3})
    assert changed.describe() == "runs (run_id='r'): b: live 2 != rebuilt 3"
    only = Difference("runs", {"run_id": "r"}, "only_rebuilt", None, {"a": 1})
    assert only.describe() == "runs (run_id='r'): only in rebuilt: {'a': 1}"
