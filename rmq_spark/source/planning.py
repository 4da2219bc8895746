"""Driver-side planning shared by the batch and streaming readers: which queues, and which ranges to read, under
the one data-loss rule (docs/DESIGN.md §10: lost is only what a live broker proves)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence

from rmq_spark.client import hints
from rmq_spark.client.base import BaseClient, outside
from rmq_spark.client.errors import (
    RETRYABLE,
    AuthError,
    BrokerUnavailableError,
    DataLossError,
    InvalidFilterError,
    TopicNotFoundError,
    UnsupportedError,
)
from rmq_spark.client.lite_topics import refuse_lite
from rmq_spark.client.model import MessageQueue, TopicRoute, queue_order
from rmq_spark.client.system_topics import is_internal_topic
from rmq_spark.compiled import data_loss_error, data_loss_note
from rmq_spark.options import OptionError, SourceOptions
from rmq_spark.source.cut_queues import all_new
from rmq_spark.source.offsets import QueueRange

log = logging.getLogger(__name__)


def where(options: SourceOptions) -> str:
    """The cluster the options point at, for messages."""
    return f"name server {options.name_server}" if options.name_server else f"endpoint {options.endpoint}"


def reads_topic(options: SourceOptions, topic: str) -> bool:
    """Whether the options name ``topic``: one of topic/topics, or a match of topicPattern that is not a system or
    connector topic by its name (``rmq_spark.client.system_topics``)."""
    if options.topic_pattern is None:
        return topic in options.topics
    return not is_internal_topic(topic) and re.fullmatch(options.topic_pattern, topic) is not None


def reads_queue(options: SourceOptions, mq: MessageQueue) -> bool:
    """Whether the options name queue ``mq``: a queue of a topic they name, and one of option assign if set."""
    return reads_topic(options, mq.topic) and (options.assign is None or mq in options.assign)


def check_assigned(options: SourceOptions, routes: Mapping[str, TopicRoute | None]) -> None:
    """OptionError naming the queues of option assign that do not exist: their broker group is in the topic's
    route with fewer queues. One whose broker group is not in the route now is not judged (it may be down)."""
    if options.assign is None:
        return
    missing = []
    for mq in sorted(options.assign):
        route = routes.get(mq.topic)
        queue_data = route.queue_data(mq.broker_name) if route else None
        if queue_data is not None and mq.queue_id >= queue_data.read_queue_nums:
            missing.append(
                f"{mq} (broker group {mq.broker_name} has {queue_data.read_queue_nums} readable queues "
                f"of topic {mq.topic})"
            )
    if missing:
        raise OptionError(f"option assign names queues that do not exist: {'; '.join(missing)}")


def query_topics(client: BaseClient, options: SourceOptions) -> list[str]:
    """The topics the options name, or those of the name server's list that match topicPattern, sorted: never a
    system topic (those the brokers create for their cluster and themselves included) nor a connector topic."""
    if options.topic_pattern is None:
        return list(options.topics)
    matches = [t for t in client.topics() if reads_topic(options, t)]
    if matches:
        own = client.cluster_topics()
        matches = [t for t in matches if t not in own]
    return sorted(matches)


# topicPattern matches left out because they cannot be read (LiteTopics)
_UNREADABLE_MATCHES: set[str] = set()


def first_route(client: BaseClient, topic: str, options: SourceOptions) -> TopicRoute | None:
    """The route of a topic the query has not read before. For a topic the options name, an error names the bad
    input (no such topic, no readable queue); a topicPattern match without a route now (deleted since the topic
    list was read, or its brokers all away) is None: left out until a later list and route show it; so is one that
    cannot be read at all (a LiteTopic), with a warning."""
    try:
        route = client.route(topic, refresh=True)
        refuse_lite(client, topic)
    except UnsupportedError as e:
        if options.topic_pattern is None:
            raise
        if topic not in _UNREADABLE_MATCHES:  # told once per process: a stream looks again at every route poll
            _UNREADABLE_MATCHES.add(topic)
            log.warning("rocketmq source: topic %s matches topicPattern but is left out: %s", topic, e)
        return None
    except TopicNotFoundError as e:
        if options.topic_pattern is not None:
            log.info(
                "rocketmq source: topic %s matches topicPattern but has no route now (deleted, or its brokers "
                "are away); it is read once it has one",
                topic,
            )
            return None
        what = f"topic {topic!r} does not exist on {where(options)}: check the topic option, or create the topic"
        try:
            if not client.live_brokers():
                what = (
                    f"topic {topic!r} has no route on {where(options)}: no broker is registered with the name "
                    "servers now; start the brokers, or check nameServer"
                )
        except (UnsupportedError, *RETRYABLE):
            pass
        raise TopicNotFoundError(what, code=e.code, remark=e.remark) from None
    if options.topic_pattern is None and not route.read_queues():
        raise OptionError(f"topic {topic!r} has no readable queue (its permission forbids reads)")
    return route


def topic_queues(client: BaseClient, topic: str, options: SourceOptions) -> list[MessageQueue]:
    """The readable queues of one topic now (``first_route``'s errors; none for a pattern's topic without a
    route)."""
    route = first_route(client, topic, options)
    return route.read_queues() if route is not None else []


def resolve_queues(client: BaseClient, options: SourceOptions) -> list[MessageQueue]:
    """Every readable queue of the query's topics (only the assigned ones with option assign), sorted. A batch
    cannot wait: an assigned queue that is not in the route now is an error."""
    found = [mq for topic in query_topics(client, options) for mq in topic_queues(client, topic, options)]
    if options.assign is not None:
        check_assigned(options, {t: client.route(t) for t in options.topics})
        away = sorted(options.assign - set(found))
        if away:
            raise BrokerUnavailableError(
                f"option assign names queues whose broker group is not in the route now (stopped, restarting or "
                f"unreachable): {', '.join(map(str, away))}; read them when it is back"
            )
    return sorted(mq for mq in found if reads_queue(options, mq))


def check_filter(client: BaseClient, options: SourceOptions, queues: Iterable[MessageQueue]) -> None:
    """OptionError naming subExpression when a broker of the queues cannot filter by it (a SQL92 expression that
    does not compile, or brokers without enablePropertyFilter), asked of each broker once, before anything is read.
    A broker that does not answer now is not asked."""
    o = options
    if not o.filter.filters:
        return
    first: dict[str, MessageQueue] = {}
    for mq in sorted(queues):
        first.setdefault(mq.broker_name, mq)
    for mq in first.values():
        try:
            client.check_filter(mq, o.pull_group, o.filter)
        except InvalidFilterError as e:
            raise OptionError(
                f"option subExpression {o.filter.expression!r} (expressionType {o.filter.type}) cannot "
                f"be used by broker {mq.broker_name}: {e.remark or e}. Fix the expression, or the "
                "expressionType"
            ) from None
        except RETRYABLE:
            continue


def compacted_topics(client: BaseClient, topics: Iterable[str]) -> frozenset[str]:
    """The topics whose cleanup policy is COMPACTION (offsets sparse by design). A transport or user that cannot
    read topic attributes counts none as compacted (logged)."""
    out = set()
    for topic in set(topics):
        try:
            if client.is_compacted(topic):
                out.add(topic)
        except (UnsupportedError, AuthError) as e:
            log.info(
                "rocketmq source: cannot tell whether topic %s is a compaction topic (%s); reading it as a "
                "normal topic, where a gap in the offsets is data loss",
                topic,
                e,
            )
            return frozenset(out)
        except RETRYABLE as e:
            log.info("rocketmq source: cannot read the attributes of topic %s now (%s)", topic, e)
    return frozenset(out)


def data_loss(what: str, fail: bool, *, remedy: str, action: str) -> None:
    """The data-loss rule for ``what`` (messages gone): DataLossError under failOnDataLoss=true (``remedy`` says
    what false would do), else a warning (``action`` says what is done). Its wording is the core's, whose range
    cursor applies the same rule."""
    if fail:
        raise DataLossError(data_loss_error(what, remedy))
    log.warning("%s", data_loss_note(what, action))


def check_data_loss(queue: MessageQueue, requested: int, available: int, fail: bool) -> int:
    """The offset to start ``queue`` at when the broker's first held offset is ``available``: ``requested`` when
    still held, else ``available`` under failOnDataLoss=false (logged), else DataLossError naming all three."""
    if requested >= available:
        return requested
    data_loss(
        f"{queue}: offset {requested} was requested but the broker's first available offset is {available}; "
        f"messages [{requested}, {available}) were deleted before they were read",
        fail,
        remedy="start at the first available offset",
        action=f"starting at {available}",
    )
    return available


def check_cut(queue: MessageQueue, reached: int, end: int, first: int | None, resume: int | None, fail: bool) -> int:
    """The start for a queue whose end offset ``end`` fell below the offset ``reached`` (``source.cut_queues``),
    ``resume`` the first offset of the messages stored after the cut, if any: a queue whose messages are all new
    (``resume`` at its first offset ``first``: the topic deleted and recreated) is read from its first offset; any
    other had its tail cut (an election of a replica that lagged) and is read on from ``resume`` (else from
    ``end``), the query's messages from there to ``reached`` lost. DataLossError naming the cause under
    failOnDataLoss=true, else logged."""
    below = f"{queue}: the broker's end offset {end} is below offset {reached}, which this query had reached"
    if all_new(resume, first):
        assert first is not None
        data_loss(
            f"{below}, and its first message was stored after the query last read it: the topic was deleted and "
            "recreated (or an election cut the queue to nothing), and the messages it holds now are new",
            fail,
            remedy=f"read the recreated queue from its first offset {first}",
            action=f"reading the recreated queue from its first offset {first}",
        )
        return first
    start = end if resume is None else resume
    stored = (
        f"the new ones are stored from offset {end} on"
        if resume is None
        else f"messages [{resume}, {end}) were stored after the cut"
    )
    data_loss(
        f"{below}: its tail was cut, as when a replica that lagged behind its master is elected (a Controller-mode "
        "election or a DLedger leader change under asynchronous replication, or a slave promoted by hand); "
        f"messages [{start}, {reached}) that the query read are gone from the broker, {stored}. "
        f"{hints.HA_PREVENTION}",
        fail,
        remedy=f"count the cut range as skipped and read on from offset {start}",
        action=f"reading on from offset {start} ({reached - start} offsets counted as skipped)",
    )
    return start


def plan_ranges(
    starts: Mapping[MessageQueue, int],
    ends: Mapping[MessageQueue, int],
    mins: Mapping[MessageQueue, int],
    *,
    fail_on_data_loss: bool,
    sparse_topics: frozenset[str] = frozenset(),
    gaps: Mapping[MessageQueue, Sequence[tuple[int, int]]] | None = None,
    resumes: Mapping[MessageQueue, int] | None = None,
) -> list[QueueRange]:
    """One range ``[start, end)`` per queue of ``ends`` that has something to read, under the one data-loss rule:
    an end below the start is a cut queue, read on from its end or from where ``resumes`` says new messages begin
    (``check_cut``), a start below the queue's first offset is data loss (``check_data_loss``). A queue missing
    from ``mins`` (its broker did not answer) is checked by its task when it pulls. ``gaps``: offsets of a queue
    that hold no message by design (a remapped logic queue's, ``remapping_gaps``), left out of its ranges: neither
    read nor lost."""
    ranges = []
    for mq in sorted(ends, key=queue_order):
        end = ends[mq]
        start = starts.get(mq, end)
        if end < start:
            start = check_cut(mq, start, end, mins.get(mq), (resumes or {}).get(mq), fail_on_data_loss)
        elif mq in mins:
            start = check_data_loss(mq, start, mins[mq], fail_on_data_loss)
        skipped = gaps.get(mq) if gaps else None
        if skipped:
            for low, high in outside(skipped, start, end):
                ranges.append(QueueRange(mq, low, high, mq.topic in sparse_topics))
        elif end > start:  # (the usual queue: a batch plans thousands)
            ranges.append(QueueRange(mq, start, end, mq.topic in sparse_topics))
    return ranges
