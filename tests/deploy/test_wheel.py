"""The release wheel installs and works where nothing else of ours is: a fresh virtualenv, no cargo, no checkout."""
from __future__ import annotations

import collections
import json
import shutil
import zipfile

from tests.deploy.conftest import ROOT


def test_the_wheel_is_one_abi3_manylinux_build_with_its_core_and_the_discovered_module(release_wheel):
    name = release_wheel.name
    assert "-cp310-abi3-" in name and "manylinux_2_17" in name, name
    files = zipfile.ZipFile(release_wheel).namelist()
    assert "rmq_spark/_native.abi3.so" in files
    assert "pyspark_rocketmq/__init__.py" in files
    assert not [f for f in files if f.startswith(("tests/", "benchmarks/", "native/", "jvm-shim/"))]


def test_a_node_with_only_the_wheel_reads_and_writes_exactly_once(node_venv, rocketmq, topic, tmp_path):
    rocketmq.produce_bulk(topic, 300, 40, tags=["TagA", "TagB"])
    target = f"{topic}-copy"
    rocketmq.create_topic(target, queues=2)
    job = shutil.copy(ROOT / "tests" / "deploy" / "node_job.py", tmp_path)
    proc = node_venv.run(node_venv.python, job, "local", "read-write", rocketmq.name_server, topic, target,
                         f"wheel-{topic}"[:60], cwd=tmp_path)
    result = json.loads(proc.stdout.strip().splitlines()[-1])

    assert result["cargo"] is None
    site = str(node_venv.root)
    for module, core, python in [result["driver"], *result["executors"]]:
        assert module.startswith(site) and core.startswith(site) and python.startswith(site), (module, core, python)

    java = sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in rocketmq.consume(topic))
    assert sorted(map(tuple, result["keys"])) == java
    written = collections.Counter(m["properties"].get("src") for m in rocketmq.consume(target))
    assert written == collections.Counter(f"{b}/{q}/{o}" for b, q, o in java)
