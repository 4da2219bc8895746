"""Polled lines (the held pulls' connections) against a scripted local socket peer: answers end their requests when
a line is polled (by its polling thread in rounds, or at once by ``poll()``), not on a reader thread of their own;
late requests, a broken line and a burst behave as on the shared connections.

The peer speaks only framing; the held pulls on the real broker are the integration tests'."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

import rmq_spark.client.remoting.polled_lines as polled_lines
from rmq_spark.client.errors import ConnectionLostError, RequestTimeoutError
from rmq_spark.client.remoting.connection import ConnectionPool, burst
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.client.remoting.polled_lines import PolledLines
from tests.support.loopback_peer import read_request
from tests.unit.test_connection import answer_two_out_of_order, respond


def _lines() -> PolledLines:
    return PolledLines(ConnectionPool().dial)


def _ended_on(call) -> threading.Event:
    """An event set once ``call`` ended, and the name of the thread it ended on (``.thread``)."""
    ended = threading.Event()

    def note() -> None:
        ended.thread = threading.current_thread().name  # type: ignore[attr-defined]
        ended.set()

    call.add_done_callback(note)
    return ended


def test_answers_end_their_requests_on_the_polling_thread_not_on_a_reader_of_the_connection(peer_factory):
    peer = peer_factory(answer_two_out_of_order)
    lines = _lines()
    threads_before = set(threading.enumerate())
    a = lines.send(peer.address, RemotingCommand(code=30), timeout=5)
    b = lines.send(peer.address, RemotingCommand(code=31), timeout=5)
    ended = [_ended_on(a), _ended_on(b)]
    assert all(e.wait(5) for e in ended)
    assert [e.thread for e in ended] == ["rmq-polled", "rmq-polled"]  # type: ignore[attr-defined]
    assert (a.result().remark, b.result().remark) == ("first", "second")
    ours = {t.name for t in set(threading.enumerate()) - threads_before if t.name.startswith("rmq-")}
    assert ours == {"rmq-polled"}, f"threads started for the line: {ours}"
    lines.close()


def _answered_between_rounds(peer_factory, monkeypatch):
    """Polled lines whose polling thread's round never comes in the test, and a request on them the peer answered."""
    monkeypatch.setattr(polled_lines, "POLL_S", 30.0)
    answered = threading.Event()

    def script(sock):
        respond(sock, read_request(sock), remark="here")
        answered.set()
        time.sleep(1.0)

    lines = _lines()
    call = lines.send(peer_factory(script).address, RemotingCommand(code=30), timeout=5)
    assert answered.wait(5)
    return lines, call


def test_poll_ends_at_once_what_came_between_the_rounds(peer_factory, monkeypatch):
    lines, call = _answered_between_rounds(peer_factory, monkeypatch)
    deadline = time.monotonic() + 5
    while not call.done():
        assert time.monotonic() < deadline, "poll() did not end the answered request"
        lines.poll()
        time.sleep(0.01)
    assert call.result().remark == "here"
    lines.close()


def test_an_answer_read_a_round_late_is_dated_no_later_than_the_read_before(peer_factory, monkeypatch):
    """What a held answer told is as old as the answer: the line dates it by its read before the one that found it
    (it came after that), not by the read that found it."""
    lines, call = _answered_between_rounds(peer_factory, monkeypatch)
    time.sleep(0.3)
    lines.poll()
    assert call.done() and call.sent_at <= call.ended_at < time.monotonic() - 0.25
    lines.close()


def test_a_request_past_its_deadline_on_a_silent_line_fails_and_the_line_is_replaced(peer_factory):
    connections = itertools.count(1)

    def script(sock):
        if next(connections) == 1:
            time.sleep(3.0)  # silent
        else:
            respond(sock, read_request(sock), remark="answered")
            time.sleep(1.0)

    peer = peer_factory(script)
    lines = _lines()
    call = lines.send(peer.address, RemotingCommand(code=30), timeout=0.2)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match=r"code 30 to 127\.0\.0\.1:\d+"):
        call.result()
    assert time.monotonic() - started < 3.0
    again = lines.send(peer.address, RemotingCommand(code=31), timeout=5)  # a new connection
    assert again.result().remark == "answered" and peer.accepted == 2
    lines.close()


def test_a_line_the_server_closes_fails_its_requests_and_the_next_request_dials_anew(peer_factory):
    connections = itertools.count(1)

    def script(sock):
        request = read_request(sock)
        if next(connections) == 1:
            return  # closes the connection without an answer
        respond(sock, request, remark="again")
        time.sleep(1.0)

    peer = peer_factory(script)
    lines = _lines()
    call = lines.send(peer.address, RemotingCommand(code=30), timeout=5)
    with pytest.raises(ConnectionLostError, match="closed by the server"):
        call.result()
    assert lines.send(peer.address, RemotingCommand(code=31), timeout=5).result().remark == "again"
    assert peer.accepted == 2
    lines.close()


def test_the_answer_to_a_cancelled_request_ends_nothing(peer_factory):
    def script(sock):
        first, second = read_request(sock), read_request(sock)
        respond(sock, first, remark="dropped")
        respond(sock, second, remark="kept")
        time.sleep(1.0)

    lines = _lines()
    peer = peer_factory(script)
    cancelled = lines.send(peer.address, RemotingCommand(code=30), timeout=5)
    cancelled.cancel()
    kept = lines.send(peer.address, RemotingCommand(code=31), timeout=5)
    assert kept.result().remark == "kept"
    lines.poll()
    assert not cancelled.done()
    lines.close()


def test_the_requests_of_a_burst_go_out_in_one_write_when_it_ends(peer_factory):
    def script(sock):
        for _ in range(3):
            request = read_request(sock)
            respond(sock, request, remark=str(request.code))
        time.sleep(1.0)

    lines = _lines()
    peer = peer_factory(script)
    lines.send(peer.address, RemotingCommand(code=29), timeout=5).result()  # the line is open
    line = lines._lines[peer.address]
    writes: list[list[int]] = []
    line.conn.pipe = _CountedPipe(line.conn.pipe, writes)
    with burst():
        calls = [lines.send(peer.address, RemotingCommand(code=code), timeout=5) for code in (30, 31)]
        assert writes == []
    assert writes == [[call.opaque for call in calls]]
    assert [call.result().remark for call in calls] == ["30", "31"]
    lines.close()


class _CountedPipe:
    """A pipe whose writes are noted (the rest is the pipe's)."""

    def __init__(self, pipe, writes: list[list[int]]) -> None:
        self._pipe, self._writes = pipe, writes

    def send_frames(self, frames: bytes, opaques: list[int], timeout: float) -> None:
        self._writes.append(opaques)
        self._pipe.send_frames(frames, opaques, timeout)

    def __getattr__(self, name):
        return getattr(self._pipe, name)


def test_closing_the_lines_fails_what_is_out_and_refuses_more(peer_factory):
    lines = _lines()
    peer = peer_factory(lambda sock: time.sleep(1.0))
    call = lines.send(peer.address, RemotingCommand(code=30), timeout=5)
    lines.close()
    with pytest.raises(ConnectionLostError, match="closed"):
        call.result()
    with pytest.raises(ConnectionLostError, match="closed"):
        lines.send(peer.address, RemotingCommand(code=31), timeout=5)
