"""The pure decision cores of the stream apps, and the rules they share.

No Kafka, database, network, filesystem or clock: every function is deterministic in its
arguments, and time (``now``, epoch milliseconds UTC) is always passed in. That is what lets
the engine replay, the tests control time, and two processors agree on every decision.

Each app's core is a package with the same public surface, ``decide(state, command, now) ->
events``, ``evolve(state, event) -> state`` and ``next_due_ms(state)``:

* :mod:`streams.core.admission` - run admission, one state per admission key;
* :mod:`streams.core.gate` - the supersession gate, one state per decision scope;
* :mod:`streams.core.journal` - the action journal, one state per run.

What they share:

* :mod:`streams.core.intake` - the front doors' one intake step: payload -> delivery or refusal,
  on :mod:`streams.core.cloudevents` (the CloudEvents 1.0 checks, every HTTP mode) and
  :mod:`streams.core.documents` (JSON that gives no key twice).
* :mod:`streams.core.identity` - occurrence identity, admission keys, content digests, on
  :mod:`streams.core.canonical` (how one field value is read) and :mod:`streams.core.fields`.
* :mod:`streams.core.refusals` - payload size and future source times, for processor and doors.
* :mod:`streams.core.workflow` - workflow file validation, digests and revisions.
* :mod:`streams.core.retention` - retention history and the horizon a delivery is judged by.
* :mod:`streams.core.lifecycle` - the one state-machine mechanism and the run and slot machines.
* :mod:`streams.core.durations` - durations, RFC 3339 / epoch-ms instants, candle intervals.
* :mod:`streams.core.limits`, :mod:`streams.core.reasons` - the bounds and the reason strings.
* :mod:`streams.core.errors` - the typed errors (root :class:`~streams.core.errors.CoreError`).
* :mod:`streams.core.state_codec` - admission's bytes for the state store and its changelog.
"""
