"""Connection behaviour (pipelining, timeouts, broken and malformed streams) against a scripted local socket peer:
the shared connection (a reader thread) and, where they promise the same, the direct one (the compiled core's pipe).

The peer speaks only framing; RocketMQ compatibility is shown by the integration tests on the real broker.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from rmq_spark.client.errors import ConnectionLostError, ProtocolError, RequestTimeoutError
from rmq_spark.client.model import HalfMessage, MessageQueue
from rmq_spark.client.remoting.client import DirectSends
from rmq_spark.client.remoting.connection import Connection, ConnectionPool, DirectConnection, burst, next_opaque
from rmq_spark.client.remoting.frame import RemotingCommand, encode_command
from rmq_spark.client.tls import TlsConfig
from tests.conftest import record_error
from tests.support.loopback_peer import read_request


def respond(sock, request: RemotingCommand, **fields) -> None:
    sock.sendall(encode_command(RemotingCommand(code=0, opaque=request.opaque, flag=1, **fields)))


def truncating_script(body: bytes):
    """A peer that answers code 99 with a truncated frame and closes, and anything else with remark "fine"."""

    def script(sock):
        request = read_request(sock)
        if request.code == 99:
            frame = encode_command(RemotingCommand(code=0, opaque=request.opaque, flag=1, body=b"x" * 100))
            sock.sendall(frame[:30])  # truncated
            return
        respond(sock, request, remark="fine", body=body)

    return script


BOTH = pytest.mark.parametrize("kind", [Connection, DirectConnection], ids=["shared", "direct"])


def answer_two_out_of_order(sock) -> None:
    """A peer's script: two requests read, answered in the other order ("second" first), the connection kept."""
    first, second = read_request(sock), read_request(sock)
    respond(sock, second, remark="second")
    respond(sock, first, remark="first")
    time.sleep(1.0)


@BOTH
def test_pipelined_requests_are_matched_by_opaque(peer_factory, kind):
    peer = peer_factory(answer_two_out_of_order)
    conn = kind(peer.address)
    a = conn.send(RemotingCommand(code=30), timeout=5)
    b = conn.send(RemotingCommand(code=31), timeout=5)
    assert b.result().remark == "second"
    assert a.result().remark == "first"
    conn.close()


@BOTH
def test_timeout_names_the_address_and_code(peer_factory, kind):
    peer = peer_factory(lambda sock: time.sleep(3))
    conn = kind(peer.address)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match=f"code 30 to {peer.address}"):
        conn.send(RemotingCommand(code=30), timeout=0.3).result()
    assert time.monotonic() - started < 2
    conn.close()


def test_close_mid_frame_fails_pending_requests_and_pool_reopens(peer_factory):
    script = truncating_script(b"")
    peer = peer_factory(script)
    pool = ConnectionPool()
    with pytest.raises(ConnectionLostError, match="closed by the server in the middle of a frame"):
        pool.request(peer.address, RemotingCommand(code=99), timeout=5)
    assert pool.request(peer.address, RemotingCommand(code=1), timeout=5).remark == "fine"
    assert peer.accepted == 2
    pool.close()


@BOTH
@pytest.mark.parametrize("length", [0, 3, 0x7FFFFFFF, -5])
def test_impossible_frame_length_is_a_protocol_error_that_closes(peer_factory, length, kind):
    def script(sock):
        read_request(sock)
        sock.sendall(struct.pack(">i", length) + b"\x00" * 8)
        time.sleep(1)

    peer = peer_factory(script)
    conn = kind(peer.address)
    with pytest.raises(ProtocolError, match="frame of length"):
        conn.send(RemotingCommand(code=1), timeout=5).result()
    assert conn.closed
    with pytest.raises(ConnectionLostError):
        conn.send(RemotingCommand(code=1), timeout=1)


@BOTH
def test_garbage_header_is_a_protocol_error(peer_factory, kind):
    def script(sock):
        read_request(sock)
        sock.sendall(struct.pack(">ii", 12, 8) + b"not json")
        time.sleep(1)

    peer = peer_factory(script)
    conn = kind(peer.address)
    with pytest.raises(ProtocolError, match="not valid JSON"):
        conn.send(RemotingCommand(code=1), timeout=5).result()


@BOTH
def test_connection_refused_is_clear(kind):
    with pytest.raises(ConnectionLostError, match="cannot connect to 127.0.0.1:1: .*server is running"):
        kind("127.0.0.1:1", connect_timeout=2)


def test_many_threads_share_one_connection(peer_factory):
    def script(sock):
        while True:
            request = read_request(sock)
            respond(sock, request, remark=request.ext_fields["n"])

    peer = peer_factory(script)
    pool = ConnectionPool()
    results, errors = [], []

    def worker(k):
        try:
            for i in range(50):
                n = f"{k}-{i}"
                results.append(pool.request(peer.address, RemotingCommand(code=1, ext_fields={"n": n}), 5).remark == n)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(results) == 400 and all(results)
    assert peer.accepted == 1
    pool.close()


def test_a_peer_that_never_reads_cannot_block_senders(peer_factory):
    peer = peer_factory(lambda sock: time.sleep(30))  # accepts, never reads: the socket buffers fill up
    conn = Connection(peer.address)
    body = b"x" * (32 << 20)
    outcomes = []

    def send():
        try:
            conn.request(RemotingCommand(code=30, body=body), timeout=1.0)
        except (ConnectionLostError, RequestTimeoutError) as e:
            outcomes.append(e)

    senders = [threading.Thread(target=send) for _ in range(2)]
    for t in senders:
        t.start()
    for t in senders:
        t.join(30)
    assert not any(t.is_alive() for t in senders), "a send did not honour its deadline"
    assert len(outcomes) == 2 and any("does not read" in str(e) for e in outcomes), outcomes
    assert conn.closed


def test_a_silent_connection_is_closed_and_replaced(peer_factory):
    peer = peer_factory(lambda sock: (read_request(sock), time.sleep(5)))  # reads, never answers
    pool = ConnectionPool()
    first = pool.get(peer.address)
    with pytest.raises(RequestTimeoutError):
        pool.request(peer.address, RemotingCommand(code=30), timeout=0.3)
    assert first.closed  # nothing at all came back: half-open or stuck
    assert pool.get(peer.address) is not first
    pool.close()


def test_a_slow_answer_on_a_live_connection_keeps_it(peer_factory):
    def script(sock):
        slow, fast = read_request(sock), read_request(sock)
        respond(sock, fast)  # the connection is alive ...
        time.sleep(1)
        respond(sock, slow)  # ... but this one is late
        time.sleep(2)

    peer = peer_factory(script)
    conn = Connection(peer.address)
    slow = conn.send(RemotingCommand(code=30), timeout=0.5)
    conn.request(RemotingCommand(code=31), timeout=5)
    with pytest.raises(RequestTimeoutError):
        slow.result()
    assert not conn.closed
    conn.close()


def test_abandoned_requests_are_dropped(peer_factory):
    peer = peer_factory(lambda sock: (read_request(sock), time.sleep(5)))
    conn = Connection(peer.address)
    abandoned = conn.send(RemotingCommand(code=30), timeout=0.2)  # nobody calls result()
    deadline = time.monotonic() + 10
    while conn._pending and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not conn._pending and abandoned.done()
    with pytest.raises(RequestTimeoutError):
        abandoned.result()
    conn.close()


def test_an_abandoned_request_expires_on_a_clock_also_on_a_busy_connection(peer_factory):
    def script(sock):
        read_request(sock)  # the held pull: never answered
        while True:
            respond(sock, read_request(sock))

    peer = peer_factory(script)
    conn = Connection(peer.address)
    ended = threading.Event()
    held = conn.send(RemotingCommand(code=11), timeout=0.2)  # nobody calls result(): a held pull's doorbell
    held.add_done_callback(ended.set)
    deadline = time.monotonic() + 10  # expiry is due about 2 s in; a loaded machine may take longer
    while not ended.is_set() and time.monotonic() < deadline:
        conn.request(RemotingCommand(code=30), timeout=5)  # traffic all the time: the reader never idles a tick
        time.sleep(0.05)
    assert ended.is_set(), "a request nobody waits for was never expired while other answers kept coming"
    with pytest.raises(RequestTimeoutError):
        held.result()
    assert not conn.closed
    conn.close()


def test_request_ids_wrap_within_int32(peer_factory, monkeypatch):
    import itertools

    from rmq_spark.client.remoting import connection

    def script(sock):
        while True:
            request = read_request(sock)
            respond(sock, request, remark=str(request.opaque))

    peer = peer_factory(script)
    monkeypatch.setattr(connection, "_opaques", itertools.count(2**31 - 3))
    conn = Connection(peer.address)
    seen = [int(conn.request(RemotingCommand(code=30), timeout=5).remark) for _ in range(5)]
    assert seen == [2**31 - 3, 2**31 - 2, 2**31 - 1, 1, 2]
    conn.close()


def test_a_failing_reader_fails_every_pending_request(peer_factory, monkeypatch):
    from rmq_spark.client.remoting import connection

    def script(sock):
        respond(sock, read_request(sock))
        time.sleep(2)

    peer = peer_factory(script)

    def broken(buf):
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(connection, "decode_frame", broken)
    conn = Connection(peer.address)
    with pytest.raises(ConnectionLostError, match="reader of the connection .* failed: RuntimeError"):
        conn.request(RemotingCommand(code=30), timeout=5)
    assert conn.closed


def test_one_slow_connect_does_not_hold_up_other_addresses(peer_factory):
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(0)  # never accepts: once its queue is full, connects hang until their timeout
    address = f"127.0.0.1:{blackhole.getsockname()[1]}"
    fillers = []
    for _ in range(8):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(blackhole.getsockname())
        fillers.append(s)
    healthy = peer_factory(lambda sock: respond(sock, read_request(sock)))
    pool = ConnectionPool(connect_timeout=5)
    errors: list[BaseException] = []
    stuck = threading.Thread(target=record_error(errors, pool.get, address))
    stuck.start()
    time.sleep(0.2)
    assert stuck.is_alive()  # still connecting to the blackhole ...
    assert pool.request(healthy.address, RemotingCommand(code=30), timeout=5).code == 0
    assert stuck.is_alive()  # ... while the healthy peer was served
    stuck.join(10)
    assert not stuck.is_alive() and len(errors) == 1 and isinstance(errors[0], ConnectionLostError)
    pool.close()
    for s in fillers:
        s.close()
    blackhole.close()


# -- the direct connection (one reader's own, answers read on its thread) -----------------------------------------


def test_a_direct_connection_closes_when_the_server_does_and_the_pool_dials_anew(peer_factory):
    script = truncating_script(b"y" * 300_000)
    peer = peer_factory(script)
    pool = ConnectionPool()
    first = pool.dial(peer.address)
    with pytest.raises(ConnectionLostError, match="closed by the server in the middle of a frame"):
        first.send(RemotingCommand(code=99), timeout=5).result()
    assert first.closed
    with pytest.raises(ConnectionLostError, match="closed earlier"):
        first.send(RemotingCommand(code=1), timeout=5)
    second = pool.dial(peer.address)
    answer = second.send(RemotingCommand(code=1), timeout=5).result()
    assert (answer.remark, answer.body) == ("fine", b"y" * 300_000)
    assert peer.accepted == 2
    second.close()


def test_a_late_answer_closes_a_direct_connection(peer_factory):
    peer = peer_factory(lambda sock: (read_request(sock), time.sleep(3)))  # reads, never answers
    conn = DirectConnection(peer.address)
    with pytest.raises(RequestTimeoutError, match="will be reopened"):
        conn.send(RemotingCommand(code=30), timeout=0.3).result()
    assert conn.closed  # never waited on again: the owner opens another


def test_the_answer_to_a_cancelled_request_is_dropped(peer_factory):
    def script(sock):
        first, second, third = read_request(sock), read_request(sock), read_request(sock)
        for request in (first, second, third):
            respond(sock, request, remark=str(request.code))
        time.sleep(0.5)

    peer = peer_factory(script)
    conn = DirectConnection(peer.address)
    first = conn.send(RemotingCommand(code=1), timeout=5)
    second = conn.send(RemotingCommand(code=2), timeout=5)
    third = conn.send(RemotingCommand(code=3), timeout=5)
    first.cancel()
    assert third.result().remark == "3"  # the answers before it were read; the cancelled one was not kept
    assert second.result().remark == "2"
    with pytest.raises(ConnectionLostError, match="no request .* in flight"):
        first.result()
    conn.close()


def test_a_peer_that_never_reads_cannot_block_a_direct_send(peer_factory):
    peer = peer_factory(lambda sock: time.sleep(30))  # accepts, never reads: the socket buffers fill up
    conn = DirectConnection(peer.address)
    started = time.monotonic()
    with pytest.raises(ConnectionLostError, match="does not read"):
        conn.send(RemotingCommand(code=30, body=b"x" * (32 << 20)), timeout=1.0)
    assert time.monotonic() - started < 5
    assert conn.closed


def test_a_direct_dial_honours_the_pools_cooldown():
    pool = ConnectionPool()
    with pytest.raises(ConnectionLostError, match="cannot connect"):
        pool.dial("127.0.0.1:1")
    with pytest.raises(ConnectionLostError, match="not retried for"):
        pool.dial("127.0.0.1:1")
    assert pool.recently_failed("127.0.0.1:1")


def test_range_reads_pull_over_direct_connections_unless_tls_and_natively_unless_signed():
    from rmq_spark.client.model import Credentials, MessageQueue
    from rmq_spark.client.range_reader import SharedPulls
    from rmq_spark.client.remoting.client import DirectPulls, RemotingClient

    mq = MessageQueue("T", "broker-a", 0)
    plain = RemotingClient("127.0.0.1:9876").pull_session(mq, group="g")
    assert isinstance(plain, DirectPulls) and plain.native
    signed = RemotingClient("127.0.0.1:9876", credentials=Credentials("ak", "sk")).pull_session(mq, group="g")
    assert isinstance(signed, DirectPulls) and not signed.native  # a signature covers every field: no template
    assert isinstance(RemotingClient("127.0.0.1:9876", tls=TlsConfig()).pull_session(mq, group="g"), SharedPulls)


def test_a_native_pull_is_the_request_the_command_path_sends(peer_factory):
    from rmq_spark.client.model import FilterExpression, MessageQueue
    from rmq_spark.client.remoting import broker as req
    from rmq_spark.client.remoting.frame import request_template
    from rmq_spark.compiled import MalformedError, RangeCursor, Step

    received = []

    def script(sock):
        while True:
            received.append(read_request(sock))
            # PULL_NOT_FOUND: nothing there yet, the cursor asks for a wait
            sock.sendall(
                encode_command(
                    RemotingCommand(code=19, opaque=received[-1].opaque, flag=1, ext_fields={"nextBeginOffset": "0"})
                )
            )

    peer = peer_factory(script)
    mq = MessageQueue("T", "broker-a", 3)
    kw = {"group": "g", "expression": FilterExpression("TagA || TagB")}
    template = request_template(req.pull_request(mq, offset=0, max_nums=0, **kw), ("queueOffset", "maxMsgNums"))
    conn = DirectConnection(peer.address)
    sent = [(7, 32), (2**40 + 5, 1), (0, 3)]
    for offset, count in sent:
        cursor = RangeCursor(
            str(mq),
            mq.broker_name,
            offset,
            offset + count,
            depth=1,
            slot=32,
            filtered=True,
            sparse=False,
            fail_on_data_loss=True,
            retry_timeout=5,
        )
        step = cursor.run(conn.pipe, template, None, 1, 1, 5, 0)
        assert isinstance(step, Step.Retry) and step.why.startswith(f"NO_NEW_MSG at offset {offset}"), step
    conn.close()
    assert len(received) == 3
    for got, (offset, count) in zip(received, sent, strict=True):
        whole = req.pull_request(mq, offset=offset, max_nums=count, **kw)
        whole.ext_fields["subVersion"] = got.ext_fields["subVersion"]  # a clock reading, taken once per template
        assert (got.code, got.language, got.version, got.flag, got.remark, got.body) == (
            whole.code,
            whole.language,
            whole.version,
            0,
            None,
            b"",
        )
        assert got.ext_fields == whole.ext_fields
    with pytest.raises(MalformedError, match="no field"):
        request_template(RemotingCommand(code=11, ext_fields={"a": "0"}), ("queueOffset",))


class _CountedWrites:
    """A connection's socket whose writes are counted (the rest is the socket's)."""

    def __init__(self, sock) -> None:
        self._sock, self.writes = sock, 0

    def send(self, data) -> int:
        self.writes += 1
        return self._sock.send(data)

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _answer_each(count: int):
    def script(sock):
        for request in [read_request(sock) for _ in range(count)]:
            respond(sock, request, remark=str(request.code))
        time.sleep(0.5)

    return script


def test_the_requests_of_a_burst_go_out_in_one_write_when_it_ends(peer_factory):
    conn = Connection(peer_factory(_answer_each(4)).address)
    counted = conn._sock = _CountedWrites(conn._sock)
    with burst():
        calls = [conn.send(RemotingCommand(code=code), timeout=5) for code in (30, 31, 32)]
        assert counted.writes == 0
    assert counted.writes == 1
    single = conn.send(RemotingCommand(code=33), timeout=5)  # outside a burst: written at once
    assert counted.writes == 2
    assert [c.result().remark for c in (*calls, single)] == ["30", "31", "32", "33"]
    conn.close()


def test_a_burst_that_raises_still_sends_what_it_asked(peer_factory):
    conn = Connection(peer_factory(_answer_each(1)).address)
    with pytest.raises(KeyError), burst():
        call = conn.send(RemotingCommand(code=30), timeout=5)
        raise KeyError("a caller's defect")
    assert call.result().remark == "30"
    conn.close()


def test_a_burst_to_a_closed_connection_fails_its_requests_at_its_end(peer_factory):
    conn = Connection(peer_factory(lambda sock: time.sleep(0.5)).address)
    with burst():
        call = conn.send(RemotingCommand(code=30), timeout=5)
        conn.close()
    with pytest.raises(ConnectionLostError):
        call.result()


def test_a_request_waited_for_inside_a_burst_is_written_first(peer_factory):
    """A route lookup inside a fan-out's burst must not wait for its own request that the burst still holds."""
    conn = Connection(peer_factory(_answer_each(2)).address)
    with burst():
        early = conn.send(RemotingCommand(code=30), timeout=5)
        assert conn.send(RemotingCommand(code=31), timeout=1).result().remark == "31"
    assert early.result().remark == "30"
    conn.close()


def _answer_all():
    def script(sock):
        while True:
            request = read_request(sock)
            respond(sock, request, remark=str(request.code))

    return script


def test_a_direct_connection_given_back_idle_is_the_next_dials(peer_factory):
    peer = peer_factory(_answer_all())
    pool = ConnectionPool()
    first = pool.dial(peer.address)
    assert first.send(RemotingCommand(code=30), timeout=5).result().remark == "30"
    pool.release(first)
    again = pool.dial(peer.address)
    assert again is first and again.send(RemotingCommand(code=31), timeout=5).result().remark == "31"
    assert peer.accepted == 1
    pool.release(again)
    pool.close()
    assert again.closed  # the idle ones close with the pool


def test_a_direct_connection_given_back_busy_or_closed_by_the_server_is_not_dialled_again(peer_factory):
    def script(sock):
        read_request(sock)  # never answers; the second connection is closed by the server after a request
        if peer.accepted == 2:
            return
        time.sleep(2.0)

    peer = peer_factory(script)
    pool = ConnectionPool()
    busy = pool.dial(peer.address)
    busy.send(RemotingCommand(code=30), timeout=5)  # in flight
    pool.release(busy)
    assert busy.closed
    closing = pool.dial(peer.address)
    assert closing is not busy
    closing.send(RemotingCommand(code=31), timeout=5).cancel()  # nobody waits; the server closes the connection
    pool.release(closing)
    time.sleep(0.3)
    fresh = pool.dial(peer.address)
    assert fresh is not closing and closing.closed
    fresh.close()
    pool.close()


class _CountedPipe:
    """A direct connection's pipe whose writes are counted (the rest is the pipe's)."""

    def __init__(self, pipe) -> None:
        self._pipe, self.writes = pipe, 0

    def send_frames(self, frames, opaques, timeout) -> None:
        self.writes += 1
        self._pipe.send_frames(frames, opaques, timeout)

    def __getattr__(self, name):
        return getattr(self._pipe, name)


def _framed(code: int) -> tuple[bytes, int]:
    cmd = RemotingCommand(code=code, opaque=next_opaque())
    return encode_command(cmd), cmd.opaque


def test_the_frames_of_a_burst_go_out_on_a_direct_connection_in_one_write_and_a_waited_one_first(peer_factory):
    conn = DirectConnection(peer_factory(_answer_each(4)).address)
    counted = conn.pipe = _CountedPipe(conn.pipe)
    with burst():
        calls = [conn.send_frame(*_framed(code), code, timeout=5) for code in (30, 31, 32)]
        assert counted.writes == 0
    assert counted.writes == 1
    with burst():
        waited = conn.send_frame(*_framed(33), 33, timeout=5)
        assert waited.result().remark == "33" and counted.writes == 2
    assert [c.result().remark for c in calls] == ["30", "31", "32"]
    conn.close()


def test_a_burst_to_a_closed_direct_connection_fails_its_requests_when_waited_for(peer_factory):
    conn = DirectConnection(peer_factory(lambda sock: time.sleep(0.5)).address)
    with burst():
        call = conn.send_frame(*_framed(30), 30, timeout=5)
        conn.close()
    with pytest.raises(ConnectionLostError, match="closed"):
        call.result()


class _Masters:
    """What DirectSends asks of its client: each queue's master (the peer), the pool, the request timeout, and
    what a failed request tells it."""

    def __init__(self, address: str) -> None:
        self.address, self._pool, self.request_timeout = address, ConnectionPool(), 5.0

    def master_address(self, mq: MessageQueue) -> str:
        return self.address

    def _wire(self, group: str, mq: MessageQueue) -> tuple[str, MessageQueue]:
        return group, mq

    def reroute(self, topic: str, e: ConnectionLostError) -> None:
        """No route to look up again."""

    def routed(self, e: Exception, address: str) -> Exception:
        return e


def test_a_commit_after_the_broker_closed_the_connection_between_rounds_goes_on_a_new_one(peer_factory):
    """A restart between two rounds of a commit: the next END_TRANSACTION must not be written onto the closed
    connection, where it would fail as sent (and a commit that may have been sent is never sent again)."""
    peer = peer_factory(lambda sock: respond(sock, read_request(sock)))  # one answer, then the broker closes
    sends = DirectSends(_Masters(peer.address))  # type: ignore[arg-type]
    halves = [HalfMessage(MessageQueue("t", "b", 0), f"id-{i}", "", i, i) for i in range(2)]
    sends.end_transaction(halves[0], commit=True, group="g").result()
    time.sleep(0.3)  # the broker's close has arrived; nothing has read it
    sends.end_transaction(halves[1], commit=True, group="g").result()
    assert peer.accepted == 2
    sends.close()
