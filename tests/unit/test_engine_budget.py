"""The adaptive batch budget as a pure rule: records per transaction from measured times.

A transaction's time is the decide/produce work (grows with the records) plus the commit
(about fixed per transaction). Only the work is sized to the commit interval; a slow commit
makes batches bigger, never smaller.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.engine.budget import BatchBudget, next_budget

RULE = BatchBudget(interval_s=0.1, minimum=20, maximum=2000)


def test_a_slow_commit_never_shrinks_a_full_batch() -> None:
    # 2000 records decided in 40 ms, then a 2 s commit (twenty commit intervals).
    assert next_budget(RULE, current=2000, handled=2000, work_s=0.04, commit_s=2.0) == 2000
    # Already shrunk (say, after slow decisions): slow commits let it grow again.
    assert next_budget(RULE, current=100, handled=100, work_s=0.01, commit_s=1.0) > 100


def test_slow_work_shrinks_towards_what_fits_in_one_interval() -> None:
    # 2000 records took 1 s to decide: about 200 fit in 100 ms; move halfway there.
    assert next_budget(RULE, current=2000, handled=2000, work_s=1.0, commit_s=0.01) == 1100
    budget = 2000
    for _ in range(20):
        budget = next_budget(RULE, current=budget, handled=budget, work_s=budget / 2000, commit_s=0)
    assert 195 <= budget <= 205


def test_fast_work_and_fast_commits_grow_to_the_maximum() -> None:
    budget = 20
    for _ in range(20):
        budget = next_budget(
            RULE, current=budget, handled=budget, work_s=budget * 1e-6, commit_s=0.005
        )
    assert budget == 2000


def test_a_partial_batch_may_shrink_the_budget_but_never_grow_it() -> None:
    # 50 records when 500 were allowed: nothing says 2000 would fit.
    assert next_budget(RULE, current=500, handled=50, work_s=0.0001, commit_s=0.01) == 500
    # But 50 records that took 0.5 s say that 500 would not.
    assert next_budget(RULE, current=500, handled=50, work_s=0.5, commit_s=0.01) < 500


def test_an_empty_or_unmeasurable_batch_changes_nothing() -> None:
    assert next_budget(RULE, current=300, handled=0, work_s=0.0, commit_s=0.5) == 300
    assert next_budget(RULE, current=300, handled=300, work_s=0.0, commit_s=0.5) >= 300


times = st.floats(min_value=0.0, max_value=30.0, allow_nan=False)
budgets = st.integers(min_value=RULE.minimum, max_value=RULE.maximum)


@given(current=budgets, handled=st.integers(0, 4000), work=times, commit=times)
def test_the_budget_stays_within_its_bounds(
    current: int, handled: int, work: float, commit: float
) -> None:
    result = next_budget(RULE, current=current, handled=handled, work_s=work, commit_s=commit)
    assert RULE.minimum <= result <= RULE.maximum


@given(current=budgets, work=times, fast=times, slow=times)
def test_a_slower_commit_never_gives_a_smaller_budget(
    current: int, work: float, fast: float, slow: float
) -> None:
    fast, slow = sorted((fast, slow))
    at_fast = next_budget(RULE, current=current, handled=current, work_s=work, commit_s=fast)
    at_slow = next_budget(RULE, current=current, handled=current, work_s=work, commit_s=slow)
    assert at_slow >= at_fast
