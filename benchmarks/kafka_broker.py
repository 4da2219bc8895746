"""A single-node KRaft Apache Kafka for the spark-kafka lines (benchmarks/kafka-shim), and the jars of Spark's Kafka
source for ``spark.jars``.

The module is built with Maven the first time a Kafka line is asked for (and again when its sources change); the
tests and the demo never build or start it::

    jars = spark_kafka_jars()            # builds benchmarks/kafka-shim when missing or stale
    with EmbeddedKafka(heap="1g") as kafka:
        kafka.create_topic("t", partitions=8)
        kafka.produce("t", 1_000_000, body_size=100)
        assert kafka.count("t") == 1_000_000

The JVM reads one command a line on stdin and exits when stdin closes.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path

from rmq_spark_testing.embedded import JDK, EmbeddedClusterError, maven_package, newer_sources, require_tool, stop_jvm

KAFKA_SHIM = Path(__file__).resolve().parent / "kafka-shim"
BROKER_JAR = KAFKA_SHIM / "broker" / "target" / "rmq-bench-kafka.jar"
SPARK_JARS_DIR = KAFKA_SHIM / "spark-kafka" / "target" / "jars"


class KafkaShimError(EmbeddedClusterError, condition="ROCKETMQ_KAFKA_SHIM"):
    """The Kafka module could not be built or started, or a command failed."""


def _sources() -> list[Path]:
    return [
        p
        for p in (*KAFKA_SHIM.glob("**/pom.xml"), *(KAFKA_SHIM / "broker" / "src").rglob("*"))
        if "target" not in p.parts
    ]


def ensure_built(*, force: bool = False) -> Path:
    """Build benchmarks/kafka-shim (``mvn -q package``) when missing or older than its sources; the broker's jar."""
    built = BROKER_JAR.is_file() and any(SPARK_JARS_DIR.glob("spark-sql-kafka-*.jar"))
    if force or not built or newer_sources(BROKER_JAR, _sources()):
        maven_package(KAFKA_SHIM, [BROKER_JAR], "benchmarks/kafka-shim")
    return BROKER_JAR


def spark_kafka_jars() -> list[str]:
    """The jars Spark needs for ``format("kafka")`` (spark-sql-kafka 4.2.0 and what pyspark does not ship)."""
    ensure_built()
    return sorted(str(p) for p in SPARK_JARS_DIR.glob("*.jar"))


class EmbeddedKafka:
    """One Kafka node (broker + controller in one JVM) on 127.0.0.1, its log in a temporary directory."""

    def __init__(self, *, heap: str = "1g", jvm_flags: tuple[str, ...] = (), ready_timeout: float = 120.0) -> None:
        self.heap = heap
        self.jvm_flags = tuple(jvm_flags)
        self.ready_timeout = ready_timeout
        self.bootstrap = ""
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=40)
        self._log_dir: str | None = None

    def start(self) -> EmbeddedKafka:
        jar = ensure_built()
        self._log_dir = tempfile.mkdtemp(prefix="rmq-bench-kafka-")
        cmd = [require_tool("java", JDK), f"-Xmx{self.heap}", *self.jvm_flags, "-jar", str(jar), self._log_dir]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, self._stderr.append), daemon=True).start()
        ready = self._answer("READY ", self.ready_timeout)
        self.bootstrap = ready["bootstrap"]
        return self

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line.rstrip("\n"))
        put(None)

    def _answer(self, prefix: str, timeout: float) -> dict:
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise KafkaShimError(f"the Kafka node gave no answer within {timeout:.0f} s") from None
            if line is None:
                raise KafkaShimError("the Kafka node exited:\n" + "\n".join(self._stderr))
            if line.startswith("ERROR "):
                raise KafkaShimError(f"the Kafka node: {line[6:]}")
            if line.startswith(prefix):
                return json.loads(line[len(prefix) :])

    def command(self, *words: object, timeout: float = 120.0) -> dict:
        """Send one command (``create``, ``produce``, ``produceRate``, ``count``) and return its result."""
        if self._proc is None or self._proc.stdin is None:
            raise KafkaShimError("the Kafka node is not running (call start())")
        self._proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self._proc.stdin.flush()
        return self._answer("RESULT ", timeout)

    def create_topic(self, topic: str, partitions: int) -> None:
        self.command("create", topic, partitions)

    def produce(self, topic: str, count: int, body_size: int, *, timeout: float = 600.0) -> float:
        """Load ``count`` records (key "key-i", partition i % partitions); the producer's seconds."""
        return float(self.command("produce", topic, count, body_size, timeout=timeout)["seconds"])

    def produce_rate(self, topic: str, rate: int, seconds: float, body_size: int) -> dict:
        """Send ``rate`` records/s for ``seconds`` (the latency line's producer); ``sent``, ``acked``, ``seconds``."""
        return self.command("produceRate", topic, rate, seconds, body_size, timeout=seconds + 120)

    def count(self, topic: str) -> int:
        """Records the topic holds (end minus start offsets over its partitions)."""
        return int(self.command("count", topic)["messages"])

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def close(self, timeout: float = 30.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_jvm(proc, timeout)
        if self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
