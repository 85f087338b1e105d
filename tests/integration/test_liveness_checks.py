"""What the projector and the branch worker call alive (what their heartbeat under ``serve``
follows): a loop that came round within the stall limit, or a projector waiting for
PostgreSQL, which a restart would not bring back."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from consumers.branch_worker import BranchWorker
from projections.db import connect, lock_key
from projections.errors import ProjectionError
from projections.projector import Projector
from streams.kafka.topics import ensure_topics
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def test_a_projector_waiting_for_postgresql_is_alive_and_a_stalled_one_is_not() -> None:
    nowhere = f"postgresql://sluicegate@127.0.0.1:{free_port()}/sluicegate"
    settings = unique_settings(SLUICEGATE_PG_DSN=nowhere)
    ensure_topics(settings)
    stop = threading.Event()
    projector = Projector(settings, stop=stop)
    failed: list[BaseException] = []

    def follow() -> None:
        try:
            projector.run()
        except ProjectionError as e:
            failed.append(e)

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        wait_until(lambda: projector.waiting_for_postgresql, timeout_s=30)
        stalled = time.monotonic() + Projector.STALLED_AFTER_S + 1
        assert projector.alive(stalled), "waiting for PostgreSQL counted as a stall"
    finally:
        stop.set()
        thread.join(30)
        projector.close()
    assert failed and "stopped while waiting for PostgreSQL" in str(failed[0])
    assert not projector.waiting_for_postgresql
    assert projector.alive(projector.came_round_at + Projector.STALLED_AFTER_S)
    assert not projector.alive(projector.came_round_at + Projector.STALLED_AFTER_S + 0.1)


def test_a_projector_waiting_for_the_writers_lock_is_alive() -> None:
    """``projections rebuild --verify`` holds the writers' lock while it compares the schemas,
    minutes on a large read model. A projector whose batch waits for it is not wedged (a
    restart would only wait again), so it is alive while its requests for the lock are
    answered. The stall limit is 3 s here instead of 60."""
    settings = unique_settings()
    ensure_topics(settings)
    runs = settings.topic_named("runs")
    stop = threading.Event()
    projector = Projector(settings, stop=stop)
    projector.STALLED_AFTER_S = 3.0
    producer = Producer(settings.producer_config())
    thread = threading.Thread(target=projector.run)
    thread.start()
    try:
        producer.produce(runs, key=b"k", value=b"not a record")  # parked: a write all the same
        producer.flush(10)
        wait_until(lambda: projector.stats.messages == 1, timeout_s=60, what="the first batch")
        with connect(settings.pg_dsn) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(projector.schema),))
            producer.produce(runs, key=b"k", value=b"nor this")
            producer.flush(10)
            wait_until(
                lambda: time.monotonic() - projector.came_round_at > 4.0,
                timeout_s=60,
                what="the projector's loop to wait for its batch",
            )
            assert projector.stats.messages == 1
            assert projector.alive(time.monotonic()), "waiting for the writers' lock: a stall?"
            holder.rollback()
        wait_until(lambda: projector.stats.messages == 2, timeout_s=60, what="the second batch")
        assert projector.alive(time.monotonic())
    finally:
        stop.set()
        thread.join(30)
        projector.close()


def test_a_worker_is_alive_while_its_loop_turns_within_the_stall_limit() -> None:
    settings = unique_settings()
    ensure_topics(settings)
    worker = BranchWorker(settings, lambda task: {}, group="liveness")
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        turned = worker.came_round_at
        wait_until(lambda: worker.came_round_at > turned, timeout_s=30)  # its loop turns
        assert worker.alive(time.monotonic())
        assert not worker.alive(worker.came_round_at + 60.1)
        assert worker.alive(worker.came_round_at + 119, stalled_after_s=120)
    finally:
        worker.stop()
        thread.join(30)
