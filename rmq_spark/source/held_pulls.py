"""The stream driver's rules for its held pulls (docs/DESIGN.md §10): one pull per queue held at the end of the
queue until a message arrives (RocketMQ's long polling: the suspend flag, PullRequestHoldService), so that the
driver learns which queues moved without asking every queue on a clock. A hold is mostly a doorbell: only a
master's answer that a message just ended tells the queue's end. The transport holds a queue again where a quiet
end or such an answer tells (``rmq_spark.client.holds``), so Spark's thread only reads what the holds learned; a
queue whose hold ends any other way (a failure, an answer that does not tell the end) or whose answer is older than
it may stand for is handed back to be asked its offsets (the rules of that asking live in QueueWatch)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RETRYABLE, RocketMQError, UnsupportedError
from rmq_spark.client.holds import EndedHold, Holds
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.outages import RETRY_DOWN_S

# How long a broker holds each pull: an idle queue costs one request per hold. RocketMQ's push consumer holds
# 15 s; 30 s keeps 1,000 idle queues at ~33 requests/s.
HOLD_MS = 30_000
# How old the end offset a hold's answer tells may be to stand for the queue's end now: a query that waits for
# messages asks every ~10 ms; under a steady flow the answer came right after the last batch was planned. An answer
# that ended a hold held longer than that stands for as long as the hold waited (``stands``).
FRESH_S = 0.02
# A queue whose hold the broker refused (no permission, a group or topic it does not know yet) is held again after
# this long, the wait doubling at each refusal up to REFUSED_RETRY_MAX_S; its offsets are asked on the clock
# meanwhile.
REFUSED_RETRY_S = RETRY_DOWN_S
REFUSED_RETRY_MAX_S = 60.0


def stands(hold: EndedHold, now: float) -> bool:
    """Whether the end ``hold``'s answer told may stand for the queue's end at ``now``: the answer is a moment old,
    or younger than the time the hold waited for it (a queue quiet that long before its message is taken to be quiet
    since; a message that came meanwhile ends the hold armed at that end at once, and the next poll sees it)."""
    age = now - hold.ended_at
    return age <= FRESH_S or age <= hold.ended_at - hold.armed_at


class HeldPulls:
    """One held pull per queue at the offset it was armed with, kept by the transport (``BaseClient.holds``), which
    holds a queue again where a quiet end or a master's new end tells: ``rung()`` takes the queues whose hold ended
    since it was last asked. Used by Spark's thread alone."""

    def __init__(self, client: BaseClient, group: str, hold_ms: int = HOLD_MS) -> None:
        self._client, self._group, self._hold_ms = client, group, hold_ms
        self._holds: Holds | None = None  # the transport's, from the first hold on
        self._held: dict[MessageQueue, int] = {}  # where each queue is held
        # held queues whose last answer did not stand: not counted as held until the watch arms them at an end
        # it asked for
        self._stale: set[MessageQueue] = set()
        # a queue whose hold was refused -> (when it may be held again, the wait after the next refusal)
        self._refused: dict[MessageQueue, tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._held) - len(self._stale)

    def __contains__(self, mq: MessageQueue) -> bool:
        return mq in self._held and mq not in self._stale

    def unheld(self, queues: Iterable[MessageQueue]) -> list[MessageQueue]:
        """Those of ``queues`` not held (in order)."""
        return [mq for mq in queues if mq not in self._held or mq in self._stale]

    def arm(self, mq: MessageQueue, offset: int) -> None:
        """Hold a pull of ``mq`` at ``offset`` unless one is held there already; one held elsewhere is dropped. A
        broker that cannot take it now, or that refused a hold of the queue lately, leaves the queue unheld (its
        offsets are asked on the clock instead)."""
        refused = self._refused.get(mq)
        if refused is not None and time.monotonic() < refused[0]:
            return
        held = self._held.get(mq)
        if held is not None:
            self._stale.discard(mq)
            if held == offset:
                return
        if self._holds is None:
            self._holds = self._client.holds(self._group, self._hold_ms)
        try:
            self._holds.hold(mq, offset)
        except RocketMQError as e:
            if held is not None:
                self._forget(mq)
            self._note_failure(mq, e)
            return
        self._held[mq] = offset

    def rung(self) -> dict[MessageQueue, int | None]:
        """The queues whose hold ended since the last call because a message came, with the end offset the master
        answered with if that answer still stands (``stands``; the queue is held there), or None where the end now
        is not known: an older answer (messages keep coming: the end may have moved on since), an answer that did
        not say, an offset that is no longer the queue's end, or a failed hold (its broker is away, or refused it).
        Those no longer count as held: ask their offsets."""
        moved: dict[MessageQueue, int | None] = {}
        if self._holds is None:
            return moved
        now = time.monotonic()
        for hold in self._holds.ended():
            mq, result = hold.mq, hold.outcome
            if isinstance(result, BaseException) and not isinstance(result, RocketMQError):
                raise result
            if isinstance(result, RocketMQError):
                self._note_failure(mq, result)
            else:
                self._refused.pop(mq, None)  # the broker takes holds of the queue again
            if hold.next_offset is None:
                if not (isinstance(result, RocketMQError) and mq in moved):
                    moved[mq] = None  # (a hold that failed after it told an end takes nothing from that end)
                self._forget(mq)
                continue
            self._held[mq] = hold.next_offset
            if hold.next_offset == hold.offset:
                continue  # quiet: held again where it was
            if stands(hold, now):
                moved[mq] = hold.next_offset
                self._stale.discard(mq)
            else:
                moved[mq] = None
                self._stale.add(mq)  # still held at the end it told, for the doorbell
        return moved

    def keep(self, queues: Iterable[MessageQueue]) -> None:
        """Drop the holds (and refusals) of queues not in ``queues`` (their topic or broker left the routes)."""
        keep = set(queues)
        for mq in [mq for mq in self._held if mq not in keep]:
            assert self._holds is not None
            self._holds.drop(mq)
            self._forget(mq)
        for mq in [mq for mq in self._refused if mq not in keep]:
            del self._refused[mq]

    def close(self) -> None:
        """Drop every hold."""
        if self._holds is not None:
            self._holds.close()
        self._held.clear()
        self._stale.clear()

    def _note_failure(self, mq: MessageQueue, e: RocketMQError) -> None:
        """A failed hold: one the broker refused is not tried again for a while (never, where the transport has no
        holds); one that waiting cures (a broker away or busy) may be armed again at once."""
        if isinstance(e, RETRYABLE):
            return
        if isinstance(e, UnsupportedError):
            self._refused[mq] = (float("inf"), float("inf"))
            return
        wait = self._refused.get(mq, (0.0, REFUSED_RETRY_S))[1]
        self._refused[mq] = (time.monotonic() + wait, min(2 * wait, REFUSED_RETRY_MAX_S))

    def _forget(self, mq: MessageQueue) -> None:
        """No hold of ``mq`` any more."""
        self._stale.discard(mq)
        self._held.pop(mq, None)
