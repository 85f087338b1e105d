"""Dead letters are projected into a table of their own, kept past the topic's 30 days.

``dead-letters`` holds what the stream apps could not decide: undecodable inputs with their
bytes, inputs Kafka would never accept (their bytes are a valid record), and input offsets
that left retention unread (no value). The topic keeps them 30 days, and before the read
model had no trace of them: an operator asking after a month found nothing, and nothing
could alert on them. Their bytes are never decoded: a valid record among them is not a
record of the topic it came from.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient
from confluent_kafka import Producer
from psycopg import sql

from projections import queries
from projections.db import connect, schema_name
from projections.errors import HistoryNotInTopics
from projections.projector import Projector
from projections.rebuild import rebuild
from schemas.codec import encode
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.integration.test_read_cli_http import with_client
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import expire_records, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GAP_REASON = "left retention unread: offsets 5 to 7 (3), deleted before this instance read them"


Letter = tuple[bytes | None, str, str, str | None]


def _letters(settings: Settings, valid: bytes) -> list[Letter]:
    """(value, reason, origin, kind) of four dead letters as the engine writes them, the last
    as it did before kinds were (no header)."""
    prefix = settings.topic_prefix
    return [
        (b"\xff\x00not avro", "undecodable: bad magic", f"{prefix}deliveries[1]@40", "undecodable"),
        (
            valid,
            "cannot_be_recorded: over max.message.bytes",
            f"{prefix}deliveries[0]@41",
            "unrecordable",
        ),
        (None, GAP_REASON, f"{prefix}deliveries[2]@5..7", "unread"),
        (b"\x00", "undecodable: before 0.2.0", f"{prefix}deliveries[2]@9", None),
    ]


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=3)
    ensure_topics(s)
    rng = random.Random(61)
    produce_history(s, build_history(rng, 10), rng=rng, abort_every=0)
    yield s
    cleanup(s)


def _produce(settings: Settings, letters: list[Letter]) -> None:
    producer = Producer(settings.producer_config())
    for value, reason, origin, kind in letters:
        headers: list[tuple[str, str | bytes | None]] = [
            ("sluicegate.reason", reason.encode()),
            ("sluicegate.origin", origin.encode()),
        ]
        if kind is not None:
            headers.append(("sluicegate.kind", kind.encode()))
        producer.produce(settings.topic_named("dead-letters"), value, b"k", headers=headers)
    assert producer.flush(30) == 0


def _rows(conn: psycopg.Connection[Any], schema: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        sql.SQL(
            "SELECT src_offset, key, kind, reason, origin, value FROM {} ORDER BY src_offset"
        ).format(sql.Identifier(schema, "dead_letters"))
    ).fetchall()


def _from_dead_letters(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE src_topic = 'dead-letters'").format(
            sql.Identifier(schema, table)
        )
    ).fetchone()
    return int(row[0]) if row else 0


def _valid_record() -> bytes:
    """The bytes of a record that decodes (a dead letter of one Kafka would not take)."""
    (emitted,) = [e for e in build_history(random.Random(7), 1) if e.topic == "deliveries"][:1]
    return encode(emitted.record)


def test_dead_letters_are_rows_of_their_own_and_survive_a_rebuild(settings: Settings) -> None:
    letters = _letters(settings, _valid_record())
    _produce(settings, letters)
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    schema = schema_name(settings.topic_prefix)
    expected = [
        (n, "k", kind or "", reason, origin, value)
        for n, (value, reason, origin, kind) in enumerate(letters)
    ]
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _rows(conn, schema) == expected
        # Never decoded: the valid record among them is no event, and nothing is parked.
        assert _from_dead_letters(conn, schema, "event_log") == 0
        assert _from_dead_letters(conn, schema, "parked") == 0
        assert queries.get_dead_letter_counts(conn, schema) == {
            "undecodable": 1,
            "unrecordable": 1,
            "unread": 1,
            "": 1,
        }

    assert rebuild(settings).swapped
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _rows(conn, schema) == expected

    async def read(client: TestClient[Any, Any]) -> None:
        first = await (await client.get("/v1/dead-letters?limit=2")).json()
        assert first["total"] == 4 and first["page"] == {"from": 0, "limit": 2, "next": 2}
        assert [d["reason"] for d in first["dead_letters"]] == [r for _, r, _, _ in letters[:2]]
        assert [d["kind"] for d in first["dead_letters"]] == ["undecodable", "unrecordable"]
        assert first["dead_letters"][0]["value_bytes"] == len(b"\xff\x00not avro")
        rest = await (await client.get("/v1/dead-letters?from=2&limit=1")).json()
        (gap,) = rest["dead_letters"]
        assert (gap["origin"], gap["value_bytes"], rest["page"]["next"]) == (
            letters[2][2],
            None,
            3,
        )
        unread = await (await client.get("/v1/dead-letters?kind=unread")).json()
        assert [d["origin"] for d in unread["dead_letters"]] == [letters[2][2]]
        assert unread["total"] == 1 and unread["page"]["next"] is None
        for query in ("limit=0", "kind=lost", "kind="):
            refused = await client.get(f"/v1/dead-letters?{query}")
            assert refused.status == 400
            assert (await refused.json())["error"]["code"] == "invalid_query"
        metrics = await (await client.get("/metrics")).text()
        assert 'sluicegate_dead_letters_total{kind="unread"} 1\n' in metrics
        assert 'sluicegate_dead_letters_total{kind="moved"} 0\n' in metrics
        assert 'sluicegate_dead_letters_total{kind=""} 1\n' in metrics

    with_client(settings, read)


def test_a_rebuild_refuses_to_drop_dead_letters_that_left_the_topic(settings: Settings) -> None:
    _produce(settings, _letters(settings, _valid_record()))
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    expire_records(settings, "dead-letters", 0, before=2)

    with pytest.raises(HistoryNotInTopics) as refused:
        rebuild(settings)
    assert f"{settings.topic_prefix}dead-letters[0]: 2 records (offsets 0 to 1" in str(
        refused.value
    )
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert len(_rows(conn, schema_name(settings.topic_prefix))) == 4
