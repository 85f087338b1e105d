"""The webhook front door: ``POST /v1/hooks/{subscription}`` to the ``deliveries`` topic.

Modules: :mod:`~consumers.ingest.app` (the aiohttp application), :mod:`~consumers.ingest.hooks`
(the request steps), :mod:`~consumers.ingest.requests` (query and body readers),
:mod:`~consumers.ingest.access` (access log, refusal bodies, log filters),
:mod:`~consumers.ingest.auth` (signatures and tokens, pure), :mod:`~consumers.ingest.parsing`
(JSON and TradingView bodies), :mod:`~consumers.ingest.cloudevents` (the CloudEvents HTTP
modes), :mod:`~consumers.ingest.answers` (refusals and JSON answers),
:mod:`~consumers.ingest.producer` (awaitable broker acks),
:mod:`~consumers.ingest.outcomes` (``?wait=``), :mod:`~consumers.ingest.workflows` (the
workflow table without blocking the loop), :mod:`~consumers.ingest.settings`,
:mod:`~consumers.ingest.errors` and :mod:`~consumers.ingest.server` (``sluicegate ingest``).
"""
