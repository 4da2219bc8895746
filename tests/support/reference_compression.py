"""The test oracle of the native core's bounded decompression (``native/src/decompress.rs``), over the Python codec
libraries: a body that would expand past the limit stops there. zlib and gzip (RocketMQ's default codec, the v2
API's GZIP encoding), LZ4 frame and zstd (RocketMQ 5)."""

from __future__ import annotations

import io
import zlib

import lz4.frame as _lz4_frame
import zstandard as _zstd

from rmq_spark.client.errors import MessageTooLargeError, ProtocolError

ZLIB, GZIP, LZ4, ZSTD = "zlib", "gzip", "lz4", "zstd"
TOO_LARGE_HINT = (
    "the limit is option maxMessageBytes (raise it only if producers really send bodies that large: a "
    "small body that expands this far is a decompression bomb)"
)


def _too_large(codec: str, limit: int) -> MessageTooLargeError:
    return MessageTooLargeError(f"the {codec}-compressed message body expands past {limit} bytes", limit=limit)


def decompress(codec: str, raw: bytes, limit: int, where: str | None = None) -> bytes:
    """``raw`` decompressed with ``codec``, at most ``limit`` bytes; MessageTooLargeError past it, ProtocolError
    for a corrupt or truncated body. ``where``: the message, which the errors then name first."""
    try:
        return _decompress(codec, raw, limit)
    except MessageTooLargeError as e:
        if where is None:
            raise
        raise MessageTooLargeError(f"{where}: {e}; {TOO_LARGE_HINT}", limit=e.limit) from None
    except ProtocolError as e:
        if where is None:
            raise
        raise ProtocolError(f"{where}: {e}") from None


def _decompress(codec: str, raw: bytes, limit: int) -> bytes:
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
