"""The consumer-group mirror off Spark's batch path: ``commit()`` hands the end Spark committed to
a thread of its own and returns; the brokers get only ends Spark handed over, the newest when commits queue up;
``stop()`` flushes what is pending within a deadline and says so in the log when it cannot; an outage is tried
again on the outage clock without a new commit."""

from __future__ import annotations

import logging
import threading
import time

from rmq_spark.client import outages
from rmq_spark.client.base import Answers
from rmq_spark.client.errors import BrokerUnavailableError
from rmq_spark.client.model import LOGIC_BROKER, MessageQueue
from rmq_spark.client.outages import OutageLog
from rmq_spark.options import parse_options
from rmq_spark.source.offset_mirror import OffsetMirror
from rmq_spark.source.offset_store import OffsetStore
from rmq_spark.source.offsets import offsets_to_json
from rmq_spark.source.stream import RocketMQStreamReader
from tests.support.waiting import wait_until

TOPIC = "T"
GROUP = "g"
Q0, Q1 = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-b", 0)


class _Masters:
    """Consumer offsets as masters keep them. An update is recorded when it is sent and answered once ``gate`` is
    open (or after ``hold`` seconds); while ``away``, the master does not answer."""

    def __init__(self, hold: float = 5.0) -> None:
        self.outages = OutageLog(logging.getLogger("test.mirror"))
        self.stored: dict[MessageQueue, int] = {}
        self.sent: list[dict[MessageQueue, int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.hold = hold
        self.away = False

    def query_consumer_offsets(self, group, mqs, partial=False) -> Answers:
        if self.away:
            return Answers({}, {m: BrokerUnavailableError("away") for m in mqs})
        return Answers({m: self.stored.get(m) for m in mqs})

    def update_consumer_offsets(self, group, offsets, partial=False) -> Answers:
        self.sent.append(dict(offsets))
        self.gate.wait(self.hold)
        if self.away:
            return Answers({}, {m: BrokerUnavailableError("away") for m in offsets})
        self.stored.update(offsets)
        return Answers({m: True for m in offsets})

    def close(self) -> None:
        pass


def _reader(masters: _Masters, **options: str) -> RocketMQStreamReader:
    reader = RocketMQStreamReader(
        parse_options(
            {
                "nameServer": "127.0.0.1:9876",
                "topic": TOPIC,
                "consumerGroup": GROUP,
                "allowSharedConsumerGroup": "true",
                **options,
            },
            streaming=True,
        )
    )
    reader._client = masters
    return reader


def _end(o0: int, o1: int) -> dict:
    return offsets_to_json({Q0: o0, Q1: o1})


def test_commit_returns_before_the_brokers_answer():
    masters = _Masters()
    masters.gate.clear()  # the masters take their time
    reader = _reader(masters)
    t0 = time.monotonic()
    reader.commit(_end(5, 7))
    took = time.monotonic() - t0
    assert took < 0.5, f"commit() waited {took:.1f} s for the brokers: the mirror is on the batch's path"
    masters.gate.set()
    wait_until(lambda: masters.stored == {Q0: 5, Q1: 7}, 5, "the committed end on the brokers")
    reader.stop()


def test_commits_that_queue_up_mirror_only_the_newest_and_nothing_beyond_it():
    masters = _Masters()
    masters.gate.clear()
    reader = _reader(masters)
    reader.commit(_end(5, 7))
    wait_until(lambda: masters.sent, 5, "the first update sent")  # and held by the masters
    reader.commit(_end(6, 8))
    reader.commit(_end(9, 8))
    masters.gate.set()
    wait_until(lambda: reader.store.settled(), 5, "the mirror to settle")
    assert masters.sent == [{Q0: 5, Q1: 7}, {Q0: 9, Q1: 8}]  # the middle end skipped
    assert masters.stored == {Q0: 9, Q1: 8}
    reader.commit(_end(10, 8))
    wait_until(lambda: reader.store.settled(), 5, "the mirror to settle")
    assert masters.sent[-1] == {Q0: 10}  # a queue that did not move is not sent again
    reader.stop()


def test_a_group_ahead_of_the_query_is_never_moved_back():
    masters = _Masters()
    masters.stored = {Q0: 20}  # another application's progress on queue 0
    reader = _reader(masters)
    reader.commit(_end(5, 7))
    wait_until(lambda: reader.store.settled(), 5, "the mirror to settle")
    assert masters.stored == {Q0: 20, Q1: 7}
    reader.stop()


def test_stop_flushes_what_is_pending():
    masters = _Masters()
    masters.gate.clear()
    reader = _reader(masters)
    reader.commit(_end(5, 7))
    wait_until(lambda: masters.sent, 5, "the first update sent")
    reader.commit(_end(6, 9))  # pending behind the update in flight
    threading.Timer(0.2, masters.gate.set).start()
    reader.stop()
    assert masters.stored == {Q0: 6, Q1: 9}


def test_stop_gives_up_at_its_deadline_and_says_so(caplog):
    masters = _Masters(hold=30.0)
    masters.gate.clear()  # a master that never answers
    reader = _reader(masters, requestTimeoutMs="100")
    reader.commit(_end(5, 7))
    wait_until(lambda: masters.sent, 5, "the first update sent")
    reader.commit(_end(6, 9))
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, "rmq_spark.source.offset_mirror"):
        reader.stop()
    took = time.monotonic() - t0
    masters.gate.set()
    assert took < 2, f"stop() waited {took:.1f} s for a master that does not answer"
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "consumer group 'g'" in text and "2 queue(s)" in text and "not mirrored" in text, text


def test_an_outage_is_mirrored_once_the_master_is_back_without_a_new_commit(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(outages.time, "monotonic", lambda: now[0])
    masters = _Masters()
    masters.away = True
    mirror = OffsetMirror(OffsetStore(masters, GROUP), flush_timeout=1.0, retry_every=0.02)
    mirror.submit({Q0: 5, Q1: 7})
    wait_until(lambda: masters.sent or masters.away is False, 5, "a first try")
    time.sleep(0.2)  # tries again every 0.02 s, but the outage clock has not moved: the master is not asked again
    asked = len(masters.sent)
    assert asked <= 1 and not mirror.settled()
    masters.away = False
    now[0] += outages.RETRY_DOWN_S
    wait_until(mirror.settled, 5, "the mirror once the master is back")
    assert masters.stored == {Q0: 5, Q1: 7}
    assert mirror.close()


def test_flush_waits_for_the_end_handed_over_and_no_longer():
    """latestOffset with nothing to read flushes: an AvailableNow run ends there, often without stop(), so the last
    committed end must be on the brokers by then."""
    masters = _Masters()
    masters.gate.clear()
    reader = _reader(masters)
    reader.commit(_end(5, 7))
    mirror = reader.store
    assert mirror is not None
    assert not mirror.flush(0.2)  # the masters have not answered
    threading.Timer(0.2, masters.gate.set).start()
    assert mirror.flush(5)
    assert masters.stored == {Q0: 5, Q1: 7}
    t0 = time.monotonic()
    assert mirror.flush(5) and time.monotonic() - t0 < 0.1  # nothing handed over since: at once
    reader.stop()


def test_flush_does_not_wait_for_a_master_that_is_away():
    masters = _Masters()
    masters.away = True
    reader = _reader(masters)
    reader.commit(_end(5, 7))
    mirror = reader.store
    assert mirror is not None
    t0 = time.monotonic()
    assert mirror.flush(5) and time.monotonic() - t0 < 2  # sent once and found away: pending for the retries
    assert not mirror.settled()
    reader.stop()


def test_a_topics_first_offset_on_a_broker_is_stored_alone_before_the_others_there():
    """A broker makes a group's offset table of a topic with a get and a put: two first updates of one table at once
    could keep only one (the real brokers: tests/integration/test_consumer_group.py)."""
    masters = _Masters()
    a0, a1, a2 = (MessageQueue(TOPIC, "broker-a", i) for i in range(3))
    b0, other = MessageQueue(TOPIC, "broker-b", 0), MessageQueue("U", "broker-a", 0)
    store = OffsetStore(masters, GROUP)
    store.update_all({a0: 1, a1: 2, b0: 3, other: 4, a2: 5})
    assert store.persist_all()
    assert masters.sent == [{a0: 1, b0: 3, other: 4}, {a1: 2, a2: 5}]
    store.update_all({a0: 6, a1: 7, b0: 8})
    assert store.persist_all()
    assert masters.sent[-1] == {a0: 6, a1: 7, b0: 8}  # their tables are made: all at once


def test_a_static_topics_logic_queues_never_stored_go_one_at_a_time():
    """A logic queue's offset goes into its leader's table, which the store does not know."""
    masters = _Masters()
    l0, l1, l2 = (MessageQueue("S", LOGIC_BROKER, i) for i in range(3))
    other, a0 = MessageQueue("S2", LOGIC_BROKER, 0), MessageQueue(TOPIC, "broker-a", 0)
    store = OffsetStore(masters, GROUP)
    store.update_all({l0: 1, l1: 2, a0: 3, l2: 4, other: 5})
    assert store.persist_all()
    assert masters.sent == [{l0: 1, a0: 3, other: 5}, {l1: 2}, {l2: 4}]
    store.update_all({l0: 6, l1: 7, l2: 8})
    assert store.persist_all()
    assert masters.sent[-1] == {l0: 6, l1: 7, l2: 8}


def test_a_table_whose_first_offset_failed_takes_no_other_until_it_is_stored():
    masters = _Masters()
    a0, a1 = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)
    masters.away = True
    store = OffsetStore(masters, GROUP)
    store.update_all({a0: 1, a1: 2})
    assert not store.persist_all()
    assert masters.sent == [{a0: 1}] and store.unstored() == {a0: 1, a1: 2}
