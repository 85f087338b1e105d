"""Faust apps as Sluicegate branch workers and readers (the optional ``faust`` extra).

Install with ``pip install -e '.[faust]'``; nothing else in Sluicegate imports this package,
so the exactly-once core never pulls Faust or aiokafka.

* :func:`sluicegate_app` builds a ``faust.App`` for a Sluicegate deployment: the broker and
  topic prefix of the :class:`~streams.settings.Settings`, reading committed records only,
  never creating or re-partitioning a Sluicegate topic.
* :func:`records` gives a Faust topic of one catalogue entry whose values are the decoded
  event dataclasses (codec ``"sluicegate"``: Avro single-object encoding, resolved by schema
  fingerprint, every released version readable).
* :func:`serve_slot` makes an agent serve branch slots with the SDK's contract
  (:func:`consumers.branch_tasks.take_task`, :func:`~consumers.branch_tasks.finish_task`).

What it guarantees and what it does not: see the README section "Faust apps".
"""

from consumers.faust_bridge.app import MissingTopics, records, sluicegate_app
from consumers.faust_bridge.codec import CODEC_NAME, SluicegateCodec
from consumers.faust_bridge.slot import SlotAgent, serve_slot

__all__ = [
    "CODEC_NAME",
    "MissingTopics",
    "SlotAgent",
    "SluicegateCodec",
    "records",
    "serve_slot",
    "sluicegate_app",
]
