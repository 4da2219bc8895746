"""Where reading starts or ends, parsed once from the options into a typed spec (as Spark's
``KafkaOffsetRangeLimit``), and the per-queue JSON the offset options and offsets JSON share."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NoReturn

from rmq_spark.client.errors import BrokerUnavailableError
from rmq_spark.client.model import MessageQueue, queue_of
from rmq_spark.option_values import OptionError, parse_int

# Where the end of a streaming query's first batch records that batch's start (``offsets.offsets_to_json``).
START_KEY = "$start"
# Where every offsets JSON of a startingOffsets=latest stream carries the time (ms) latest was resolved at its
# start: a queue that enters later starts at the first offset stored at or after it (``entering_spec``).
START_TIME_KEY = "$startTime"
# Where every batch end of a stream carries when the batch was planned (ms): every message the query delivered
# before the next batch was stored before then, which tells the messages of a cut queue apart (``cut_queues``).
PLANNED_AT_KEY = "$plannedAt"


def is_annotation(key: str) -> bool:
    """Whether a key of offsets JSON is not a topic but the connector's note beside the offsets (the start a first
    batch recorded, the skipped counts of reportLatestOffset): RocketMQ topic names are [%|a-zA-Z0-9_-]+, and every
    note's key starts with ``$``. Every reader of offsets JSON skips them."""
    return key.startswith("$")


def topics_json(name: str, value: str, *, what: str, example: str) -> dict:
    """Option ``name``'s JSON, a non-empty object keyed by topic; the error names the option and shows ``example``
    of ``what`` it holds."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(
            f"option {name} is not valid JSON ({e.msg} at position {e.pos}); expected {what} like {example}"
        ) from None
    if not isinstance(data, dict) or not data:
        raise OptionError(f"option {name} must be a JSON object of topics, like {example}")
    return data


def parse_queue_json(name: str, value: str, *, what: str) -> dict[str, dict[str, int]]:
    """``{"Topic": {"broker-a/0": 42}}`` → nested dict; error names the option and the bad part."""
    example = '{"TopicA": {"broker-a/0": 42, "broker-b/3": -2}}'
    data = topics_json(name, value, what=what, example=example)
    out: dict[str, dict[str, int]] = {}
    for topic, queues in data.items():
        if is_annotation(topic):
            continue  # offsets copied from a checkpoint or a query's progress: its notes are not topics
        if not isinstance(queues, dict):
            raise OptionError(
                f'option {name}: topic {topic!r} must map to an object of "brokerName/queueId" keys, like {example}'
            )
        out[topic] = {}
        for key, v in queues.items():
            mq = parse_queue_key(name, topic, key)
            if isinstance(v, bool) or not isinstance(v, int):
                raise OptionError(f"option {name}: {topic} {key} must be an integer ({what}), not {v!r}")
            out[topic][f"{mq.broker_name}/{mq.queue_id}"] = v
    return out


def parse_queue_key(name: str, topic: str, key: object) -> MessageQueue:
    """A ``"brokerName/queueId"`` key of topic ``topic`` in option ``name``'s JSON, as a queue."""
    broker, sep, qid = str(key).rpartition("/")
    if not sep or not broker or not qid.isdigit():
        raise OptionError(
            f'option {name}: queue key {key!r} of topic {topic!r} must be "brokerName/queueId", e.g. "broker-a/0"'
        )
    return MessageQueue(topic, broker, int(qid))


class Edge(enum.IntEnum):
    """Each queue's first offset held by the broker, or its end (the offset after its last message). The values
    stand for them in offsets JSON, as in Spark's Kafka source."""

    EARLIEST = -2
    LATEST = -1


@dataclass(frozen=True)
class Committed:
    """The consumer group's committed offsets; queues without one start at ``fallback``, or fail the query when it
    is None (startingOffsetsFallback=error)."""

    group: str
    fallback: Edge | None = Edge.EARLIEST


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per queue from an option's JSON (an Edge's value for earliest or latest); queues left out take
    ``default``."""

    option: str
    offsets: dict[MessageQueue, int]
    default: Edge


@dataclass(frozen=True)
class ByTimestamp:
    """The first offset stored at or after a time in ms: ``timestamp`` for every queue, or ``per_queue`` from an
    option's JSON (queues left out take ``default``). ``strict``: a queue with no message stored at or after its
    time is an error (startingOffsetsByTimestampStrategy=error), not its end."""

    option: str
    timestamp: int | None = None
    per_queue: dict[MessageQueue, int] | None = None
    default: Edge = Edge.EARLIEST
    strict: bool = False


OffsetSpec = Edge | Committed | SpecificOffsets | ByTimestamp


def assert_never(spec: NoReturn) -> NoReturn:
    """The last arm of a match over OffsetSpec: the type checker fails where a spec is left unmatched
    (``typing.assert_never`` from Python 3.11 on; the package supports 3.10)."""
    raise AssertionError(f"an offset spec no arm matches: {spec!r}")


def queue_offsets(nested: Mapping[str, Mapping[str, int]]) -> dict[MessageQueue, int]:
    """``{"Topic": {"broker-a/0": 42}}`` → per-queue values (a recorded batch start is skipped)."""
    out = {}
    for topic, queues in nested.items():
        if is_annotation(topic):
            continue
        for key, value in queues.items():
            broker, _, qid = key.rpartition("/")
            out[queue_of(topic, broker, int(qid))] = int(value)
    return out


def offset_spec(
    opts: Mapping[str, str], side: str, group: str | None, fallback: Edge | None, *, default: OffsetSpec
) -> OffsetSpec:
    """The start (``side`` "starting") or end ("ending") of reading, from its three options. Precedence as in
    Spark's Kafka source: {side}Timestamp, then {side}OffsetsByTimestamp, then {side}Offsets."""
    name_ts, name_by_ts, name_offsets = f"{side}Timestamp", f"{side}OffsetsByTimestamp", f"{side}Offsets"
    unnamed = Edge.EARLIEST if side == "starting" else Edge.LATEST
    if name_ts in opts:
        return ByTimestamp(name_ts, timestamp=parse_int(name_ts, opts[name_ts], minimum=0))
    if name_by_ts in opts:
        per_queue = parse_queue_json(name_by_ts, opts[name_by_ts], what="timestamps in ms")
        for topic, queues in per_queue.items():
            for key, ts in queues.items():
                if ts < 0:
                    raise OptionError(
                        f"option {name_by_ts}: {topic} {key} must be a time in ms since the epoch, not {ts}"
                    )
        return ByTimestamp(name_by_ts, per_queue=queue_offsets(per_queue), default=unnamed)
    if name_offsets not in opts:
        return default
    words = ("earliest", "latest", "committed") if side == "starting" else ("latest",)
    v = opts[name_offsets].strip()
    word = v.lower()
    if word in words:
        if word != "committed":
            return Edge[word.upper()]
        if group is None:
            raise OptionError(f"option {name_offsets}=committed needs option consumerGroup")
        return Committed(group, fallback)
    if v.startswith("{"):
        offsets = queue_offsets(parse_queue_json(name_offsets, v, what="offsets (-2 earliest, -1 latest)"))
        for mq, o in offsets.items():
            if o < Edge.EARLIEST:
                raise OptionError(
                    f"option {name_offsets}: offset {o} for {mq} is not valid (use >= 0, -2 earliest, -1 latest)"
                )
        return SpecificOffsets(name_offsets, offsets, unnamed)
    raise OptionError(
        f"option {name_offsets} must be {' | '.join(words)} or a JSON object like "
        f'{{"TopicA": {{"broker-a/0": 42}}}}, not {v!r}'
    )


def named_queues(spec: OffsetSpec) -> tuple[str, Mapping[MessageQueue, int]] | None:
    """The option of ``spec`` and the queues it names one by one (with their offsets or times); None when it
    names none."""
    match spec:
        case SpecificOffsets(option=option, offsets=named) | ByTimestamp(option=option, per_queue=named) if named:
            return option, named
        case _:
            return None


def check_named(spec: OffsetSpec, queues: Iterable[MessageQueue], *, waits: bool) -> list[str]:
    """OptionError when ``spec`` names a queue of a topic the query does not read, or one that its broker group,
    in the routes now (``queues``: the query's queues there), does not have. A named queue whose broker group is
    not in the routes now may be away (or misspelt): a stream (``waits``) starts it once the group is back, and gets
    a note per such queue to log; a batch cannot wait and fails naming them."""
    found = named_queues(spec)
    if found is None:
        return []
    option, named = found
    known = set(queues)
    topics = {mq.topic for mq in known}
    groups = {(mq.topic, mq.broker_name) for mq in known}
    away = []
    for mq in sorted(named):
        if mq.topic not in topics:
            raise OptionError(
                f"option {option} names topic {mq.topic!r}, which this query does not read "
                f"(it reads {', '.join(sorted(topics))})"
            )
        if mq in known:
            continue
        if (mq.topic, mq.broker_name) in groups:
            raise OptionError(
                f"option {option} names queue {mq.key} of topic {mq.topic!r}, which does not "
                "exist; its queues are " + ", ".join(q.key for q in sorted(known) if q.topic == mq.topic)
            )
        in_route = sorted({b for t, b in groups if t == mq.topic})
        away.append(
            f"option {option} names queue {mq.key} of topic {mq.topic!r}, whose broker group is not "
            f"in the topic's route now (it has {', '.join(in_route)}): check the name"
        )
    if away and not waits:
        raise BrokerUnavailableError(
            "; ".join(away) + "; if that broker group is stopped or restarting, read when it is back"
        )
    return away


def entering_spec(spec: OffsetSpec, start_time: int | None = None) -> OffsetSpec:
    """Where a stream starts a queue that enters after its start (a new queue, or one whose broker group was away):
    where ``spec`` puts it when it names the queue (offsets or times) or under committed (the group's offset, else
    startingOffsetsFallback); under latest, at what latest meant at the query's start (``start_time``, ms: the
    first offset stored at or after it, so a group away at the start is not read from its first message); any
    other queue at its first offset, as Spark's Kafka source reads new partitions."""
    match spec:
        case Committed():
            return spec
        case SpecificOffsets():
            return replace(spec, default=Edge.EARLIEST)
        case ByTimestamp():
            return replace(spec, default=Edge.EARLIEST, strict=False)  # a new queue may well be empty
        case Edge.LATEST if start_time is not None:
            return ByTimestamp("startingOffsets", timestamp=start_time)
        case Edge():
            return Edge.EARLIEST
        case _:
            assert_never(spec)
