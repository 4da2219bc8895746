"""Where an exactly-once streaming query keeps its commit records: the *home*, one broker group of option ``topic``,
chosen at the query's first commit (the first by name with a master) and never moved.

While the records topic is in the routes, its route names the home. While it is not, either the query has never
committed or the home is away. To tell the two apart, every commit writes the home's name, as a *fingerprint* (a
consumer offset of group ``<producerGroup>_commit_home``), into queue 0 of every (topic, broker group) pair the batch
writes to, of every broker group of option ``topic``, and of the topic every live broker group is named after (each
broker registers one), so that a broker group the query's topics spread to after its last commit knows the home
too. A broker keeps consumer offsets in memory and writes them to disk every few seconds, so a broker process killed
just after a commit forgets them: the home's name is also kept in the name servers' KV config (namespace
``rmq_spark_commit_home``, key the producer group), which each name server writes to its disk at once. A commit
that finds no records topic and the home named anywhere waits for the home; one that finds it named nowhere, where
every broker group that may name it answered, is the query's first."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable

from rmq_spark.client import hints
from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import BrokerUnavailableError, RocketMQError, TopicNotFoundError, UnsupportedError
from rmq_spark.client.model import MessageQueue
from rmq_spark.errors import CommitError
from rmq_spark.sink.commit_log import CommitLog, CommitRecord, CommitStep, Pair, from_masters

log = logging.getLogger(__name__)
HOME_SUFFIX = "_commit_home"  # the group whose consumer offsets are the home's fingerprints
HOME_KV_NAMESPACE = "rmq_spark_commit_home"  # the name servers' KV config namespace of the homes, by producer group
LEGACY_MARKER_SUFFIX = "_commits"  # releases before the records topic kept the marker as this group's offset


def fingerprint(broker_name: str) -> int:
    """A broker group name as a consumer offset (a non-negative long)."""
    return int.from_bytes(hashlib.blake2b(broker_name.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def fingerprint_queue(pair: Pair) -> MessageQueue:
    """The queue of a pair whose consumer offset holds the home's fingerprint: its queue 0."""
    return MessageQueue(pair[0], pair[1], 0)


def refuse_static_topics(client: BaseClient, topics: Iterable[str]) -> None:
    """UnsupportedError naming the first static topic of ``topics``: the records cannot keep its logic queues."""
    for topic in sorted(set(topics)):
        try:
            static = client.route(topic).logic_queues
        except TopicNotFoundError:
            continue  # the write itself says what is missing
        if static:
            raise UnsupportedError(f"topic {topic!r} is {hints.STATIC_RECORDS}")


class CommitHome:
    """Finds, or at the first commit chooses and creates, the home of producer group ``log.producer_group``'s
    records among the broker groups of ``topic``."""

    def __init__(self, log: CommitLog, topic: str) -> None:
        self.log = log
        self.client = log.client
        self.producer_group = log.producer_group
        self.topic = topic
        self.home_group = self.producer_group + HOME_SUFFIX

    def locate(self, topics: Iterable[str]) -> tuple[str, CommitRecord | None]:
        """The home and the state a release before the records topic left there, if any (None otherwise). At the
        first commit the home is chosen and its records topic created. BrokerUnavailableError while the home, or a
        broker group that may record which one it is, is away. UnsupportedError for a static topic."""
        refuse_static_topics(self.client, topics)
        holders = self.holders()
        if len(holders) > 1:
            raise CommitError(
                f"topic {self.log.topic!r}, which keeps the commit records of producer group "
                f"{self.producer_group!r}, is on {len(holders)} broker groups ({', '.join(holders)}); "
                "it must be on one: delete it from all but the one that holds messages"
            )
        if holders:
            return holders[0], None
        brokers = self.pairs({*topics, self.topic})
        home, legacy = self._recorded(brokers), None
        if home is None:
            home = self._first()
            self.mark(home, brokers, partial=False)
        else:  # the home is up, and its records topic not in the route: a release before it kept a marker
            legacy = self._legacy_marker(home)
        self._create(home)
        return home, legacy

    def holders(self) -> list[str]:
        """The broker groups the records topic's route lists (none while it does not exist, or its broker group
        is away)."""
        try:
            route = self.client.route(self.log.topic, refresh=True)
        except TopicNotFoundError:
            return []
        return sorted({q.broker_name for q in route.queues})

    def pairs(self, topics: Iterable[str]) -> set[Pair]:
        """Every (topic, broker group) of the routes of ``topics`` now (looked up again: a commit waiting for a
        broker sees it come back), masterless groups included."""
        return {(t, b.broker_name) for t in sorted(set(topics)) for b in self.client.route(t, refresh=True).brokers}

    def named_after_groups(self) -> set[Pair]:
        """(topic, broker group) of the topic each live broker group is named after, where it has one
        (``brokerTopicEnable``, on by default; none in a namespace, whose names would be wrapped)."""
        try:
            names = self.client.live_brokers()
        except UnsupportedError:
            return set()
        out: set[Pair] = set()
        for name in sorted(names):
            try:
                route = self.client.route(name)
            except TopicNotFoundError:
                continue
            if any(q.broker_name == name for q in route.queues):
                out.add((name, name))
        return out

    def mark(self, home: str, pairs: set[Pair], *, partial: bool = True) -> None:
        """The home's fingerprint in the queues of ``pairs`` and of the named-after topics. ``partial``: those whose
        broker group is away are left out (the next commit writes them); otherwise the home's own pair of option
        ``topic`` must take it. A named-after topic that refuses it (an ACL without that topic) is left out."""
        self._keep_on_name_servers(home)
        fp = fingerprint(home)
        own = (self.topic, home)
        if not partial and own in pairs:
            self.client.update_consumer_offsets(self.home_group, {fingerprint_queue(own): fp})
            pairs = pairs - {own}
        self.client.update_consumer_offsets(self.home_group, {fingerprint_queue(p): fp for p in pairs}, partial=True)
        extra = self.named_after_groups() - pairs
        try:
            self.client.update_consumer_offsets(
                self.home_group, {fingerprint_queue(p): fp for p in extra}, partial=True
            )
        except RocketMQError as e:
            log.info("rocketmq sink: the home's fingerprint is not kept on the named-after topics: %s", e)

    def _on_name_servers(self) -> dict[str, str | None]:
        """The home each answering name server names (None: none); empty where the transport has no name servers
        or they refuse."""
        try:
            return self.client.name_server_values(HOME_KV_NAMESPACE, self.producer_group)
        except RocketMQError as e:
            log.info("rocketmq sink: the name servers do not tell the home of the commit records: %s", e)
            return {}

    def _keep_on_name_servers(self, home: str) -> None:
        """The home's name on every name server that lacks it (a put only where one lacks it: each put rewrites the
        name server's KV file)."""
        named = self._on_name_servers()
        if named and all(v == home for v in named.values()):
            return
        try:
            self.client.put_name_server_value(HOME_KV_NAMESPACE, self.producer_group, home)
        except RocketMQError as e:
            log.info("rocketmq sink: the home of the commit records is not kept on the name servers: %s", e)

    def _recorded(self, brokers: set[Pair]) -> str | None:
        """The home the fingerprints of ``brokers`` (the pairs of the query's topics and option topic) name; None
        where none does (the query's first commit). BrokerUnavailableError while the recorded home is out of the
        route, or a broker group that may record it has no master answering."""
        answers = self.client.query_consumer_offsets(
            self.home_group, sorted(fingerprint_queue(p) for p in brokers), partial=True
        )
        try:  # where a named-after topic refuses (an ACL without it), its answer is only missing
            extra = sorted(fingerprint_queue(p) for p in self.named_after_groups() - brokers)
            answers = answers.merge(self.client.query_consumer_offsets(self.home_group, extra, partial=True))
        except RocketMQError as e:
            log.info("rocketmq sink: the named-after topics do not tell the home's fingerprint: %s", e)
        prints = {v for v in answers.values() if v is not None}  # a slave's copy counts: it never changes
        named = {v for v in self._on_name_servers().values() if v is not None}
        prints |= {fingerprint(v) for v in named}
        if len(prints) > 1:
            raise CommitError(
                f"the queues of producer group {self.producer_group!r} record {len(prints)} different "
                "broker groups as the home of its commit records: is the group used by another query?"
            )
        if not prints:
            unsure = {mq.broker_name for mq in (*answers.failed, *answers.replica)}
            if unsure:
                raise BrokerUnavailableError(
                    f"cannot tell which broker group keeps the commit records of producer group "
                    f"{self.producer_group!r}: {', '.join(sorted(unsure))}, which may record it, have no master "
                    "answering now"
                )
            return None
        recorded = prints.pop()
        home = next((b for _, b in sorted(brokers) if fingerprint(b) == recorded), None)
        if home is None or (self.topic, home) not in brokers:
            holders = sorted({mq.broker_name for mq, v in answers.items() if v == recorded})
            holders += ["the name servers"] if named else []
            raise BrokerUnavailableError(
                f"the broker group that keeps the commit records of producer group {self.producer_group!r} "
                f"(recorded by {', '.join(holders)}) is not in the route of topic {self.topic!r} now: it is "
                "stopped or unreachable. The records never move to another broker group; if that one is gone "
                "for good, the query can only go on under a new producerGroup, and the batch cut by the crash "
                "may then be written twice"
            )
        return home

    def _first(self) -> str:
        masters = sorted(b.broker_name for b in self.client.route(self.topic).brokers if b.master_address)
        if not masters:
            raise BrokerUnavailableError(
                f"topic {self.topic!r} has no broker group with a master now to keep "
                f"the commit records of producer group {self.producer_group!r}"
            )
        return masters[0]

    def configure_again(self, home: str) -> None:
        """Create the records topic again on the home's master, which the name servers route it to and which
        answers that it does not exist: a master elected (a DLedger leader change, a Controller-mode election)
        before it copied its old master's topic configs, which replicas do every 10 s. The records are in the
        replicated log; the config makes them readable again."""
        log.warning(
            "rocketmq sink: the master of broker group %s does not know topic %r, which keeps the commit records of "
            "producer group %r and which the name servers route to it: it was elected before it copied the topic's "
            "config. Creating the topic there again (one queue); its records are in the group's replicated log",
            home,
            self.log.topic,
            self.producer_group,
        )
        self._create(home)

    def _create(self, home: str) -> None:
        """Create the records topic, one queue, on the home's master; wait for the route to show it."""
        topic = self.log.topic
        try:
            self.client.create_topic(topic, 1, broker_names=[home], seed_topic=self.topic)
        except UnsupportedError as e:
            raise CommitError(
                f"{e}: the commit records of deliveryGuarantee=exactly_once need topic {topic!r}, and this "
                "transport cannot create it"
            ) from e
        except RocketMQError as e:
            if isinstance(e, BrokerUnavailableError):
                raise
            raise CommitError(
                f"creating topic {topic!r} on broker group {home}, which keeps the commit records of "
                f"producer group {self.producer_group!r}, failed: {e}. Create it yourself with one read and one "
                f"write queue on that broker group only (mqadmin updateTopic -b <{home}'s master> -t "
                f"{topic} -r 1 -w 1), or let this user create topics",
                code=e.code,
                remark=e.remark,
            ) from e
        if self.holders() != [home]:
            raise BrokerUnavailableError(
                f"topic {topic!r} was created on {home} and is not in the name servers' route yet"
            )

    def _legacy_marker(self, home: str) -> CommitRecord | None:
        """The state the marker of a release before the records topic holds (a consumer offset on the home's
        queue 0: 2N + 1 while batch N committed, 2N + 2 once done)."""
        mq = fingerprint_queue((self.topic, home))
        what = f"reading the commit marker of producer group {self.producer_group!r} on {home}"
        value = from_masters(
            what, self.client.query_consumer_offsets(self.producer_group + LEGACY_MARKER_SUFFIX, [mq], partial=True)
        )[mq]
        if value is None:
            return None
        return CommitRecord((value - 1) // 2, CommitStep.STARTED if value % 2 else CommitStep.DONE)
