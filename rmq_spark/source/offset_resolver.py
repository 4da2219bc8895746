"""Offset specs resolved against the brokers: the starting and ending offsets of a batch query, a stream's initial
offsets and the starts of queues that enter it later, as an offset per queue, each broker asked concurrently. The
end offsets a running stream reads to are the queue watch's (``queue_watch.py``), not this module's."""

from __future__ import annotations

from collections.abc import Mapping

from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.model import Boundary, MessageQueue
from rmq_spark.option_values import OptionError
from rmq_spark.source.offset_specs import ByTimestamp, Committed, Edge, OffsetSpec, SpecificOffsets, assert_never


def _merge(*parts: Answers) -> Answers:
    out = Answers()
    for p in parts:
        out = out.merge(p)
    return out


class OffsetResolver:
    """Turns an offset spec into an offset per queue of those asked for (queues it names besides are not its
    concern: ``check_named``), asking each broker concurrently. With ``partial``, queues whose broker cannot answer
    now are left out (in ``Answers.failed``) instead of failing the call."""

    def __init__(self, client: BaseClient, *, partial: bool = False) -> None:
        self.client = client
        self.partial = partial

    def resolve(self, spec: OffsetSpec, queues: list[MessageQueue]) -> Answers:
        if not queues:
            return Answers()
        match spec:
            case Edge.EARLIEST:
                return self.client.min_offsets(queues, partial=self.partial)
            case Edge.LATEST:
                return self.client.max_offsets(queues, partial=self.partial)
            case Committed():
                return self._committed(spec, queues)
            case SpecificOffsets():
                chosen = {mq: spec.offsets.get(mq, spec.default) for mq in queues}
                return _merge(
                    Answers({mq: o for mq, o in chosen.items() if o >= 0}),
                    *(self.resolve(edge, [mq for mq, o in chosen.items() if o == edge]) for edge in Edge),
                )
            case ByTimestamp():
                return self._by_timestamp(spec, queues)
            case _:
                assert_never(spec)

    def _by_timestamp(self, spec: ByTimestamp, queues: list[MessageQueue]) -> Answers:
        per_queue = spec.per_queue if spec.per_queue is not None else {mq: spec.timestamp for mq in queues}
        by_ts: dict[int, list[MessageQueue]] = {}
        for mq in queues:
            ts = per_queue.get(mq)
            if ts is not None:
                by_ts.setdefault(ts, []).append(mq)
        rest = [mq for mq in queues if mq not in per_queue]
        found = _merge(
            *(self.client.search_offsets(mqs, ts, Boundary.LOWER, partial=self.partial) for ts, mqs in by_ts.items())
        )
        if spec.strict:
            self._check_found(spec, found, per_queue)
        return _merge(found, self.resolve(spec.default, rest))

    def _check_found(self, spec: ByTimestamp, found: Answers, times: Mapping[MessageQueue, int | None]) -> None:
        """OptionError naming the queues with no message stored at or after their time (the search answered
        their end), as Spark's Kafka source fails under startingOffsetsByTimestampStrategy=error."""
        ends = self.client.max_offsets(list(found), partial=self.partial)
        past = sorted(mq for mq, end in ends.items() if found[mq] >= end)
        if past:
            raise OptionError(
                f"option {spec.option}: no message is stored at or after the time in "
                + ", ".join(f"{mq} (time {times[mq]})" for mq in past[:10])
                + (" ..." if len(past) > 10 else "")
                + "; set startingOffsetsByTimestampStrategy=latest to start such queues at their end, or choose "
                "an earlier time"
            )

    def _committed(self, spec: Committed, queues: list[MessageQueue]) -> Answers:
        stored = self.client.query_consumer_offsets(spec.group, queues, partial=self.partial)
        missing = [mq for mq, off in stored.items() if off is None or off < 0]
        if missing and spec.fallback is None:
            raise OptionError(
                f"consumer group {spec.group!r} has no committed offset for "
                + ", ".join(str(mq) for mq in missing[:10])
                + (" ..." if len(missing) > 10 else "")
                + "; set startingOffsetsFallback to earliest or latest to start those queues there"
            )
        found = Answers({mq: off for mq, off in stored.items() if off is not None and off >= 0}, stored.failed)
        if spec.fallback is None:  # (so no queue is missing)
            return found
        return _merge(found, self.resolve(spec.fallback, missing))
