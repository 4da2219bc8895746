"""Exactly once across hard kills of the driver, for the source and the sink together: one driver process runs a
Parquet copy of a topic through the gRPC gateway and two rocketmq sink queries of it through the name server (one
exactly once, one at least once). Three drivers are SIGKILLed in turn, at moments drawn at random from a seed the
test prints (RMQ_SPARK_KILL_SEED replays one): one in its start-up, one inside the first batch it plans (for the
first driver, the query's batch 0), one inside an exactly-once commit, after a broker restarted under it; messages
keep arriving all along. Then every query is restarted to the end of its source, recovering what the kills cut."""

from __future__ import annotations

import base64
import collections
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from rmq_spark.client import RemotingClient, RocketMQError
from rmq_spark.sink.commit_log import CommitRecord, CommitStep
from rmq_spark.sink.commit_records import CommitRecords
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY
from tests.conftest import unique_topic
from tests.integration import kill_job
from tests.integration.streaming import remove_torn_first_write
from tests.support.checkpoints import committed_offsets, logged
from tests.support.processes import kill_group
from tests.support.spark_deaths import SPARE_DRIVERS, SparkDeath, run_all_to_end, run_to_end, spark_death
from tests.support.waiting import wait_until

BROKERS = ("broker-a", "broker-b")


END = 10_000  # the batch limit of the runs to the end: one batch where the job's small ones would take dozens


class KillJob:
    """kill_job.py in its own process group (the Python driver, its Spark JVM and the JVM's Python workers), to be
    SIGKILLed together as when the driver's host dies; its copy query reads through ``rocketmq``'s gateway, or its
    name server when it has none; its output goes to ``log`` (a pipe nobody reads while it runs
    could fill and stall it)."""

    def __init__(self, rocketmq, log: Path, source: str, group: str, out: Path, checkpoint: Path, *sinks: tuple):
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        args = [
            rocketmq.name_server,
            getattr(rocketmq, "gateway", None) or "-",
            source,
            group,
            out,
            checkpoint,
            *(part for sink in sinks for part in sink),
        ]
        self.log = log
        with open(log, "w") as f:
            self.proc = subprocess.Popen(
                [sys.executable, kill_job.__file__, *map(str, args)],
                stdout=f,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                start_new_session=True,
            )

    def alive(self) -> None:
        if self.proc.poll() is not None:
            text = self.log.read_text(errors="replace")
            lines = text.splitlines()
            causes = [line for line in lines if "Caused by" in line or "Exception:" in line][:20]
            message = f"the job exited ({self.proc.returncode}); its log is {self.log}:\n" + "\n".join(
                causes + ["..."] + lines[-40:]
            )
            died_of = spark_death(text)
            raise (SparkDeath(died_of, message) if died_of else AssertionError(message))

    def kill(self) -> None:
        kill_group(self.proc)


def _wait_for(condition, timeout: float, what: str, job: KillJob, poll: float = 0.2) -> None:
    wait_until(condition, timeout, what, job.alive, poll)


def _commits(checkpoint: Path) -> int:
    """The copy query's batches in Spark's commit log."""
    return len(logged(checkpoint, "commits"))


def _batches(checkpoint: Path) -> int:
    """The copy query's batches in Spark's offset log (planned; the last may not be committed)."""
    return len(logged(checkpoint, "offsets"))


def _sources(rocketmq, target: str) -> dict[str, list[str]]:
    """For each source position in ``target``, where its copies are: target queue and offset, and the row key
    (micro-batch and task) of an exactly-once write."""
    copies = collections.defaultdict(list)
    for m in rocketmq.consume(target):
        copies[m["properties"].get("src")].append(
            f"{m['brokerName']}/{m['queueId']}/{m['queueOffset']} {m['properties'].get(ROW_KEY_PROPERTY, '')}"
        )
    return copies


def test_exactly_once_across_kills_inside_commits_and_a_broker_restart(spark, rocketmq, topic, request, tmp_path):
    exact, least = unique_topic(request) + "e", unique_topic(request) + "l"
    for target in (exact, least):
        rocketmq.create_topic(target, queues=4)
    group, exact_group = f"eo-{topic}"[:100], f"eo-{exact}"[:60]
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    sinks = (
        (exact, "exactly_once", exact_group, tmp_path / "exact"),
        (least, "at_least_once", "alo-group", tmp_path / "least"),
    )
    rocketmq.produce_bulk(topic, 2000, 60, tags=["TagA", "TagB"])

    stop, producer_error = threading.Event(), []

    def produce():  # messages keep arriving while the drivers run and die
        try:
            while not stop.wait(2):
                rocketmq.produce_bulk(topic, 50, 60, tags=["TagA"])
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            producer_error.append(e)

    client = RemotingClient(rocketmq.name_server)
    records = CommitRecords(client, exact_group, exact, query="")  # read only: any query reads the last record

    def marker() -> CommitRecord | None:
        """The exactly-once query's last commit record (§11): started from the start of a commit to its end; None
        while there is none, or its broker is restarting."""
        try:
            return records.current()
        except RocketMQError:
            return None

    seed = int(os.environ.get("RMQ_SPARK_KILL_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"kill moments drawn with RMQ_SPARK_KILL_SEED={seed}")  # pytest shows it with a failure
    rng = random.Random(seed)
    kinds = ["start-up", "first batch", "commit"]
    rng.shuffle(kinds)
    t0 = time.monotonic()

    def phase(what: str) -> None:
        """Where the test's time goes (shown with -s)."""
        print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)

    def kill_moment(kind: str, job: KillJob, left: CommitRecord | None, planned: int) -> None:
        """Wait for this driver's moment of ``kind``: a random time in its start-up (the JVM, the first
        planning), inside the first batch it plans (logged, not committed; for the first driver the query's batch
        0), or inside an exactly-once commit."""
        if kind == "start-up":
            deadline = time.monotonic() + rng.uniform(0.5, 12)
            _wait_for(lambda: time.monotonic() > deadline, 30, "the start-up kill moment", job)
        elif kind == "first batch":
            _wait_for(lambda: _batches(checkpoint) > planned, 240, "a batch this driver planned", job, poll=0.005)
            time.sleep(rng.uniform(0, 0.5))
        else:
            _wait_for(
                lambda: (m := marker()) is not None and m.step is CommitStep.STARTED and m != left,
                240,
                "an exactly-once commit of this driver under way",
                job,
                poll=0.005,
            )

    def _kill_round(round: int, attempt: int, kind: str) -> None:
        """One driver, from its start to its SIGKILL at a moment of ``kind``."""
        planned = _batches(checkpoint)
        job = KillJob(rocketmq, tmp_path / f"driver-{round}.{attempt}.log", topic, group, out, checkpoint, *sinks)
        try:
            left = marker()  # started when the last driver died inside a commit
            if kind == "commit":  # a broker restarts under this driver, which must go on past it
                before = _commits(checkpoint)
                _wait_for(lambda: _commits(checkpoint) > before, 240, "a batch of the first driver", job)
                phase("broker-b restarts")
                rocketmq.stop_broker("broker-b")
                time.sleep(2)
                rocketmq.start_broker("broker-b")
                after = _commits(checkpoint)
                phase("broker-b restarted")
                _wait_for(lambda: _commits(checkpoint) >= after + 2, 240, "progress after the broker restart", job)
            kill_moment(kind, job, left, planned)
        finally:
            job.kill()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        spares = SPARE_DRIVERS
        for round, kind in enumerate(kinds):
            for attempt in range(spares + 1):
                try:
                    phase(f"driver {round}.{attempt}: {kind}")
                    _kill_round(round, attempt, kind)
                    phase(f"driver {round}.{attempt} killed")
                    break
                except SparkDeath as e:
                    assert spares > 0, f"more than {SPARE_DRIVERS} drivers died of Spark's own failures: {e}"
                    spares -= 1
                    print(f"driver {round}.{attempt} died of a Spark failure ({e.cause}); another takes its place")
                finally:
                    for chk in (checkpoint, *(sink[3] for sink in sinks)):
                        if torn := remove_torn_first_write(chk):  # killed inside Spark's first offset-log write
                            print(f"removed {torn} from {chk} (README: Failures and data loss)")
    finally:
        stop.set()
        producer.join()
        client.close()
    assert not producer_error, producer_error

    phase("runs to the end")
    run_all_to_end(
        [
            kill_job.copy_writer(spark, rocketmq.gateway, topic, group, str(out), str(checkpoint), limit=END),
            *(
                kill_job.sink_writer(
                    spark, rocketmq.name_server, topic, target, guarantee, group_, str(sink_checkpoint), limit=END
                )
                for target, guarantee, group_, sink_checkpoint in sinks
            ),
        ]
    )

    phase("checks")
    java = {
        (m["brokerName"], m["queueId"], m["queueOffset"]): base64.b64decode(m["bodyBase64"])
        for m in rocketmq.consume(topic)
    }
    assert len(java) > 2000
    rows = spark.read.parquet(str(out)).collect()
    keys = [(r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows]
    assert len(keys) == len(set(keys)), "the copy holds some messages twice"
    assert set(keys) == set(java), "the copy misses some messages"
    assert all(bytes(r["body"]) == java[(r["brokerName"], r["queueId"], r["queueOffset"])] for r in rows)

    expected = {f"{b}/{q}/{o}" for b, q, o in java}
    copies = _sources(rocketmq, exact)
    assert set(copies) == expected
    twice = {src: at for src, at in sorted(copies.items()) if len(at) > 1}
    assert not twice, f"{len(twice)} rows were written twice, e.g. {dict(list(twice.items())[:12])}"
    # at least once: nothing lost (a batch cut by a kill is sent again whole, so rows may appear twice)
    assert set(_sources(rocketmq, least)) == expected

    # the copy's consumer group on the brokers mirrors its last committed batch
    final = committed_offsets(checkpoint)
    committed = {f"{b}/{q}": rocketmq.query_consumer_offset(group, topic, b, q) for b in BROKERS for q in range(4)}
    assert committed == final[topic]
    assert sorted(committed.values()) == sorted(o["maxOffset"] for o in rocketmq.offsets(topic))

    # a new query from the group's committed offsets continues with no gap and no duplicate
    phase("a new query from the group's offsets")
    rocketmq.produce_bulk(topic, 300, 80, tags=["TagC"])
    out2 = tmp_path / "out2"
    run_to_end(
        kill_job.copy_writer(
            spark, rocketmq.gateway, topic, group, str(out2), str(tmp_path / "checkpoint2"), "committed"
        )
    )
    later = spark.read.parquet(str(out2)).collect()
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in later) == sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"])
        for m in rocketmq.consume(topic)
        if m["queueOffset"] >= committed[f"{m['brokerName']}/{m['queueId']}"]
    )
    assert len(later) == 300
    phase("done")
