"""The crash points of the exactly-once streaming sink (docs/DESIGN.md §11.1) on released RocketMQ in processes of
their own: a copy of numbered messages, its commit held at one point (rmq_spark/sink/pause_points.py) while the
driver, the home broker or a target broker is SIGKILLed; run again from its checkpoint to the end, the copy holds
every message once, as RocketMQ's Java consumer reads it.

By default one case runs: the driver SIGKILLed with its commit half done, on 5.5.0. The whole matrix (every point,
every kill, on 5.5.0 and 4.9.7) is marked ``crash_matrix``, which pyproject.toml's addopts deselect:
``bash scripts/test.sh tests/stock -m crash_matrix``.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.sink.commit_log import records_topic
from rmq_spark.sink.pause_points import PAUSE_AT, PAUSE_FILE, PAUSE_SECONDS, CommitPoint
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY
from tests.integration.streaming import remove_torn_first_write
from tests.integration.test_kills import KillJob
from tests.stock import sink_job
from tests.stock.loads import send_numbered
from tests.stock.test_sink_crash import BROKER_CONFIG
from tests.support.processes import running_in_group
from tests.support.spark_deaths import SPARE_DRIVERS, SparkDeath, run_to_end
from tests.support.stock_cluster import StockCluster
from tests.support.waiting import wait_until

SOURCE, TARGET = "PointsSource", "PointsTarget"
HOME, TARGET_BROKER = "broker-a", "broker-b"  # the home is the target topic's first broker group by name
KILLS = {"driver": None, "home": HOME, "target": TARGET_BROKER}
VERSIONS = ("5.5.0", "4.9.7")
# The default run keeps to the case no other stock test covers (a home broker killed inside a commit is
# test_sink_crash's, every broker killed after one test_sink_home's): the suite's 20 minutes on two cores.
DEFAULT = (("5.5.0", "committing", "driver"),)

PER_QUEUE = 750  # 3,000 messages over the source's four queues (two per broker group)
LIMIT = 1000  # three batches
RETRY_MS = 5000  # a commit gives up on a killed broker after 5 s
DRIVER_PAUSE = 600  # the driver is killed while its commit is held: it never goes on
BROKER_PAUSE = 5  # then the commit goes on without the killed broker, and fails once RETRY_MS is spent on it
RESTART_AFTER = 12  # seconds from a broker's kill to its restart: past the paused commit's retry deadline
HELD_WITHIN = 600  # seconds from the job's start to the held commit: a Spark start and a batch on a busy machine
WORKERS_GONE = 30  # seconds for the pyspark daemon (a process group of its own) to end its workers after the JVM


# The default subset, then the whole matrix, marked crash_matrix (a -m crash_matrix run has every case once).
CASES = [pytest.param(version, point, kill, id=f"{version}-{kill}@{point}") for version, point, kill in DEFAULT] + [
    pytest.param(version, p.value, kill, id=f"matrix-{version}-{kill}@{p.value}", marks=pytest.mark.crash_matrix)
    for version in VERSIONS
    for p in CommitPoint
    for kill in KILLS
]


class SinkJob(KillJob):
    """sink_job.py in its own process group, its commit held at ``point`` for ``pause`` seconds; ``marker`` is the
    file the held commit writes."""

    def __init__(self, log: Path, args: tuple, point: str, marker: Path, pause: int):
        env = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            PAUSE_AT: point,
            PAUSE_FILE: str(marker),
            PAUSE_SECONDS: str(pause),
        }
        self.log, self.marker = log, marker
        with open(log, "w") as f:
            self.proc = subprocess.Popen(
                [sys.executable, sink_job.__file__, *map(str, args)],
                stdout=f,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                start_new_session=True,
            )

    def wait_held(self, timeout: float) -> tuple[int, int]:
        """Wait until the commit is held; its batch and the pid of the Python worker that holds it."""
        wait_until(
            lambda: self.marker.read_text().endswith("\n") if self.marker.exists() else False,
            timeout,
            f"the commit to reach its pause point ({self.log})",
            self.alive,
        )
        _, batch, pid = self.marker.read_text().split()
        return int(batch), int(pid)

    def outcome(self) -> str:
        """How the job ended: finished, or failed with the first error of the connector its log shows (Spark's
        own report of the failed query where there is none)."""
        if self.proc.returncode == 0:
            return "finished"
        lines = self.log.read_text(errors="replace").splitlines()
        ours = [line for line in lines if re.match(r"rmq_spark\.[\w.]+: ", line)]
        reported = [line for line in lines if line.startswith(sink_job.FAILED)]
        cause = (ours or reported or [f"exit {self.proc.returncode}"])[0]
        return f"failed: {cause[:300]} (its log: {self.log})"


def _start_held(tmp_path: Path, args: tuple, point: str, pause: int) -> tuple[SinkJob, int, int]:
    """Start the job and wait until its commit is held at ``point``: the job, the batch and the pid of the Python
    worker that holds it. A driver that one of Spark's own failures on a starved machine ends first (tests/support/
    spark_deaths.py) is replaced, at most SPARE_DRIVERS times: its commit never reached the point."""
    for spare in range(SPARE_DRIVERS + 1):
        job = SinkJob(tmp_path / f"job-{spare}.log", args, point, tmp_path / "held", pause)
        try:
            return job, *job.wait_held(HELD_WITHIN)
        except SparkDeath:
            job.kill()
            if spare == SPARE_DRIVERS:
                raise
            remove_torn_first_write(Path(args[4]))


def _kill_driver(job: SinkJob, worker: int) -> str:
    """SIGKILL the job's process group, and wait until the Python worker that holds the commit is gone too: a worker
    of pyspark's daemon is in the daemon's process group, which the daemon ends once it sees the JVM gone."""
    workers = os.getpgid(worker)
    job.kill()
    try:
        wait_until(lambda: not running_in_group(workers), WORKERS_GONE, f"the held commit's worker {worker} to end")
    except AssertionError:
        os.killpg(workers, signal.SIGKILL)  # it would go on committing beside the restart: it must not outlive us
        raise
    return "killed"


def _kill_broker(cluster: StockCluster, job: SinkJob, broker: str) -> str:
    """SIGKILL ``broker`` while the commit is held, restart it RESTART_AFTER seconds later, and wait for the job to
    end (the commit goes on after its pause: it may fail for the broker's absence, or finish once it is back)."""
    killed = time.monotonic()
    cluster.kill(broker)
    time.sleep(max(0.0, killed + RESTART_AFTER - time.monotonic()))
    cluster.restart(broker)
    wait_until(lambda: job.proc.poll() is not None, 300, f"the job to end after {broker}'s restart ({job.log})")
    return job.outcome()


def _body(message: dict) -> str:
    return base64.b64decode(message["bodyBase64"]).decode()


@pytest.mark.timeout(1800)  # two Spark runs, a broker's kill and restart, on two cores shared with others
@pytest.mark.parametrize(("stock_version", "point", "kill"), CASES)
def test_a_commit_cut_at_each_point_leaves_every_message_once(spark, start_stock_cluster, tmp_path, point, kill):
    cluster = start_stock_cluster(broker_config=BROKER_CONFIG)
    cluster.create_topic(SOURCE, queues=2)
    cluster.create_topic(TARGET, queues=2)  # on broker-a (the home) and broker-b
    sent = send_numbered(cluster.name_server, SOURCE, PER_QUEUE)
    group = f"points-{kill}-{point}"
    args = (cluster.name_server, SOURCE, TARGET, group, str(tmp_path / "checkpoint"), LIMIT, RETRY_MS)
    broker = KILLS[kill]
    started = time.monotonic()
    job, batch, worker = _start_held(tmp_path, args, point, BROKER_PAUSE if broker else DRIVER_PAUSE)
    try:
        first_run = _kill_broker(cluster, job, broker) if broker else _kill_driver(job, worker)
    finally:
        job.kill()
    run_to_end(sink_job.exactly_once_copy(spark, *args))
    print(
        f"{kill}@{point} on {cluster.version}: held at batch {batch}; the first run {first_run}; "
        f"{time.monotonic() - started:.0f} s from the job's start to the end of the restart"
    )

    with RemotingClient(cluster.name_server) as client:
        homes = {q.broker_name for q in client.route(records_topic(group), refresh=True).queues}
    assert homes == {HOME}, f"the commit records are on {homes}, not on {HOME}: the kills hit other groups"
    read = cluster.consume(SOURCE, TARGET)
    expected = Counter(_body(m) for m in read if m["topic"] == SOURCE)
    assert len(expected) == sum(expected.values()) == sent
    copies: dict[str, list[str]] = {}
    for m in read:
        if m["topic"] == TARGET:
            where = f"{m['brokerName']}/{m['queueId']}/{m['queueOffset']} {m['properties'].get(ROW_KEY_PROPERTY)}"
            copies.setdefault(_body(m), []).append(where)
    missing = sorted(expected.keys() - copies.keys(), key=lambda b: int(b.split()[-1]))
    doubled = {b: w for b, w in copies.items() if len(w) > 1}
    strange = copies.keys() - expected.keys()
    assert not missing and not doubled and not strange, (
        f"{kill}@{point} (batch {batch}) on RocketMQ {cluster.version}: {len(missing)} of {sent} messages missing "
        f"({missing[:10]}), {len(doubled)} stored more than once ({dict(list(doubled.items())[:5])}), "
        f"{len(strange)} not sent; the first run {first_run}; its log: {job.log}"
    )
