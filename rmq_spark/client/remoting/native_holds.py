"""Held pulls over plain TCP, kept in the compiled core: one hold line per master (``HoldLine``) carries the holds
of all its queues, judges each answer and holds the queue again where a quiet end or a master's new end tells,
without Python: a thread of the line's own writes the holds due and reads their answers POLL_S apart. Python sees
the holds that ended (``ended()``, which reads what came at once)."""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING

from rmq_spark.client.errors import ConnectionLostError, RocketMQError
from rmq_spark.client.holds import ARM_ROUND_S, EndedHold, Holds
from rmq_spark.client.model import MessageQueue, PullResult
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.connection import pipe_failure
from rmq_spark.client.remoting.frame import command_of, request_template
from rmq_spark.compiled import CoreError, HoldEnd, HoldLine

if TYPE_CHECKING:
    from rmq_spark.client.remoting.client import RemotingClient

# How often a line's thread writes the holds due and reads what came.
POLL_S = 0.1


class NativeHolds(Holds):
    """The holds of one consumer group over hold lines of its own (opened on first use, again after one closed).
    Each queue is held on its master's line under a key of its own."""

    def __init__(self, client: RemotingClient, group: str, hold_ms: int) -> None:
        self._client, self._group, self._hold_ms = client, group, hold_ms
        self._timeout = req.hold_timeout(client.request_timeout, hold_ms)
        self._lines: dict[str, HoldLine] = {}
        self._retired: list[tuple[str, HoldLine]] = []  # closed lines replaced before their ends were told
        self._held: dict[MessageQueue, tuple[str, HoldLine]] = {}  # the address and line each queue is held on
        self._keys: dict[MessageQueue, int] = {}
        self._queues: dict[int, MessageQueue] = {}
        self._next_key = itertools.count(1)
        self._closed = False

    def hold(self, mq: MessageQueue, offset: int) -> None:
        client = self._client
        self.drop(mq)
        key = self._key(mq)
        address = client.master_address(mq)
        try:
            line = self._line(address)
            wire_group, wire_queue = client._wire(self._group, mq)
            template = request_template(
                req.pull_request(wire_queue, wire_group, offset, 1, suspend_ms=self._hold_ms), ("queueOffset",)
            )
            line.hold(key, template, offset)
        except CoreError as e:
            error = pipe_failure(e, address, codes.PULL_MESSAGE)
            if isinstance(error, ConnectionLostError):
                client.reroute(mq.topic, error)
            raise error from None
        except ConnectionLostError:
            client.invalidate_route(mq.topic)
            raise
        self._held[mq] = (address, line)

    def _key(self, mq: MessageQueue) -> int:
        key = self._keys.get(mq)
        if key is None:
            key = self._keys[mq] = next(self._next_key)
            self._queues[key] = mq
        return key

    def _line(self, address: str) -> HoldLine:
        """The open line to ``address``, opened now if there is none (ConnectionLostError when it cannot be)."""
        line = self._lines.get(address)
        if line is not None and not line.closed:
            return line
        if self._closed:
            raise ConnectionLostError(f"the client's connection to {address} was closed")
        fresh = self._client._pool.hold_line(
            address,
            hold_timeout=self._timeout,
            round_s=ARM_ROUND_S,
            poll_s=POLL_S,
            send_timeout=self._client.request_timeout,
        )
        if line is not None:
            self._retired.append((address, line))
        self._lines[address] = fresh
        return fresh

    def drop(self, mq: MessageQueue) -> None:
        held = self._held.pop(mq, None)
        if held is not None:
            held[1].drop(self._keys[mq])

    def ended(self) -> list[EndedHold]:
        now = time.monotonic()
        lines = [*self._lines.items(), *self._retired]
        self._retired.clear()
        out = []
        for address, line in lines:
            for end in line.take(now, self._client.request_timeout):
                mq = self._queues[end.key]
                held = self._held.get(mq)
                if held is None or held[1] is not line:
                    continue  # dropped, or held anew on another line
                if end.next_offset is not None:
                    out.append(EndedHold(mq, end.offset, end.armed_at, end.ended_at, end.next_offset))
                    continue
                del self._held[mq]
                out.append(EndedHold(mq, end.offset, end.armed_at, end.ended_at, None, self._outcome(mq, address, end)))
        return out

    def _outcome(self, mq: MessageQueue, address: str, end: HoldEnd) -> PullResult | RocketMQError:
        """What ended a hold that is not held again: the answer's PullResult, or the error it or the line's failure
        means (a lost line or a broker that no longer leads the queue has the route looked up again)."""
        try:
            if end.frame is None:
                assert end.failure is not None, "a hold not held again ends with its answer or a failure"
                raise pipe_failure(end.failure, address, codes.PULL_MESSAGE)
            return req.pull_result(command_of(end.frame), mq, address, end.offset, messages=False)
        except RocketMQError as e:
            if isinstance(e, ConnectionLostError):
                self._client.reroute(mq.topic, e)
            return e

    def close(self) -> None:
        self._closed = True
        for line in [*self._lines.values(), *(line for _, line in self._retired)]:
            line.close()
        self._lines.clear()
        self._retired.clear()
        self._held.clear()
