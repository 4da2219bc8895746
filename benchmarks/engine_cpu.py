"""Where the engine-side CPU of the spark-batch lines goes: Spark's JVM by thread kind and our
Python workers by process, per run.

    python -m benchmarks.engine_cpu [--messages 1000000] [--repeat 3] [--jfr DIR]
                                    [--lines spark-batch,spark-batch-narrow,spark-batch-scalars,spark-batch-properties]

One embedded RocketMQ and one topic as ``benchmarks.run``'s, one SparkSession; after a warm-up of each line the lines
run in alternation ``--repeat`` times. Each run reports CPU seconds (user + system, from /proc) of Spark's JVM split
by thread kind (task threads, the threads that feed and read the Python workers, JIT compilers, GC, the rest), of
the Python workers (Spark's daemon and its forked workers) and of the broker. ``--jfr DIR`` records the Spark JVM
with Java Flight Recorder into DIR (summarise with ``jfr print --events jdk.ExecutionSample``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict

from benchmarks.rss import _TICK, _scan, _tree

# Linux keeps the first 15 bytes of a Java thread's name; the kinds of Spark's JVM threads by those.
THREAD_KINDS = (
    ("task", re.compile(r"^Executor task")),
    ("python io", re.compile(r"^(stdout writer|stdin writer|Worker Monitor|writer for|reader for)")),
    ("jit", re.compile(r"^C[12] Compiler")),
    ("gc", re.compile(r"^(GC Thread|G1 |VM Periodic|VM Thread|Concurrent|ZGC|Parallel GC)")),
)


def _threads(pid: int) -> dict[str, float]:
    """CPU seconds of each live thread of ``pid``, by ``tid:name``."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        name = data[data.find(b"(") + 1 : data.rfind(b")")].decode(errors="replace")
        rest = data[data.rfind(b")") + 2 :].split(b" ")
        out[f"{tid}:{name}"] = (int(rest[11]) + int(rest[12])) / _TICK
    return out


def _kind(thread: str) -> str:
    name = thread.split(":", 1)[1]
    return next((kind for kind, pattern in THREAD_KINDS if pattern.match(name)), "other")


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class Snapshot:
    """CPU seconds of every process under the harness and of the Spark JVM's threads, at one moment."""

    def __init__(self, spark_pid: int, shim_pid: int) -> None:
        kids, cpu = _scan()
        me = os.getpid()
        self.process = {pid: cpu.get(pid, 0.0) for pid in _tree(me, kids)}
        self.comm = {pid: _comm(pid) for pid in self.process}
        self.threads = _threads(spark_pid)
        self.spark_pid, self.shim_pid, self.me = spark_pid, shim_pid, me


def breakdown(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU seconds used between two snapshots: Spark's JVM by thread kind (``jvm:<kind>``; threads that ended in
    between are ``jvm:ended``), ``jvm``, ``python workers``, ``python driver`` (this harness) and ``broker``."""
    used: dict[str, float] = defaultdict(float)
    for pid, seconds in after.process.items():
        delta = seconds - before.process.get(pid, 0.0)
        comm = after.comm.get(pid, "")
        if pid == after.spark_pid:
            used["jvm"] += delta
        elif pid == after.shim_pid:
            used["broker"] += delta
        elif pid == after.me:
            used["python driver"] += delta
        elif comm.startswith(("python", "pyspark")):
            used["python workers"] += delta
    for thread, seconds in after.threads.items():
        used[f"jvm:{_kind(thread)}"] += seconds - before.threads.get(thread, 0.0)
    used["jvm:ended"] = used["jvm"] - sum(v for k, v in used.items() if k.startswith("jvm:"))
    return {k: round(v, 3) for k, v in sorted(used.items())}


def _top_threads(before: Snapshot, after: Snapshot, count: int = 12) -> dict[str, float]:
    """The Spark JVM's ``count`` busiest threads between two snapshots (CPU seconds by name, tids dropped)."""
    used: dict[str, float] = defaultdict(float)
    for thread, seconds in after.threads.items():
        used[thread.split(":", 1)[1]] += seconds - before.threads.get(thread, 0.0)
    return {k: round(v, 2) for k, v in sorted(used.items(), key=lambda kv: -kv[1])[:count] if v > 0}


def _workers(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU seconds of each Python process other than this harness between two snapshots, by ``pid`` (``+`` marks
    one that started in between)."""
    return {
        f"{pid}{'' if pid in before.process else '+'}": round(seconds - before.process.get(pid, 0.0), 3)
        for pid, seconds in after.process.items()
        if pid != after.me and after.comm.get(pid, "").startswith(("python", "pyspark"))
    }


def _perf(folder: str, name: str, now: Snapshot) -> subprocess.Popen:
    """``perf record`` of the Python worker processes alive at ``now`` (stopped with SIGINT)."""
    os.makedirs(folder, exist_ok=True)
    pids = [
        str(pid) for pid in now.process if pid != now.me and now.comm.get(pid, "").startswith(("python", "pyspark"))
    ]
    recorder = subprocess.Popen(
        ["perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", f"{folder}/{name}.data", "-p", ",".join(pids)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    return recorder


def _spark_pid(spark) -> int:
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--body-size", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--lines", default="spark-batch,spark-batch-narrow")
    p.add_argument("--jfr", default=None, help="record the Spark JVM with Java Flight Recorder into this folder")
    p.add_argument("--threads", action="store_true", help="also list the Spark JVM's busiest threads per run")
    p.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a source option for every run (repeatable)"
    )
    p.add_argument(
        "--line-schema",
        action="append",
        default=[],
        metavar="NAME=DDL",
        help="one more line: spark-batch with this user schema (repeatable; name it in --lines)",
    )
    p.add_argument("--perf", default=None, help="record the Python workers with perf (cpu-clock) into this folder")
    p.add_argument("--output", default=None, help="write the runs as JSON here")
    args = p.parse_args(argv)

    from benchmarks.run import BENCH_JVM_FLAGS, TAGS
    from benchmarks.spark_lines import FULL_ROW, NARROW_SCHEMA, SCALAR_SCHEMA, batch_noop
    from rmq_spark_testing.embedded import EmbeddedRocketMQ

    if args.jfr:
        os.makedirs(args.jfr, exist_ok=True)
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f"--driver-java-options -XX:StartFlightRecording=filename={args.jfr}/spark.jfr,settings=profile "
            "pyspark-shell"
        )
    lines = args.lines.split(",")
    schemas = {"spark-batch-narrow": NARROW_SCHEMA, "spark-batch-scalars": SCALAR_SCHEMA}
    schemas.update(dict(s.split("=", 1) for s in args.line_schema))
    runs: list[dict] = []
    with EmbeddedRocketMQ(brokers=1, jvm_flags=BENCH_JVM_FLAGS) as mq:
        topic = f"engine-{args.messages}-{os.getpid()}"
        mq.create_topic(topic, queues=args.queues)
        mq.produce_bulk(
            topic, args.messages, args.body_size, tags=TAGS, key_prefix="key-", timeout=max(600.0, args.messages / 5000)
        )
        from benchmarks.spark_lines import new_session

        spark = new_session()
        spark_pid = _spark_pid(spark)
        source = {"nameServer": mq.name_server}
        options = dict(o.split("=", 1) for o in args.option)
        for i in range(args.warmup + args.repeat):
            for line in lines:
                schema = schemas.get(line)
                before = Snapshot(spark_pid, mq.pid)
                recorder = _perf(args.perf, f"{line}-{i}", before) if args.perf and i >= args.warmup else None
                line_options = {**options, **(FULL_ROW if line == "spark-batch-properties" else {})}
                r = batch_noop(spark, source, topic, line_options, schema=schema)
                if recorder is not None:
                    recorder.send_signal(signal.SIGINT)
                    recorder.wait()
                time.sleep(0.3)  # the workers' last writes and the JVM's last task threads settle
                after = Snapshot(spark_pid, mq.pid)
                cpu = breakdown(before, after)
                if r["messages"] != args.messages:
                    raise RuntimeError(f"{line}: read {r['messages']:,} of {args.messages:,} messages")
                if i < args.warmup:
                    continue
                runs.append({"line": line, "seconds": round(r["seconds"], 3), "cpu": cpu})
                if args.threads:
                    runs[-1]["threads"] = _top_threads(before, after)
                    runs[-1]["workers"] = _workers(before, after)
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        spark.stop()
    summary = {line: _medians([r["cpu"] for r in runs if r["line"] == line], args.messages) for line in lines}
    print(json.dumps(summary, indent=1))
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"runs": runs, "per_1m": summary}, f, indent=1)
    return 0


def _medians(cpus: list[dict[str, float]], messages: int) -> dict[str, float]:
    """The median of each figure over the runs, per 1M messages."""
    keys = sorted({k for c in cpus for k in c})
    return {k: round(statistics.median(c.get(k, 0.0) for c in cpus) * 1e6 / messages, 3) for k in keys}


if __name__ == "__main__":
    sys.exit(main())
