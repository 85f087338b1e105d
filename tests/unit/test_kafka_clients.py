"""Every client kind carries its guarantees, whatever a caller tunes or the environment says."""

from __future__ import annotations

import pytest

from streams.kafka.clients import (
    IDEMPOTENT,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    client_config,
    transactional_config,
)
from streams.settings import load_settings


def test_a_producer_is_idempotent_acks_all_and_murmur2_partitioned() -> None:
    settings = load_settings({"SLUICEGATE_RDKAFKA_ACKS": "1"})
    conf = client_config(settings, IDEMPOTENT, {"client.id": "c"}, {"linger.ms": 2}, producer=True)
    assert conf["acks"] == "all"  # the environment's acks=1 does not weaken it
    assert conf["enable.idempotence"] is True
    assert conf["partitioner"] == "murmur2_random"
    assert (conf["client.id"], conf["linger.ms"]) == ("c", 2)


def test_consumers_read_committed_or_uncommitted_and_never_auto_commit() -> None:
    settings = load_settings({})
    committed = client_config(settings, READ_COMMITTED, {"group.id": "g"})
    assert committed["isolation.level"] == "read_committed"
    assert committed["enable.auto.commit"] is False
    assert "partitioner" not in committed
    ends = client_config(settings, READ_UNCOMMITTED, {"group.id": "g"})
    assert (ends["isolation.level"], ends["enable.auto.commit"]) == ("read_uncommitted", False)


@pytest.mark.parametrize(
    ("guaranteed", "tuning"),
    [
        (IDEMPOTENT, {"acks": "1"}),
        (IDEMPOTENT, {"enable.idempotence": False}),
        (READ_COMMITTED, {"isolation.level": "read_uncommitted"}),
        (READ_COMMITTED, {"enable.auto.commit": True}),
    ],
)
def test_a_guarantee_cannot_be_tuned_away(
    guaranteed: dict[str, object], tuning: dict[str, object]
) -> None:
    with pytest.raises(ValueError, match="fixed by the client kind"):
        client_config(load_settings({}), guaranteed, {"group.id": "g"}, tuning)


def test_a_transactional_producer_retries_soon_unless_the_environment_says_otherwise() -> None:
    def backoff(env: dict[str, str], tuning: dict[str, object] | None = None) -> object:
        conf = transactional_config(
            load_settings(env), transactional_id="t", client_id="c", tuning=tuning
        )
        return conf["retry.backoff.ms"], conf["retry.backoff.max.ms"]

    assert backoff({}) == (2, 1000)
    assert backoff({"SLUICEGATE_RDKAFKA_RETRY_BACKOFF_MS": "250"}) == ("250", 1000)
    assert backoff({}, {"retry.backoff.ms": 50}) == (50, 1000)
