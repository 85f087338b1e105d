"""Java's murmur2 partitioning (``streams/core/partitioning.py``), against the values Kafka's
own tests pin, and librdkafka's partitioner called directly (``streams/kafka/partitioner.py``)
against it; where a producer really puts keys is checked on the broker
(``tests/integration/test_admission_misrouted.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.partitioning import murmur2, partition_of
from streams.kafka.partitioner import murmur2_partitioner


def signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_is_javas(data: bytes, expected: int) -> None:
    assert signed(murmur2(data)) == expected


@given(st.binary(max_size=300), st.integers(1, 1024))
def test_a_key_belongs_to_one_partition_in_range(key: bytes, partitions: int) -> None:
    owner = partition_of(key, partitions)
    assert 0 <= owner < partitions
    assert owner == (murmur2(key) & 0x7FFFFFFF) % partitions
    assert 0 <= murmur2(key) < 1 << 32


LIBRDKAFKA = murmur2_partitioner()


def test_librdkafkas_partitioner_can_be_called_here() -> None:
    assert LIBRDKAFKA is not None


@given(st.binary(max_size=300), st.integers(1, 1024))
def test_librdkafkas_partitioner_agrees_with_javas_murmur2(key: bytes, partitions: int) -> None:
    assert LIBRDKAFKA is not None
    assert LIBRDKAFKA(key, partitions) == partition_of(key, partitions)
