"""The release wheel: one abi3 manylinux build holding the compiled core and the module Spark discovers. That it
installs and works where nothing else of ours is (a fresh virtualenv, no cargo, no checkout) is test_cluster's and
test_pipelines', which run every Spark process from such a virtualenv."""

from __future__ import annotations

import zipfile


def test_the_wheel_is_one_abi3_manylinux_build_with_its_core_its_types_and_the_discovered_module(release_wheel):
    name = release_wheel.name
    assert "-cp310-abi3-" in name and "manylinux_2_17" in name, name
    files = zipfile.ZipFile(release_wheel).namelist()
    assert "rmq_spark/_native.abi3.so" in files
    assert {"rmq_spark/_native.pyi", "rmq_spark/py.typed"} <= set(files)  # the core's types, for type checkers
    assert "pyspark_rocketmq/__init__.py" in files
    harness = ("tests/", "benchmarks/", "native/", "jvm-shim/", "rmq_spark_testing/")
    assert not [f for f in files if f.startswith(harness)]
    assert not [f for f in files if f.endswith(".pyc")], "set-up's bytecode of the checkout went into the wheel"
    assert {"LICENSE", "NOTICE"} <= {f.rsplit("/", 1)[-1] for f in files if ".dist-info/" in f}  # license-files
