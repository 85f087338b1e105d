"""Java's murmur2 partitioning (``streams/core/partitioning.py``), against the values Kafka's
own tests pin, and librdkafka's partitioner called directly (``streams/kafka/partitioner.py``)
against it; where a producer really puts keys is checked on the broker
(``tests/integration/test_admission_misrouted.py``)."""

from __future__ import annotations

import sys
import threading

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


def test_librdkafkas_partitioner_keeps_the_gil_while_it_hashes() -> None:
    """The processor calls it once per input, so a call must not hand the GIL to another
    thread: one that wants it (a Kafka client's callback, a metadata check) then keeps it
    for a whole switch interval while the loop waits. Releasing it on every call (ctypes'
    CDLL) cost the processor 41% of its admission rate (6,300 against 10,700 deliveries/s).

    A thread counting in Python is ready to take the GIL the moment it is released; with a
    long switch interval it can get it no other way, so the count moves across a call only
    if the call released it."""
    assert LIBRDKAFKA is not None
    counted = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            counted[0] += 1

    interval = sys.getswitchinterval()
    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    try:
        while counted[0] == 0:  # the counter runs, and now waits for the GIL
            stop.wait(0.001)
        sys.setswitchinterval(0.5)
        released = 0
        for _ in range(2_000):
            before = counted[0]
            LIBRDKAFKA(b"an-admission-key", 6)
            if counted[0] != before:
                released += 1
                break  # one is proof; each costs a switch interval
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        counter.join()
    assert released == 0
