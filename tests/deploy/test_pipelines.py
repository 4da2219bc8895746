"""A Spark Declarative Pipeline reading RocketMQ, run with spark-pipelines from a node that has only the release
wheel (and its pipelines extra): a streaming table of the topic's messages and a materialized view over it. The
second run appends only the messages that arrived since the first."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path

from tests.deploy.node import NodeVenv
from tests.support.sessions import JVM_OPTIONS

PIPELINE = Path(__file__).resolve().parent / "pipeline"


def _run(venv: NodeVenv, home: Path, spec: Path) -> None:
    # the catalog must outlive each run's Spark Connect server: Hive's, with its Derby metastore in ``home``
    venv.run(
        venv.bin("spark-pipelines"),
        "run",
        "--spec",
        spec,
        "--conf",
        "spark.sql.catalogImplementation=hive",
        "--conf",
        f"spark.sql.warehouse.dir={home / 'warehouse'}",
        "--conf",
        f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
        cwd=home,
        timeout=300,
    )


def test_a_pipeline_streams_a_topic_into_a_table_and_its_second_run_takes_only_new_messages(
    node_venv, rocketmq, topic, tmp_path, spark
):
    home = tmp_path / "pipeline"
    shutil.copytree(PIPELINE, home)
    spec = home / "spark-pipeline.yml"
    spec.write_text(f"""name: rocketmq_events
storage: {(home / "storage").as_uri()}
libraries:
  - glob:
      include: transformations/**
configuration:
  spark.sql.shuffle.partitions: "2"
  rocketmq.nameServer: "{rocketmq.name_server}"
  rocketmq.topic: "{topic}"
""")

    def tables():
        events = spark.read.parquet(str(home / "warehouse" / "events")).select("brokerName", "queueId", "queueOffset")
        counts = spark.read.parquet(str(home / "warehouse" / "events_by_tag")).collect()
        return sorted((r[0], r[1], r[2]) for r in events.collect()), {r["tags"]: r["count"] for r in counts}

    def java():
        messages = rocketmq.consume(topic)
        return (
            sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in messages),
            dict(collections.Counter(m["tags"] for m in messages)),
        )

    rocketmq.produce_bulk(topic, 120, 30, tags=["TagA", "TagB"])
    _run(node_venv, home, spec)
    assert tables() == java()

    rocketmq.produce_bulk(topic, 40, 30, tags=["TagC"])
    _run(node_venv, home, spec)
    events, counts = tables()
    assert len(events) == len(set(events)), "the second run appended messages of the first again"
    assert (events, counts) == java()
