"""Values of the RocketMQ client: queues, routes, messages and pull results (transport-neutral, picklable)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, final

from rmq_spark.client.unique_ids import new_unique_id

if TYPE_CHECKING:  # the core's statuses; the values here import without the core
    from rmq_spark.compiled import PullStatus

MASTER_ID = 0
# The group named in pulls and offset requests, and in sends, when the user names none.
DEFAULT_GROUP = "rmq_spark_reader"
DEFAULT_PRODUCER_GROUP = "rmq_spark_producer"
# Messages asked for in one pull: the most a broker serves in one (its default maxMsgNums from memory).
SLOT = 32

# Permission bits of a topic or broker (PermName in RocketMQ).
PERM_INHERIT = 0x1
PERM_WRITE = 0x2
PERM_READ = 0x4

# Message properties the client writes or reads by name (MessageConst).
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"  # the message group RocketMQ 5 FIFO consumers order by
KEY_SEPARATOR = " "
# The broker name of a static topic's logic queues in the global scope, as RocketMQ 5's clients name them
# (TopicQueueMappingUtils.getMockBrokerName): a logic queue stands for whichever broker group leads it now.
LOGIC_BROKER_PREFIX = "__syslo__"
LOGIC_BROKER = LOGIC_BROKER_PREFIX + "global__"


_QUEUES: dict[tuple[str, str, int], MessageQueue] = {}


@final
@dataclass(frozen=True, order=True, init=False)
class MessageQueue:
    """One queue of a topic on one broker; the unit of ordering and of offsets. A process holds one object per
    queue: equal queues are the same object."""

    topic: str
    broker_name: str
    queue_id: int

    # The stream driver looks up thousands of queues in a dozen maps per trigger: with one object per queue (made
    # here, from routes, Spark's offset JSON and pickles alike), hashing and equality are the identity's, with no
    # Python call. Pickles carry the three fields and are made one object again on load.
    def __new__(cls, topic: str, broker_name: str, queue_id: int) -> MessageQueue:
        key = (topic, broker_name, queue_id)
        mq = _QUEUES.get(key)
        if mq is None:
            mq = object.__new__(cls)
            object.__setattr__(mq, "topic", topic)
            object.__setattr__(mq, "broker_name", broker_name)
            object.__setattr__(mq, "queue_id", queue_id)
            mq = _QUEUES.setdefault(key, mq)
        return mq

    __hash__ = object.__hash__
    __eq__ = object.__eq__

    def __reduce__(self):
        return MessageQueue, (self.topic, self.broker_name, self.queue_id)

    @property
    def key(self) -> str:
        """The ``brokerName/queueId`` key used in offset JSON."""
        return f"{self.broker_name}/{self.queue_id}"

    def __str__(self) -> str:
        return f"{self.topic}:{self.broker_name}/{self.queue_id}"

    @property
    def logic(self) -> bool:
        """True for a static topic's logic queue (RocketMQ 5), whose offsets the leading broker translates."""
        return self.broker_name.startswith(LOGIC_BROKER_PREFIX)


# Queues in their order (topic, broker, queue id) as a sort key: a sort by it compares no MessageQueues (a Python
# call per pair).
queue_order = attrgetter("topic", "broker_name", "queue_id")


def queue_of(topic: str, broker_name: str, queue_id: int) -> MessageQueue:
    """The one MessageQueue of these fields in this process (``MessageQueue(...)`` is the same)."""
    return MessageQueue(topic, broker_name, queue_id)


FILTER_TYPES = ("TAG", "SQL92")


@dataclass(frozen=True)
class FilterExpression:
    """A subscription's filter, as the broker takes it: ``TAG`` (``TagA || TagB``; ``*`` passes every message) or
    ``SQL92`` over message properties. ``tags`` is what a TAG filter re-checks on the client, as the Java client
    does (the broker filters by tag hash): None when it passes every tag (a ``*`` anywhere in the list), and
    then the expression is ``*``."""

    expression: str = "*"
    type: str = "TAG"
    tags: frozenset[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = str(self.type).upper()
        if kind not in FILTER_TYPES:
            raise ValueError(f"filter type must be one of {', '.join(FILTER_TYPES)}, not {self.type!r}")
        expression = (self.expression or "").strip() or "*"
        tags = None
        if kind == "TAG":
            tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
            if not tags or "*" in tags:  # sent as it is, the broker would read "A || *" as the tags A and "*"
                tags, expression = None, "*"
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "tags", tags)

    @classmethod
    def of_tags(cls, tags: Iterable[str]) -> FilterExpression:
        """The TAG filter that passes exactly ``tags`` (at least one)."""
        names = sorted({t.strip() for t in tags} - {""})
        if not names or "*" in names:
            raise ValueError(f"a TAG filter of named tags needs at least one tag other than '*', not {names!r}")
        return cls(" || ".join(names))

    @property
    def filters(self) -> bool:
        """True unless it passes every message (a SQL92 filter always counts as filtering)."""
        return self.type != "TAG" or self.tags is not None


EVERY_MESSAGE = FilterExpression()


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret (never shown in ``repr``), with an optional security token; each transport
    signs its requests with them in its own scheme."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class BrokerData:
    """A broker group: its name and the address of each broker id (0 is the master, unless ``acting_master``: then
    the node at 0 is a slave standing in while the master is away, and the group has no master)."""

    broker_name: str
    addresses: dict[int, str]
    cluster: str = ""
    acting_master: bool = False

    @property
    def master_address(self) -> str | None:
        return None if self.acting_master else self.addresses.get(MASTER_ID)

    def read_candidates(self, preferred: int = MASTER_ID) -> list[str]:
        """Addresses to read from, best first: the preferred broker id (the broker's suggestion), the master, then
        the slaves by id (as RocketMQ's PullAPIWrapper falls back when the suggested node is absent)."""
        ids = sorted(self.addresses, key=lambda i: (i != preferred, i != MASTER_ID, i))
        return [self.addresses[i] for i in ids]


@dataclass(frozen=True)
class QueueData:
    """The queue counts and permissions of a topic on one broker group."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


@dataclass(frozen=True)
class TopicRoute:
    """The route of one topic as the name server reports it."""

    topic: str
    brokers: tuple[BrokerData, ...]
    queues: tuple[QueueData, ...]
    # The topic's message.type where the route tells it (the v2 API's accept_message_types), else None
    message_type: MessageType | None = None
    # A static topic (RocketMQ 5 logic queues): the broker group that leads each logic queue now, by its
    # (logic broker name, queue id); its queues are these logic queues, not the brokers' own
    logic_leaders: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def logic_queues(self) -> bool:
        """True for a static topic."""
        return bool(self.logic_leaders)

    def broker(self, broker_name: str) -> BrokerData | None:
        for b in self.brokers:
            if b.broker_name == broker_name:
                return b
        return None

    def serving_broker(self, mq: MessageQueue) -> str | None:
        """The broker group requests for ``mq`` go to: its own, or for a logic queue its leader (None when no
        broker group in the route leads it now)."""
        return self.logic_leaders.get((mq.broker_name, mq.queue_id)) if mq.logic else mq.broker_name

    def broker_of(self, mq: MessageQueue) -> BrokerData | None:
        """The members of the broker group that serves ``mq`` (``serving_broker``), None where the route has none."""
        name = self.serving_broker(mq)
        return None if name is None else self.broker(name)

    def queue_data(self, broker_name: str) -> QueueData | None:
        """The topic's queue counts and permission on broker group ``broker_name``, None where it has none; for a
        logic broker name, the count of its logic queues (of the highest id led now)."""
        if broker_name.startswith(LOGIC_BROKER_PREFIX):
            ids = [i for b, i in self.logic_leaders if b == broker_name]
            return QueueData(broker_name, max(ids) + 1, max(ids) + 1, PERM_READ | PERM_WRITE) if ids else None
        return next((q for q in self.queues if q.broker_name == broker_name), None)

    def _led(self, permitted) -> list[MessageQueue]:
        """The logic queues whose leader's queue data has the permission ``permitted`` tests."""
        out = []
        for (logic, queue_id), leader in self.logic_leaders.items():
            data = next((q for q in self.queues if q.broker_name == leader), None)
            if data is not None and permitted(data):
                out.append(queue_of(self.topic, logic, queue_id))
        return sorted(out)

    def read_queues(self) -> list[MessageQueue]:
        """Every readable queue, sorted by broker name and queue id (a static topic's: its logic queues)."""
        if self.logic_leaders:
            return self._led(lambda q: q.readable)
        out = [
            queue_of(self.topic, q.broker_name, i) for q in self.queues if q.readable for i in range(q.read_queue_nums)
        ]
        return sorted(out)

    def write_queues(self) -> list[MessageQueue]:
        """Every writable queue of a broker group that has a master (only a master takes sends), sorted by broker
        name and queue id: the queues the Java producer publishes to (MQClientInstance.
        topicRouteData2TopicPublishInfo), so that a sharding key's queue is the one it picks (a static topic's:
        the logic queues whose leader has a master)."""
        masters = {b.broker_name for b in self.brokers if b.master_address is not None}
        if self.logic_leaders:
            return [mq for mq in self._led(lambda q: q.writable) if self.serving_broker(mq) in masters]
        out = [
            MessageQueue(self.topic, q.broker_name, i)
            for q in self.queues
            if q.writable and q.broker_name in masters
            for i in range(q.write_queue_nums)
        ]
        return sorted(out)


@dataclass(frozen=True)
class Message:
    """One message as stored by the broker."""

    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    tags: str | None
    keys: tuple[str, ...]
    body: bytes
    born_timestamp: int  # ms since epoch
    store_timestamp: int  # ms since epoch
    born_host: str
    store_host: str
    reconsume_times: int
    flag: int
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    commit_log_offset: int = 0
    body_crc: int = 0


class Boundary(str, enum.Enum):
    """Which offset a search by time answers: the first message stored at or after the time (``LOWER``), or the
    last stored at or before it (``UPPER``), as SEARCH_OFFSET_BY_TIMESTAMP's boundary type."""

    LOWER = "lower"
    UPPER = "upper"


class MessageType(enum.Enum):
    """A RocketMQ 5 topic's attribute message.type, and the kind of a message checked against it: a topic takes
    messages of its own type, a MIXED topic all of them (TopicMessageType; the proxy refuses other sends)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    LITE = "LITE"  # RocketMQ 5.5's LiteTopic: no message of the connector's is of this kind
    MIXED = "MIXED"

    def takes(self, kind: MessageType) -> bool:
        return self is MessageType.MIXED or self is kind


@dataclass(frozen=True)
class PullResult:
    """The outcome of one pull. For FOUND, what came is as the transport carries it: ``body`` is the raw message
    block (remoting), ``frames`` the answer frames (serialized v2 ``PullMessageResponse``s) that each hold a message
    (gRPC); the Arrow builder gathers either natively, the transport's reference decoder turns either into
    Messages. ``first_offset`` is the queue offset of the first record the broker returned (-1 when none).
    ``min_offset`` and ``max_offset`` are -1 when the transport does not report them. ``offset_delta``: what to add
    to the queue offsets the records in ``body`` carry (a static topic's logic queue: the records are stored with
    the offsets of a broker's queue; the broker's offsetDelta); the other offsets here have it added already."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes = b""
    suggest_which_broker_id: int = 0
    frames: tuple[bytes, ...] | None = None
    first_offset: int = -1
    offset_delta: int = 0


@dataclass(frozen=True)
class SendResult:
    """Where a send landed. ``msg_id`` is the client's UNIQ_KEY (comma-joined for a batch), as the Java client
    reports it; ``offset_msg_id`` is the broker's store-position id."""

    msg_id: str
    queue: MessageQueue
    queue_offset: int
    offset_msg_id: str = ""


@dataclass(frozen=True)
class HalfMessage:
    """A transaction's half message as stored by the broker: what END_TRANSACTION needs to commit or roll it back.
    ``queue`` is where the message goes once committed; the broker keeps the half itself in its half topic at
    ``half_queue_offset``."""

    queue: MessageQueue
    msg_id: str
    transaction_id: str
    commit_log_offset: int
    half_queue_offset: int


@dataclass(frozen=True)
class OutgoingMessage:
    """A message to send: body, optional tag and keys, user properties, the user flag, for a timer message the
    time (ms since the epoch) the broker delivers it at, and the sharding key (message group) of an ordered one."""

    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    deliver_time_ms: int | None = None
    sharding_key: str | None = None

    def wire_properties(self) -> dict[str, str]:
        """The properties as sent over remoting: the user properties plus TAGS, KEYS (space-joined),
        TIMER_DELIVER_MS and __SHARDINGKEY, which win."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = KEY_SEPARATOR.join(self.keys)
        if self.deliver_time_ms is not None:
            props[PROPERTY_TIMER_DELIVER_MS] = str(self.deliver_time_ms)
        if self.sharding_key is not None:
            props[PROPERTY_SHARDING_KEY] = self.sharding_key
        return props

    @property
    def message_type(self) -> MessageType:
        """The kind of message RocketMQ 5 sees in it when it is not a transaction's (TopicMessageType's rule:
        a delivery time makes it DELAY, else a sharding key FIFO)."""
        if self.deliver_time_ms is not None:
            return MessageType.DELAY
        return MessageType.NORMAL if self.sharding_key is None else MessageType.FIFO

    def with_unique_id(self) -> OutgoingMessage:
        """This message with a UNIQ_KEY property (a new one unless it already has one)."""
        if self.properties.get(PROPERTY_UNIQ_KEY):
            return self
        return replace(self, properties={**self.properties, PROPERTY_UNIQ_KEY: new_unique_id()})

    @property
    def unique_id(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)
