"""Namespaces (managed RocketMQ instances, tenants sharing name servers): on the wire a topic is ``ns%Topic``, a
group ``ns%group``, a retry topic ``%RETRY%ns%group`` (RocketMQ's NamespaceUtil rules); everywhere else, in
columns, offsets JSON and errors, the names are shown without the namespace. System topics and groups are never
wrapped, and a name given with the namespace already is not wrapped twice."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rmq_spark.client.model import MessageQueue
from rmq_spark.client.system_topics import DLQ_PREFIX, RETRY_PREFIX, is_rocketmq_system_topic

SEPARATOR = "%"
_SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll's system consumer groups
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # the characters RocketMQ's clients accept in a namespace


def _is_system(resource: str) -> bool:
    return is_rocketmq_system_topic(resource) or resource.startswith(_SYSTEM_GROUP_PREFIX)


def _split_kind(resource: str) -> tuple[str, str]:
    """(``%RETRY%``, ``%DLQ%`` or "", the rest)."""
    for kind in (RETRY_PREFIX, DLQ_PREFIX):
        if resource.startswith(kind):
            return kind, resource[len(kind) :]
    return "", resource


@dataclass(frozen=True)
class Namespace:
    """One namespace (``name`` empty: none, every name as it is). Picklable."""

    name: str = ""

    def __bool__(self) -> bool:
        return bool(self.name)

    def wrap(self, resource: str) -> str:
        """``resource`` (a topic or group) as the brokers know it."""
        if not self.name or not resource or _is_system(resource):
            return resource
        kind, rest = _split_kind(resource)
        if rest.startswith(self.name + SEPARATOR):
            return resource
        return f"{kind}{self.name}{SEPARATOR}{rest}"

    def unwrap(self, resource: str) -> str:
        """``resource`` as the user knows it: without this namespace (a name of another namespace is kept)."""
        if not self.name or not resource or _is_system(resource):
            return resource
        kind, rest = _split_kind(resource)
        prefix = self.name + SEPARATOR
        return kind + rest[len(prefix) :] if rest.startswith(prefix) else resource

    def owns(self, resource: str) -> bool:
        """Whether the brokers' ``resource`` is in this namespace (every name is, without one)."""
        return not self.name or _split_kind(resource)[1].startswith(self.name + SEPARATOR)

    def queue(self, mq: MessageQueue) -> MessageQueue:
        """``mq`` with its topic as the brokers know it."""
        return replace(mq, topic=self.wrap(mq.topic)) if self.name else mq


NO_NAMESPACE = Namespace()
