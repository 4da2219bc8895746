"""The connector's options: one typed, validated, picklable value, built once from Spark's option map.

Every error names the option and what it accepts. Secrets never appear in ``repr`` or in error messages.
"""

from __future__ import annotations

import difflib
import enum
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rmq_spark.client.addresses import address_list, host_port
from rmq_spark.client.errors import AddressError
from rmq_spark.client.model import DEFAULT_GROUP, DEFAULT_PRODUCER_GROUP, EVERY_MESSAGE, FilterExpression, MessageQueue
from rmq_spark.client.namespaces import VALID_NAME, Namespace
from rmq_spark.client.tls import TlsConfig
from rmq_spark.errors import OptionError  # the modules that parse options import it from here too
from rmq_spark.option_table import KAFKA_NAMES, OPTIONS, RULES, Across, Kind, Option, Scope, default, options_for
from rmq_spark.option_values import choice, parse_bool, parse_duration_ms, parse_int
from rmq_spark.source.offset_specs import (
    ByTimestamp,
    Edge,
    OffsetSpec,
    named_queues,
    offset_spec,
    parse_queue_key,
    topics_json,
)

log = logging.getLogger(__name__)

SOURCE_OPTIONS: dict[str, Option] = options_for(Scope.READ)
SINK_OPTIONS: dict[str, Option] = options_for(Scope.WRITE)
SECRET_OPTIONS = frozenset(o.name for o in OPTIONS if o.secret)
_TOPIC_NAME = re.compile(r"^[%A-Za-z0-9_|-]{1,127}$")


def parse_assign(value: str) -> frozenset[MessageQueue]:
    """Option assign, ``{"Orders": ["broker-a/0", "broker-a/1"]}``: the only queues a query reads."""
    example = '{"Orders": ["broker-a/0", "broker-a/1"]}'
    data = topics_json("assign", value, what="the queues to read", example=example)
    out: set[MessageQueue] = set()
    for topic, keys in data.items():
        check_topic_name("assign", topic)
        if not isinstance(keys, list) or not keys:
            raise OptionError(
                f'option assign: topic {topic!r} must map to a non-empty list of "brokerName/queueId" '
                f"keys, like {example}"
            )
        out.update(parse_queue_key("assign", topic, key) for key in keys)
    return frozenset(out)


@dataclass(frozen=True)
class ConnectionOptions:
    """Where and how to connect: the options the source and the sink share. Picklable."""

    name_server: str | None = None
    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    namespace: str | None = None
    tls: bool = default("tls")
    tls_ca_file: str | None = None
    tls_server_name: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    request_timeout_ms: int = default("requestTimeoutMs")
    connect_timeout_ms: int = default("connectTimeoutMs")
    broker_retry_timeout_ms: int = default("brokerRetryTimeoutMs")
    max_message_bytes: int = default("maxMessageBytes")

    @property
    def tls_config(self) -> TlsConfig | None:
        """What the clients get for option tls and the tls* files: None for plain TCP."""
        if self.tls or self.tls_ca_file or self.tls_server_name or self.tls_cert_file:
            return TlsConfig(self.tls_ca_file, self.tls_server_name, self.tls_cert_file, self.tls_key_file)
        return None

    @property
    def wire_namespace(self) -> Namespace:
        """The namespace the clients put topics and groups in (none: names as they are)."""
        return Namespace(self.namespace or "")

    @property
    def broker_retry_timeout(self) -> float:
        """brokerRetryTimeoutMs in seconds."""
        return self.broker_retry_timeout_ms / 1000


@dataclass(frozen=True)
class SourceOptions(ConnectionOptions):
    """Every option of the source, parsed. Picklable: it travels to the executors inside the reader."""

    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    assign: frozenset[MessageQueue] | None = None  # option assign: only these queues of ``topics``
    filter: FilterExpression = EVERY_MESSAGE  # subExpression and expressionType
    starting: OffsetSpec = Edge.EARLIEST
    ending: OffsetSpec = Edge.LATEST
    consumer_group: str | None = None
    min_partitions: int | None = None
    max_messages_per_partition: int | None = None
    # A task of a Python data source costs Spark about 100 ms whatever it reads, more than reading thousands of
    # messages: smaller parts are read together by one task (two Arrow batches of the default size).
    min_messages_per_partition: int = default("minMessagesPerPartition")
    fail_on_data_loss: bool = default("failOnDataLoss")
    pull_depth: int = default("pullDepth")
    rows_per_batch: int = default("rowsPerBatch")
    max_messages_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay_ms: int = default("maxTriggerDelay")
    commit_offsets_to_broker: bool = False
    poll_name_server_interval_ms: int = default("pollNameServerIntervalMs")
    push_filters: bool = default("pushFilters")
    include_properties: bool = default("includeProperties")
    allow_shared_consumer_group: bool = default("allowSharedConsumerGroup")

    @property
    def pull_group(self) -> str:
        """The group named in pulls (the broker requires one)."""
        return self.consumer_group or DEFAULT_GROUP


class DeliveryGuarantee(enum.Enum):
    """Option deliveryGuarantee."""

    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


@dataclass(frozen=True)
class SinkOptions(ConnectionOptions):
    """Every option of the sink, parsed. Picklable: it travels to the executors inside the writer."""

    topic: str | None = None
    producer_group: str = default("producerGroup", Scope.WRITE)
    delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee(default("deliveryGuarantee", Scope.WRITE))

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE


_TLS_FILE_OPTIONS = {  # option -> field; any of them turns TLS on
    "tlsCaFile": "tls_ca_file",
    "tlsServerName": "tls_server_name",
    "tlsCertFile": "tls_cert_file",
    "tlsKeyFile": "tls_key_file",
}

_SPARK_OWN = frozenset({"checkpointlocation"})  # Spark's own options, passed on to a stream writer


def _canonical(raw: Mapping[str, str], known: Mapping[str, Option], what: str) -> dict[str, str]:
    """Spark's lower-cased option map with each key in its canonical spelling; OptionError for an unknown key."""
    if not raw:
        raise OptionError(
            f"the rocketmq {what} was given no options at all (it needs nameServer or endpoint, and a topic). A table "
            "made with CREATE TABLE ... USING rocketmq OPTIONS (...) is read and written without its OPTIONS: Spark "
            "does not pass a catalog table's options to a Python data source. Give them with each statement, "
            "SELECT * FROM t WITH ('nameServer' = 'host:9876', 'topic' = 'T') (also FROM STREAM t WITH (...), and "
            "INSERT INTO t WITH (...)), or spark.read.options(...).table('t'); or define the source as "
            "CREATE TEMPORARY VIEW v USING rocketmq OPTIONS (...), which keeps them (batch reads)"
        )
    by_lower = {k.lower(): k for k in known}
    opts: dict[str, str] = {}
    for key, value in raw.items():
        canonical = by_lower.get(str(key).lower())
        if canonical is None:
            if str(key).lower() in _SPARK_OWN:
                continue
            if str(key).lower() == "path":
                raise OptionError(
                    f"the rocketmq {what} takes no path: remove the argument of "
                    f"{'load' if what == 'source' else 'save'}() and set the option topic"
                )
            ours = KAFKA_NAMES.get(str(key).lower())
            if ours is not None:
                raise OptionError(f"option {key!r} is Spark's Kafka source's; the rocketmq {what}'s is {ours}")
            elsewhere = {k.lower(): k for k in (*SOURCE_OPTIONS, *SINK_OPTIONS)}.get(str(key).lower())
            if elsewhere is not None:
                other = "sink (df.write)" if what == "source" else "source (spark.read)"
                raise OptionError(
                    f"option {elsewhere} is an option of the rocketmq {other}, not of the {what}; "
                    "the " + what + " takes: " + ", ".join(sorted(known))
                )
            closest = difflib.get_close_matches(str(key).lower(), by_lower, n=1, cutoff=0.75)
            hint = f"did you mean {by_lower[closest[0]]}? " if closest else ""
            raise OptionError(
                f"unknown option {key!r} for the rocketmq {what}; {hint}known options: " + ", ".join(sorted(known))
            )
        opts[canonical] = str(value)
    return opts


def _typed_values(opts: Mapping[str, str], known: Mapping[str, Option]) -> dict[str, Any]:
    """The integer, boolean and duration options of ``known`` present in ``opts``, parsed, by field name (each of
    its option's kind: the table says which)."""
    values: dict[str, Any] = {}
    for name, o in known.items():
        if name not in opts or o.field is None:
            continue
        if o.kind is Kind.INT:
            values[o.field] = parse_int(name, opts[name], minimum=o.minimum)
        elif o.kind is Kind.BOOL:
            values[o.field] = parse_bool(name, opts[name])
        elif o.kind is Kind.DURATION:
            values[o.field] = parse_duration_ms(name, opts[name])
    return values


def _warn_elsewhere(opts: Mapping[str, str], known: Mapping[str, Option], mode: Scope, what: str) -> None:
    """Log each option of ``opts`` that does not apply to ``mode`` (it is ignored), as Spark's Kafka source does."""
    for name in opts:
        if not known[name].scope & mode:
            log.warning("rocketmq: option %s does not apply to a %s; it is ignored", name, what)


def _given(opts: Mapping[str, str], name: str) -> bool:
    return bool(opts.get(name, "").strip())


def _holds(opts: Mapping[str, str], name: str, value: str | None) -> bool:
    """Whether option ``name`` is set (to ``value``, read as the parsers read it: any case, ``-`` as ``_``)."""
    if not _given(opts, name):
        return False
    return value is None or opts[name].strip().lower().replace("-", "_") == value


def _check_rules(opts: Mapping[str, str], mode: Scope) -> None:
    """OptionError for the first rule across options (``option_table.RULES``) that ``opts`` break in ``mode``."""
    for rule in RULES:
        if not rule.scope & mode:
            continue
        names, first = rule.options, rule.options[0]
        got = [n for n in names if _given(opts, n)]
        broken, shown = False, got
        if rule.across is Across.ONE_OF:
            if not got:
                raise OptionError(rule.missing or rule.error.format(got=""))
            broken = len(got) > 1
        elif rule.across is Across.TOGETHER:
            broken = 0 < len(got) < len(names)
        elif rule.across is Across.REQUIRES:
            shown = [n for n in names[1:] if not _given(opts, n)]
            broken = _holds(opts, first, rule.value) and bool(shown)
        elif rule.across is Across.EXCLUDES:
            shown = [n for n in names[1:] if _given(opts, n)]
            broken = _holds(opts, first, rule.value) and bool(shown)
        elif rule.across is Across.REFUSED:
            shown = [n for n in names if _holds(opts, n, rule.value)]
            broken = bool(shown)
        elif rule.across is Across.NOT_ABOVE:
            if len(got) == 2:
                low, high = (parse_int(n, opts[n]) for n in names)
                if low > high:
                    raise OptionError(rule.error.format(low=low, high=high))
        if broken:
            raise OptionError(rule.error.format(got=", ".join(shown[:1] if rule.across is Across.REFUSED else shown)))


def _connection(opts: Mapping[str, str]) -> dict[str, Any]:
    """The ConnectionOptions fields from ``opts``, validated (transport, address, credentials, TLS, timeouts)."""
    name_server = opts.get("nameServer", "").strip() or None
    endpoint = opts.get("endpoint", "").strip() or None
    if endpoint and (";" in endpoint or "," in endpoint):
        raise OptionError(f"option endpoint takes one host:port (the gateway), not a list: {endpoint!r}")
    try:
        address_list(name_server, "option nameServer:") if name_server else host_port(endpoint or "", "option endpoint")
    except AddressError as e:
        raise OptionError(str(e)) from None
    tls_files = {attr: opts[name].strip() for name, attr in _TLS_FILE_OPTIONS.items() if opts.get(name, "").strip()}
    namespace = opts.get("namespace", "").strip() or None
    if namespace is not None and not VALID_NAME.match(namespace):
        raise OptionError(
            f"option namespace {namespace!r} is not a namespace: letters, digits, _ and -, at most 64 "
            "characters (the instance id of a managed RocketMQ, without the %)"
        )
    return {
        "name_server": name_server,
        "endpoint": endpoint,
        "access_key": opts.get("accessKey"),
        "secret_key": opts.get("secretKey"),
        "security_token": opts.get("securityToken"),
        "namespace": namespace,
        **tls_files,
        **({"tls": True} if tls_files else {}),
    }


def check_topic_name(option: str, topic: str) -> str:
    """``topic`` when it is a valid RocketMQ topic name, else OptionError naming ``option``."""
    if not _TOPIC_NAME.match(topic):
        raise OptionError(
            f"option {option}: {topic!r} is not a valid RocketMQ topic name "
            "(letters, digits, %, |, _ and -, at most 127 characters)"
        )
    return topic


def include_properties(raw: Mapping[str, str]) -> bool:
    """Option includeProperties of Spark's (case-insensitive) option map, read alone: Spark asks for the default
    schema before any reader, also for a write and for a catalog table, whose options it does not pass."""
    given = [value for key, value in raw.items() if str(key).lower() == "includeproperties"]
    return parse_bool("includeProperties", given[0]) if given else default("includeProperties")


def parse_options(raw: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Validate Spark's (case-insensitive) option map; raise OptionError on the first problem."""
    opts = _canonical(raw, SOURCE_OPTIONS, "source")
    _check_rules(opts, Scope.STREAM_READ if streaming else Scope.BATCH_READ)
    connection = _connection(opts)

    chosen = [k for k in ("topic", "topics", "topicPattern", "assign") if _given(opts, k)]
    topics: tuple[str, ...] = ()
    pattern = None
    assign = None
    if chosen[0] == "assign":
        assign = parse_assign(opts["assign"])
        topics = tuple(sorted({mq.topic for mq in assign}))
    elif chosen[0] == "topicPattern":
        pattern = opts["topicPattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option topicPattern is not a valid regular expression: {e}") from None
    else:
        topics = tuple(
            sorted({check_topic_name(chosen[0], t.strip()) for t in opts[chosen[0]].split(",") if t.strip()})
        )

    expression = FilterExpression(opts.get("subExpression", "*"), choice(SOURCE_OPTIONS["expressionType"], opts))
    ns = Namespace(connection["namespace"] or "")
    if ns:  # names given with the namespace already: shown without it, like every other
        topics = tuple(sorted({ns.unwrap(t) for t in topics}))
        assign = frozenset(replace(mq, topic=ns.unwrap(mq.topic)) for mq in assign) if assign is not None else None

    consumer_group = ns.unwrap(opts.get("consumerGroup", "").strip()) or None
    _warn_elsewhere(
        opts,
        SOURCE_OPTIONS,
        Scope.STREAM_READ if streaming else Scope.BATCH_READ,
        "streaming query" if streaming else "batch read",
    )
    fallback = choice(SOURCE_OPTIONS["startingOffsetsFallback"], opts)
    starting = offset_spec(
        opts,
        "starting",
        consumer_group,
        None if fallback == "error" else Edge[fallback.upper()],
        default=Edge.LATEST if streaming else Edge.EARLIEST,
    )
    if isinstance(starting, ByTimestamp):
        strategy = choice(SOURCE_OPTIONS["startingOffsetsByTimestampStrategy"], opts)
        starting = replace(starting, strict=strategy == "error")
    ending = offset_spec(opts, "ending", consumer_group, None, default=Edge.LATEST)
    if assign is not None:
        for found in filter(None, (named_queues(starting), named_queues(ending))):
            option, named = found
            outside = named.keys() - assign
            if outside:
                raise OptionError(
                    f"option {option} names queues that option assign does not: "
                    f"{', '.join(map(str, sorted(outside)))}; name only assigned queues"
                )

    values = _typed_values(opts, SOURCE_OPTIONS)
    commit = opts.get("commitOffsetsToBroker")
    parsed = SourceOptions(
        topics=topics,
        topic_pattern=pattern,
        assign=assign,
        filter=expression,
        starting=starting,
        ending=ending,
        consumer_group=consumer_group,
        commit_offsets_to_broker=(
            parse_bool("commitOffsetsToBroker", commit) if commit is not None else consumer_group is not None
        ),
        **{**connection, **values},
    )
    return parsed


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """Validate the sink's (case-insensitive) option map; raise OptionError on the first problem."""
    opts = _canonical(raw, SINK_OPTIONS, "sink")
    _check_rules(opts, Scope.WRITE)
    connection = _connection(opts)
    ns = Namespace(connection["namespace"] or "")
    topic = ns.unwrap(opts.get("topic", "").strip()) or None
    if topic is not None:
        check_topic_name("topic", topic)
    group = ns.unwrap(opts.get("producerGroup", "").strip())
    guarantee = DeliveryGuarantee(choice(SINK_OPTIONS["deliveryGuarantee"], opts, dashes=True))
    return SinkOptions(
        topic=topic,
        producer_group=group or DEFAULT_PRODUCER_GROUP,
        delivery_guarantee=guarantee,
        **{**connection, **_typed_values(opts, SINK_OPTIONS)},
    )
