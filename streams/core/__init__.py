"""The pure decision core of the processor.

No Kafka, database, network, filesystem or clock: every function is deterministic in its
arguments, and time (``now``, epoch milliseconds UTC) is always passed in. That is what lets
the engine replay, the tests control time, and two processors agree on every decision.

* :mod:`streams.core.errors` - the typed errors (root :class:`~streams.core.errors.CoreError`).
* :mod:`streams.core.reasons` - the reason strings of rejected deliveries and reruns.
* :mod:`streams.core.limits` - the bounds admission enforces (payloads, reruns, durations).
* :mod:`streams.core.durations` - durations, RFC 3339 / epoch-ms instants, candle intervals.
* :mod:`streams.core.fields` - how each payload field is read (time, interval, case-folded).
* :mod:`streams.core.retention` - retention history and the horizon a delivery is judged by.
* :mod:`streams.core.workflow` - workflow file validation, digests and revisions.
* :mod:`streams.core.identity` - occurrence identity, admission keys, content digests.
* :mod:`streams.core.refusals` - payload size and future source times, for processor and doors.
* :mod:`streams.core.lifecycle` - run and branch-slot status machines.
* :mod:`streams.core.admission` - the admission aggregate: ``decide`` / ``evolve``.
* :mod:`streams.core.state_codec` - bytes for the state store and its changelog.
"""
