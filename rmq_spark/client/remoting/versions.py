"""Which release of RocketMQ answered a request. A broker started by RocketMQ's BrokerStartup stamps each answer with
its release (``version``: the ordinal of MQVersion.Version), which tells 4.x brokers, where some requests answer
differently, from 5.x ones. A server that stamps nothing (0) is taken for a 5.x one."""

from __future__ import annotations

from rmq_spark.client.remoting.frame import RemotingCommand

V4_0_0 = 213  # MQVersion.Version.V4_0_0.ordinal()
V4_9_0_SNAPSHOT = 392
V5_0_0 = 413


def is_v4(response: RemotingCommand) -> bool:
    """Whether a RocketMQ 4.x broker sent ``response``."""
    return V4_0_0 <= response.version < V5_0_0


def release_name(version: int) -> str:
    """``version`` as a release name ("4.9.7"); an approximate one outside 4.9.x ("4.x")."""
    if V4_9_0_SNAPSHOT <= version < V5_0_0:
        patch, snapshot = divmod(version - V4_9_0_SNAPSHOT, 2)
        return f"4.9.{patch}" + ("" if snapshot else "-SNAPSHOT")
    if V4_0_0 <= version < V5_0_0:
        return "4.x"
    return "5.x or later" if version >= V5_0_0 else "unknown"
