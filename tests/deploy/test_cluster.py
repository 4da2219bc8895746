"""rmq-spark on a real Spark standalone cluster: a master and two workers as separate processes, every node running
the release wheel's virtualenv, jobs sent with spark-submit. One worker (with its executor) is SIGKILLed while a
streaming query runs; every message still arrives once."""

from __future__ import annotations

import subprocess

import pytest

from tests.deploy.node import (
    assert_loaded_from,
    assert_read_and_written_once,
    job_in,
    job_result,
    topic_keys,
)
from tests.deploy.standalone import StandaloneCluster
from tests.support.checkpoints import committed_offsets, logged
from tests.support.processes import kill_group
from tests.support.sessions import JVM_OPTIONS
from tests.support.waiting import wait_until


@pytest.fixture
def standalone(node_venv, tmp_path):
    home = tmp_path / "cluster"
    home.mkdir()
    cluster = StandaloneCluster(node_venv, home, workers=2, cores=1)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def test_spark_submit_to_a_standalone_cluster_survives_a_worker_killed_mid_stream(
    standalone, node_venv, rocketmq, topic, tmp_path, spark
):
    rocketmq.produce_bulk(topic, 1000, 60, tags=["TagA", "TagB"])
    before_kill = topic_keys(rocketmq, topic)  # what the batch part of the job reads and writes
    target = f"{topic}-copy"
    rocketmq.create_topic(target, queues=2)
    work = tmp_path / "job"
    work.mkdir()
    out, checkpoint, stop = work / "out", work / "checkpoint", work / "stop"
    submit = [
        node_venv.bin("spark-submit"),
        "--master",
        standalone.url,
        "--conf",
        f"spark.pyspark.python={node_venv.python}",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
        "--conf",
        f"spark.executor.extraJavaOptions={JVM_OPTIONS}",
        job_in(work),
        "--name-server",
        rocketmq.name_server,
        "--source",
        topic,
        "--target",
        target,
        "--group",
        f"cluster-{topic}"[:60],
        "--out",
        out,
        "--checkpoint",
        checkpoint,
        "--stop-file",
        stop,
    ]
    log = work / "driver.log"
    with open(log, "w") as f:
        driver = subprocess.Popen(
            list(map(str, submit)),
            cwd=work,
            env=node_venv.env(),
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive() -> None:
        standalone.alive()
        assert driver.poll() is None, f"spark-submit exited ({driver.returncode}):\n{log.read_text()[-6000:]}"

    try:
        wait_until(
            lambda: len(logged(checkpoint, "commits")) >= 2,
            240,
            "two micro-batches committed on the cluster",
            alive,
            poll=0.2,
        )
        standalone.kill_worker("worker-1")
        killed_at = logged(checkpoint, "commits")[-1]
        wait_until(lambda: len(standalone.alive_workers()) == 1, 60, "the master to see the worker gone", alive)
        rocketmq.produce_bulk(topic, 200, 60, tags=["TagC"])
        ends = {f"{o['brokerName']}/{o['queueId']}": o["maxOffset"] for o in rocketmq.offsets(topic)}
        wait_until(
            lambda: committed_offsets(checkpoint).get(topic, {}) == ends,
            240,
            "the stream to commit every message on the one worker left",
            alive,
            poll=0.5,
        )
        assert logged(checkpoint, "commits")[-1] > killed_at
        stop.touch()
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            kill_group(driver)
    output = log.read_text(errors="replace")
    assert driver.returncode == 0, output[-6000:]
    assert "Lost executor" in output, "the killed worker's executor was never part of the job"

    result = job_result(output)
    assert_loaded_from(result, node_venv)
    assert_read_and_written_once(result, rocketmq, before_kill, target)
    rows = spark.read.parquet(str(out)).select("brokerName", "queueId", "queueOffset").collect()
    keys = sorted((r[0], r[1], r[2]) for r in rows)
    assert keys == topic_keys(rocketmq, topic), "the streaming copy differs from the topic (lost or repeated messages)"
