"""The connector's options: one typed, validated, picklable value, built once from Spark's option map.

Every error names the option and what it accepts. Secrets never appear in ``repr`` or in error messages.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.grpc.client import parse_endpoint


class OptionError(RocketMQError):
    """An option is unknown, missing, malformed or contradicts another option."""


# canonical name -> one-line description (used in the unknown-option error)
KNOWN_OPTIONS: dict[str, str] = {
    "nameServer": "name server addresses, host:port[;host:port] (the remoting transport)",
    "endpoint": "host:port of an apache.rocketmq.v2 gRPC pull gateway (the gRPC transport), instead of nameServer",
    "topic": "one topic",
    "topics": "comma-separated topics",
    "topicPattern": "regular expression over the name server's topic list",
    "subExpression": "filter expression, default *",
    "expressionType": "TAG (default) or SQL92",
    "startingOffsets": "earliest | latest | committed | JSON",
    "startingOffsetsFallback": "earliest | latest | error, for 'committed' queues without an offset",
    "startingTimestamp": "ms since epoch, for all queues",
    "startingOffsetsByTimestamp": "JSON of ms per queue",
    "endingOffsets": "latest | JSON (batch only)",
    "endingTimestamp": "ms since epoch, for all queues (batch only)",
    "endingOffsetsByTimestamp": "JSON of ms per queue (batch only)",
    "consumerGroup": "consumer group for 'committed' and for offsets mirrored to the broker",
    "minPartitions": "minimum number of Spark partitions",
    "maxMessagesPerPartition": "split queue ranges larger than this",
    "failOnDataLoss": "true (default) or false",
    "accessKey": "ACL access key",
    "secretKey": "ACL secret key",
    "securityToken": "ACL security token",
    "tls": "true or false (default)",
    "pullDepth": "pulls in flight per task, default 8",
    "rowsPerBatch": "rows per Arrow batch a task yields, default 8192",
    "requestTimeoutMs": "per-request timeout, default 10000",
    "connectTimeoutMs": "connect timeout, default 5000",
    "maxMessagesPerTrigger": "streaming: at most this many messages per micro-batch",
    "minMessagesPerTrigger": "streaming: wait for at least this many messages per micro-batch",
    "maxTriggerDelay": "streaming: longest wait for minMessagesPerTrigger, e.g. '15m', '30s'",
    "commitOffsetsToBroker": "streaming: mirror committed offsets to consumerGroup on the broker",
    "pollNameServerIntervalMs": "streaming: how often new queues and topics are looked up, default 10000",
    "pushFilters": "batch: narrow the plan by pushed filters (needs spark.sql.python.filterPushdown.enabled)",
}
_BY_LOWER = {k.lower(): k for k in KNOWN_OPTIONS}
SECRET_OPTIONS = frozenset({"secretKey", "securityToken"})
_TOPIC_NAME = re.compile(r"^[%A-Za-z0-9_|-]{1,127}$")


def _parse_bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def _parse_int(name: str, value: str, *, minimum: int | None = None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {value!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {n}")
    return n


def _parse_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    v = value.strip().lower()
    for c in choices:
        if v == c.lower():
            return c
    raise OptionError(f"option {name} must be one of {', '.join(choices)}, not {value!r}")


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}


def parse_duration_ms(name: str, value: str) -> int:
    """'15m', '30s', '500ms' or a bare number of seconds → milliseconds."""
    m = _DURATION.match(value)
    if not m:
        raise OptionError(f"option {name} must be a duration such as 500ms, 30s, 15m or 1h, not {value!r}")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _UNIT_MS[unit]


def parse_queue_json(name: str, value: str, *, what: str) -> dict[str, dict[str, int]]:
    """``{"Topic": {"broker-a/0": 42}}`` → nested dict; error names the option and the bad part."""
    example = '{"TopicA": {"broker-a/0": 42, "broker-b/3": -2}}'
    try:
        data = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON ({e.msg} at position {e.pos}); expected {what} "
                          f"like {example}") from None
    if not isinstance(data, dict) or not data:
        raise OptionError(f"option {name} must be a JSON object of topics, like {example}")
    out: dict[str, dict[str, int]] = {}
    for topic, queues in data.items():
        if not isinstance(queues, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map to an object of \"brokerName/queueId\" "
                              f"keys, like {example}")
        out[topic] = {}
        for key, v in queues.items():
            broker, sep, qid = str(key).rpartition("/")
            if not sep or not broker or not qid.isdigit():
                raise OptionError(f"option {name}: queue key {key!r} of topic {topic!r} must be "
                                  "\"brokerName/queueId\", e.g. \"broker-a/0\"")
            if isinstance(v, bool) or not isinstance(v, int):
                raise OptionError(f"option {name}: {topic} {key} must be an integer ({what}), not {v!r}")
            out[topic][f"{broker}/{int(qid)}"] = v
    return out


@dataclass(frozen=True)
class SourceOptions:
    """Every option of the source, parsed. Picklable: it travels to the executors inside the reader."""

    name_server: str | None
    topics: tuple[str, ...] = ()
    endpoint: str | None = None
    topic_pattern: str | None = None
    sub_expression: str = "*"
    expression_type: str = "TAG"
    starting_offsets: str | None = None
    starting_offsets_fallback: str = "earliest"
    starting_timestamp: int | None = None
    starting_offsets_by_timestamp: dict | None = None
    ending_offsets: str | None = None
    ending_timestamp: int | None = None
    ending_offsets_by_timestamp: dict | None = None
    consumer_group: str | None = None
    min_partitions: int | None = None
    max_messages_per_partition: int | None = None
    fail_on_data_loss: bool = True
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    tls: bool = False
    pull_depth: int = 8
    rows_per_batch: int = 8192
    request_timeout_ms: int = 10_000
    connect_timeout_ms: int = 5_000
    max_messages_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    commit_offsets_to_broker: bool = False
    poll_name_server_interval_ms: int = 10_000
    push_filters: bool = False

    @property
    def pull_group(self) -> str:
        """The group named in pulls (the broker requires one)."""
        return self.consumer_group or "rmq_spark_reader"


def parse_options(raw: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Validate Spark's (case-insensitive) option map; raise OptionError on the first problem."""
    opts: dict[str, str] = {}
    for key, value in raw.items():
        canonical = _BY_LOWER.get(str(key).lower())
        if canonical is None:
            if str(key).lower() == "path":
                raise OptionError("the rocketmq source takes no path: remove the argument of load() and set the "
                                  "option topic, topics or topicPattern")
            raise OptionError(f"unknown option {key!r} for format('rocketmq'); known options: "
                              + ", ".join(sorted(KNOWN_OPTIONS)))
        opts[canonical] = str(value)

    name_server = opts.get("nameServer", "").strip() or None
    endpoint = opts.get("endpoint", "").strip() or None
    if name_server and endpoint:
        raise OptionError("set option nameServer (remoting) or option endpoint (gRPC pull gateway), not both")
    if not name_server and not endpoint:
        raise OptionError("option nameServer is required: the name server addresses, host:port[;host:port] "
                          "(or option endpoint, the host:port of a gRPC pull gateway)")
    for addr in (name_server or "").replace(",", ";").split(";"):
        host, sep, port = addr.strip().rpartition(":")
        if addr.strip() and (not sep or not host or not port.isdigit()):
            raise OptionError(f"option nameServer: {addr.strip()!r} is not host:port")
    if endpoint:
        if ";" in endpoint or "," in endpoint:
            raise OptionError(f"option endpoint takes one host:port (the gateway), not a list: {endpoint!r}")
        try:
            parse_endpoint(endpoint)
        except ValueError as e:
            raise OptionError(f"option {e}") from None

    chosen = [k for k in ("topic", "topics", "topicPattern") if opts.get(k, "").strip()]
    if len(chosen) != 1:
        raise OptionError("set exactly one of the options topic, topics, topicPattern"
                          + (f" (got {', '.join(chosen)})" if chosen else ""))
    topics: tuple[str, ...] = ()
    pattern = None
    if chosen[0] == "topicPattern":
        if endpoint:
            raise OptionError("option topicPattern needs the name server's topic list, which the gRPC API of option "
                              "endpoint does not offer: name the topics with topic or topics, or use nameServer")
        pattern = opts["topicPattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option topicPattern is not a valid regular expression: {e}") from None
    else:
        topics = tuple(sorted({t.strip() for t in opts[chosen[0]].split(",") if t.strip()}))
        for t in topics:
            if not _TOPIC_NAME.match(t):
                raise OptionError(f"option {chosen[0]}: {t!r} is not a valid RocketMQ topic name "
                                  "(letters, digits, %, |, _ and -, at most 127 characters)")

    expression_type = _parse_choice("expressionType", opts.get("expressionType", "TAG"), ("TAG", "SQL92"))
    sub_expression = opts.get("subExpression", "*").strip() or "*"

    def int_opt(name: str, minimum: int | None = None) -> int | None:
        return _parse_int(name, opts[name], minimum=minimum) if name in opts else None

    def offsets_opt(name: str, words: tuple[str, ...]) -> str | None:
        if name not in opts:
            return None
        v = opts[name].strip()
        if v.lower() in words:
            return v.lower()
        if v.startswith("{"):
            parse_queue_json(name, v, what="offsets (-2 earliest, -1 latest)")
            return v
        raise OptionError(f"option {name} must be {' | '.join(words)} or a JSON object like "
                          f'{{"TopicA": {{"broker-a/0": 42}}}}, not {v!r}')

    def ts_json(name: str) -> dict | None:
        return parse_queue_json(name, opts[name], what="timestamps in ms") if name in opts else None

    starting = offsets_opt("startingOffsets", ("earliest", "latest", "committed"))
    ending = offsets_opt("endingOffsets", ("latest",))
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name in opts:
                raise OptionError(f"option {name} is for batch queries only; a streaming query has no end")
    elif starting == "latest":
        raise OptionError("option startingOffsets=latest is for streaming queries; a batch query from latest "
                          "would be empty (use earliest, committed, JSON offsets or a timestamp)")
    consumer_group = opts.get("consumerGroup", "").strip() or None
    if starting == "committed" and not consumer_group:
        raise OptionError("option startingOffsets=committed needs option consumerGroup")
    if ("accessKey" in opts) != ("secretKey" in opts):
        raise OptionError("options accessKey and secretKey go together: set both or neither")

    commit = opts.get("commitOffsetsToBroker")
    parsed = SourceOptions(
        name_server=name_server,
        endpoint=endpoint,
        topics=topics,
        topic_pattern=pattern,
        sub_expression=sub_expression,
        expression_type=expression_type,
        starting_offsets=starting,
        starting_offsets_fallback=_parse_choice("startingOffsetsFallback",
                                                opts.get("startingOffsetsFallback", "earliest"),
                                                ("earliest", "latest", "error")),
        starting_timestamp=int_opt("startingTimestamp", 0),
        starting_offsets_by_timestamp=ts_json("startingOffsetsByTimestamp"),
        ending_offsets=ending,
        ending_timestamp=int_opt("endingTimestamp", 0),
        ending_offsets_by_timestamp=ts_json("endingOffsetsByTimestamp"),
        consumer_group=consumer_group,
        min_partitions=int_opt("minPartitions", 1),
        max_messages_per_partition=int_opt("maxMessagesPerPartition", 1),
        fail_on_data_loss=_parse_bool("failOnDataLoss", opts.get("failOnDataLoss", "true")),
        access_key=opts.get("accessKey"),
        secret_key=opts.get("secretKey"),
        security_token=opts.get("securityToken"),
        tls=_parse_bool("tls", opts.get("tls", "false")),
        pull_depth=int_opt("pullDepth", 1) or 8,
        rows_per_batch=int_opt("rowsPerBatch", 1) or 8192,
        request_timeout_ms=int_opt("requestTimeoutMs", 1) or 10_000,
        connect_timeout_ms=int_opt("connectTimeoutMs", 1) or 5_000,
        max_messages_per_trigger=int_opt("maxMessagesPerTrigger", 1),
        min_messages_per_trigger=int_opt("minMessagesPerTrigger", 1),
        max_trigger_delay_ms=(parse_duration_ms("maxTriggerDelay", opts["maxTriggerDelay"])
                              if "maxTriggerDelay" in opts else 15 * 60 * 1000),
        push_filters=_parse_bool("pushFilters", opts.get("pushFilters", "false")),
        poll_name_server_interval_ms=int_opt("pollNameServerIntervalMs", 1) or 10_000,
        commit_offsets_to_broker=(_parse_bool("commitOffsetsToBroker", commit) if commit is not None
                                  else consumer_group is not None),
    )
    if parsed.commit_offsets_to_broker and not consumer_group:
        raise OptionError("option commitOffsetsToBroker=true needs option consumerGroup")
    return parsed
