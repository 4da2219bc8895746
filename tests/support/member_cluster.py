"""What the stock tier's replicated broker groups share, whoever elects their master (RocketMQ 5's controller,
``ControllerCluster``; a DLedger Raft group, ``DLedgerCluster``): each broker group is several broker processes
(members), and which one is master is read from the name server's route (brokerId 0)."""

from __future__ import annotations

import signal

from rmq_spark.client.errors import RocketMQError, TopicNotFoundError
from rmq_spark.client.model import MASTER_ID
from rmq_spark.client.remoting.frame import RemotingCommand
from tests.support.processes import kill_group
from tests.support.stock_cluster import StockCluster, StockClusterError, StockProcess

GET_ALL_TOPIC_CONFIG = 21  # RequestCode: a broker's topic config table (what a slave copies from its master)


class MemberCluster(StockCluster):
    """A StockCluster whose broker groups are ``members`` (set by the subclass, which starts each member in
    ``_start_member``)."""

    members: dict[str, list[StockProcess]]

    def master(self, group: str) -> StockProcess:
        """The member the route lists at brokerId 0 now."""
        address = self._addresses(group).get(MASTER_ID)
        for p in self._members(group):
            if p.address == address:
                return p
        raise StockClusterError(f"broker group {group} has no master in the route now ({self._addresses(group)})")

    def slaves(self, group: str) -> list[StockProcess]:
        """The running members other than the master."""
        master = self.master(group)
        return [p for p in self._members(group) if p is not master and p.running]

    def kill_member(self, p: StockProcess) -> None:
        """SIGKILL the member's JVM: the name server drops it at once (its connection closes), and its group elects
        another member."""
        if p.proc is None:
            raise StockClusterError(f"{p.name} is not running")
        kill_group(p.proc, signal.SIGKILL)
        p.proc = None

    def restart_member(self, p: StockProcess) -> None:
        """Start a killed member again on its ports and store: it rejoins its group as a slave of the master now."""
        if p.running:
            raise StockClusterError(f"{p.name} is running: kill it before restarting it")
        self._start_member(p)

    def wait_master(self, group: str, p: StockProcess, timeout: float | None = None) -> None:
        """Wait until the route lists ``p`` at brokerId 0 of ``group``."""
        self._wait(
            lambda: self._addresses(group).get(MASTER_ID) == p.address,
            f"{p.name} at {p.address} to be the master of {group} in the route",
            p,
            timeout,
        )

    def wait_slave(self, group: str, p: StockProcess, timeout: float | None = None) -> None:
        """Wait until the route lists ``p`` in ``group`` at a brokerId other than 0."""
        self._wait(
            lambda: any(i != MASTER_ID and a == p.address for i, a in self._addresses(group).items()),
            f"{p.name} at {p.address} to be a slave of {group} in the route",
            p,
            timeout,
        )

    def wait_new_master(
        self, group: str, old: StockProcess | None = None, timeout: float | None = None
    ) -> StockProcess:
        """Wait until the route lists a running member other than ``old`` at brokerId 0 of ``group``; that member."""
        others = {p.address: p for p in self._members(group) if p is not old and p.running}
        seen: list[StockProcess] = []

        def elected() -> bool:
            master = others.get(self._addresses(group).get(MASTER_ID))
            seen[:] = [master] if master else []
            return bool(seen)

        names = sorted(p.name for p in others.values())
        self._wait(elected, f"one of {names} to be the master of {group} in the route", self.namesrv, timeout)
        return seen[0]

    def has_topic(self, p: StockProcess, topic: str) -> bool:
        """Whether member ``p`` has ``topic`` in its topic config table (GET_ALL_TOPIC_CONFIG)."""
        try:
            answer = self._client._pool.request(p.address, RemotingCommand(code=GET_ALL_TOPIC_CONFIG), 5.0)
        except RocketMQError:
            return False
        return answer.code == 0 and f'"{topic}"'.encode() in answer.body

    def wait_topic_on_members(self, topic: str, timeout: float = 60.0) -> None:
        """Wait until every running member has ``topic``: a slave copies its master's topic configs now and then
        (every 10 s in DLedger mode, syncBrokerMetadataPeriod in Controller mode), and one elected without it would
        not route the topic."""
        running = [p for p in self._processes() if p.running]
        self._wait(
            lambda: all(self.has_topic(p, topic) for p in running),
            f"topic {topic} on every running member ({', '.join(p.name for p in running)})",
            self.namesrv,
            timeout,
        )

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create ``topic`` on every group's master, as StockCluster does, and wait until its slaves copied it."""
        super().create_topic(topic, queues)
        self.wait_topic_on_members(topic)

    # -- StockCluster's hooks --------------------------------------------------------------------------------
    def _processes(self) -> list[StockProcess]:
        return [p for members in self.members.values() for p in members]

    def _groups(self) -> list[str]:
        return [group for group in self.members if MASTER_ID in self._addresses(group)]

    # -- internals -------------------------------------------------------------------------------------------
    def _start_member(self, p: StockProcess) -> None:
        raise NotImplementedError

    def _members(self, group: str) -> list[StockProcess]:
        try:
            return self.members[group]
        except KeyError:
            raise StockClusterError(f"unknown broker group {group!r}: the cluster has {sorted(self.members)}") from None

    def _addresses(self, group: str) -> dict[int, str]:
        """brokerId -> address of ``group`` in the route of the topic named after it, as the name server answers."""
        try:
            data = self._client.route(group, refresh=True).broker(group)
        except TopicNotFoundError:
            return {}
        return dict(data.addresses) if data is not None else {}
