"""Decompress message bodies with a bound on the output, for every transport: a body that would expand past the
limit stops there (a few KiB of zstd can claim gigabytes), so a worker's memory stays bounded whatever a producer
sent. zlib and gzip (RocketMQ's default codec, the v2 API's GZIP encoding), LZ4 frame and zstd (RocketMQ 5)."""
from __future__ import annotations

import io
import zlib

from rmq_spark.client.defaults import DEFAULT_MAX_MESSAGE_BYTES  # noqa: F401 (the decoders' default bound)
from rmq_spark.client.errors import ProtocolError

try:  # optional at import so that the pure-Python parts stay importable; both are dependencies
    import lz4.frame as _lz4_frame
except ImportError:  # pragma: no cover
    _lz4_frame = None
try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover
    _zstd = None

ZLIB, GZIP, LZ4, ZSTD = "zlib", "gzip", "lz4", "zstd"


class MessageTooLargeError(ProtocolError):
    """A message body decompresses to more than the limit (maxMessageBytes)."""

    def __init__(self, message: str, *, limit: int = -1, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(message, code=code, remark=remark)
        self.limit = limit


def _too_large(codec: str, limit: int) -> MessageTooLargeError:
    return MessageTooLargeError(f"the {codec}-compressed message body expands past {limit} bytes", limit=limit)


def decompress(codec: str, raw: bytes, limit: int) -> bytes:
    """``raw`` decompressed with ``codec``, at most ``limit`` bytes; MessageTooLargeError past it, ProtocolError
    for a corrupt or truncated body."""
    try:
        if codec in (ZLIB, GZIP):
            return _inflate(codec, raw, limit)
        if codec == LZ4:
            return _lz4(raw, limit)
        if codec == ZSTD:
            return _zstd_frames(raw, limit)
    except ProtocolError:
        raise
    except Exception as e:  # zlib.error, RuntimeError (lz4), ZstdError ...
        raise ProtocolError(f"cannot decompress the {codec} message body: {e}") from None
    raise ValueError(f"unknown codec {codec!r}")


def _inflate(codec: str, raw: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS if codec == GZIP else zlib.MAX_WBITS)
    out = d.decompress(raw, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise _too_large(codec, limit)
    if not d.eof:
        raise ProtocolError(f"the {codec}-compressed message body is truncated")
    return out


def _lz4(raw: bytes, limit: int) -> bytes:
    if _lz4_frame is None:  # pragma: no cover
        raise ProtocolError("the message body is LZ4-compressed but the lz4 package is not installed")
    parts, size, rest = [], 0, raw
    while rest:  # one or more concatenated frames
        d = _lz4_frame.LZ4FrameDecompressor()
        part = d.decompress(rest, max_length=limit - size + 1)
        size += len(part)
        if size > limit or not (d.eof or d.needs_input):
            raise _too_large(LZ4, limit)
        if not d.eof:
            raise ProtocolError("the lz4-compressed message body is truncated")
        parts.append(part)
        rest = d.unused_data or b""
    return b"".join(parts)


def _zstd_frames(raw: bytes, limit: int) -> bytes:
    if _zstd is None:  # pragma: no cover
        raise ProtocolError("the message body is zstd-compressed but the zstandard package is not installed")
    dctx = _zstd.ZstdDecompressor()
    # the size first, reading at most limit + 1 bytes (zstd's decompressobj has no output bound) ...
    reader = dctx.stream_reader(io.BytesIO(raw), read_across_frames=True)
    if len(reader.read(limit + 1)) > limit:
        raise _too_large(ZSTD, limit)
    # ... then the frames, now known to fit, with the truncation check the reader lacks
    parts, rest = [], raw
    while rest:
        d = dctx.decompressobj()
        parts.append(d.decompress(rest))
        if not d.eof:
            raise ProtocolError("the zstd-compressed message body is truncated")
        rest = d.unused_data
    return b"".join(parts)
