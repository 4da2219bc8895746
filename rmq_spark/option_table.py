"""Every option of the connector, once: its name, kind, default, minimum, where it applies and what it does. The
parsers (``rmq_spark.options``), their did-you-mean, the options dataclasses' defaults and the options reference
(``docs/OPTIONS.md``, ``python -m rmq_spark.option_table``) all come from this table."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rmq_spark.client.defaults import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PULL_DEPTH,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_TIMEOUT,
)
from rmq_spark.client.model import DEFAULT_PRODUCER_GROUP, FILTER_TYPES


class Scope(enum.Flag):
    """Where an option applies."""

    BATCH_READ = enum.auto()
    STREAM_READ = enum.auto()
    WRITE = enum.auto()
    READ = BATCH_READ | STREAM_READ
    ALL = READ | WRITE


class Kind(enum.Enum):
    TEXT = "string"
    INT = "integer"
    BOOL = "boolean"
    DURATION = "duration"
    CHOICE = "choice"
    JSON = "JSON"


@dataclass(frozen=True)
class Option:
    """One option. ``default`` is the parsed value a query gets without it (None: no value); ``shown`` is how the
    reference shows a default that depends on other options; ``field`` the options dataclass field an INT, BOOL or
    DURATION option fills."""

    name: str
    kind: Kind
    scope: Scope
    help: str
    default: object = None
    field: str | None = None
    minimum: int | None = None
    choices: tuple[str, ...] = ()
    shown: str | None = None
    secret: bool = False


OPTIONS: tuple[Option, ...] = (
    # -- connection: the source and the sink --------------------------------------------------------------------
    Option(
        "nameServer",
        Kind.TEXT,
        Scope.ALL,
        "name server addresses `host:port[;host:port]`: the remoting transport",
        shown="(this or `endpoint`)",
    ),
    Option(
        "endpoint",
        Kind.TEXT,
        Scope.ALL,
        "`host:port` of an `apache.rocketmq.v2` gRPC server with the pull calls "
        "(the pull gateway): the gRPC transport. The stock RocketMQ proxy does not implement them and is refused "
        "with an error that says so. No `topicPattern` (v2 has no topic list)",
        shown="(this or `nameServer`)",
    ),
    Option("accessKey", Kind.TEXT, Scope.ALL, "ACL access key"),
    Option(
        "secretKey", Kind.TEXT, Scope.ALL, "ACL secret key (never shown in logs, errors or `explain()`)", secret=True
    ),
    Option("securityToken", Kind.TEXT, Scope.ALL, "ACL security token (never shown)", secret=True),
    Option(
        "namespace",
        Kind.TEXT,
        Scope.ALL,
        "the namespace of the topics and groups (managed RocketMQ instances, "
        "tenants sharing name servers): on the wire `Topic` is `ns%Topic`, a group `ns%group` (over `endpoint`, "
        "the `x-mq-namespace` header); columns, offsets JSON and errors show names without it, a name given with "
        "it is not prefixed twice, system topics are left alone",
    ),
    Option(
        "tls",
        Kind.BOOL,
        Scope.ALL,
        "TLS to name servers and brokers, or to the gRPC endpoint (certificates and "
        "names always verified); implied by the other tls options",
        default=False,
        field="tls",
    ),
    Option(
        "tlsCaFile",
        Kind.TEXT,
        Scope.ALL,
        "PEM file of the CAs that signed the servers' certificates (a private CA); implies `tls`",
        shown="the system's CAs",
    ),
    Option(
        "tlsServerName",
        Kind.TEXT,
        Scope.ALL,
        "the name the servers' certificates must carry",
        shown="the host connected to",
    ),
    Option(
        "tlsCertFile",
        Kind.TEXT,
        Scope.ALL,
        "PEM client certificate (chain), for servers that require one (RocketMQ's mutual TLS)",
    ),
    Option("tlsKeyFile", Kind.TEXT, Scope.ALL, "PEM private key of `tlsCertFile`"),
    Option(
        "requestTimeoutMs",
        Kind.INT,
        Scope.ALL,
        "per-request timeout (ms)",
        default=int(DEFAULT_REQUEST_TIMEOUT * 1000),
        field="request_timeout_ms",
        minimum=1,
    ),
    Option(
        "connectTimeoutMs",
        Kind.INT,
        Scope.ALL,
        "per-connection timeout (ms)",
        default=int(DEFAULT_CONNECT_TIMEOUT * 1000),
        field="connect_timeout_ms",
        minimum=1,
    ),
    Option(
        "brokerRetryTimeoutMs",
        Kind.INT,
        Scope.ALL,
        "how long a task, or a sink's commit, waits for a broker that "
        "went away or asks to back off (restart, fail-over, busy) before it fails naming the broker (ms); Spark "
        "then retries the task",
        default=int(DEFAULT_RETRY_TIMEOUT * 1000),
        field="broker_retry_timeout_ms",
        minimum=0,
    ),
    Option(
        "maxMessageBytes",
        Kind.INT,
        Scope.ALL,
        "the most a message body may decompress to; a body past it fails "
        "the task naming topic, queue, offset and this option (4x the broker's default max message size)",
        default=DEFAULT_MAX_MESSAGE_BYTES,
        field="max_message_bytes",
        minimum=1024,
    ),
    # -- the source ---------------------------------------------------------------------------------------------
    Option(
        "topic", Kind.TEXT, Scope.READ, "one topic (set exactly one of `topic`, `topics`, `topicPattern`, `assign`)"
    ),
    Option("topics", Kind.TEXT, Scope.READ, "comma-separated topics"),
    Option(
        "topicPattern",
        Kind.TEXT,
        Scope.READ,
        "a regular expression over the name server's topic list. As Spark's "
        "Kafka source leaves out internal topics, a pattern never matches system topics: RocketMQ's `RMQ_SYS_*`, "
        "`rmq_sys_*`, `%RETRY%*`, `%DLQ%*`, `%LMQ%*`, `TBW102`, `SCHEDULE_TOPIC_XXXX`, `BenchmarkTest`, "
        "`OFFSET_MOVED_EVENT`, `SELF_TEST_TOPIC`, `TRANS_CHECK_MAX_TIME_TOPIC`, `CHECKPOINT_TOPIC`, the topics "
        "each broker creates under its cluster's name, `<cluster>_REPLY_TOPIC` and its own name, nor this "
        "connector's own topics, the exactly-once sink's `rmq_spark_commits_*` (other topics named `rmq_spark_*` are "
        "users' and matched); `topic`/`topics` may name any of them",
    ),
    Option(
        "assign",
        Kind.JSON,
        Scope.READ,
        'JSON naming the only queues to read, `{"Orders": ["broker-a/0", '
        "\"broker-a/1\"]}` (as Spark's Kafka source's `assign`: no other queue of the topic is read, new queues "
        "included; a queue that does not exist is an error, one whose broker group is down waits in a stream and "
        "fails a batch; offsets options may name only assigned queues)",
    ),
    Option(
        "subExpression",
        Kind.TEXT,
        Scope.READ,
        "broker-side filter, e.g. `TagA || TagB` (a `*` among the tags "
        "passes every message), or a `SQL92` expression over properties",
        default="*",
    ),
    Option(
        "expressionType", Kind.CHOICE, Scope.READ, "the kind of `subExpression`", default="TAG", choices=FILTER_TYPES
    ),
    Option(
        "startingOffsets",
        Kind.TEXT,
        Scope.READ,
        "`earliest`, `latest` (streaming), `committed`, or offsets "
        'JSON `{"Orders": {"broker-a/0": 42, "broker-b/3": -2}}` (-2 earliest, -1 latest). Under streaming '
        "`latest`, a queue that enters later (a new queue, or one whose broker group was away at the start) starts "
        "at the first offset stored at or after the query's start time, which the checkpoint's offsets keep "
        "(`$startTime`)",
        shown="batch `earliest`, streaming `latest`",
    ),
    Option(
        "startingOffsetsFallback",
        Kind.CHOICE,
        Scope.READ,
        "for `committed`: where queues without a committed offset start, at the start and when they appear later",
        default="earliest",
        choices=("earliest", "latest", "error"),
    ),
    Option(
        "startingTimestamp",
        Kind.INT,
        Scope.READ,
        "ms since the epoch for every queue: the first message stored at or after it",
        minimum=0,
    ),
    Option(
        "startingOffsetsByTimestamp",
        Kind.JSON,
        Scope.READ,
        "JSON of ms per queue: the first message stored at or after it",
    ),
    Option(
        "startingOffsetsByTimestampStrategy",
        Kind.CHOICE,
        Scope.READ,
        "when a queue has no message stored at "
        "or after the starting time: `error` fails the query naming the queues, `latest` starts them at their end "
        "(as Spark's Kafka source)",
        default="error",
        choices=("error", "latest"),
    ),
    Option(
        "endingOffsets", Kind.TEXT, Scope.BATCH_READ, "`latest` or offsets JSON; the end is exclusive", shown="`latest`"
    ),
    Option("endingTimestamp", Kind.INT, Scope.BATCH_READ, "ms since the epoch for every queue", minimum=0),
    Option("endingOffsetsByTimestamp", Kind.JSON, Scope.BATCH_READ, "JSON of ms per queue"),
    Option("consumerGroup", Kind.TEXT, Scope.READ, "group for `committed` and for mirrored offsets"),
    Option(
        "commitOffsetsToBroker",
        Kind.BOOL,
        Scope.STREAM_READ,
        "mirror committed offsets to `consumerGroup` on the broker (never moving them back)",
        shown="true when `consumerGroup` is set",
    ),
    Option(
        "allowSharedConsumerGroup",
        Kind.BOOL,
        Scope.STREAM_READ,
        "mirror to a `consumerGroup` that other applications consume with (refused by default)",
        default=False,
        field="allow_shared_consumer_group",
    ),
    Option(
        "failOnDataLoss",
        Kind.BOOL,
        Scope.READ,
        "fail when a live broker proves messages lost (deleted before they "
        "were read, a queue reset or removed); `false` skips them, logs and counts them. Never applies to an "
        "unavailable broker",
        default=True,
        field="fail_on_data_loss",
    ),
    Option(
        "minPartitions",
        Kind.INT,
        Scope.READ,
        "split large queue ranges so a read has at least this many tasks",
        field="min_partitions",
        minimum=1,
    ),
    Option(
        "maxMessagesPerPartition",
        Kind.INT,
        Scope.READ,
        "split queue ranges larger than this",
        field="max_messages_per_partition",
        minimum=1,
    ),
    Option(
        "minMessagesPerPartition",
        Kind.INT,
        Scope.READ,
        "read smaller queue ranges together in one task, up to "
        "this many messages (not past `maxMessagesPerPartition`, and not with `minPartitions`): a Spark task of a "
        "Python source costs about 100 ms whatever it reads. `0`: one task per range",
        default=16384,
        field="min_messages_per_partition",
        minimum=0,
    ),
    Option(
        "maxMessagesPerTrigger",
        Kind.INT,
        Scope.STREAM_READ,
        "at most this many messages per micro-batch, spread over queues by backlog",
        field="max_messages_per_trigger",
        minimum=1,
    ),
    Option(
        "minMessagesPerTrigger",
        Kind.INT,
        Scope.STREAM_READ,
        "wait for at least this many messages per micro-batch, but no longer than `maxTriggerDelay`",
        field="min_messages_per_trigger",
        minimum=1,
    ),
    Option(
        "maxTriggerDelay",
        Kind.DURATION,
        Scope.STREAM_READ,
        "the longest wait for `minMessagesPerTrigger`, as "
        "Spark reads durations: `500ms`, `30s`, `15m`, `2min`, `1h`, `1d`; a bare number is milliseconds",
        default=15 * 60 * 1000,
        field="max_trigger_delay_ms",
        shown="`15m`",
    ),
    Option(
        "pollNameServerIntervalMs",
        Kind.INT,
        Scope.STREAM_READ,
        "how often new queues and topics are looked up (ms)",
        default=10_000,
        field="poll_name_server_interval_ms",
        minimum=1,
    ),
    Option(
        "pullDepth",
        Kind.INT,
        Scope.READ,
        "pulls in flight per task",
        default=DEFAULT_PULL_DEPTH,
        field="pull_depth",
        minimum=1,
    ),
    Option(
        "includeProperties",
        Kind.BOOL,
        Scope.READ,
        "add the `properties` column (every property of the message, a map) to the row of a query that gives no "
        "schema, as Spark's Kafka source adds `headers` under `includeHeaders`; without it the row is lighter for "
        "Spark (the map costs Spark's JVM about a third of its CPU per row). A schema given with `.schema(...)` "
        "chooses its own columns: one that names `properties` reads it either way",
        default=False,
        field="include_properties",
    ),
    Option(
        "rowsPerBatch",
        Kind.INT,
        Scope.READ,
        "rows per Arrow batch a task yields (memory stays flat)",
        default=8192,
        field="rows_per_batch",
        minimum=1,
    ),
    Option(
        "pushFilters",
        Kind.BOOL,
        Scope.BATCH_READ,
        "let filters on topic, brokerName, queueId, queueOffset, tags, "
        "storeTimestamp narrow the plan; also set `spark.sql.python.filterPushdown.enabled=true`",
        default=False,
        field="push_filters",
    ),
    # -- the sink -----------------------------------------------------------------------------------------------
    Option(
        "topic",
        Kind.TEXT,
        Scope.WRITE,
        "the topic of rows without a `topic` column; with `exactly_once` in a "
        "stream, the topic whose broker group keeps the commit records",
    ),
    Option(
        "producerGroup",
        Kind.TEXT,
        Scope.WRITE,
        "producer group of the sends; required with `exactly_once`: one "
        "per query, kept across restarts (it names the query's commit records)",
        default=DEFAULT_PRODUCER_GROUP,
    ),
    Option(
        "deliveryGuarantee",
        Kind.CHOICE,
        Scope.WRITE,
        "`at_least_once` (as Spark's Kafka sink) or `exactly_once` "
        "(transactional half messages); `at-least-once` and `exactly-once` are read the same",
        default="at_least_once",
        choices=("at_least_once", "exactly_once"),
    ),
)

# Spark's Kafka source's spellings a Kafka user may try, and this connector's option for each
KAFKA_NAMES: dict[str, str] = {
    "subscribe": "topics",
    "subscribepattern": "topicPattern",
    "maxoffsetspertrigger": "maxMessagesPerTrigger",
    "minoffsetspertrigger": "minMessagesPerTrigger",
    "maxrecordsperpartition": "maxMessagesPerPartition",
    "kafka.bootstrap.servers": "nameServer",
    "kafka.group.id": "consumerGroup",
}


class Across(enum.Enum):
    """How a rule ties its options together."""

    ONE_OF = "exactly one of"  # exactly one is set
    TOGETHER = "all or none of"  # all are set, or none
    REQUIRES = "requires"  # where the first holds, the others are set
    EXCLUDES = "excludes"  # where the first holds, none of the others is set
    REFUSED = "refused"  # none of them holds in this mode
    NOT_ABOVE = "not above"  # the first's value is at most the second's


@dataclass(frozen=True)
class Rule:
    """A rule across options, checked when the options are parsed (``rmq_spark.options``) and listed in the
    reference. ``value``: the first option's value the rule is about (None: the option is set at all). ``error`` is
    the OptionError's text (``{got}``: the options set among those named); ``missing`` that of ONE_OF when none is
    set."""

    scope: Scope
    across: Across
    options: tuple[str, ...]
    error: str
    value: str | None = None
    missing: str | None = None

    def describe(self) -> str:
        """The rule as the reference states it."""
        first = f"`{self.options[0]}`" if self.value is None else f"`{self.options[0]}={self.value}`"
        rest = ", ".join(f"`{o}`" for o in self.options[1:])
        if self.across in (Across.ONE_OF, Across.TOGETHER):
            return f"{self.across.value} " + ", ".join(f"`{o}`" for o in self.options)
        if self.across is Across.REFUSED:
            return (", ".join(f"`{o}`" for o in self.options) if self.value is None else first) + " refused"
        return f"{first} {self.across.value} {rest}"


_TLS_FILES = ("tlsCaFile", "tlsServerName", "tlsCertFile", "tlsKeyFile")

# Checked in this order, before the options' own values (the first broken rule is the error).
RULES: tuple[Rule, ...] = (
    Rule(
        Scope.ALL,
        Across.ONE_OF,
        ("nameServer", "endpoint"),
        "set option nameServer (remoting) or option endpoint (gRPC pull gateway), not both",
        missing="option nameServer is required: the name server addresses, host:port[;host:port] (or option "
        "endpoint, the host:port of a gRPC pull gateway)",
    ),
    Rule(
        Scope.ALL,
        Across.TOGETHER,
        ("accessKey", "secretKey"),
        "options accessKey and secretKey go together: set both or neither",
    ),
    Rule(
        Scope.ALL,
        Across.TOGETHER,
        ("tlsCertFile", "tlsKeyFile"),
        "options tlsCertFile and tlsKeyFile go together (a client certificate and its key): set both or neither",
    ),
    Rule(
        Scope.ALL,
        Across.EXCLUDES,
        ("tls", *_TLS_FILES),
        "option tls=false contradicts {got}: remove tls=false to connect with TLS, or remove those options",
        value="false",
    ),
    Rule(
        Scope.READ,
        Across.ONE_OF,
        ("topic", "topics", "topicPattern", "assign"),
        "set exactly one of the options topic, topics, topicPattern, assign (got {got})",
        missing="set exactly one of the options topic, topics, topicPattern, assign",
    ),
    Rule(
        Scope.READ,
        Across.EXCLUDES,
        ("topicPattern", "endpoint"),
        "option topicPattern needs the name server's topic list, which the gRPC API of option endpoint does not "
        "offer: name the topics with topic or topics, or use nameServer",
    ),
    Rule(
        Scope.STREAM_READ,
        Across.REFUSED,
        ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"),
        "option {got} is for batch queries only; a streaming query has no end",
    ),
    Rule(
        Scope.BATCH_READ,
        Across.REFUSED,
        ("startingOffsets",),
        "option startingOffsets=latest is for streaming queries; a batch query from latest would be empty (use "
        "earliest, committed, JSON offsets or a timestamp)",
        value="latest",
    ),
    Rule(
        Scope.STREAM_READ,
        Across.NOT_ABOVE,
        ("minMessagesPerTrigger", "maxMessagesPerTrigger"),
        "option minMessagesPerTrigger ({low}) is above maxMessagesPerTrigger ({high}): a batch could never hold "
        "what it waits for; lower the first or raise the second",
    ),
    Rule(
        Scope.READ,
        Across.REQUIRES,
        ("commitOffsetsToBroker", "consumerGroup"),
        "option commitOffsetsToBroker=true needs option consumerGroup",
        value="true",
    ),
    Rule(
        Scope.WRITE,
        Across.EXCLUDES,
        ("deliveryGuarantee", "endpoint"),
        "option deliveryGuarantee=exactly_once needs transactional messages, which the gRPC pull gateway of "
        "option endpoint does not offer: use option nameServer",
        value="exactly_once",
    ),
    Rule(
        Scope.WRITE,
        Across.REQUIRES,
        ("deliveryGuarantee", "producerGroup"),
        "option deliveryGuarantee=exactly_once needs option producerGroup, one per query and kept across its "
        "restarts: a streaming query keeps its commit records under that group, and refuses a group that holds "
        "another query's (the default group would be everyone's)",
        value="exactly_once",
    ),
)


def options_for(scope: Scope) -> dict[str, Option]:
    """The options that apply somewhere in ``scope`` (the source: Scope.READ; the sink: Scope.WRITE), by name."""
    return {o.name: o for o in OPTIONS if o.scope & scope}


def default(name: str, scope: Scope = Scope.ALL) -> Any:
    """The default of option ``name`` (of the side ``scope`` names, where both sides have one of that name): a value
    of the option's kind, which the table, not the type, says."""
    return next(o.default for o in OPTIONS if o.name == name and o.scope & scope)


def _where(scope: Scope) -> str:
    parts = [
        w
        for s, w in ((Scope.BATCH_READ, "batch read"), (Scope.STREAM_READ, "stream read"), (Scope.WRITE, "write"))
        if s in scope
    ]
    return ", ".join(parts)


def _shown(o: Option) -> str:
    if o.shown is not None:
        return o.shown
    if o.default is None:
        return ""
    return f"`{str(o.default).lower() if isinstance(o.default, bool) else o.default}`"


def reference_markdown() -> str:
    """The options reference, ``docs/OPTIONS.md``."""
    lines = [
        "# Options",
        "",
        "Generated from `rmq_spark/option_table.py` by `python -m rmq_spark.option_table > docs/OPTIONS.md`; "
        "a unit test keeps the two the same. Option names are case-insensitive (Spark lower-cases them). An "
        "unknown option fails with the closest known one; an option that applies to the source or the sink but "
        "not to the query's mode (a trigger limit on a batch read, `pushFilters` on a stream) is logged as a "
        "warning and ignored, as Spark's Kafka source does.",
        "",
        "| option | type | default | applies to | meaning |",
        "|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        kind = o.kind.value + (f" ({' / '.join(f'`{c}`' for c in o.choices)})" if o.choices else "")
        kind += f", >= {o.minimum}" if o.minimum is not None else ""
        text = o.help.replace("|", "\\|")
        lines.append(f"| `{o.name}` | {kind} | {_shown(o)} | {_where(o.scope)} | {text} |")
    lines += [
        "",
        "## Rules across options",
        "",
        "Checked before a query starts; the first broken one fails it with `[ROCKETMQ_INVALID_OPTION]` and this text.",
        "",
        "| rule | applies to | error |",
        "|---|---|---|",
    ]
    for r in RULES:
        shown = r.error.replace("{got}", "...").replace("{low}", "n").replace("{high}", "m").replace("|", "\\|")
        lines.append(f"| {r.describe()} | {_where(r.scope)} | {shown} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
