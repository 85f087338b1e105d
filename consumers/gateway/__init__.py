"""The execution gateway: the action journal (``streams.core.journal``) on the engine.

- :mod:`consumers.gateway.app` — the stream app (inputs, routes, effects, restore recovery);
- :mod:`consumers.gateway.shell` — performs the journal's effect requests on the venue;
- :mod:`consumers.gateway.orders` — recorded requests to venue orders, venue answers to the
  core's answer commands (pure);
- :mod:`consumers.gateway.notify` — the notification channel (HTTP POST, idempotency key);
- :mod:`consumers.gateway.dispatch` — the gate's ``ActionDispatched`` as ``AcceptDispatch``;
- :mod:`consumers.gateway.operator` — ``RecoverRun`` / ``ResolveHold`` onto ``actions``;
- :mod:`consumers.gateway.settings` — ``SLUICEGATE_VENUE*``, ``SLUICEGATE_GATEWAY_*``,
  ``SLUICEGATE_NOTIFY_*``.
"""
