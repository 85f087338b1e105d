"""A Faust app serving every slot, for the bridge's broker tests (run as a subprocess).

``python -m tests.support.faust_worker worker`` with the test's ``SLUICEGATE_*`` environment;
``FAUST_TEST_CALLS`` names a file that gets one line ``run_id/slot/attempt`` per handler call,
``FAUST_TEST_DEADLINE_SLOTS`` the comma-separated slots whose deadline is checked.
"""

from __future__ import annotations

import os

from consumers.branch_worker import Proposal, Task
from consumers.faust_bridge import serve_slot, sluicegate_app
from streams.settings import load_settings

settings = load_settings()
app = sluicegate_app(settings, "faust-test")
CALLS = os.environ["FAUST_TEST_CALLS"]
DEADLINE_SLOTS = [s for s in os.environ.get("FAUST_TEST_DEADLINE_SLOTS", "").split(",") if s]


def handler(task: Task) -> dict[str, object] | Proposal:
    with open(CALLS, "a", encoding="utf-8") as calls:
        calls.write(f"{task.run_id}/{task.slot}/{task.attempt}\n")
    seen: dict[str, object] = {"slot": task.slot, "instrument": task.payload.get("instrument")}
    if task.action_role == "propose":
        return Proposal(kind="entry", side="buy", quantity="0.01", result=seen)
    return seen


slot = serve_slot(app, settings, handler, deadline_slots=DEADLINE_SLOTS, name="faust-test")

if __name__ == "__main__":
    app.main()
