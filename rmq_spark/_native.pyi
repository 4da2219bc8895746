"""The compiled core (``native/src/python.rs``): the gatherer of pulled blocks into Arrow columns, the remoting frame
codec, the pipe, the line of held pulls, and the range cursor with its native pull loop. Its errors are
``CoreError``s, which ``rmq_spark.client.core_errors.package_error`` turns into the package's own."""

from typing import Any, ClassVar, final

# The codes and the remark of a pull's answer that the core reads (RocketMQ's ResponseCode, GetMessageStatus).
SUCCESS: int
PULL_NOT_FOUND: int
PULL_RETRY_IMMEDIATELY: int
PULL_OFFSET_MOVED: int
NO_MATCHED_MESSAGE: str

class CoreError(Exception):
    """An error of the compiled core."""

class MalformedError(CoreError):
    """Bytes that do not follow the wire format, or a command the frame cannot hold."""

class PipeLostError(CoreError):
    """A pipe could not be opened, broke or was closed."""

class PipeTimeoutError(CoreError):
    """No answer on a pipe in time (the pipe is closed)."""

class DataLostError(CoreError):
    """Messages of a range are gone (failOnDataLoss)."""

class RefusedError(CoreError):
    """The broker answered a range read what no rule accepts."""

class UnavailableError(CoreError):
    """The broker did not serve a range read until its retry timeout."""

class UnreadableError(MalformedError):
    """A pulled block or answer frame that does not read (nothing of it was gathered)."""

class BodyTooLargeError(UnreadableError):
    """A message body expands past the limit: args (text, limit)."""

@final
class PullStatus:
    """A pull answer's status, as the transports classify it. Each status is one object (compare with ``is``)."""

    FOUND: ClassVar[PullStatus]
    NO_NEW_MSG: ClassVar[PullStatus]
    NO_MATCHED_MSG: ClassVar[PullStatus]
    RETRY_IMMEDIATELY: ClassVar[PullStatus]
    OFFSET_ILLEGAL: ClassVar[PullStatus]
    @property
    def name(self) -> str: ...

@final
class ArrowColumn:
    """One gathered column, for ``pyarrow.array(column)``; it can be taken once."""

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]: ...

@final
class BlockGatherer:
    """Gathers pulled PULL_MESSAGE bodies (or gRPC answer frames) into the columns named at construction."""

    def __init__(
        self, columns: list[str], tags: list[str] | None = None, *, broker_name: str, max_body: int
    ) -> None: ...
    def add(self, block: bytes, low: int, high: int) -> None: ...
    def add_v2(self, frames: list[bytes], topic: str, low: int, high: int) -> None: ...
    @property
    def rows(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def take(self) -> list[tuple[str, ArrowColumn]]: ...

@final
class Frame:
    """A decoded remoting frame: a command's header fields and its body."""

    @property
    def code(self) -> int: ...
    @property
    def language(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def opaque(self) -> int: ...
    @property
    def flag(self) -> int: ...
    @property
    def remark(self) -> str | None: ...
    @property
    def ext_fields(self) -> dict[str, str]: ...
    @property
    def serialize_type(self) -> int: ...
    @property
    def body(self) -> bytes: ...

def encode_frame(
    code: int,
    language: str,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext: dict[str, Any],
    body: bytes,
    serialize_type: int,
) -> bytes: ...
def decode_frame(buf: bytes) -> Frame: ...

@final
class RequestTemplate:
    """A request sent many times with only the integer fields ``vary`` changed."""

    def __init__(
        self, code: int, language: str, version: int, ext: dict[str, Any], vary: list[str], serialize_type: int
    ) -> None: ...

@final
class FramePipe:
    """A connection of one reader's own (plain TCP), used with the GIL released."""

    def __init__(self, host: str, port: int, connect_timeout: float, max_frame: int) -> None: ...
    def send(self, frame: bytes, opaque: int, timeout: float) -> None: ...
    def send_frames(self, frames: bytes, opaques: list[int], timeout: float) -> None: ...
    def receive(self, opaque: int, timeout: float) -> Frame: ...
    def ready(self) -> list[Frame]: ...
    def forget(self, opaque: int) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def busy(self) -> bool: ...

@final
class HoldEnd:
    """A hold of a ``HoldLine`` that ended; ``next_offset`` None: not held any more (``frame``, the answer's header
    without its body, or ``failure`` says why)."""

    @property
    def key(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def armed_at(self) -> float: ...
    @property
    def ended_at(self) -> float: ...
    @property
    def next_offset(self) -> int | None: ...
    @property
    def frame(self) -> Frame | None: ...
    @property
    def failure(self) -> CoreError | None: ...

@final
class HoldLine:
    """The held pulls of many queues over one connection to a broker, judged and held again in the core."""

    def __init__(
        self,
        host: str,
        port: int,
        connect_timeout: float,
        max_frame: int,
        hold_timeout: float,
        round_s: float,
        poll_s: float,
        send_timeout: float,
        now: float,
    ) -> None: ...
    def hold(self, key: int, template: RequestTemplate, offset: int) -> None: ...
    def drop(self, key: int) -> None: ...
    def take(self, now: float, send_timeout: float) -> list[HoldEnd]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...

def pull_status(code: int, remark: str | None, next_begin: int, offset: int) -> PullStatus | None: ...
def next_hold(status: PullStatus, next_begin: int, max_offset: int, offset: int) -> int | None: ...
def first_offset(block: bytes) -> int: ...
def v2_queue_offset(frame: bytes) -> int: ...
def backoff_delay(attempt: int) -> float: ...
def data_loss_error(what: str, remedy: str) -> str: ...
def data_loss_note(what: str, action: str) -> str: ...

class Step:
    """What a range read's cursor tells its driver to do next: one of the variants below."""

    @final
    class Take(Step):
        __match_args__ = ("low", "high", "body")
        def __init__(self, low: int, high: int, body: bytes | None) -> None: ...
        @property
        def low(self) -> int: ...
        @property
        def high(self) -> int: ...
        @property
        def body(self) -> bytes | None: ...

    @final
    class Skip(Step):
        def __init__(self) -> None: ...

    @final
    class Gap(Step):
        def __init__(self) -> None: ...

    @final
    class Retry(Step):
        __match_args__ = ("why",)
        def __init__(self, why: str) -> None: ...
        @property
        def why(self) -> str: ...

    @final
    class Done(Step):
        def __init__(self) -> None: ...

    @final
    class Full(Step):
        def __init__(self) -> None: ...

    @final
    class Suggest(Step):
        __match_args__ = ("broker_id",)
        def __init__(self, broker_id: int) -> None: ...
        @property
        def broker_id(self) -> int: ...

    @final
    class Answer(Step):
        __match_args__ = ("offset", "frame")
        def __init__(self, offset: int, frame: Frame) -> None: ...
        @property
        def offset(self) -> int: ...
        @property
        def frame(self) -> Frame: ...

@final
class RangeCursor:
    """One exact range read's rules, and its native pull loop. Its calls answer with a ``Step``, or raise
    DataLostError, RefusedError or UnavailableError when the read cannot go on (a native run also the pipe's
    errors, and the gatherer's UnreadableError for an answer whose records do not read)."""

    def __init__(
        self,
        queue: str,
        broker: str,
        start: int,
        end: int,
        *,
        depth: int,
        slot: int,
        filtered: bool,
        sparse: bool,
        fail_on_data_loss: bool,
        retry_timeout: float,
    ) -> None: ...
    def next_pulls(self) -> list[tuple[int, int, int]]: ...
    @property
    def head(self) -> int | None: ...
    @property
    def lost(self) -> int: ...
    def judge(
        self, status: PullStatus, next_begin: int, min_offset: int, max_offset: int, first_offset: int, nbytes: int
    ) -> Step.Take | Step.Skip | Step.Gap | Step.Retry: ...
    def gap(self, first: int) -> Step.Take | Step.Skip | Step.Retry: ...
    def failed(self, why: str) -> Step.Retry: ...
    def retry(self) -> tuple[float, list[int]]: ...
    def rewind(self) -> list[int]: ...
    def run(
        self,
        pipe: FramePipe,
        template: RequestTemplate,
        gatherer: BlockGatherer | None,
        rows: int,
        nbytes: int,
        timeout: float,
        suggested: int,
    ) -> Step: ...

class SendEncoder:
    """The sink's encoder of SEND_BATCH_MESSAGE bodies per target queue (native/src/sends.rs)."""

    def __init__(
        self,
        *,
        reserved: list[str],
        transient_prefix: str,
        max_messages: int,
        max_bytes: int,
        compress_from: int,
        level: int,
        id_prefix: str,
        month_start_ms: int,
    ) -> None: ...
    def set_ids(self, id_prefix: str, month_start_ms: int) -> None: ...
    def add(
        self, rows: int, columns: dict[str, Any], topics: list[tuple[int, list[tuple[str, int]]]], turn: int
    ) -> tuple[list[tuple[int, int, int, int, bytes]], int]: ...
    def halves(
        self,
        rows: int,
        columns: dict[str, Any],
        topics: list[tuple[int, list[tuple[str, int]]]],
        names: list[tuple[str, str]],
        turn: int,
        *,
        group: str,
        key_prefix: str | None,
        language: str,
        version: int,
        opaques: list[int],
    ) -> tuple[bytes, list[tuple[int, int, int, str, str]], int]: ...
    def finish(self) -> list[tuple[int, int, int, int, bytes]]: ...

def unique_ids_at(prefix: str, month_start_ms: int, times: list[int]) -> list[str]: ...
