"""spark.readStream.format("rocketmq") against the real embedded RocketMQ: exactly-once across a hard kill and a
broker restart, read limits, Trigger.AvailableNow, new and vanished queues, offsets mirrored to the group."""
from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import TRANSPORTS, transport_options
from tests.integration import stream_job

BROKERS = ("broker-a", "broker-b")


def _commits(checkpoint: Path) -> int:
    d = checkpoint / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0


def _last_offsets(checkpoint: Path) -> dict:
    """The source offsets of the newest committed batch, from Spark's offset log."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    return json.loads((checkpoint / "offsets" / str(last)).read_text().strip().splitlines()[-1])


class Job:
    """stream_job.py in its own process, to be SIGKILLed."""

    def __init__(self, rocketmq, transport, topic, group, out, checkpoint):
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        ((option, address),) = transport_options(rocketmq, transport).items()
        self.proc = subprocess.Popen([sys.executable, str(stream_job.__file__), f"{option}={address}", topic, group,
                                      str(out), str(checkpoint)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def _available_now(spark, rocketmq, transport, topic, group, out, checkpoint, starting="earliest"):
    """The job's query run to the end of what is there, in this session (a restart as good as a new process's:
    all a query carries over is its checkpoint)."""
    ((option, address),) = transport_options(rocketmq, transport).items()
    query = stream_job.writer(spark, option, address, topic, group, str(out), str(checkpoint), starting)
    query = query.trigger(availableNow=True).start()
    assert query.awaitTermination(300), "the available-now run did not end"
    assert query.exception() is None, query.exception()


def _wait_for(condition, timeout, what, job=None):
    deadline = time.monotonic() + timeout
    while not condition():
        if job is not None and job.proc.poll() is not None:
            raise AssertionError(f"the streaming job exited ({job.proc.returncode}) while waiting for {what}:\n"
                                 + job.proc.stderr.read()[-6000:])
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_exactly_once_across_a_kill_and_a_broker_restart(spark, rocketmq, transport, topic, tmp_path):
    group = f"eo-{topic}"[:100]
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    rounds, per_round = 8, 400
    producer_error = []

    def produce():
        try:
            for _ in range(rounds):
                rocketmq.produce_bulk(topic, per_round, 80, tags=["TagA", "TagB"])
                time.sleep(0.4)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            producer_error.append(e)
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        # One hard kill here; test_sink's streaming test kills a driver reading this source three times and checks
        # that every source row reached its target exactly once.
        job = Job(rocketmq, transport, topic, group, out, checkpoint)
        _wait_for(lambda: _commits(checkpoint) >= 2, 240, "2 committed batches", job)
        first = _commits(checkpoint)
        rocketmq.stop_broker("broker-b")
        time.sleep(2)
        rocketmq.start_broker("broker-b")
        _wait_for(lambda: _commits(checkpoint) >= first + 3, 240, "progress after the broker restart", job)
        job.kill()  # possibly in the middle of a batch
    finally:
        producer.join()
    assert not producer_error, producer_error

    _available_now(spark, rocketmq, transport, topic, group, out, checkpoint)

    java = {(m["brokerName"], m["queueId"], m["queueOffset"]): base64.b64decode(m["bodyBase64"])
            for m in rocketmq.consume(topic)}
    assert len(java) == rounds * per_round
    rows = spark.read.parquet(str(out)).collect()
    keys = [(r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows]
    assert len(keys) == len(set(keys)), "some messages were written twice"
    assert set(keys) == set(java), "some messages are missing"
    assert all(bytes(r["body"]) == java[(r["brokerName"], r["queueId"], r["queueOffset"])] for r in rows)

    # the group's offsets on the broker mirror the last committed batch
    final = _last_offsets(checkpoint)
    committed = {f"{b}/{q}": rocketmq.query_consumer_offset(group, topic, b, q) for b in BROKERS for q in range(4)}
    assert committed == final[topic]
    assert sorted(committed.values()) == sorted(o["maxOffset"] for o in rocketmq.offsets(topic))

    # a new query from the group's committed offsets continues with no gap and no duplicate
    rocketmq.produce_bulk(topic, 300, 80, tags=["TagC"])
    out2, checkpoint2 = tmp_path / "out2", tmp_path / "checkpoint2"
    _available_now(spark, rocketmq, transport, topic, group, out2, checkpoint2, "committed")
    later = spark.read.parquet(str(out2)).collect()
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in later) == sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"]) for m in rocketmq.consume(topic)
        if m["queueOffset"] >= committed[f"{m['brokerName']}/{m['queueId']}"])
    assert len(later) == 300


def _stream(spark, rocketmq, transport, topic, *, schema=None, **options):
    reader = spark.readStream.format("rocketmq").option("topic", topic)
    if schema is not None:
        reader = reader.schema(schema)
    for k, v in {**transport_options(rocketmq, transport), **options}.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rate_limit_and_available_now(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce_bulk(topic, 1000, 40, tags=["TagA"])
    q = (_stream(spark, rocketmq, transport, topic, startingOffsets="earliest", maxMessagesPerTrigger="150")
         .writeStream.format("memory").queryName(f"ratelimited_{transport}").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    rocketmq.produce_bulk(topic, 500, 40, tags=["TagB"])  # arrives after the start: not read by this run
    q.awaitTermination(180)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == spark.sql(f"select count(*) from ratelimited_{transport}").first()[0]
    assert 1000 <= sum(sizes) <= 1500
    assert len(sizes) >= 7 and max(sizes) <= 150 + 8, sizes
    assert spark.sql(f"select count(distinct brokerName, queueId, queueOffset) from ratelimited_{transport}"
                     ).first()[0] == \
        sum(sizes)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_user_schema_streams_only_its_columns(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce_bulk(topic, 300, 20, tags=["TagA"])
    q = (_stream(spark, rocketmq, transport, topic, schema="queueId INT, queueOffset BIGINT, brokerName STRING",
                 startingOffsets="earliest")
         .writeStream.format("memory").queryName(f"narrow_{transport}")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    df = spark.sql(f"select * from narrow_{transport}")
    assert df.columns == ["queueId", "queueOffset", "brokerName"]
    held = {(o["brokerName"], o["queueId"]): (o["minOffset"], o["maxOffset"]) for o in rocketmq.offsets(topic)}
    want = sorted((b, q_, i) for (b, q_), (lo, hi) in held.items() for i in range(lo, hi))
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in df.collect()) == want
    assert len(want) == 300


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_new_queues_are_picked_up_and_vanished_queues_are_data_loss(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce(topic, [{"body": f"a{i}", "broker": b, "queueId": q} for b in BROKERS for q in range(4)
                             for i in range(2)])
    grow = f"grow_{transport}"
    q = (_stream(spark, rocketmq, transport, topic, startingOffsets="earliest", pollNameServerIntervalMs="500")
         .writeStream.format("memory").queryName(grow).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        _wait_for(lambda: spark.sql(f"select count(*) from {grow}").first()[0] == 16, 120, "the first 16 messages")
        rocketmq.create_topic(topic, queues=6)
        rocketmq.produce(topic, [{"body": f"n{i}", "broker": b, "queueId": 5} for b in BROKERS for i in range(3)])
        _wait_for(lambda: spark.sql(f"select count(*) from {grow} where queueId = 5").first()[0] == 6, 120,
                  "the messages of the new queues")
        assert sorted(r[0] for r in spark.sql(f"select queueOffset from {grow} where queueId = 5").collect()) == \
            [0, 0, 1, 1, 2, 2]
        rocketmq.create_topic(topic, queues=2)  # queues 2..5 vanish from the route
        with pytest.raises(Exception, match="no longer in the topic route"):
            q.awaitTermination(120)
            raise AssertionError("the query did not fail")
    finally:
        q.stop()
