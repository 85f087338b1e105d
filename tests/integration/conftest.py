"""Fixtures the broker and venue tests share. A module that needs another admission harness
(other partitions, a changed topic) defines its own ``harness``, which takes precedence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.admission import AdmissionHarness
from tests.support.venue import VenueProcess, running_venue


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    """Admission topics under a fresh prefix (3 partitions), the example workflow applied;
    processors started on it are stopped afterwards."""
    h = AdmissionHarness(partitions=3)
    h.apply_workflow()
    yield h
    h.close()


@pytest.fixture(scope="module")
def venue_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VenueProcess]:
    """One paper venue (``tests/support/venue.py``'s config) for the whole module."""
    with running_venue(tmp_path_factory.mktemp("venue")) as venue:
        yield venue


@pytest.fixture
def venue(venue_process: VenueProcess) -> VenueProcess:
    """The module's venue, reset: no orders, trades or faults; balances as configured."""
    venue_process.reset()
    return venue_process
