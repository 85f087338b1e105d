"""What the projector and the branch worker call alive (what their heartbeat under ``serve``
follows): a loop that came round within the stall limit, or a projector waiting for
PostgreSQL, which a restart would not bring back."""

from __future__ import annotations

import threading
import time

import pytest

from consumers.branch_worker import BranchWorker
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
