"""A task's sends: per queue in row order and batched (SEND_BATCH_MESSAGE), several queues in flight at once,
memory bounded by the batch and in-flight limits, transient failures retried with backoff until a deadline. In
exactly-once mode every message is a transaction's half message (the broker takes halves one by one) and the task
returns their handles for the driver to commit."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RETRYABLE, RocketMQError
from rmq_spark.client.model import HalfMessage, MessageQueue, OutgoingMessage
from rmq_spark.client.remoting.client import DirectSends, RemotingClient
from rmq_spark.client.transport import Call
from rmq_spark.sink.retry import Retries

if TYPE_CHECKING:
    from rmq_spark.sink.native_sends import EncodedHalf

BATCH_MESSAGES = 256  # messages per SEND_BATCH_MESSAGE at most
BATCH_BYTES = 1 << 20  # body bytes per send at most (the broker takes up to maxMessageSize, 4 MiB by default)
MAX_IN_FLIGHT = 16  # sends in flight per task
# Half messages in flight per task (one message a request, so more of them), and their bodies' bytes at most: as
# many as MAX_IN_FLIGHT full batches hold
HALVES_IN_FLIGHT = 32
HALF_BYTES_IN_FLIGHT = MAX_IN_FLIGHT * BATCH_BYTES


@dataclass
class _Send:
    """One send in flight: a batch for one queue (or one half message) and its attempt."""

    mq: MessageQueue
    messages: list[OutgoingMessage]
    sys_flag: int
    seq: int = -1  # the row sequence of a half message
    encoded: bytes | None = None  # a SEND_BATCH_MESSAGE body of ``count`` messages the native core encoded
    count: int = 0
    half: EncodedHalf | None = None  # a half message the native core framed
    size: int = 0  # a half message's body bytes
    call: Call | None = None
    retries: Retries | None = None


@dataclass
class _Batching:
    """A queue's messages gathered for its next send."""

    sys_flag: int
    messages: list[OutgoingMessage] = field(default_factory=list)
    size: int = 0


class Sender:
    """Sends one task's messages. ``add`` in row order, then ``finish``; ``sent`` counts the stored messages and
    ``halves()`` lists the half messages in row order (exactly-once)."""

    def __init__(
        self,
        client: BaseClient,
        group: str,
        *,
        transactional: bool,
        retry_timeout: float,
        max_in_flight: int | None = None,
        max_half_bytes: int = HALF_BYTES_IN_FLIGHT,
        sends: DirectSends | None = None,
    ) -> None:
        self._client = client
        self._sends = sends  # where the half messages of ``add_half`` go
        self._group = group
        self._transactional = transactional
        self._retry_timeout = retry_timeout
        if max_in_flight is None:
            max_in_flight = HALVES_IN_FLIGHT if transactional else MAX_IN_FLIGHT
        self._max_in_flight = max_in_flight
        self._max_half_bytes = max_half_bytes
        self._pending: dict[MessageQueue, _Batching] = {}
        self._busy: dict[MessageQueue, _Send] = {}  # at most one send in flight per queue keeps its order
        self._inflight: deque[_Send] = deque()
        self._halves: list[tuple[int, HalfMessage]] = []
        self._queued: list[_Send] = []  # half messages waiting to go out together
        self._queued_bytes = 0
        self._inflight_bytes = 0  # of the half messages in flight
        self._seq = 0
        self.sent = 0

    def add(self, mq: MessageQueue, message: OutgoingMessage) -> None:
        message, sys_flag = self._client.wire_message(message)
        if self._transactional:
            self._queue_half(_Send(mq, [message], sys_flag, size=len(message.body)))
            return
        pending = self._pending.get(mq)
        alone = message.deliver_time_ms is not None  # the broker schedules timer messages sent one by one
        if pending is not None and (
            pending.sys_flag != sys_flag
            or alone
            or len(pending.messages) >= BATCH_MESSAGES
            or pending.size + len(message.body) > BATCH_BYTES
        ):
            self._flush(mq)
            pending = None
        if alone:
            self._launch(_Send(mq, [message], sys_flag))
            return
        if pending is None:
            pending = self._pending[mq] = _Batching(sys_flag)
        pending.messages.append(message)
        pending.size += len(message.body)

    def add_half(self, half: EncodedHalf) -> None:
        """Send a half message the native core framed (exactly-once over ``sends``), in row order with ``add``."""
        self._queue_half(_Send(half.mq, [], 0, count=1, half=half, size=half.size))

    def add_encoded(self, mq: MessageQueue, body: bytes, count: int, sys_flag: int) -> None:
        """Send a batch body of ``count`` messages for ``mq`` (remoting, at-least-once), after what ``add`` gathered
        for ``mq``."""
        self._flush(mq)
        self._launch(_Send(mq, [], sys_flag, encoded=body, count=count))

    def finish(self) -> None:
        """Send what is pending and wait for every send."""
        self._launch_queued()
        for mq in list(self._pending):
            self._flush(mq)
        while self._inflight:
            self._complete(self._inflight.popleft())

    def halves(self) -> list[HalfMessage]:
        return [h for _, h in sorted(self._halves, key=lambda e: e[0])]

    # -- internals -------------------------------------------------------------------------------------------
    def _flush(self, mq: MessageQueue) -> None:
        pending = self._pending.pop(mq, None)
        if pending is not None and pending.messages:
            self._launch(_Send(mq, pending.messages, pending.sys_flag))

    def _queue_half(self, send: _Send) -> None:
        send.seq = self._seq
        self._seq += 1
        self._queued.append(send)
        self._queued_bytes += send.size
        if len(self._queued) * 2 >= self._max_in_flight or self._queued_bytes * 2 >= self._max_half_bytes:
            self._launch_queued()

    def _launch_queued(self) -> None:
        """The queued half messages, in one write per connection (one request each: the broker takes no half
        message in a batch). Room is made for all of them first, within the window's count and bytes, so that
        nothing is waited for inside the burst."""
        if not self._queued:
            return
        queued, size = self._queued, self._queued_bytes
        self._queued, self._queued_bytes = [], 0
        while self._inflight and (
            len(self._inflight) + len(queued) > self._max_in_flight
            or self._inflight_bytes + size > self._max_half_bytes
        ):
            done = self._inflight.popleft()
            self._complete(done)
            self._inflight_bytes -= done.size
        with self._client.burst():
            for send in queued:
                self._start(send)
                self._inflight.append(send)
        self._inflight_bytes += size

    def _launch(self, send: _Send) -> None:
        """An at-least-once send (half messages go out by ``_launch_queued``): one in flight per queue keeps the
        queue's order."""
        before = self._busy.get(send.mq)
        if before is not None:
            self._inflight.remove(before)
            self._complete(before)
        while len(self._inflight) >= self._max_in_flight:
            self._complete(self._inflight.popleft())
        self._start(send)
        self._inflight.append(send)
        self._busy[send.mq] = send

    def _start(self, send: _Send) -> None:
        try:
            if send.half is not None:
                assert self._sends is not None, "the native core frames half messages for direct sends only"
                h = send.half
                send.call = self._sends.send_half(h.mq, h.frame, h.opaque, h.msg_id)
            elif send.encoded is not None:
                assert isinstance(self._client, RemotingClient), "the native core encodes for remoting only"
                send.call = self._client.send_encoded_async(
                    send.mq, send.encoded, group=self._group, sys_flag=send.sys_flag
                )
            elif self._transactional:
                send.call = self._client.send_half_async(
                    send.mq, send.messages[0], group=self._group, sys_flag=send.sys_flag
                )
            else:
                send.call = self._client.send_async(send.mq, send.messages, group=self._group, sys_flag=send.sys_flag)
        except RETRYABLE as e:
            send.call = _Failed(e)

    def _complete(self, send: _Send) -> None:
        """Wait for ``send``; send it again after a transient failure (the broker may have stored the first try:
        at-least-once) until brokerRetryTimeoutMs has passed since the first failure."""
        while True:
            call = send.call
            assert call is not None, "a send is started before it is waited for"
            try:
                result = call.result()
                break
            except RETRYABLE as e:
                send.retries = send.retries or Retries(self._retry_timeout)
                send.retries.wait(e, f"sending to {send.mq}")
                self._start(send)
        if self._busy.get(send.mq) is send:
            del self._busy[send.mq]
        if self._transactional:
            self._halves.append((send.seq, result))
        self.sent += len(send.messages) + send.count


class _Failed:
    """A send that failed before it left (the broker could not be reached); ``result`` raises its error."""

    replica = False

    def __init__(self, error: RocketMQError) -> None:
        self._error = error

    def result(self):
        raise self._error

    def cancel(self) -> None:
        """Nothing is in flight."""
