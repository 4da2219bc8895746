"""Pulls the brokers hold at the end of each queue until a message arrives (RocketMQ's long polling: the suspend
flag, PullRequestHoldService), so that the stream driver learns which queues moved without asking every queue on
a clock. A hold is mostly a doorbell: only a master's answer that a message just ended tells the queue's end; a
queue whose hold ends any other way (an older answer, a failure) is handed back to be asked its offsets
(docs/DESIGN.md §10's rules live with that asking, in QueueWatch)."""
from __future__ import annotations

import collections
import time
from typing import Iterable

from rmq_spark.client.errors import RETRYABLE, RocketMQError
from rmq_spark.client.model import MessageQueue
from rmq_spark.compiled import PullStatus

# How long a broker holds each pull: an idle queue costs one request per hold. RocketMQ's push consumer holds
# 15 s; 30 s keeps 1,000 idle queues at ~33 requests/s.
HOLD_MS = 30_000
# How old the end offset a hold's answer tells may be to stand for the queue's end now: a query that waits for
# messages asks every ~10 ms; under a steady flow the answer came right after the last batch was planned.
FRESH_S = 0.02


class HeldPulls:
    """One held pull per queue at the offset it was armed with. ``rung()`` takes the queues whose hold ended since
    it was last asked; a hold that ended quietly (nothing came before it timed out) is armed again instead."""

    def __init__(self, client, group: str, hold_ms: int = HOLD_MS) -> None:
        self._client, self._group, self._hold_ms = client, group, hold_ms
        self._held: dict[MessageQueue, tuple[int, object]] = {}  # queue -> (offset, call)
        # (queue, call, when it ended), appended by the calls' threads
        self._ended: collections.deque = collections.deque()
        self._refused: set[MessageQueue] = set()  # a hold failed for a reason waiting will not cure: never again

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, mq: MessageQueue) -> bool:
        return mq in self._held

    def arm(self, mq: MessageQueue, offset: int) -> None:
        """Hold a pull of ``mq`` at ``offset`` unless one is held there already; one held elsewhere is dropped. A
        broker that cannot take it now, or that refused a hold of the queue before, leaves the queue unheld (its
        offsets are asked on the clock instead)."""
        if mq in self._refused:
            return
        held = self._held.get(mq)
        if held is not None:
            if held[0] == offset:
                return
            self._drop(mq)
        try:
            call = self._client.hold_async(mq, offset, group=self._group, hold_ms=self._hold_ms)
        except RocketMQError as e:
            self._note_failure(mq, e)
            return
        self._held[mq] = (offset, call)
        call.add_done_callback(lambda: self._ended.append((mq, call, time.monotonic())))

    def rung(self) -> dict[MessageQueue, int | None]:
        """The queues whose hold ended since the last call because a message came, with the end offset the master
        answered with if that was in the last FRESH_S (its hold is armed again there), or None where the end now is
        not known: an older answer (messages keep coming: the end has moved on since), an answer that did not say,
        an offset that is no longer the queue's end, or a failed hold (its broker is away, or refused it). Those
        are no longer held: ask their offsets."""
        moved: dict[MessageQueue, int | None] = {}
        now = time.monotonic()
        while self._ended:
            mq, call, ended_at = self._ended.popleft()
            held = self._held.get(mq)
            if held is None or held[1] is not call:
                continue  # dropped, re-armed, or told twice
            offset = held[0]
            del self._held[mq]
            try:
                result = call.result()
            except RocketMQError as e:
                self._note_failure(mq, e)
                moved[mq] = None
                continue
            if result.status is PullStatus.NO_NEW_MSG and result.next_begin_offset == offset \
                    and result.max_offset in (-1, offset):  # -1: the transport does not report it
                self.arm(mq, offset)  # quiet: nothing came before the hold timed out
            elif result.status is PullStatus.FOUND and result.max_offset > offset and now - ended_at <= FRESH_S:
                moved[mq] = result.max_offset
                self.arm(mq, result.max_offset)
            else:
                moved[mq] = None
        return moved

    def keep(self, queues: Iterable[MessageQueue]) -> None:
        """Drop the holds of queues not in ``queues`` (their topic or broker left the routes)."""
        keep = set(queues)
        for mq in [mq for mq in self._held if mq not in keep]:
            self._drop(mq)

    def close(self) -> None:
        for mq in list(self._held):
            self._drop(mq)

    def _note_failure(self, mq: MessageQueue, e: RocketMQError) -> None:
        if not isinstance(e, RETRYABLE):
            self._refused.add(mq)

    def _drop(self, mq: MessageQueue) -> None:
        _offset, call = self._held.pop(mq)
        call.cancel()
