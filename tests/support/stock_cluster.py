"""Apache RocketMQ run as operators run it: a name server and broker groups, each in its own JVM started through the
released startup classes with plain config files, from the released jars of one version (``stock_release``), so that
a test can SIGKILL a broker and restart it on its store::

    with StockCluster(tmp_path, brokers=("broker-a", "broker-b")) as cluster:
        cluster.create_topic("Orders", queues=4)          # UPDATE_AND_CREATE_TOPIC on every master
        cluster.mqadmin("updateTopic", "-c", CLUSTER, "-t", "Audit", "-r", "2", "-w", "2")   # RocketMQ's own tool
        cluster.kill("broker-a")                          # SIGKILL, waits until the name server dropped it
        cluster.restart("broker-a")                       # same port and store, waits until it registered again
        messages = cluster.consume("Orders")              # RocketMQ's Java pull consumer

    with StockCluster(tmp_path, proxy=True) as cluster:  # and RocketMQ 5's proxy (ProxyStartup, cluster mode)
        cluster.proxy_address                             # its remoting port: name server and broker to a client

Every process runs in its own process group with its logs in its directory under ``root``; ``close`` SIGKILLs them
all, and each dies with the thread that started it (PR_SET_PDEATHSIG) should the test process itself be killed.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rmq_spark.client.errors import RocketMQError, TopicNotFoundError
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark_testing.embedded import EmbeddedClusterError, ensure_jar
from tests.support.ports import server_port
from tests.support.processes import kill_group
from tests.support.stock_release import java, java_command

CLUSTER = "DefaultCluster"
HOST = "127.0.0.1"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
READER_MAIN = "org.rmqspark.shim.ReadTopic"
_PR_SET_PDEATHSIG = 1
# RocketMQ 4.x configures logback from $ROCKETMQ_HOME/conf (5.x from its jars, into ${user.home}/logs/rocketmqlogs):
# one file appender into the process's own directory.
_LOGBACK = """<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>${user.home}/logs/rocketmqlogs/rocketmq.log</file>
    <encoder><pattern>%d{HH:mm:ss.SSS} %p %t %c{0} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="file"/></root>
</configuration>
"""
# A test broker: small files (EmbeddedCluster.java's sizes), few writer threads, the 5.x timer wheel flushed rarely.
# 5.5.0 and 5.5.1 spin a core per broker from transactionOpBatchInterval (3 s) after their last END_TRANSACTION
# (README, "spin a core"; measured here: 0.8-0.9 core): five minutes keeps a test's brokers quiet. The records of
# ended halves are then written once 4 KiB of them are pending, the rest within five minutes; meanwhile the broker's
# transaction check may copy committed halves inside its half topic, which consumers never see.
BROKER_DEFAULTS: Mapping[str, str] = {
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
    "maxHashSlotNum": "5000",
    "maxIndexNum": "20000",
    "mappedFileSizeTimerLog": str(4 * 1024 * 1024),
    "timerFlushIntervalMs": "30000",
    "transactionMetricFlushInterval": "500",
    "transactionOpBatchInterval": "300000",
    "sendMessageThreadPoolNums": "2",
    "endTransactionThreadPoolNums": "2",
    "diskMaxUsedSpaceRatio": "95",
}


# A test proxy: few threads (its defaults scale with the cores), no thread dumps in its log.
PROXY_DEFAULTS: Mapping[str, object] = {
    "rocketmqMQClientNum": 1,
    "enablePrintJstack": False,
    "grpcThreadPoolNums": 2,
    "remotingSendMessageThreadPoolNums": 2,
    "remotingPullMessageThreadPoolNums": 4,
    "remotingUpdateOffsetThreadPoolNums": 2,
    "remotingDefaultThreadPoolNums": 2,
    "remotingHeartbeatThreadPoolNums": 1,
    "remotingTopicRouteThreadPoolNums": 1,
}


class StockClusterError(EmbeddedClusterError, condition="ROCKETMQ_STOCK_CLUSTER"):
    """A stock RocketMQ process did not start, register or unregister in time, or the Java consumer failed."""


_prctl = ctypes.CDLL(None).prctl  # looked up here: the forked child of a threaded process only calls it


def _die_with_parent() -> None:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class StockProcess:
    """One RocketMQ JVM: its name, port, directory (config, store, logs) and, while it runs, its process."""

    name: str
    port: int
    dir: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self, lines: int = 40) -> str:
        """The last lines of its console and of RocketMQ's own logs, for an error message."""
        parts = []
        main_logs = ("broker.log", "namesrv.log", "proxy.log", "rocketmq.log")  # 5.x's, and 4.x's one (_LOGBACK)
        for log in [
            self.dir / "console.log",
            *(p for p in sorted((self.dir / "logs").rglob("*.log")) if p.name in main_logs),
        ]:
            if log.is_file():
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts) or "(no output)"


class StockCluster:
    """A name server and one master per broker group (brokerId 0), RocketMQ ``version`` from Maven Central, on free
    loopback ports, stores and logs under ``root``. ``broker_config`` adds or overrides broker.conf entries. With
    ``proxy`` (5.x only), RocketMQ 5's proxy in front of them, in cluster mode: its remoting port is
    ``proxy_address``, its gRPC port ``proxy_grpc_address``."""

    def __init__(
        self,
        root: Path,
        *,
        version: str = "5.5.0",
        brokers: tuple[str, ...] = ("broker-a", "broker-b"),
        heap: str = "256m",
        broker_config: Mapping[str, str] | None = None,
        ready_timeout: float = 90.0,
        proxy: bool = False,
    ) -> None:
        self.root = Path(root)
        self.version = version
        self.heap = heap
        self.ready_timeout = ready_timeout
        self.broker_config = {**BROKER_DEFAULTS, **(broker_config or {})}
        self.namesrv = StockProcess("namesrv", server_port(), self.root / "namesrv")
        # listen port p; RocketMQ also binds p - 2 (the "fast" remoting server) and p + 1 (HA, for slaves)
        self.brokers = {name: StockProcess(name, server_port(-2, 1), self.root / name) for name in brokers}
        self.proxy = StockProcess("proxy", server_port(), self.root / "proxy") if proxy else None
        self._proxy_grpc_port = server_port() if proxy else 0
        self._home = self.root / "rocketmq-home"
        self._client: RemotingClient | None = None

    @property
    def name_server(self) -> str:
        return self.namesrv.address

    @property
    def proxy_address(self) -> str:
        """The proxy's remoting port (host:port), which a client takes for its name server."""
        if self.proxy is None:
            raise StockClusterError("this cluster has no proxy: start it with proxy=True")
        return self.proxy.address

    @property
    def proxy_grpc_address(self) -> str:
        return f"{HOST}:{self._proxy_grpc_port}"

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> StockCluster:
        """Start the name server, then every broker; return once each is registered (``close`` stops what
        started, also when this fails)."""
        try:
            (self._home / "conf").mkdir(parents=True, exist_ok=True)
            for name in ("logback_namesrv.xml", "logback_broker.xml", "logback_tools.xml"):
                (self._home / "conf" / name).write_text(_LOGBACK)
            self._launch(self.namesrv, NAMESRV_MAIN, self._namesrv_config())
            self._client = RemotingClient(self.name_server, request_timeout=5.0, connect_timeout=2.0)
            self._wait(self._answers, f"name server {self.name_server} to answer", self.namesrv)
            self._start_brokers()
            if self.proxy is not None:
                self._start_proxy()
        except BaseException:
            self.close()
            raise
        return self

    def _namesrv_config(self) -> dict[str, str]:
        """namesrv.conf's entries."""
        return {"listenPort": str(self.namesrv.port)}

    def _start_brokers(self) -> None:
        """Start every broker group's master and wait until each is registered."""
        for broker in self.brokers.values():
            self._start_broker(broker)
        for name in self.brokers:
            self.wait_registered(name)

    def _processes(self) -> list[StockProcess]:
        """Every broker process of the cluster."""
        return list(self.brokers.values())

    def _groups(self) -> list[str]:
        """The broker groups a topic is created on: those whose master runs."""
        return [name for name, b in self.brokers.items() if b.running]

    def close(self) -> None:
        """SIGKILL every process of the cluster (their stores are the test's) and wait until none runs."""
        for p in [*([self.proxy] if self.proxy else []), *self._processes(), self.namesrv]:
            if p.proc is not None:
                kill_group(p.proc)
                p.proc = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> StockCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kill(self, broker: str) -> None:
        """SIGKILL ``broker``'s JVM, as a crash or the OOM killer would end it, and wait until the name server has
        dropped it from the routes (at once: the kernel closes its connections)."""
        b = self._broker(broker)
        if b.proc is None:
            raise StockClusterError(f"broker {broker} is not running: restart it before killing it again")
        kill_group(b.proc, signal.SIGKILL)
        b.proc = None
        self.wait_registered(broker, present=False)

    def restart(self, broker: str) -> None:
        """Start ``broker`` again on its port and store (recovering its commit log as after a crash) and wait
        until it is registered."""
        b = self._broker(broker)
        if b.running:
            raise StockClusterError(f"broker {broker} is running: kill it before restarting it")
        self._start_broker(b)
        self.wait_registered(broker)

    def wait_registered(self, broker: str, present: bool = True, timeout: float | None = None) -> None:
        """Wait until the name server's route lists ``broker``'s master at its address (``present``), or no
        longer lists it."""
        b = self._broker(broker)
        what = f"broker {broker} at {b.address} to {'register with' if present else 'leave'} the name server"
        self._wait(lambda: self._registered(b) == present, what, b if present else self.namesrv, timeout)

    # -- operators' tools ------------------------------------------------------------------------------------
    def mqadmin(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``mqadmin`` (the version's MQAdminStartup) against the cluster's name server (``-n`` is added); its
        output. mqadmin exits 0 even when its command failed: check the effect (e.g. ``wait_topic``)."""
        tools = self.root / "mqadmin"
        tools.mkdir(exist_ok=True)
        cmd = java_command(
            self.version, MQADMIN_MAIN, *args, "-n", self.name_server, heap="128m", home=tools, rocketmq_home=self._home
        )
        proc = subprocess.run(cmd, cwd=tools, capture_output=True, text=True, timeout=timeout)
        return proc.stdout + proc.stderr

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create ``topic`` with ``queues`` read and write queues on every running master: the request that
        ``mqadmin updateTopic -c`` sends (UPDATE_AND_CREATE_TOPIC), from the project's client without a JVM's
        start; then wait until the route shows it."""
        for name in self._groups():  # each through the route of the topic named after it: no autoCreateTopicEnable
            self._client.create_topic(topic, queues, seed_topic=name)
        self.wait_topic(topic, queues)

    def wait_topic(self, topic: str, queues: int, timeout: float = 30.0) -> None:
        """Wait until the route of ``topic`` shows ``queues`` read and write queues on every running broker."""

        def shown() -> bool:
            try:
                route = self._client.route(topic, refresh=True)
            except TopicNotFoundError:
                return False
            counts = {q.broker_name: (q.read_queue_nums, q.write_queue_nums) for q in route.queues}
            return all(counts.get(name) == (queues, queues) for name in self._groups())

        self._wait(shown, f"topic {topic} with {queues} queues on every running broker", self.namesrv, timeout)

    def consume(self, *topics: str, timeout: float = 120.0) -> list[dict]:
        """Every message of ``topics`` as RocketMQ's Java pull consumer reads it, queue by queue from each queue's
        min to max offset (jvm-shim's ReadTopic, the consume command's message form: brokerName, queueId,
        queueOffset, msgId, bodyBase64, properties, ...)."""
        reader = self.root / "reader"
        reader.mkdir(exist_ok=True)
        cmd = java(str(ensure_jar()), READER_MAIN, self.name_server, *topics, heap="256m", home=reader)
        proc = subprocess.run(cmd, cwd=reader, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise StockClusterError(
                f"the Java consumer could not read {', '.join(topics)} (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
            )
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]

    # -- internals -------------------------------------------------------------------------------------------
    def _broker(self, name: str) -> StockProcess:
        try:
            return self.brokers[name]
        except KeyError:
            raise StockClusterError(f"unknown broker {name!r}: the cluster has {sorted(self.brokers)}") from None

    def _start_broker(self, b: StockProcess) -> None:
        store = b.dir / "store"
        self._launch(
            b,
            BROKER_MAIN,
            {
                "brokerClusterName": CLUSTER,
                "brokerName": b.name,
                "brokerId": "0",
                "namesrvAddr": self.name_server,
                "brokerIP1": HOST,
                "brokerIP2": HOST,
                "listenPort": str(b.port),
                "haListenPort": str(b.port + 1),
                "storePathRootDir": str(store),
                "storePathCommitLog": str(store / "commitlog"),
                **self.broker_config,
            },
        )

    def _start_proxy(self) -> None:
        """ProxyStartup in cluster mode with a plain rmq-proxy.json, as operators start it; wait until its remoting
        port answers a route (rewritten to point at itself) for every broker group."""
        p = self.proxy
        p.dir.mkdir(parents=True, exist_ok=True)
        conf = p.dir / "rmq-proxy.json"
        conf.write_text(
            json.dumps(
                {
                    "rocketMQClusterName": CLUSTER,
                    "namesrvAddr": self.name_server,
                    "proxyMode": "cluster",
                    "remotingListenPort": p.port,
                    "grpcServerPort": self._proxy_grpc_port,
                    "remotingAccessAddr": HOST,
                    "localServeAddr": HOST,
                    "proxyName": "stock-proxy",
                    **PROXY_DEFAULTS,
                },
                indent=2,
            )
        )
        self._launch(p, PROXY_MAIN, conf, "-pc", str(conf), "-pm", "cluster")
        with RemotingClient(p.address, request_timeout=5.0, connect_timeout=2.0) as client:

            def routes_through_it() -> bool:
                try:
                    groups = [client.route(name, refresh=True).broker(name) for name in self.brokers]
                except RocketMQError:
                    return False
                return all(g is not None and g.master_address == p.address for g in groups)

            self._wait(routes_through_it, f"the proxy at {p.address} to route every broker group", p)

    def _launch(self, p: StockProcess, main_class: str, conf: Path | Mapping[str, str], *args: str) -> None:
        """Start ``main_class`` as ``p``: with a config map, written as ``p``'s .conf file and passed by ``-c``;
        with a path, the file already written, and ``args`` for the command line."""
        p.dir.mkdir(parents=True, exist_ok=True)
        if not isinstance(conf, Path):
            config, conf = conf, p.dir / ("broker.conf" if main_class == BROKER_MAIN else "namesrv.conf")
            conf.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
            args = ("-c", str(conf))
        cmd = java_command(
            self.version,
            main_class,
            *args,
            heap=self.heap,
            home=p.dir,
            rocketmq_home=self._home,
            proxy=self.proxy is not None,
        )
        with open(p.dir / "console.log", "a") as console:
            p.proc = subprocess.Popen(
                cmd,
                cwd=p.dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def _answers(self) -> bool:
        try:
            self._client.live_brokers()
        except RocketMQError:
            return False
        return True

    def _registered(self, b: StockProcess) -> bool:
        """Whether the route of the topic named after the broker group (every broker registers one) lists its
        master at its address."""
        try:
            group = self._client.route(b.name, refresh=True).broker(b.name)
        except TopicNotFoundError:
            return False
        return group is not None and group.master_address == b.address

    def _wait(self, condition, what: str, process: StockProcess, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.ready_timeout)
        while not condition():
            if process.proc is not None and process.proc.poll() is not None:
                raise StockClusterError(
                    f"waiting for {what}: {process.name} exited ({process.proc.returncode}); "
                    f"its output:\n{process.output()}"
                )
            if time.monotonic() > deadline:
                raise StockClusterError(f"timed out waiting for {what}; {process.name}'s output:\n{process.output()}")
            time.sleep(0.1)
