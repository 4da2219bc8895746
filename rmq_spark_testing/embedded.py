"""Start and drive the real Apache RocketMQ of ``jvm-shim`` (name server + brokers in one JVM).

Used by the demo, the tests (a session-scoped fixture) and the benchmarks::

    with EmbeddedRocketMQ(brokers=2) as mq:
        mq.create_topic("Orders", queues=4)
        mq.produce("Orders", [{"body": "hello", "tags": "TagA"}])
        print(mq.name_server, mq.offsets("Orders"))
        print(mq.gateway)  # the v2 pull gateway beside the cluster (jvm-shim/gateway/README.md)

The JVM reads commands on its stdin and exits when stdin closes, so a killed Python process leaves no JVM behind.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rmq_spark.client.errors import RocketMQError

SHIM_DIR = Path(os.environ.get("RMQ_SPARK_SHIM_DIR", Path(__file__).resolve().parent.parent / "jvm-shim"))
JAR = SHIM_DIR / "harness" / "target" / "rmq-shim.jar"  # the test harness (embedded RocketMQ + the gateway)
GATEWAY_JAR = SHIM_DIR / "gateway" / "target" / "rmq-gateway.jar"  # the pull gateway on its own
JVM_FLAGS_FILE = SHIM_DIR / "jvm-flags.txt"
_TAIL_LINES = 80


class EmbeddedClusterError(RocketMQError, condition="ROCKETMQ_EMBEDDED_CLUSTER"):
    """The embedded RocketMQ could not be built, started, or did not carry out a command."""


JDK = "a JDK 17 or newer (e.g. apt-get install openjdk-17-jdk-headless)"
MAVEN = "Apache Maven (e.g. apt-get install maven)"


def require_tool(name: str, what: str) -> str:
    """The path of the program ``name``; EmbeddedClusterError naming ``what`` to install when it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        raise EmbeddedClusterError(f"'{name}' was not found on PATH: install {what} and make sure '{name}' runs.")
    return path


def newer_sources(target: Path, sources: Iterable[Path]) -> bool:
    """Whether any file among ``sources`` changed after ``target`` was built."""
    built = target.stat().st_mtime
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


def maven_package(module: Path, outputs: list[Path], what: str) -> None:
    """``mvn -q package`` in ``module``; EmbeddedClusterError with Maven's last lines when it fails or leaves an
    output missing. The first output is touched: it is the one to compare with the sources next time."""
    require_tool("java", JDK)
    proc = subprocess.run(
        [require_tool("mvn", MAVEN), "-q", "-B", "package", "-DskipTests"],
        cwd=module,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0 or not all(p.is_file() for p in outputs):
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        raise EmbeddedClusterError(f"building {what} with 'mvn -q package' failed (exit {proc.returncode}):\n{tail}")
    outputs[0].touch()


def stop_jvm(proc: subprocess.Popen, timeout: float) -> None:
    """End a JVM that runs until its stdin closes: close it, wait ``timeout`` s, then kill it."""
    try:
        if proc.stdin:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _shim_sources() -> list[Path]:
    modules = ("gateway", "harness")  # jvm-shim/stock only resolves released jars (tests/support/stock_release.py)
    return [
        SHIM_DIR / "pom.xml",
        *(SHIM_DIR / m / "pom.xml" for m in modules),
        *(p for m in modules for p in (SHIM_DIR / m / "src").rglob("*")),
    ]


def ensure_jar(*, force: bool = False) -> Path:
    """Build ``jvm-shim``'s jars (``gateway/target/rmq-gateway.jar``, ``harness/target/rmq-shim.jar``) with Maven when
    they are missing or older than their sources; returns the harness jar."""
    if not (SHIM_DIR / "pom.xml").is_file():
        raise EmbeddedClusterError(
            f"jvm-shim was not found at {SHIM_DIR}: run from a checkout of rmq-spark (pip install -e .) "
            "or set RMQ_SPARK_SHIM_DIR to the jvm-shim folder."
        )
    if JAR.is_file() and GATEWAY_JAR.is_file() and not force and not newer_sources(JAR, _shim_sources()):
        return JAR
    maven_package(SHIM_DIR, [JAR, GATEWAY_JAR], "jvm-shim")
    return JAR


def _given(**args: Any) -> dict[str, Any]:
    """The optional arguments of a shim command that are set (the shim takes an absent one for its default)."""
    return {name: value for name, value in args.items() if value}


def jvm_flags() -> list[str]:
    """The JVM flags of jvm-flags.txt: what RocketMQ needs on JDK 17, and a quick start on a small machine."""
    if not JVM_FLAGS_FILE.is_file():
        return []
    return [
        line.strip()
        for line in JVM_FLAGS_FILE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def jvm_command(
    *args: str, heap: str = "768m", extra_flags: tuple[str, ...] | list[str] = (), jar: Path | None = None
) -> list[str]:
    """The java command line that runs the harness jar (or ``jar``, e.g. GATEWAY_JAR) with the flags RocketMQ needs
    on JDK 17; ``extra_flags`` come after jvm-flags.txt, so they override it (the benchmarks turn the full JIT back
    on)."""
    java = require_tool("java", JDK)
    built = ensure_jar()
    return [java, f"-Xmx{heap}", *jvm_flags(), *extra_flags, "-jar", str(jar or built), *args]


class EmbeddedRocketMQ:
    """A running name server and ``brokers`` brokers on 127.0.0.1, driven through the shim's command protocol."""

    def __init__(
        self,
        brokers: int = 1,
        *,
        slaves: int = 0,
        slave_read: bool = True,
        acting_master: bool = False,
        store_dir: str | os.PathLike | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        commitlog_file_size: int | None = None,
        cq_file_entries: int | None = None,
        tls: bool = False,
        mutual_tls: bool = False,
        gateway: bool = True,
        gateway_port: int = 0,
        stock_proxy: bool = False,
        heap: str = "768m",
        ready_timeout: float = 180.0,
        jvm_flags: tuple[str, ...] = (),
    ) -> None:
        if (access_key is None) != (secret_key is None):
            raise ValueError("give both access_key and secret_key for an authenticated cluster, or neither")
        self.broker_count = brokers
        self.slave_count = slaves
        self.slave_read = slave_read  # slaves serve pulls (slaveReadEnable); False: RocketMQ's default, they refuse
        # slave-acting-master mode: while a master is away, the route lists its first slave at brokerId 0
        self.acting_master = acting_master
        self.store_dir = store_dir
        self.access_key = access_key
        self.secret_key = secret_key
        self.commitlog_file_size = commitlog_file_size
        self.cq_file_entries = cq_file_entries
        self.tls = tls or mutual_tls
        self.mutual_tls = mutual_tls
        self.with_gateway = gateway
        self.gateway_port = gateway_port
        self.with_stock_proxy = stock_proxy
        self.heap = heap
        self.jvm_flags = tuple(jvm_flags)
        self.ready_timeout = ready_timeout
        self.name_server: str = ""
        self.brokers: dict[str, str] = {}  # broker group -> its master's address
        self.slaves: dict[tuple[str, int], str] = {}  # (broker group, broker id) -> the slave's address
        # The v2 pull gateway beside the cluster ("127.0.0.1:PORT", None when started with gateway=False).
        self.gateway: str | None = None
        # With stock_proxy=True, the gRPC address of the stock Apache RocketMQ proxy run in front of the cluster: a
        # real v2 server without the pull calls (it answers them UNIMPLEMENTED).
        self.stock_proxy: str | None = None
        # With tls=True, the PEM file of the self-signed certificate that the name server, brokers and gateway serve
        # (valid for localhost and 127.0.0.1). With mutual_tls=True: the private CA's certificate (the servers'
        # certificates are signed by it), and a client certificate and key it signed, which they require on TLS.
        self.tls_ca: str | None = None
        self.tls_client_cert: str | None = None
        self.tls_client_key: str | None = None
        self._proc: subprocess.Popen | None = None
        self._ids = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._results: dict[int, dict] = {}
        self._ready: dict | None = None
        self._output: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._stdout_closed = False

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> EmbeddedRocketMQ:
        args = ["--brokers", str(self.broker_count)]
        if self.slave_count:
            args += ["--slaves", str(self.slave_count)]
            if not self.slave_read:
                args.append("--no-slave-read")
            if self.acting_master:
                args.append("--acting-master")
        if self.store_dir is not None:
            args += ["--store", str(self.store_dir)]
        if self.access_key is not None:
            args += ["--auth-access-key", self.access_key, "--auth-secret-key", str(self.secret_key)]
        if self.commitlog_file_size is not None:
            args += ["--commitlog-file-size", str(self.commitlog_file_size)]
        if self.cq_file_entries is not None:
            args += ["--cq-file-entries", str(self.cq_file_entries)]
        if self.mutual_tls:
            args.append("--tls-ca")  # a private CA's certificates, client certificates required on TLS
        elif self.tls:
            args.append("--tls")  # brokers: TLS beside plain TCP; gateway: TLS only (self-signed certificates)
        if not self.with_gateway:
            args.append("--no-gateway")
        elif self.gateway_port:
            args += ["--gateway-port", str(self.gateway_port)]
        if self.with_stock_proxy:
            args.append("--stock-proxy")
        cmd = jvm_command(*args, heap=self.heap, extra_flags=self.jvm_flags)
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        threading.Thread(target=self._read_stdout, name="rmq-shim-stdout", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="rmq-shim-stderr", daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout
        with self._cond:
            while self._ready is None and not self._stdout_closed and time.monotonic() < deadline:
                self._cond.wait(timeout=0.5)
        if self._ready is None:
            reason = "exited" if self._stdout_closed else f"was not ready within {self.ready_timeout:.0f} s"
            self.close()
            raise EmbeddedClusterError(f"the embedded RocketMQ {reason}; its last output:\n{self._tail()}")
        self.name_server = self._ready["nameServer"]
        self.brokers = {b["name"]: b["address"] for b in self._ready["brokers"]}
        self.slaves = {(b["name"], int(b["id"])): b["address"] for b in self._ready.get("slaves", [])}
        self.gateway = self._ready.get("gateway")
        self.stock_proxy = self._ready.get("stockProxy")
        self.tls_ca = self._ready.get("tlsCa")
        self.tls_client_cert = self._ready.get("tlsClientCert")
        self.tls_client_key = self._ready.get("tlsClientKey")
        return self

    def close(self, timeout: float = 30.0, *, wait: bool = True) -> None:
        """Shut the cluster down (end of stdin) and wait for the JVM to exit; kill it if it does not. With
        ``wait=False`` the caller goes on while the JVM shuts down (seconds: its brokers stop), and a thread of this
        process waits for it (and kills it after ``timeout``); the JVM exits on its own at the end of its stdin."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if wait:
            stop_jvm(proc, timeout)
        else:
            threading.Thread(target=stop_jvm, args=(proc, timeout), name="rmq-shim-stop", daemon=True).start()

    def __enter__(self) -> EmbeddedRocketMQ:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # -- protocol --------------------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        assert self._proc and self._proc.stdout
        for line in self._proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("READY "):
                with self._cond:
                    self._ready = json.loads(line[6:])
                    self._cond.notify_all()
            elif line.startswith("RESULT "):
                msg = json.loads(line[7:])
                with self._cond:
                    self._results[msg["id"]] = msg
                    self._cond.notify_all()
            else:
                self._output.append(line)
        with self._cond:
            self._stdout_closed = True
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self._proc and self._proc.stderr
        for line in self._proc.stderr:
            self._output.append(line.rstrip("\n"))

    def _tail(self) -> str:
        return "\n".join(self._output) or "(no output)"

    def command(self, cmd: str, *, timeout: float = 120.0, **args: Any) -> Any:
        """Send one command to the shim and return its result; raise EmbeddedClusterError on failure."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise EmbeddedClusterError(f"command {cmd!r}: the embedded RocketMQ is not running (call start())")
        with self._lock:
            self._ids += 1
            rid = self._ids
            try:
                proc.stdin.write(json.dumps({"id": rid, "cmd": cmd, **args}) + "\n")
                proc.stdin.flush()
            except OSError as e:
                raise EmbeddedClusterError(
                    f"command {cmd!r}: the embedded RocketMQ is gone ({e}); its last output:\n{self._tail()}"
                ) from e
        deadline = time.monotonic() + timeout
        with self._cond:
            while rid not in self._results:
                if self._stdout_closed:
                    raise EmbeddedClusterError(
                        f"command {cmd!r}: the embedded RocketMQ exited; its last output:\n{self._tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EmbeddedClusterError(f"command {cmd!r} got no answer within {timeout:.0f} s")
                self._cond.wait(timeout=min(left, 0.5))
            msg = self._results.pop(rid)
        if not msg.get("ok"):
            raise EmbeddedClusterError(f"command {cmd!r} failed in the embedded RocketMQ: {msg.get('error')}")
        return msg.get("result")

    # -- commands --------------------------------------------------------------------------------------------
    def create_topic(
        self, topic: str, queues: int = 4, broker: str | None = None, *, attributes: dict[str, str] | None = None
    ) -> None:
        """Create ``topic`` with ``queues`` read/write queues on every broker (or one) and wait for its route;
        ``attributes`` e.g. ``{"cleanup.policy": "COMPACTION"}``. Slaves take the topic at once."""
        self.command("createTopic", topic=topic, queues=queues, **_given(broker=broker, attributes=attributes))

    def create_static_topic(self, topic: str, queues: int = 4) -> None:
        """Create ``topic`` as a static topic (RocketMQ 5 logic queues, as ``mqadmin updateStaticTopic``) of
        ``queues`` logic queues over the running broker groups, and wait for its queue mapping in the route."""
        self.command("createStaticTopic", topic=topic, queues=queues)

    def remap_static_topic(self, topic: str, brokers: list[str]) -> None:
        """Move the logic queues of static topic ``topic`` onto broker groups ``brokers`` (as ``mqadmin
        remappingStaticTopic``: a moved queue's logic offsets go on at the next block of 10,000 on its new leader),
        and wait until the route shows them there."""
        self.command("remapStaticTopic", topic=topic, brokers=list(brokers))

    def stop_broker(self, broker: str, broker_id: int = 0) -> None:
        """Stop the master (or slave ``broker_id``) of a broker group; it unregisters from the name server."""
        self.command("stopBroker", broker=broker, brokerId=broker_id)

    def start_broker(self, broker: str, broker_id: int = 0) -> None:
        """Restart a stopped broker on its old port and store, and wait until it is registered."""
        self.command("startBroker", broker=broker, brokerId=broker_id)

    def stop_name_server(self) -> None:
        """Stop the name server (the brokers keep running)."""
        self.command("stopNamesrv")

    def start_name_server(self) -> None:
        """Start the name server again on its port and wait until every running broker has registered."""
        self.command("startNamesrv")

    def start_consumer(self, group: str, topic: str) -> str:
        """Start an official Java push consumer of ``topic`` in ``group`` (another application using the group);
        returns its client id."""
        return self.command("startConsumer", group=group, topic=topic)

    def stop_consumer(self, group: str) -> None:
        self.command("stopConsumer", group=group)

    def produce(
        self, topic: str, messages: list[dict], *, batch: bool = False, namespace: str | None = None
    ) -> list[dict]:
        """Send messages with the official Java producer (in ``namespace``, as its setNamespace takes one); each
        dict may hold body or bodyBase64, tags, keys, properties, broker and queueId. Returns msgId, brokerName,
        queueId and queueOffset of each."""
        return self.command("produce", topic=topic, messages=messages, batch=batch, **_given(namespace=namespace))

    def produce_bulk(
        self,
        topic: str,
        count: int,
        body_size: int = 100,
        *,
        tags: list[str] | None = None,
        key_prefix: str = "key-",
        timeout: float = 600.0,
    ) -> dict:
        """Load ``count`` generated messages fast with the official Java producer (benchmarks, large tests)."""
        return self.command(
            "produceBulk",
            topic=topic,
            count=count,
            bodySize=body_size,
            tags=tags or ["TagA"],
            keyPrefix=key_prefix,
            timeout=timeout,
        )

    def produce_transactional(
        self,
        topic: str,
        count: int,
        body_size: int = 100,
        *,
        mode: str = "async",
        concurrency: int = 32,
        tags: list[str] | None = None,
        key_prefix: str = "key-",
        timeout: float = 600.0,
    ) -> dict:
        """Send ``count`` generated messages as transactions of the official Java client, each a half message
        committed by one END_TRANSACTION (benchmarks.write's floor of the exactly-once sink; jvm-shim
        TransactionalLoad): ``mode`` "async" (``concurrency`` transactions in flight) or "sync"
        (``sendMessageInTransaction`` from ``concurrency`` threads). Returns ``seconds`` from the first half to the
        topic holding every message, and ``sentSeconds`` to the last commit sent."""
        return self.command(
            "produceTransactional",
            topic=topic,
            count=count,
            bodySize=body_size,
            mode=mode,
            concurrency=concurrency,
            tags=tags or ["TagA"],
            keyPrefix=key_prefix,
            timeoutMs=int(timeout * 1000),
            timeout=timeout + 90,
        )

    def consume(self, topic: str, **selection: Any) -> list[dict]:
        """Every message of the topic (or of ``broker``/``queueId``) as the official Java consumer sees it (in
        ``namespace=``, as its setNamespace takes one)."""
        return self.command("consume", topic=topic, **selection)

    def request_counts(self) -> dict[int, int]:
        """The requests the brokers received so far, in all, by RocketMQ request code."""
        return {int(code): n for code, n in self.command("requestCounts").items()}

    def offsets(self, topic: str) -> list[dict]:
        """Min and max offset of every queue of the topic, from the official Java admin tool."""
        return self.command("offsets", topic=topic)

    def search_offset(self, topic: str, broker: str, queue_id: int, timestamp: int, boundary: str | None = None) -> int:
        return self.command(
            "searchOffset",
            topic=topic,
            broker=broker,
            queueId=queue_id,
            timestamp=timestamp,
            **_given(boundary=boundary),
        )

    def query_consumer_offset(self, group: str, topic: str, broker: str, queue_id: int) -> int:
        return self.command("queryConsumerOffset", group=group, topic=topic, broker=broker, queueId=queue_id)

    def update_consumer_offset(self, group: str, topic: str, broker: str, queue_id: int, offset: int) -> None:
        self.command("updateConsumerOffset", group=group, topic=topic, broker=broker, queueId=queue_id, offset=offset)

    def earliest_store_time(self, topic: str, broker: str, queue_id: int) -> int:
        return self.command("earliestMsgStoreTime", topic=topic, broker=broker, queueId=queue_id)

    def delete_old_files(self, broker: str, *, correct_queues: bool = True) -> Any:
        """Make the broker delete all but its newest commit-log file (data-loss tests). Without ``correct_queues``
        its consume queues keep pointing into the deleted files until the broker's own clean-up (every 10 s)
        corrects their min offsets."""
        return self.command("deleteOldFiles", broker=broker, correctQueues=correct_queues)

    def correct_queues(self, broker: str) -> Any:
        """Make the broker's consume queues drop entries that point into deleted commit-log files now (what its
        clean-up does every 10 s, starting a minute after the broker started)."""
        return self.command("correctQueues", broker=broker)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rmq_spark_testing.embedded",
        description="Run the embedded Apache RocketMQ of jvm-shim until stdin closes or Ctrl-C.",
    )
    parser.add_argument("--brokers", type=int, default=1, help="number of brokers (broker-a, broker-b, ...)")
    parser.add_argument("--slaves", type=int, default=0, help="slaves per broker (master-slave replication)")
    parser.add_argument(
        "--no-slave-read", action="store_true", help="slaves refuse pulls (slaveReadEnable=false, RocketMQ's default)"
    )
    parser.add_argument(
        "--acting-master",
        action="store_true",
        help="slave-acting-master mode: the route lists a slave at brokerId 0 while its master is away",
    )
    parser.add_argument("--store", help="store directory (default: a temporary one, deleted at exit)")
    parser.add_argument("--topic", action="append", default=[], help="create this topic (repeatable)")
    parser.add_argument("--queues", type=int, default=4, help="queues per broker for --topic")
    parser.add_argument("--no-gateway", action="store_true", help="do not start the v2 pull gateway")
    parser.add_argument("--build", action="store_true", help="only build the jar (when missing or stale) and exit")
    args = parser.parse_args(argv)
    try:
        if args.build:
            print(ensure_jar())
            return 0
        with EmbeddedRocketMQ(
            args.brokers,
            slaves=args.slaves,
            slave_read=not args.no_slave_read,
            acting_master=args.acting_master,
            store_dir=args.store,
            gateway=not args.no_gateway,
        ) as mq:
            for topic in args.topic:
                mq.create_topic(topic, args.queues)
            print(
                json.dumps(
                    {
                        "nameServer": mq.name_server,
                        "brokers": mq.brokers,
                        "slaves": {f"{b}:{i}": a for (b, i), a in mq.slaves.items()},
                        "gateway": mq.gateway,
                        "topics": args.topic,
                    }
                ),
                flush=True,
            )
            try:
                for _ in sys.stdin:
                    pass
            except KeyboardInterrupt:
                pass
    except EmbeddedClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
