"""Test helper: build commit-log message records (what a PULL_MESSAGE FOUND body concatenates) by the layout
of MessageDecoder.encode, independently of the library's decoder."""

from __future__ import annotations

import ipaddress
import struct
import zlib

import lz4.frame
import zstandard
from hypothesis import strategies as st

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
BLANK_MAGIC = -875286124

COMPRESSED = 0x1
BORN_V6 = 0x10
STORE_V6 = 0x20
NEED_UNWRAP = 0x40
INNER_BATCH = 0x80
COMPRESSION_BITS = {"lz4": 1 << 8, "zstd": 2 << 8, "zlib": 3 << 8, "zlib-legacy": 0}


def props_text(props: dict[str, str]) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def compress(kind: str, data: bytes) -> bytes:
    if kind in ("zlib", "zlib-legacy"):
        return zlib.compress(data, 5)
    if kind == "lz4":
        return lz4.frame.compress(data)
    if kind == "zstd":
        # a streaming frame without a content size, like the Java ZstdOutputStream writes
        cobj = zstandard.ZstdCompressor(level=5).compressobj()
        return cobj.compress(data) + cobj.flush()
    raise ValueError(kind)


def _host(addr: tuple[str, int]) -> tuple[bytes, bool]:
    ip = ipaddress.ip_address(addr[0])
    return ip.packed + struct.pack(">i", addr[1]), ip.version == 6


def encode_stored_message(
    *,
    topic: str = "TopicTest",
    body: bytes = b"hello",
    properties: dict[str, str] | None = None,
    raw_properties: bytes | None = None,
    queue_id: int = 0,
    queue_offset: int = 0,
    flag: int = 0,
    commit_log_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 1_700_000_000_000,
    born_host: tuple[str, int] = ("10.0.0.1", 50000),
    store_timestamp: int = 1_700_000_000_005,
    store_host: tuple[str, int] = ("10.0.0.2", 10911),
    reconsume_times: int = 0,
    body_crc: int = 0,
    prepared_tx_offset: int = 0,
    magic: int = MAGIC_V1,
    compression: str | None = None,
    total_size: int | None = None,
) -> bytes:
    """One stored record. ``compression`` compresses ``body`` and sets the sysFlag bits; the host IP version
    sets the V6 flags."""
    born, born_v6 = _host(born_host)
    store, store_v6 = _host(store_host)
    if born_v6:
        sys_flag |= BORN_V6
    if store_v6:
        sys_flag |= STORE_V6
    if compression is not None:
        body = compress(compression, body)
        sys_flag |= COMPRESSED | COMPRESSION_BITS[compression]
    topic_b = topic.encode("utf-8")
    topic_len = struct.pack(">b", len(topic_b)) if magic == MAGIC_V1 else struct.pack(">h", len(topic_b))
    props_b = raw_properties if raw_properties is not None else props_text(properties or {}).encode("utf-8")
    rest = b"".join(
        [
            struct.pack(">i", magic),
            struct.pack(">i", body_crc),
            struct.pack(">i", queue_id),
            struct.pack(">i", flag),
            struct.pack(">q", queue_offset),
            struct.pack(">q", commit_log_offset),
            struct.pack(">i", sys_flag),
            struct.pack(">q", born_timestamp),
            born,
            struct.pack(">q", store_timestamp),
            store,
            struct.pack(">i", reconsume_times),
            struct.pack(">q", prepared_tx_offset),
            struct.pack(">i", len(body)),
            body,
            topic_len,
            topic_b,
            struct.pack(">h", len(props_b)),
            props_b,
        ]
    )
    size = 4 + len(rest) if total_size is None else total_size
    return struct.pack(">i", size) + rest


def encode_batch_record(body: bytes, properties: dict[str, str], flag: int = 0) -> bytes:
    """One record of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage)."""
    props_b = props_text(properties).encode("utf-8")
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props_b)
    return struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props_b)) + props_b


def blank_record(size: int = 8) -> bytes:
    return struct.pack(">ii", size, BLANK_MAGIC) + b"\0" * (size - 8)


def mutated_prefix(data, block: bytes, *, min_mutations: int = 0) -> bytearray:
    """A hypothesis-drawn variant of ``block``: up to 6 bytes overwritten, then cut at a drawn length."""
    out = bytearray(block)
    for _ in range(data.draw(st.integers(min_mutations, 6))):
        out[data.draw(st.integers(0, len(out) - 1))] = data.draw(st.integers(0, 255))
    return out[: data.draw(st.integers(0, len(out)))]
