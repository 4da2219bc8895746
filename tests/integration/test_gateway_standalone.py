"""The pull gateway as a deployable: started on its own beside a running cluster (here the embedded one, reached
only through its name server address), read through by the connector, stopped by SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess

from rmq_spark.client import GrpcClient, MessageQueue
from rmq_spark_testing.embedded import GATEWAY_JAR, jvm_command


def test_standalone_gateway_serves_an_existing_cluster(spark, rocketmq, topic):
    rocketmq.produce(topic, [{"body": f"s{i}", "tags": "TagS", "broker": "broker-b", "queueId": 3} for i in range(7)])
    cmd = jvm_command(
        "--namesrv", rocketmq.name_server, "--port", "0", "--bind", "127.0.0.1", heap="256m", jar=GATEWAY_JAR
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY "), f"the gateway printed no READY line but {line!r}"
        ready = json.loads(line[len("READY ") :])
        address = ready["gateway"]
        assert ready["nameServer"] == rocketmq.name_server and address.startswith("127.0.0.1:")
        with GrpcClient(address) as client:
            mq = MessageQueue(topic, "broker-b", 3)
            assert [m.body for m in client.read_range(mq, 0, client.max_offset(mq))] == [
                f"s{i}".encode() for i in range(7)
            ]
        rows = (
            spark.read.format("rocketmq")
            .option("endpoint", address)
            .option("topic", topic)
            .load()
            .select("queueOffset", "tags")
            .collect()
        )
        assert sorted((r["queueOffset"], r["tags"]) for r in rows) == [(i, "TagS") for i in range(7)]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, proc.stderr.read()[-3000:]
