"""A queue's first and end offsets, asked of its broker for many queues at once (one fan-out). A user the brokers
refuse those Get requests (ACL 2.0 grants RocketMQ's consumers ``Sub`` only) learns them instead from the header of a
one-message pull at the queue's end, as the reader's pull group: the topics refused are remembered for GET_RETRY_S,
and each queue's last known end, where its next such pull goes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol

from rmq_spark.client.errors import AuthError
from rmq_spark.client.fan_out import Answers, gather
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.transport import Bursts, Call

# A topic whose Get requests (first and end offsets) the brokers refused this user has its offsets learnt from pulls'
# answers; the Get requests are tried again this long after the refusal (a permission granted since).
GET_RETRY_S = 300.0


class EdgeSource(Bursts, Protocol):
    """The requests the offsets are asked with: the Get requests, and a pull in their place as ``pull_group``."""

    pull_group: str

    def _min_offset_call(self, mq: MessageQueue) -> Call: ...

    def _max_offset_call(self, mq: MessageQueue) -> Call: ...

    def pull_async(self, mq: MessageQueue, offset: int, max_nums: int, *, group: str) -> Call: ...

    def refuses_permission(self, e: AuthError) -> bool: ...


class _Probe:
    """A pull as ``group`` asked for a queue's first or end offset (``edge``, a PullResult field) in place of a Get
    request the broker refused (``refusal``); notes the queue's end in ``ends``, where its next probe pulls."""

    def __init__(
        self, pull: Call, mq: MessageQueue, edge: str, group: str, ends: dict[MessageQueue, int], refusal: AuthError
    ) -> None:
        self.pull, self.mq, self.edge, self.group, self.ends, self.refusal = pull, mq, edge, group, ends, refusal
        self.replica = pull.replica

    def result(self) -> int:
        topic, group = self.mq.topic, self.group
        try:
            r = self.pull.result()
        except AuthError as e:
            raise AuthError(
                f"{self.edge.replace('_', ' ')} of {self.mq}: the user may neither ask it (permission `Get` on "
                f"`Topic:{topic}`) nor pull it (`Sub` on `Topic:{topic}` and `Group:{group}`): grant one of them "
                f"(mqadmin createAcl or updateAcl), or set consumerGroup to a group the user has `Sub` on",
                code=e.code,
                remark=e.remark,
            ) from e
        if r.max_offset >= 0:
            self.ends[self.mq] = r.max_offset
        value = getattr(r, self.edge)
        if value < 0:  # a transport whose pulls do not report it
            raise self.refusal
        return value

    def cancel(self) -> None:
        self.pull.cancel()


class OffsetEdges:
    """The first and end offsets of queues over ``client``, with what its refused Get requests taught."""

    def __init__(self, client: EdgeSource) -> None:
        self._client = client
        self._get_refused: dict[str, tuple[float, AuthError]] = {}  # topic: when, and the refusal
        self._probe_at: dict[MessageQueue, int] = {}  # where the next pull for a queue's offsets pulls: its end

    def min_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The first offset still held by the broker, per queue."""
        return self._edges("min offsets", mqs, self._client._min_offset_call, "min_offset", partial)

    def max_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The offset after the last message (exclusive end), per queue."""
        return self._edges("max offsets", mqs, self._client._max_offset_call, "max_offset", partial)

    def _edges(
        self, what: str, mqs: Iterable[MessageQueue], make: Callable[[MessageQueue], Call], edge: str, partial: bool
    ) -> Answers:
        """The first or end offsets (``edge``) of ``mqs``. A user refused the Get requests they take (ACL 2.0 grants
        RocketMQ's consumers ``Sub`` only) learns them from the header of a pull as ``pull_group``, which carries
        both: the queues of a topic refused once are asked that way until GET_RETRY_S has passed."""
        mqs = list(mqs)
        now = time.monotonic()
        refused = {t for t, (at, _) in self._get_refused.items() if now - at < GET_RETRY_S}
        asked = [mq for mq in mqs if mq.topic not in refused]
        try:
            out = gather(self._client, what, asked, make, partial=partial)
        except AuthError as e:
            if not self._client.refuses_permission(e):
                raise
            for topic in {mq.topic for mq in asked}:
                self._get_refused[topic] = (now, e)
            out, asked = Answers(), []
        pulled = [mq for mq in mqs if mq not in asked]
        if not pulled:
            return out
        return out.merge(gather(self._client, what, pulled, lambda mq: self._probe_call(mq, edge), partial=partial))

    def _probe_call(self, mq: MessageQueue, edge: str) -> Call:
        """A pull of one message at the queue's last known end (no message comes back unless one came since),
        answering the ``edge`` offset its header carries."""
        pull = self._client.pull_async(mq, self._probe_at.get(mq, 0), 1, group=self._client.pull_group)
        return _Probe(pull, mq, edge, self._client.pull_group, self._probe_at, self._get_refused[mq.topic][1])
