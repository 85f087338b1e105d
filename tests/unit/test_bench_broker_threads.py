"""bench.broker_threads and bench.latency_profile: the broker's CPU by thread group, and the
Kafka requests each client sent."""

from __future__ import annotations

import os
from pathlib import Path

from bench.broker_threads import OTHER, by_group, group_of, parse_thread_dump, snapshot
from bench.latency_profile import requests_sent

DUMP = """2026-12-03 11:30:00
Full thread dump OpenJDK 64-Bit Server VM (17.0.13+11-Debian-2deb12u1 mixed mode, sharing):

"main" #1 prio=5 os_prio=0 cpu=2500.10ms elapsed=900.00s tid=0x00007f nid=0x2371 waiting
   java.lang.Thread.State: WAITING (parking)

"data-plane-kafka-request-handler-0" #52 daemon prio=5 os_prio=0 tid=0x1 nid=0x23a1 waiting
"data-plane-kafka-network-thread-1-PLAINTEXT-PLAINTEXT-0" #50 prio=5 tid=0x2 nid=0x239f runnable
"AddPartitionsToTxnSenderThread-1" #60 prio=5 os_prio=0 tid=0x3 nid=0x23b0 runnable
"C2 CompilerThread0" #8 daemon prio=9 os_prio=0 tid=0x4 nid=0x2380 waiting on condition
"GC Thread#0" os_prio=0 cpu=100.00ms elapsed=900.00s tid=0x5 nid=0x2374 runnable
"""


def test_full_names_split_request_handling_and_cut_names_keep_it_together() -> None:
    assert group_of("data-plane-kafka-request-handler-3") == "request handlers"
    assert group_of("data-plane-kafka-network-thread-1-PLAINTEXT-PLAINTEXT-1") == (
        "network threads"
    )
    assert group_of("data-plane-kafk") == "request handlers and network threads"
    # The scheduler's and the cleaner's names start like the controller's: order decides.
    assert group_of("kafka-scheduler-2") == "scheduler, log cleaner, metrics"
    assert group_of("kafka-1-raft-io-thread") == "KRaft controller and metadata"
    assert group_of("TxnMarkerSenderThread-1") == group_of("AddPartitionsTo")
    assert group_of("executor-group-coordinator").startswith("group coordinator")
    assert group_of("executor-Fetch").startswith("delayed requests")
    assert group_of("something new") == OTHER


def test_a_thread_dump_gives_each_tid_its_full_name() -> None:
    names = parse_thread_dump(DUMP)
    assert names[0x23A1] == "data-plane-kafka-request-handler-0"
    assert names[0x239F] == "data-plane-kafka-network-thread-1-PLAINTEXT-PLAINTEXT-0"
    assert names[0x2380] == "C2 CompilerThread0"
    assert names[0x2374] == "GC Thread#0"
    assert len(names) == 6
    assert parse_thread_dump("jcmd: could not attach") == {}


def test_groups_sum_what_each_thread_used_between_snapshots() -> None:
    before = {
        1: ("data-plane-kafk", 10.0),
        2: ("data-plane-kafk", 4.0),
        3: ("C2 CompilerThre", 1.0),
    }
    after = {
        1: ("data-plane-kafk", 12.5),
        2: ("data-plane-kafk", 4.5),
        3: ("C2 CompilerThre", 1.0),  # idle: left out
        4: ("TxnMarkerSender", 0.25),  # started in between: counts from zero
    }
    assert by_group(before, after) == {
        "request handlers and network threads": 3.0,
        "transaction coordinator (partition registration, commit markers)": 0.25,
    }
    names = {1: "data-plane-kafka-request-handler-0", 2: "data-plane-kafka-network-thread-1-P-0"}
    split = by_group(before, after, names)
    assert list(split) == [  # largest first
        "request handlers",
        "network threads",
        "transaction coordinator (partition registration, commit markers)",
    ]
    assert split["request handlers"] == 2.5


def _thread(proc: Path, pid: int, tid: int, comm: str, *, utime: int, stime: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    after = ["S", "1", *["0"] * 9, str(utime), str(stime), "0", "0", "20", "0"]
    (task / "stat").write_text(f"{tid} ({comm}) {' '.join(after)}\n")


def test_a_snapshot_reads_every_thread_of_the_process(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    _thread(tmp_path, 7, 7, "java", utime=ticks, stime=0)
    _thread(
        tmp_path, 7, 9, "GC Thread#0 (x)", utime=2 * ticks, stime=ticks
    )  # a name with a parenthesis
    assert snapshot(7, tmp_path) == {7: ("java", 1.0), 9: ("GC Thread#0 (x)", 3.0)}
    assert snapshot(8, tmp_path) == {}


def test_this_process_threads_are_readable() -> None:
    mine = snapshot(os.getpid())
    assert os.getpid() in mine


def test_requests_are_counted_by_type_from_librdkafkas_protocol_log() -> None:
    log = (
        b"%7|1796296896.973|SEND|rdkafka#consumer-2| [thrd:127.0.0.1:9092/1]: "
        b"127.0.0.1:9092/1: Sent FetchRequest (v16, 98 bytes @ 0, CorrId 5)\n"
        b"%7|1796296896.980|SEND|rdkafka#producer-1| [thrd:127.0.0.1:9092/1]: "
        b"127.0.0.1:9092/1: Sent ProduceRequest (v9, 1200 bytes @ 0, CorrId 9)\n"
        b"%7|1796296896.981|RECV|rdkafka#producer-1| [thrd:127.0.0.1:9092/1]: "
        b"127.0.0.1:9092/1: Received ProduceResponse (v9, 60 bytes, CorrId 9, rtt 1.02ms)\n"
        b"%7|1796296896.990|SEND|rdkafka#consumer-2| [thrd:127.0.0.1:9092/1]: "
        b"127.0.0.1:9092/1: Sent FetchRequest (v16, 98 bytes @ 0, CorrId 6)\n"
        b"2026-12-03 11:30:00,000 INFO sluicegate.processor: counters: records=5\n"
    )
    assert requests_sent(log) == {"Fetch": 2, "Produce": 1}
