"""The embedded RocketMQ harness itself, checked with the official Java producer, consumer and admin tool."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rmq_spark_testing.embedded import EmbeddedClusterError


def _produce_round_robin(rocketmq, topic: str, per_queue: int) -> list[dict]:
    messages = [
        {"body": f"m-{b}-{q}-{i}", "broker": b, "queueId": q, "tags": "TagA"}
        for b in ("broker-a", "broker-b")
        for q in range(4)
        for i in range(per_queue)
    ]
    return rocketmq.produce(topic, messages)


def test_java_producer_messages_are_on_every_queue(rocketmq, topic):
    sent = _produce_round_robin(rocketmq, topic, per_queue=5)
    assert {(r["brokerName"], r["queueId"]) for r in sent} == {
        (b, q) for b in ("broker-a", "broker-b") for q in range(4)
    }
    offsets = rocketmq.offsets(topic)
    assert [(o["brokerName"], o["queueId"], o["minOffset"], o["maxOffset"]) for o in offsets] == [
        (b, q, 0, 5) for b in ("broker-a", "broker-b") for q in range(4)
    ]
    consumed = rocketmq.consume(topic)
    assert sorted(base64.b64decode(m["bodyBase64"]).decode() for m in consumed) == sorted(
        f"m-{b}-{q}-{i}" for b in ("broker-a", "broker-b") for q in range(4) for i in range(5)
    )


def test_restarted_broker_keeps_its_messages(rocketmq, topic):
    _produce_round_robin(rocketmq, topic, per_queue=3)
    before = rocketmq.consume(topic, broker="broker-b", queueId=2)
    rocketmq.stop_broker("broker-b")
    with pytest.raises(EmbeddedClusterError):
        rocketmq.consume(topic, broker="broker-b", queueId=2)
    rocketmq.start_broker("broker-b")
    after = rocketmq.consume(topic, broker="broker-b", queueId=2)
    assert [m["bodyBase64"] for m in after] == [m["bodyBase64"] for m in before]
    assert len(after) == 3
    assert [o["maxOffset"] for o in rocketmq.offsets(topic)] == [3] * 8


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_jvm_exits_when_its_python_parent_is_killed(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from rmq_spark_testing.embedded import EmbeddedRocketMQ
        mq = EmbeddedRocketMQ(1).start()
        print(mq.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        jvm_pid = int(parent.stdout.readline())
        assert _pid_alive(jvm_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 60
        while _pid_alive(jvm_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _pid_alive(jvm_pid), "the JVM outlived its killed parent"
    finally:
        parent.kill()


def test_missing_java_is_one_clear_sentence(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty folder: no java, no mvn
    proc = subprocess.run(
        [sys.executable, "-m", "rmq_spark_testing.embedded"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "'java' was not found on PATH: install a JDK 17 or newer" in proc.stderr
