"""The projector's waits between batches PostgreSQL refused in a row (``projections/retry.py``)."""

from __future__ import annotations

import psycopg
from hypothesis import given
from hypothesis import strategies as st

from projections.retry import FIRST_WAIT_S, LONGEST_WAIT_S, FailuresInARow, one_line


def test_the_first_failure_is_retried_at_once_then_waits_double_up_to_the_longest() -> None:
    failures = FailuresInARow()
    assert [failures.failed() for _ in range(8)] == [0, 1, 2, 4, 8, 16, 30, 30]
    failures.succeeded()
    assert failures.failed() == 0 and failures.count == 1


@given(st.lists(st.booleans(), max_size=200))
def test_a_wait_is_never_longer_than_the_longest_and_a_success_restarts_the_count(
    outcomes: list[bool],
) -> None:
    failures, in_a_row = FailuresInARow(), 0
    for ok in outcomes:
        if ok:
            failures.succeeded()
            in_a_row = 0
            continue
        wait = failures.failed()
        in_a_row += 1
        assert failures.count == in_a_row
        assert (wait == 0) == (in_a_row == 1)
        assert wait == 0 or FIRST_WAIT_S <= wait <= LONGEST_WAIT_S


def test_an_error_of_several_lines_is_logged_as_one() -> None:
    error = psycopg.errors.DiskFull(
        'could not extend file "base/1/2": No space left on device\n'
        "HINT:  Check free disk space.\nCONTEXT:  COPY event_log, line 85\n"
    )
    assert one_line(error) == (
        'could not extend file "base/1/2": No space left on device; '
        "HINT:  Check free disk space.; CONTEXT:  COPY event_log, line 85"
    )
    assert one_line(psycopg.OperationalError()) == "OperationalError"


def test_a_note_added_to_the_error_joins_its_line() -> None:
    error = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout\n")
    error.add_note("on sg_x: pid 7 (user analyst, idle in transaction) holds runs")
    assert one_line(error) == (
        "canceling statement due to lock timeout; "
        "on sg_x: pid 7 (user analyst, idle in transaction) holds runs"
    )
