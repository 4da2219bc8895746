"""The first offset stored at or after a time, found around a 4.x broker's nearest answer (client/time_search.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmq_spark.client.model import MessageQueue
from rmq_spark.client.time_search import first_stored_at_or_after

MQ = MessageQueue("T", "broker-a", 0)


class Stored:
    """A queue's store times from offset ``first``; ``read_range`` as the client's, counting the messages read."""

    def __init__(self, times: list[int], first: int = 0) -> None:
        self.times, self.first, self.read = times, first, 0

    @property
    def end(self) -> int:
        return self.first + len(self.times)

    def read_range(self, mq, start, end, fail_on_data_loss=True, retry_timeout=0.0):
        for offset in range(max(start, self.first), end):
            self.read += 1
            yield SimpleNamespace(queue_offset=offset, store_timestamp=self.times[offset - self.first])

    def answer(self, timestamp: int) -> int:
        return next((self.first + i for i, t in enumerate(self.times) if t >= timestamp), self.end)


# 200 messages stored in the same millisecond, as one batch send stores them, between older and newer ones
TIMES = [10, 20, 30] + [40] * 200 + [50, 60]


@pytest.mark.parametrize("timestamp", [0, 10, 15, 20, 35, 40, 41, 50, 55, 60, 61, 10_000])
@pytest.mark.parametrize("near", [0, 1, 2, 3, 100, 202, 203, 204, 205])
def test_any_nearby_answer_leads_to_the_first_message_stored_at_or_after_the_time(timestamp, near):
    queue = Stored(TIMES, first=7)
    assert first_stored_at_or_after(queue, MQ, timestamp, queue.first + near, queue.first, queue.end) == queue.answer(
        timestamp
    )


def test_the_messages_read_grow_with_the_distance_not_the_queue():
    queue = Stored(list(range(100_000)))
    assert first_stored_at_or_after(queue, MQ, 50_000, 50_001, 0, queue.end) == 50_000
    assert queue.read < 100


def test_an_empty_queue_and_a_time_past_every_message_give_the_end():
    assert first_stored_at_or_after(Stored([], first=5), MQ, 1, 0, 5, 5) == 5
    queue = Stored([1, 2, 3])
    assert first_stored_at_or_after(queue, MQ, 4, 2, 0, 3) == 3  # 4.x answers the last message here
