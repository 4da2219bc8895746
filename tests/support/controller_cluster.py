"""RocketMQ 5's Controller mode as operators run it: the controller embedded in the name server
(``enableControllerInNamesrv``, a one-peer DLedger controller) and each broker group as several broker processes
with ``enableControllerMode=true`` and ``brokerId=-1``, each with its own store and HA port; the controller elects
the master and, when it dies, one of the replicas in the group's SyncStateSet::

    with ControllerCluster(tmp_path) as cluster:               # broker-a: two members, asynchronous replication
        cluster.create_topic("Orders", queues=4)
        master, slave = cluster.master("broker-a"), cluster.slaves("broker-a")[0]
        cluster.pause(slave)                                   # SIGSTOP: it stops replicating
        cluster.kill_member(master)                            # SIGKILL
        cluster.resume(slave)                                  # SIGCONT
        cluster.wait_master("broker-a", slave)                 # the controller elected it: brokerId 0 in the route
        cluster.restart_member(master)                         # it comes back as a slave
        cluster.wait_slave("broker-a", master)

``sync=True`` sets ``allAckInSyncStateSet=true``: a send is answered once every replica of the SyncStateSet has it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path

from rmq_spark.client.remoting.frame import RemotingCommand
from tests.support.member_cluster import MemberCluster
from tests.support.ports import server_port
from tests.support.stock_cluster import BROKER_MAIN, CLUSTER, HOST, StockClusterError, StockProcess

# What the controller and the members are told beyond RocketMQ's defaults: a replica that stops replicating leaves
# the SyncStateSet after haMaxTimeSlaveNotCatchup (15 s by default), so a slave paused for a few seconds is still
# eligible when its master dies; the members heartbeat the controller every second, as the quick start does not.
CONTROLLER_DEFAULTS: Mapping[str, str] = {
    "controllerDLegerGroup": "group1",
    "controllerDLegerSelfId": "n0",
    "enableElectUncleanMaster": "false",
    "notifyBrokerRoleChanged": "true",
    "scanNotActiveBrokerInterval": "1000",
    "scanInactiveMasterInterval": "1000",
}
CONTROLLER_GET_REPLICA_INFO = 1004  # RequestCode: the group's master and SyncStateSet
MEMBER_DEFAULTS: Mapping[str, str] = {
    "enableControllerMode": "true",
    "brokerId": "-1",
    "brokerRole": "SLAVE",
    "controllerHeartBeatTimeoutMills": "5000",
    "syncBrokerMetadataPeriod": "1000",
    "checkSyncStateSetPeriod": "1000",
    "syncControllerMetadataPeriod": "2000",
}


class ControllerCluster(MemberCluster):
    """A name server with the controller in it and, per broker group, ``replicas`` broker processes (members) that
    the controller assigns master and slaves; ``sync``: allAckInSyncStateSet=true. 5.x only (the controller came
    with 5.0)."""

    def __init__(
        self,
        root: Path,
        *,
        version: str = "5.5.0",
        brokers: tuple[str, ...] = ("broker-a",),
        replicas: int = 2,
        sync: bool = False,
        broker_config: Mapping[str, str] | None = None,
        **kwargs,
    ) -> None:
        if version.startswith("4."):
            raise StockClusterError(f"RocketMQ {version} has no controller mode (5.0 added it)")
        config = {**MEMBER_DEFAULTS, **({"allAckInSyncStateSet": "true"} if sync else {}), **(broker_config or {})}
        super().__init__(root, version=version, brokers=(), broker_config=config, **kwargs)
        self.controller_port = server_port()
        # listen port p; RocketMQ also binds p - 2 (the "fast" remoting server) and p + 1 (haListenPort)
        self.members = {
            group: [
                StockProcess(f"{group}-n{i}", server_port(-2, 1), self.root / f"{group}-n{i}") for i in range(replicas)
            ]
            for group in brokers
        }

    @property
    def controller_address(self) -> str:
        return f"{HOST}:{self.controller_port}"

    # -- the members -----------------------------------------------------------------------------------------
    def pause(self, p: StockProcess) -> None:
        """SIGSTOP the member's JVM: it neither replicates nor answers, and keeps its connections open."""
        self._signal(p, signal.SIGSTOP)

    def resume(self, p: StockProcess) -> None:
        """SIGCONT a paused member."""
        self._signal(p, signal.SIGCONT)

    def in_sync(self, group: str) -> set[int]:
        """The brokerIds of ``group``'s SyncStateSet (the members the controller may elect), as the controller
        answers CONTROLLER_GET_REPLICA_INFO (mqadmin getSyncStateSet asks the same)."""
        cmd = RemotingCommand(code=CONTROLLER_GET_REPLICA_INFO, ext_fields={"brokerName": group})
        answer = self._client._pool.request(self.controller_address, cmd, 5.0)
        if answer.code != 0 or not answer.body:
            return set()
        return set(json.loads(answer.body).get("syncStateSet", ()))

    def wait_in_sync(self, group: str, timeout: float | None = None) -> None:
        """Wait until every running member of ``group`` is in its SyncStateSet: a slave joins it once it has
        caught up with its master, and only then can it be elected."""
        running = sum(p.running for p in self._members(group))
        self._wait(
            lambda: len(self.in_sync(group)) == running,
            f"the {running} running members of {group} to be in its SyncStateSet",
            self.namesrv,
            timeout,
        )

    # -- StockCluster's hooks --------------------------------------------------------------------------------
    def _namesrv_config(self) -> dict[str, str]:
        store = self.namesrv.dir / "controller"
        return {
            **super()._namesrv_config(),
            "enableControllerInNamesrv": "true",
            "controllerDLegerPeers": f"n0-{self.controller_address}",
            "controllerStorePath": str(store),
            "configStorePath": str(store / "controller.properties"),
            **CONTROLLER_DEFAULTS,
        }

    def _start_brokers(self) -> None:
        """Each group's first member, elected master; then the others, which become its slaves."""
        for group, members in self.members.items():
            first, *rest = members
            self._start_member(first)
            self.wait_master(group, first)
            for p in rest:
                self._start_member(p)
            for p in rest:
                self.wait_slave(group, p)
            self.wait_in_sync(group)

    def _start_member(self, p: StockProcess) -> None:
        group = next(g for g, members in self.members.items() if p in members)
        store = p.dir / "store"
        self._launch(
            p,
            BROKER_MAIN,
            {
                "brokerClusterName": CLUSTER,
                "brokerName": group,
                "namesrvAddr": self.name_server,
                "controllerAddr": self.controller_address,
                "brokerIP1": HOST,
                "brokerIP2": HOST,
                "listenPort": str(p.port),
                "haListenPort": str(p.port + 1),
                "storePathRootDir": str(store),
                "storePathCommitLog": str(store / "commitlog"),
                "storePathEpochFile": str(store / "epochFileCheckpoint"),
                **self.broker_config,
            },
        )

    @staticmethod
    def _signal(p: StockProcess, sig: signal.Signals) -> None:
        if p.proc is None:
            raise StockClusterError(f"{p.name} is not running")
        os.killpg(p.proc.pid, sig)
