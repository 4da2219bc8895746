"""RocketMQ 4.9's DLedger mode as operators run it: a broker group as three broker processes with
``enableDLegerCommitLog=true``, one Raft group (``dLegerGroup``, ``dLegerPeers``, ``dLegerSelfId``) whose commit log
they replicate; Raft elects the leader, which registers as the group's master (brokerId 0), the followers as its
slaves (brokerId = the peer's index + 1). When the leader dies, the two others elect one of them::

    with DLedgerCluster(tmp_path) as cluster:                  # broker-a: n0, n1, n2
        cluster.create_topic("Orders", queues=2)               # on the leader, copied to the followers
        leader = cluster.leader()
        cluster.kill_member(leader)                            # SIGKILL
        new = cluster.wait_new_master("broker-a", leader)      # Raft elected another: brokerId 0 in the route
        cluster.restart_member(leader)                         # it rejoins as a follower
        cluster.wait_slave("broker-a", leader)

A message is visible (dispatched to its consume queue) only once a majority stored it (DLedgerCommitLog serves up to
the committed position), so an elected leader holds every message a consumer could have read. Topic configs and
consumer offsets are not in the Raft log: a follower copies them from its master every 10 s (SlaveSynchronize), and
``create_topic`` waits until every running member has the topic.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.member_cluster import MemberCluster
from tests.support.ports import server_port
from tests.support.stock_cluster import BROKER_MAIN, CLUSTER, HOST, StockClusterError, StockProcess

# Beyond the stock defaults: no brokerRole (the Raft role sets it: a leader becomes SYNC_MASTER, a follower SLAVE);
# sendMessageThreadPoolNums set, as RocketMQ's DLedger deploy guide asks (it advises the cores' count; two, as
# every broker of this tier, on a small shared machine).
MEMBER_DEFAULTS: Mapping[str, str] = {
    "enableDLegerCommitLog": "true",
    "sendMessageThreadPoolNums": "2",
}


class DLedgerCluster(MemberCluster):
    """A name server and, per broker group, ``replicas`` broker processes (members) in one DLedger Raft group named
    after it. Run on 4.x only (4.9.7 is what it was tried with); the tier's 5.x elections use the controller
    (``ControllerCluster``)."""

    def __init__(
        self,
        root: Path,
        *,
        version: str = "4.9.7",
        brokers: tuple[str, ...] = ("broker-a",),
        replicas: int = 3,
        broker_config: Mapping[str, str] | None = None,
        **kwargs,
    ) -> None:
        if not version.startswith("4."):
            raise StockClusterError(f"DLedgerCluster runs RocketMQ 4.x only; for {version} use ControllerCluster")
        super().__init__(root, version=version, brokers=(), **kwargs)
        config = {k: v for k, v in self.broker_config.items() if k != "brokerRole"}
        self.broker_config = {**config, **MEMBER_DEFAULTS, **(broker_config or {})}
        # listen port p; RocketMQ also binds p - 2 (the "fast" remoting server) and p + 1 (haListenPort); the Raft
        # peers talk on a port of their own
        self.members = {
            group: [
                StockProcess(f"{group}-n{i}", server_port(-2, 1), self.root / f"{group}-n{i}") for i in range(replicas)
            ]
            for group in brokers
        }
        self.peer_ports = {p.name: server_port() for members in self.members.values() for p in members}

    # -- StockCluster's hooks --------------------------------------------------------------------------------
    def _start_brokers(self) -> None:
        """Every member at once (an election needs a majority), then wait until one is master and the others its
        slaves."""
        for members in self.members.values():
            for p in members:
                self._start_member(p)
        for group, members in self.members.items():
            deadline = time.monotonic() + self.ready_timeout
            master = self.wait_new_master(group)
            for p in members:
                if p is not master:
                    self.wait_slave(group, p, max(deadline - time.monotonic(), 1.0))

    def _peers(self, group: str) -> str:
        """dLegerPeers: ``n0-host:port;n1-host:port;...``, the same on every member."""
        return ";".join(f"n{i}-{HOST}:{self.peer_ports[p.name]}" for i, p in enumerate(self._members(group)))

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
                "brokerIP1": HOST,
                "brokerIP2": HOST,
                "listenPort": str(p.port),
                "storePathRootDir": str(store),
                "storePathCommitLog": str(store / "commitlog"),
                "dLegerGroup": group,
                "dLegerPeers": self._peers(group),
                "dLegerSelfId": f"n{self._members(group).index(p)}",
                **self.broker_config,
            },
        )
