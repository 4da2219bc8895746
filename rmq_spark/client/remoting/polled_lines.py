"""Connections for the requests a broker holds until something happens (held pulls): one direct connection per
broker (the compiled core's pipe, plain TCP) whose answers one thread reads for every broker in rounds POLL_S
apart, and any thread at once with ``poll()``, instead of a reader thread woken for each answer. A thousand
trickling queues then cost a few wake-ups a round, not one per message."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rmq_spark.client.errors import ConnectionLostError, RequestTimeoutError, RocketMQError
from rmq_spark.client.remoting.connection import TICK_S, DirectConnection, pipe_failure, write_held, write_or_hold
from rmq_spark.client.remoting.frame import RemotingCommand, command_of
from rmq_spark.compiled import CoreError

# How often the polling thread reads the lines while requests are out on them: how late a held answer may complete
# its request when nobody polls (a poll() reads what has come at once). As far apart as the held pulls' arming
# rounds: 0.05 s woke the thread twice as often for the same answers.
POLL_S = 0.1
# How often result() reads its line while it waits.
_WAIT_S = 0.005


class PolledRequest:
    """A request sent on a polled line: completed when its line is polled after the answer came, or failed once its
    deadline passed (the line is closed too when it received nothing since the request was sent)."""

    __slots__ = (
        "line",
        "code",
        "opaque",
        "sent_at",
        "deadline",
        "ended_at",
        "_done",
        "_response",
        "_error",
        "_on_done",
    )

    def __init__(self, line: PolledLine, code: int, opaque: int, sent_at: float, deadline: float) -> None:
        self.line, self.code, self.opaque, self.sent_at, self.deadline = line, code, opaque, sent_at, deadline
        # once ended: the earliest its answer may have come (the line's read before the one that found it)
        self.ended_at = 0.0
        self._done = False
        self._response: RemotingCommand | None = None
        self._error: RocketMQError | None = None
        self._on_done: Callable[[], None] | None = None

    def _complete(self, response: RemotingCommand | None, error: RocketMQError | None, since: float) -> None:
        self._response, self._error, self.ended_at, self._done = response, error, max(since, self.sent_at), True
        if self._on_done is not None:
            self._on_done()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once the request is answered or fails (at once if it has), on the thread that polled its
        answer: it must be quick and must not raise. It may be called twice when the two race."""
        self._on_done = fn
        if self._done:
            fn()

    def done(self) -> bool:
        return self._done

    def cancel(self) -> None:
        """Nobody waits for the answer any more: it is dropped when it comes."""
        self.line.forget(self)

    def result(self) -> RemotingCommand:
        """The answer, reading the line until it comes (or the request fails at its deadline)."""
        if not self._done:
            write_held(self.line)
        while not self._done:
            self.line.lines.poll()
            if not self._done:
                time.sleep(_WAIT_S)
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response


# a request, its answer or its error, and the earliest time it may have come
_Completion = tuple[PolledRequest, RemotingCommand | None, RocketMQError | None, float]


class PolledLine:
    """One broker's direct connection, its requests in flight and what the last polls read. Any thread may send
    and poll (under the line's lock); requests are completed by the caller of ``PolledLines.poll`` outside it."""

    def __init__(self, lines: PolledLines, conn: DirectConnection) -> None:
        self.lines, self.conn, self.address = lines, conn, conn.address
        self._lock = threading.Lock()
        self._calls: dict[int, PolledRequest] = {}
        self._failed: list[_Completion] = []  # failed while sending: completed by the next poll
        self._closed = False
        self.last_received = self._read_at = time.monotonic()  # when something last came, when the line was read
        self._expiry_due = self.last_received + TICK_S

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy(self) -> bool:
        """Whether requests are out on the line (or failures wait to be told)."""
        return bool(self._calls or self._failed)

    def send(self, cmd: RemotingCommand, timeout: float) -> PolledRequest:
        """Send a request (written within ``timeout``; inside a ``burst()`` with the others when it ends) and return
        at once; the request fails if no answer came ``timeout`` after it was sent."""
        frame = self.conn.frame(cmd)
        now = time.monotonic()
        pending = PolledRequest(self, cmd.code, cmd.opaque, now, now + timeout)
        with self._lock:
            if self._closed:
                raise ConnectionLostError(f"connection to {self.address} is closed")
            self._calls[cmd.opaque] = pending
        write_or_hold(self, (frame, pending))
        return pending

    def _write(self, queued: list[tuple[bytes, PolledRequest]]) -> None:
        """Write the frames of sent requests in one go, by the earliest of their deadlines (a burst's end)."""
        deadline = min(pending.deadline for _, pending in queued)
        with self._lock:
            if self._closed:
                return  # closing failed them
            try:
                self.conn.pipe.send_frames(
                    b"".join(frame for frame, _ in queued),
                    [pending.opaque for _, pending in queued],
                    max(0.0, deadline - time.monotonic()),
                )
            except CoreError as e:
                self._close(pipe_failure(e, self.address, queued[0][1].code))

    def forget(self, pending: PolledRequest) -> None:
        with self._lock:
            if self._calls.pop(pending.opaque, None) is not None and not self._closed:
                self.conn.pipe.forget(pending.opaque)

    def poll(self) -> list[_Completion]:
        """The requests whose answers have come, and those that failed (all of them when the line broke)."""
        with self._lock:
            done, self._failed = self._failed, []
            if self._closed or not self._calls:
                return done
            read_at = time.monotonic()
            try:
                frames = self.conn.pipe.ready()
            except CoreError as e:
                self._close(pipe_failure(e, self.address, next(iter(self._calls.values())).code))
                done, self._failed = done + self._failed, []
                return done
            now, since, self._read_at = time.monotonic(), self._read_at, read_at
            if frames:
                self.last_received = now
            for frame in frames:
                pending = self._calls.pop(frame.opaque, None)
                if pending is not None:
                    done.append((pending, command_of(frame), None, since))  # came after the line's last read
            if now >= self._expiry_due:
                self._expire(now)
                done.extend(self._failed)
                self._failed = []
        return done

    def _expire(self, now: float) -> None:
        """Fail the requests past their deadline, and close the line when one of them got nothing back since it was
        sent (a half-open or stuck connection is replaced, not waited on). Under the lock."""
        self._expiry_due = now + TICK_S
        late = [p for p in self._calls.values() if p.deadline < now]
        for p in late:
            del self._calls[p.opaque]
            self.conn.pipe.forget(p.opaque)
            self._failed.append(
                (p, None, RequestTimeoutError(f"request code {p.code} to {self.address} got no response in time"), now)
            )
        silent = [p for p in late if p.sent_at > self.last_received]
        if silent:
            self._close(
                ConnectionLostError(
                    f"{self.address} answered nothing for {now - silent[0].sent_at:.1f} s; the connection was closed "
                    "and will be reopened"
                )
            )

    def close(self, error: RocketMQError) -> None:
        """Close the line; its requests fail with ``error`` at the next poll."""
        with self._lock:
            self._close(error)

    def _close(self, error: RocketMQError) -> None:
        """Close the line and fail every request on it with ``error`` (under the lock)."""
        if self._closed:
            return
        self._closed = True
        self.conn.close()
        now = time.monotonic()
        self._failed.extend((p, None, error, now) for p in self._calls.values())
        self._calls.clear()


class PolledLines:
    """The polled lines of a client, one per address, opened by ``dial`` on first use and again after one closed;
    a polling thread of their own reads them while requests are out."""

    def __init__(self, dial: Callable[[str], DirectConnection]) -> None:
        self._dial = dial
        self._lock = threading.Lock()
        self._lines: dict[str, PolledLine] = {}
        self._retired: list[PolledLine] = []  # closed lines replaced before their failures were told
        self._out = threading.Event()  # set while requests may be out: the polling thread runs
        self._poller: threading.Thread | None = None
        self._closed = False

    def send(self, address: str, cmd: RemotingCommand, timeout: float) -> PolledRequest:
        """Send a request on ``address``'s line (ConnectionLostError when it cannot be opened)."""
        pending = self._line(address).send(cmd, timeout)
        if not self._out.is_set():  # set() takes the event's lock and wakes its waiters: once a round is enough
            self._out.set()
        return pending

    def _line(self, address: str) -> PolledLine:
        with self._lock:
            if self._closed:
                raise ConnectionLostError(f"the client's connection to {address} was closed")
            line = self._lines.get(address)
            if line is not None and not line.closed:
                return line
        fresh = PolledLine(self, self._dial(address))
        with self._lock:
            line = self._lines.get(address)
            if line is not None and not line.closed:
                fresh.conn.close()  # another thread opened one meanwhile
                return line
            if line is not None:
                self._retired.append(line)
            self._lines[address] = fresh
            if self._poller is None:
                self._poller = threading.Thread(target=self._polling, name="rmq-polled", daemon=True)
                self._poller.start()
        return fresh

    def poll(self) -> None:
        """Complete the requests whose answers have come, on the caller's thread (their callbacks run here)."""
        with self._lock:
            lines = [*self._lines.values(), *self._retired]
            self._retired.clear()
        for line in lines:
            for pending, response, error, since in line.poll():
                pending._complete(response, error, since)

    def busy(self) -> bool:
        with self._lock:
            return any(line.busy for line in self._lines.values())

    def _polling(self) -> None:
        """The polling thread: while requests are out, read every line POLL_S apart."""
        while True:
            self._out.wait()
            if self._closed:
                return
            time.sleep(POLL_S)
            self.poll()
            self._out.clear()
            if self.busy():
                self._out.set()

    def close(self) -> None:
        """Close every line (their requests fail) and end the polling thread."""
        with self._lock:
            self._closed = True
            lines = list(self._lines.values())
        error = ConnectionLostError("the client was closed")
        for line in lines:
            line.close(error)
        self.poll()
        self._out.set()
