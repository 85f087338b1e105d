"""librdkafka's own murmur2 partitioner, called directly: where a producer configured as
``Settings.producer_config`` puts a key.

``rd_kafka_msg_partitioner_murmur2`` is part of librdkafka's public API (``rdkafka.h``: the
Java-compatible partitioner, ``murmur2(key) & 0x7fffffff % partition_cnt``); it reads neither
the topic handle nor the opaques it is given. It is found through confluent-kafka's extension
module, which links the librdkafka it uses, so it is the very function that partitions every
Sluicegate producer's records. About 0.5 us per 77-byte key through ctypes, against about
9 us for the same hash in Python (``streams/core/partitioning.py``, the reference the tests
compare it with, and what to use where :func:`murmur2_partitioner` finds nothing).

It is called holding the GIL (``ctypes.PyDLL``, not ``CDLL``): the processor calls it once
per input, and a call that releases the GIL lets any other thread that wants it (a Kafka
client's callback, the input check) take it mid-batch, the loop then waiting for that
thread to give it back, up to a switch interval (5 ms). Released on every call, it cost one
processor 41% of its admission rate (measured side by side: 6,300 against 10,700
deliveries/s). Holding it for a hash of a few hundred nanoseconds costs nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from confluent_kafka import cimpl


def murmur2_partitioner() -> Callable[[bytes, int], int] | None:
    """``partition(key, partitions)``, librdkafka's murmur2; ``None`` if the library does not
    export it."""
    try:
        function = ctypes.PyDLL(cimpl.__file__).rd_kafka_msg_partitioner_murmur2
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int32
    function.argtypes = [
        ctypes.c_void_p,  # the topic handle: not read
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_void_p,  # the topic's opaque: not read
        ctypes.c_void_p,  # the message's opaque: not read
    ]

    def partition(key: bytes, partitions: int) -> int:
        owner: int = function(None, key, len(key), partitions, None, None)
        return owner

    return partition
