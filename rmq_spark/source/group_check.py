"""The check that a stream's consumer group is its own: a group other applications consume with is refused before
any offset is mirrored to it (its progress would be overwritten), unless allowSharedConsumerGroup is set."""

from __future__ import annotations

import logging
from collections.abc import Callable

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RocketMQError, UnsupportedError
from rmq_spark.errors import OptionError
from rmq_spark.options import SourceOptions

log = logging.getLogger(__name__)


class GroupCheck:
    """Asks once whether ``options``' consumer group has online consumers, of the topics ``topics`` gives. A
    broker that cannot answer now is asked again every few seconds (the client's outage clock), not at every
    call; until then nothing is mirrored."""

    def __init__(self, client: BaseClient, options: SourceOptions, topics: Callable[[], list[str]]) -> None:
        self.client = client
        self.options = options
        self.topics = topics
        self.passed = (
            not options.commit_offsets_to_broker
            or options.consumer_group is None
            or options.allow_shared_consumer_group
        )

    def check(self) -> bool:
        """Whether the group may be mirrored to; OptionError when another application consumes with it."""
        if self.passed:
            return True
        group = self.options.consumer_group
        assert group is not None, "checked in __init__: no group, nothing to check"
        who = f"the check of consumer group {group!r} for other consumers"
        if not self.client.outages.due(who):
            return False
        try:
            consumers = self.client.online_consumers(group, self.topics())
        except UnsupportedError as e:
            log.warning("rocketmq source: cannot check whether consumer group %r has other consumers (%s)", group, e)
            consumers = []
        except RocketMQError as e:
            self.client.outages.down(who, "checked again before offsets are mirrored", e)
            return False
        self.client.outages.up(who)
        if consumers:
            raise OptionError(
                f"consumer group {group!r} has {len(consumers)} online consumer(s) "
                f"({', '.join(consumers[:5])}{' ...' if len(consumers) > 5 else ''}): another application consumes "
                "with it, and mirroring this query's offsets would overwrite its progress. Use a consumerGroup of "
                "its own for this query, set commitOffsetsToBroker=false, or set allowSharedConsumerGroup=true"
            )
        self.passed = True
        return True
