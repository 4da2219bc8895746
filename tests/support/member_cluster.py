"""What the stock tier's replicated broker groups share, whoever elects their master (RocketMQ 5's controller,
``ControllerCluster``; a DLedger Raft group, ``DLedgerCluster``): each broker group is several broker processes
(members), and which one is master is read from the name server's route (brokerId 0)."""

from __future__ import annotations

import signal

from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.model import MASTER_ID
from tests.support.processes import kill_group
from tests.support.stock_cluster import StockCluster, StockClusterError, StockProcess


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
