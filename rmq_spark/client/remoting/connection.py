"""Connections to name servers and brokers, with many requests in flight matched by ``opaque``: shared ones (TCP or
TLS, a reader thread each, any thread may send), direct ones of one reader's own (plain TCP, the compiled core's
pipe, answers read on the caller's thread), and the compiled core's hold lines (plain TCP, held pulls)."""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from rmq_spark.client import hints
from rmq_spark.client.addresses import host_port
from rmq_spark.client.core_errors import package_error
from rmq_spark.client.defaults import DEFAULT_CONNECT_TIMEOUT
from rmq_spark.client.errors import ConnectionLostError, ProtocolError, RequestTimeoutError, RocketMQError
from rmq_spark.client.remoting.frame import RemotingCommand, command_of, decode_frame, encode_command
from rmq_spark.compiled import CoreError, FramePipe, HoldLine, MalformedError, PipeLostError, PipeTimeoutError

# The broker's own limit (com.rocketmq.remoting.frameMaxLength); a larger length means a corrupt stream.
MAX_FRAME_LENGTH = 16 * 1024 * 1024
_LENGTH = struct.Struct(">i")
_OPAQUE_MAX = 0x7FFFFFFF
_opaques = itertools.count(1)
# The socket's timeout: a blocked receive wakes this often to expire abandoned requests, a send checks its deadline.
# A busy connection, whose receives never time out, expires them as often between frames.
TICK_S = 1.0
# A request nobody waits for any more is dropped this long after its deadline.
ABANDONED_GRACE_S = 1.0
# How long a failed TLS send waits for the reader to end with what it read (the server's alert).
READER_GRACE_S = 0.5
# TCP keepalive: first probe after 30 s idle, then every 10 s, dead after 3 unanswered (Linux option names).
_KEEPALIVE = (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3))

Signer = Callable[[RemotingCommand], None]
T = TypeVar("T")


# A burst writes what waits for a connection once this many requests do (a long fan-out keeps the peer busy).
BURST_FRAMES = 256
_bursts = threading.local()  # .held: the requests this thread's burst has not written yet, per connection


class _Writer(Protocol):
    """A connection that writes the frames of a burst's requests in one go."""

    def _write(self, queued: list[Any]) -> None: ...


@contextmanager
def burst() -> Iterator[None]:
    """Requests this thread sends on shared connections inside go out when it ends, in one write per connection (a
    burst inside a burst is part of it): many requests, one system call. Each deadline runs from its send."""
    if getattr(_bursts, "held", None) is not None:
        yield
        return
    held: dict[_Writer, list[Any]] = {}
    _bursts.held = held
    try:
        yield
    finally:
        _bursts.held = None
        for conn, queued in held.items():
            conn._write(queued)


def write_or_hold(conn: _Writer, request: Any) -> None:
    """Write ``request`` (what ``conn._write`` takes a list of) now, or, inside this thread's burst, when the burst
    ends with the others (at once when BURST_FRAMES wait)."""
    held: dict[_Writer, list[Any]] | None = getattr(_bursts, "held", None)
    if held is None:
        conn._write([request])
        return
    queued = held.setdefault(conn, [])
    queued.append(request)
    if len(queued) >= BURST_FRAMES:
        conn._write(held.pop(conn))


def write_held(conn: _Writer) -> None:
    """Write now what this thread's burst holds for ``conn`` (a request of it is waited for inside the burst)."""
    held: dict[_Writer, list[Any]] | None = getattr(_bursts, "held", None)
    if held and conn in held:
        conn._write(held.pop(conn))


def next_opaque() -> int:
    """The next request id, in 1..2^31-1 and wrapping: the header carries it as a signed int32."""
    return (next(_opaques) - 1) % _OPAQUE_MAX + 1


def _request_frame(cmd: RemotingCommand, signer: Signer | None) -> bytes:
    """The frame of request ``cmd`` under a new opaque, signed when the client has credentials."""
    cmd.opaque = next_opaque()
    if signer is not None:
        signer(cmd)
    return encode_command(cmd)


def _cannot_connect(address: str, e: BaseException) -> str:
    return f"cannot connect to {address}: {e}; check that the address is right and the server is running and reachable"


def _tls_hint(e: ssl.SSLError) -> str:
    """What a TLS failure asks the user to fix: the client's certificate when the server refused it."""
    reason = f"{getattr(e, 'reason', '')} {e}".upper()
    return hints.TLS_CLIENT if "CERTIFICATE" in reason and "ALERT" in reason else hints.TLS_SERVER


class PendingRequest:
    """A request sent on a connection; ``result()`` waits for its response until the request's deadline."""

    __slots__ = (
        "connection",
        "code",
        "opaque",
        "sent_at",
        "deadline",
        "ended_at",
        "_event",
        "_response",
        "_error",
        "_on_done",
    )

    def __init__(self, connection: Connection, code: int, opaque: int, sent_at: float, deadline: float) -> None:
        self.connection = connection
        self.code = code
        self.opaque = opaque
        self.sent_at = sent_at
        self.deadline = deadline
        self.ended_at = 0.0  # when it was answered or failed
        self._event = threading.Event()
        self._response: RemotingCommand | None = None
        self._error: RocketMQError | None = None
        self._on_done: Callable[[], None] | None = None

    def _complete(self, response: RemotingCommand | None, error: RocketMQError | None = None) -> None:
        self._response, self._error, self.ended_at = response, error, time.monotonic()
        self._event.set()
        if self._on_done is not None:
            self._on_done()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once the request is answered or fails (at once if it has), on the thread that completes
        it: it must be quick and must not raise. It may be called twice when the two race; ``fn`` must not mind."""
        self._on_done = fn
        if self._event.is_set():
            fn()

    def done(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        """Nobody waits for the answer any more."""
        self.connection._forget(self.opaque)

    def result(self) -> RemotingCommand:
        write_held(self.connection)
        if not self._event.wait(max(0.0, self.deadline - time.monotonic())):
            self.connection._timed_out(self)
            if not self._event.is_set():
                raise RequestTimeoutError(
                    f"request code {self.code} to {self.connection.address} got no response in time"
                )
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response


class Connection:
    """A socket with a reader thread. Thread-safe: any thread may send; responses complete their requests.

    Every send has a deadline (a peer that stops reading cannot block senders), TCP keepalive finds dead peers,
    a request that times out on a connection that has received nothing since it was sent closes it (a half-open
    connection is replaced, not kept), the reader fails every pending request and closes the connection on any
    error, and requests nobody waits for fail within TICK_S after their deadline (and grace), idle or busy."""

    def __init__(
        self,
        address: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        tls: ssl.SSLContext | None = None,
        server_name: str | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.address = address
        self._signer = signer
        self._send_lock = threading.Lock()
        self._pending: dict[int, PendingRequest] = {}
        self._pending_lock = threading.Lock()
        self._closed_error: RocketMQError | None = None
        self.last_received = time.monotonic()
        self._expiry_due = self.last_received + TICK_S  # when the reader next looks for abandoned requests
        host, port = host_port(address)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            for name, value in _KEEPALIVE:
                if hasattr(socket, name):
                    sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=server_name or host)  # the handshake: connect_timeout
        except ssl.SSLCertVerificationError as e:
            raise ConnectionLostError(f"cannot connect to {address}: {e}; {hints.TLS_SERVER}") from e
        except ssl.SSLError as e:
            raise ConnectionLostError(f"cannot connect to {address}: {e}; {_tls_hint(e)}") from e
        except OSError as e:
            raise ConnectionLostError(_cannot_connect(address, e)) from e
        _set_tick(sock, tls is not None)
        self._tls = tls is not None
        self._answered = False  # a frame arrived: the server took the connection
        self._sock = sock
        self._reader = threading.Thread(target=self._read_loop, name=f"rmq-conn-{address}", daemon=True)
        self._reader.start()

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    def send(self, cmd: RemotingCommand, timeout: float) -> PendingRequest:
        """Send a request and return at once; call ``result()`` on the returned object for the response. The send
        itself must finish within ``timeout``, or the connection is closed (the peer does not read). Inside a
        ``burst()`` the request is written when the burst ends (or once BURST_FRAMES wait), with the others."""
        frame = _request_frame(cmd, self._signer)
        now = time.monotonic()
        pending = PendingRequest(self, cmd.code, cmd.opaque, now, now + timeout)
        with self._pending_lock:
            if self._closed_error is not None:
                raise ConnectionLostError(f"connection to {self.address} is closed: {self._closed_error}")
            self._pending[cmd.opaque] = pending
        write_or_hold(self, (frame, pending))
        return pending

    def _write(self, queued: list[tuple[bytes, PendingRequest]]) -> None:
        """Write the frames of sent requests in one go, by the earliest of their deadlines."""
        if self.closed:
            return  # closing failed them
        deadline = min(pending.deadline for _, pending in queued)
        if not self._send_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            for _, pending in queued:
                self._forget(pending.opaque)
                pending._complete(
                    None,
                    RequestTimeoutError(
                        f"request code {pending.code} to {self.address} could not be sent in time: another send on "
                        "the connection is stuck"
                    ),
                )
            return
        try:
            self._send_all(memoryview(b"".join(frame for frame, _ in queued)), deadline)
        except TimeoutError:
            self._fail(
                ConnectionLostError(
                    f"sending to {self.address} did not finish within {deadline - queued[0][1].sent_at:.1f} s (the "
                    "peer does not read); the connection was closed"
                )
            )
        except OSError as e:
            self._let_reader_tell()
            self._fail(
                ConnectionLostError(f"connection to {self.address} broke while sending: {e}{self._refused_hint()}")
            )
        finally:
            self._send_lock.release()

    def _refused_hint(self) -> str:
        """The fix to name when the connection ends: a TLS server that closes it before answering anything refused
        the client's certificate (its alert may be lost in the race with a send)."""
        return f"; {hints.TLS_CLOSED}" if self._tls and not self._answered else ""

    def _let_reader_tell(self) -> None:
        """A send failed: give the reader a moment to end first, as what it read says more. A server that refuses
        the client's certificate after a TLS 1.3 handshake sends an alert, which a racing send sees only as EOF."""
        if isinstance(self._sock, ssl.SSLSocket) and threading.current_thread() is not self._reader:
            self._reader.join(READER_GRACE_S)

    def _send_all(self, view: memoryview, deadline: float) -> None:
        while True:
            try:
                view = view[self._sock.send(view) :]
            except (TimeoutError, BlockingIOError):
                pass
            if not view:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError("send deadline passed")

    def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for its response."""
        return self.send(cmd, timeout).result()

    def close(self) -> None:
        self._fail(ConnectionLostError(f"connection to {self.address} was closed by the client"))

    def _forget(self, opaque: int) -> None:
        with self._pending_lock:
            self._pending.pop(opaque, None)

    def _timed_out(self, pending: PendingRequest) -> None:
        """A request got no answer in time: forget it, and close the connection if nothing at all arrived on it
        since the request was sent (a half-open or stuck connection; the next request opens a new one)."""
        self._forget(pending.opaque)
        if self.last_received < pending.sent_at:
            self._fail(
                ConnectionLostError(
                    f"{self.address} answered nothing for {time.monotonic() - pending.sent_at:.1f}"
                    " s; the connection was closed and will be reopened"
                )
            )

    def _expire_abandoned(self) -> None:
        now = time.monotonic()
        self._expiry_due = now + TICK_S
        with self._pending_lock:
            expired = [p for p in self._pending.values() if p.deadline + ABANDONED_GRACE_S < now]
            for p in expired:
                del self._pending[p.opaque]
        for p in expired:
            p._complete(None, RequestTimeoutError(f"request code {p.code} to {self.address} got no response in time"))

    def _fail(self, error: RocketMQError) -> None:
        with self._pending_lock:
            if self._closed_error is None:
                self._closed_error = error
            pending, self._pending = self._pending, {}
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        for p in pending.values():
            p._complete(None, error)

    def _read_exact(self, n: int) -> memoryview:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = self._sock.recv_into(view[got:], n - got)
            except (TimeoutError, BlockingIOError):  # a tick: nothing arrived for TICK_S
                if self._closed_error is not None:
                    raise ConnectionLostError(f"connection to {self.address} was closed") from None
                self._expire_abandoned()
                continue
            if k == 0:
                raise ConnectionLostError(
                    f"connection to {self.address} was closed by the server"
                    + (" in the middle of a frame" if got else "")
                )
            got += k
        return view

    def _read_loop(self) -> None:
        try:
            while True:
                (length,) = _LENGTH.unpack(self._read_exact(4))
                if length < 4 or length > MAX_FRAME_LENGTH:
                    raise ProtocolError(
                        f"{self.address} sent a frame of length {length}, outside 4..{MAX_FRAME_LENGTH}"
                    )
                response = decode_frame(self._read_exact(length))
                self._answered = True
                self.last_received = time.monotonic()
                if self.last_received >= self._expiry_due:
                    self._expire_abandoned()
                if not response.is_response:
                    continue  # server-initiated requests (e.g. consumer ids changed) do not concern a pull client
                with self._pending_lock:
                    pending = self._pending.pop(response.opaque, None)
                if pending is not None:
                    pending._complete(response)
        except ConnectionLostError as e:
            hint = self._refused_hint()
            self._fail(ConnectionLostError(f"{e}{hint}") if hint else e)
        except RocketMQError as e:
            self._fail(e)
        except ssl.SSLError as e:
            self._fail(ConnectionLostError(f"connection to {self.address} broke: {e}; {_tls_hint(e)}"))
        except (OSError, ValueError) as e:
            self._fail(ConnectionLostError(f"connection to {self.address} broke: {e}{self._refused_hint()}"))
        except BaseException as e:  # whatever it was, no request may wait on a dead reader
            self._fail(ConnectionLostError(f"the reader of the connection to {self.address} failed: {e!r}"))
            if not isinstance(e, Exception):
                raise


# What a direct connection's failure says, by the core's error.
_PIPE_FAILURES = {
    PipeTimeoutError: "request code {code} to {address} got no response in time; the connection was closed and will "
    "be reopened",
    MalformedError: "{address}: {error}",
    PipeLostError: "connection to {address}: {error}",
}


def pipe_failure(e: CoreError, address: str, code: int) -> RocketMQError:
    """The error for a direct connection to ``address`` that failed (and closed itself) with ``e`` on request
    ``code``."""
    return package_error(e, _PIPE_FAILURES[type(e)].format(address=address, code=code, error=e))


def connect_core(address: str, connect: Callable[[str, int], T]) -> T:
    """``connect(host, port)`` of one of the compiled core's connections to ``address``; a failure to connect
    raises ConnectionLostError naming the address."""
    host, port = host_port(address)
    try:
        return connect(host, port)
    except CoreError as e:
        raise package_error(e, _cannot_connect(address, e)) from None


class DirectPending:
    """A request sent on a DirectConnection; ``result()`` reads until its answer comes or its deadline passes."""

    __slots__ = ("connection", "code", "opaque", "deadline")

    def __init__(self, connection: DirectConnection, code: int, opaque: int, deadline: float) -> None:
        self.connection, self.code, self.opaque, self.deadline = connection, code, opaque, deadline

    def result(self) -> RemotingCommand:
        c = self.connection
        write_held(c)
        try:
            return command_of(c.pipe.receive(self.opaque, max(0.0, self.deadline - time.monotonic())))
        except CoreError as e:
            raise pipe_failure(e, c.address, self.code) from None

    def cancel(self) -> None:
        """Nobody waits for the answer any more: it is dropped when it comes."""
        self.connection.pipe.forget(self.opaque)


class DirectConnection:
    """A connection of one reader's own over plain TCP (the compiled core's FramePipe): requests are sent and their
    answers read on the caller's thread with the GIL released, no reader thread in between; a range read's native
    loop pulls over its ``pipe`` directly. One thread uses it at a time (another thread touching it meanwhile gets
    a RuntimeError). A late answer, a send that does not finish in time, a malformed frame or a broken socket
    closes it; the owner opens a new one."""

    def __init__(
        self, address: str, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, signer: Signer | None = None
    ) -> None:
        self.address = address
        self._signer = signer
        self.pipe = connect_core(address, lambda host, port: FramePipe(host, port, connect_timeout, MAX_FRAME_LENGTH))

    @property
    def closed(self) -> bool:
        return self.pipe.closed

    def open_when_idle(self) -> bool:
        """Whether it is still open, judged by reading what came while nobody read (with nothing in flight): a
        server that closed it meanwhile is seen only then, as the pipe has no reader thread."""
        if not self.pipe.busy:
            try:
                self.pipe.ready()
            except CoreError:
                pass  # the server closed it: the pipe closed itself
        return not self.closed

    @property
    def signs(self) -> bool:
        """Whether requests are signed (then the core cannot render them from a template)."""
        return self._signer is not None

    def frame(self, cmd: RemotingCommand) -> bytes:
        """The frame of request ``cmd`` under a new opaque (signed when the client has credentials)."""
        return _request_frame(cmd, self._signer)

    def send(self, cmd: RemotingCommand, timeout: float) -> DirectPending:
        """Send a request (within ``timeout``) and return at once; ``result()`` of the answer waits for it."""
        frame = self.frame(cmd)
        deadline = time.monotonic() + timeout
        try:
            self.pipe.send(frame, cmd.opaque, timeout)
        except CoreError as e:
            raise pipe_failure(e, self.address, cmd.code) from None
        return DirectPending(self, cmd.code, cmd.opaque, deadline)

    def send_frame(self, frame: bytes, opaque: int, code: int, timeout: float) -> DirectPending:
        """Send request ``code`` the caller framed itself under ``opaque`` (unsigned); inside a ``burst()`` it is
        written when the burst ends, with the others. The answer's ``result()`` waits for it."""
        deadline = time.monotonic() + timeout
        write_or_hold(self, (frame, opaque, deadline))
        return DirectPending(self, code, opaque, deadline)

    def _write(self, queued: list[tuple[bytes, int, float]]) -> None:
        """Write the frames of a burst in one go, by the earliest of their deadlines. A failed write has closed the
        pipe, and each request's ``result()`` raises the pipe's error."""
        deadline = min(d for _, _, d in queued)
        try:
            self.pipe.send_frames(
                b"".join(f for f, _, _ in queued), [o for _, o, _ in queued], max(0.0, deadline - time.monotonic())
            )
        except CoreError:
            pass

    def close(self) -> None:
        self.pipe.close()


def _set_tick(sock: socket.socket, tls: bool) -> None:
    """Make every send and receive on ``sock`` return after at most TICK_S (the reader's tick, the send deadline).
    A plain socket gets the kernel's own timeouts (SO_RCVTIMEO/SO_SNDTIMEO: no extra poll per call on the hot
    path); a TLS socket needs Python's timeout mode, as its blocking mode retries a timed-out read inside OpenSSL."""
    sock.settimeout(None)
    if tls:
        sock.settimeout(TICK_S)
        return
    tick = struct.pack("ll", int(TICK_S), int(TICK_S % 1 * 1_000_000))  # struct timeval
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tick)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tick)


class ConnectionPool:
    """One shared connection per address, reopened on the next request after it broke or the server closed it.
    Connecting holds up only requests to the same address. An address that could not be connected to is not
    tried again for ``COOLDOWN_S`` (requests to it fail at once), so a dead broker costs one connect timeout, not
    one per request."""

    COOLDOWN_S = 2.0
    # Direct connections given back (``release``) are kept for the next range read, this many per address, for at
    # most IDLE_S (a broker closes a channel idle for 120 s): a task reading thousands of small ranges opens one
    # connection, not one per range.
    IDLE_PER_ADDRESS = 4
    IDLE_S = 60.0

    def __init__(
        self,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        tls: ssl.SSLContext | None = None,
        server_name: str | None = None,
        signer: Signer | None = None,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._tls = tls
        self._server_name = server_name
        self._signer = signer
        self._lock = threading.Lock()
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, threading.Lock] = {}
        self._failed: dict[str, tuple[float, str]] = {}
        self._idle: dict[str, list[tuple[DirectConnection, float]]] = {}  # given back: (connection, since when)
        self._closed = False

    @property
    def direct(self) -> bool:
        """Whether readers may open direct connections of their own (plain TCP only)."""
        return self._tls is None

    @property
    def signs(self) -> bool:
        """Whether requests are signed (ACL credentials)."""
        return self._signer is not None

    def _check_cooldown(self, address: str) -> None:
        """Raise while ``address`` is cooling down after a failed connect."""
        failed = self._failed.get(address)
        if failed is not None and time.monotonic() - failed[0] < self.COOLDOWN_S:
            raise ConnectionLostError(f"{failed[1]} (not retried for {self.COOLDOWN_S:.0f} s)")

    def _open(self, address: str) -> Connection | None:
        """The live connection to ``address``, or None; raises while the address is cooling down."""
        conn = self._conns.get(address)
        if conn is not None and not conn.closed:
            return conn
        self._check_cooldown(address)
        return None

    def _connected(self, address: str, connect: Callable[[], T]) -> T:
        """``connect()``, with its failure remembered for the cooldown (and a success clearing it)."""
        try:
            conn = connect()
        except ConnectionLostError as e:
            with self._lock:
                self._failed[address] = (time.monotonic(), str(e))
            raise
        with self._lock:
            self._failed.pop(address, None)
        return conn

    def dial(self, address: str) -> DirectConnection:
        """A direct connection of the caller's own to ``address``: one given back idle, else a new one (the
        cooldown applies as to shared ones)."""
        conn = self._idle_connection(address)
        if conn is not None:
            return conn
        with self._lock:
            self._check_cooldown(address)
        return self._connected(
            address, lambda: DirectConnection(address, connect_timeout=self._connect_timeout, signer=self._signer)
        )

    def hold_line(
        self, address: str, *, hold_timeout: float, round_s: float, poll_s: float, send_timeout: float
    ) -> HoldLine:
        """A hold line of the caller's own to ``address`` (the compiled core's, plain TCP and unsigned; the
        cooldown applies as to direct connections): its holds' answers may take ``hold_timeout``, a queue whose
        hold a message ended is held again ``round_s`` after its last hold at the earliest, and the line's thread
        writes what is due and reads what came every ``poll_s`` (each write within ``send_timeout``)."""
        with self._lock:
            self._check_cooldown(address)

        def connect(host: str, port: int) -> HoldLine:
            settings = (hold_timeout, round_s, poll_s, send_timeout, time.monotonic())
            return HoldLine(host, port, self._connect_timeout, MAX_FRAME_LENGTH, *settings)

        return self._connected(address, lambda: connect_core(address, connect))

    def _idle_connection(self, address: str) -> DirectConnection | None:
        """A connection to ``address`` given back lately and still open (a read that finds nothing tells one the
        server closed), or None."""
        while True:
            with self._lock:
                idle = self._idle.get(address)
                if not idle:
                    return None
                conn, since = idle.pop()
            if time.monotonic() - since < self.IDLE_S and conn.open_when_idle():
                return conn
            conn.close()

    def release(self, conn: DirectConnection) -> None:
        """Give back a direct connection the caller is done with: kept for the next ``dial`` when it is open with
        nothing in flight, else closed."""
        if not conn.closed and not conn.pipe.busy:
            with self._lock:
                idle = self._idle.setdefault(conn.address, [])
                if not self._closed and len(idle) < self.IDLE_PER_ADDRESS:
                    idle.append((conn, time.monotonic()))
                    return
        conn.close()

    def get(self, address: str) -> Connection:
        with self._lock:
            conn = self._open(address)
            if conn is not None:
                return conn
            connecting = self._connecting.setdefault(address, threading.Lock())
        with connecting:
            with self._lock:
                conn = self._open(address)
                if conn is not None:
                    return conn
            conn = self._connected(
                address,
                lambda: Connection(
                    address,
                    connect_timeout=self._connect_timeout,
                    tls=self._tls,
                    server_name=self._server_name,
                    signer=self._signer,
                ),
            )
            with self._lock:
                self._conns[address] = conn
            return conn

    def recently_failed(self, address: str) -> bool:
        """True while ``address`` is cooling down after a failed connect."""
        with self._lock:
            failed = self._failed.get(address)
        return failed is not None and time.monotonic() - failed[0] < self.COOLDOWN_S

    def send(self, address: str, cmd: RemotingCommand, timeout: float) -> PendingRequest:
        return self.get(address).send(cmd, timeout)

    def request(self, address: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        return self.get(address).request(cmd, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns.values()), {}
            idle, self._idle = [conn for kept in self._idle.values() for conn, _ in kept], {}
        for c in conns:
            c.close()
        for d in idle:
            d.close()
