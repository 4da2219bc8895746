"""Writes the seeds of the gather_block fuzz target (native/fuzz/seeds): its three header bytes (columns, window,
tag filter and input kind) and a block of records in the stored layout, or gRPC PullMessage answer frames behind a
length byte each. Run from the repository root."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from rmq_spark.client.grpc.messages import FLAG_PROPERTY
from rmq_spark.client.grpc.v2.definition_pb2 import GZIP
from tests.support.stored_messages import INNER_BATCH, MAGIC_V2, NEED_UNWRAP, encode_batch_record
from tests.support.stored_messages import encode_stored_message as rec
from tests.unit.test_v2_columns import frame

out = Path("native/fuzz/seeds/gather_block")
blocks = {
    "plain": rec(properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}, queue_offset=0)
    + rec(body=b"", properties={"TAGS": "TagB"}, queue_offset=1),
    "v6_hosts": rec(born_host=("2001:db8::1", 1), store_host=("::ffff:1.2.3.4", 10911), queue_offset=2),
    "magic_v2": rec(magic=MAGIC_V2, topic="T" * 300, raw_properties=b"a\x01b\x02a\x01c\x02\x01x\x02", queue_offset=1),
    "compressed": rec(body=b"z" * 5000, compression="zlib", properties={"TAGS": "TagA"}),
    "lz4_zstd": rec(body=b"l" * 300, compression="lz4", queue_offset=0)
    + rec(body=b"s" * 300, compression="zstd", properties={"TAGS": "TagA"}, queue_offset=1),
    "past_the_limit": rec(body=b"\0" * 8000, compression="zstd"),  # the fuzz target's limit is 6000
    "inner_batch": rec(
        body=encode_batch_record(b"one", {"TAGS": "TagA", "UNIQ_KEY": "U1"}, flag=1)
        + encode_batch_record(b"", {"KEYS": "k"}),
        sys_flag=INNER_BATCH | NEED_UNWRAP,
        queue_offset=0,
    )
    + rec(
        body=encode_batch_record(b"two", {"TAGS": "TagA"}),
        sys_flag=INNER_BATCH | NEED_UNWRAP,
        compression="lz4",
        queue_offset=2,
    ),
    "unicode": rec(topic="t\u00e9", properties={"n": "\u4e2d\u6587", "KEYS": " a  b "}, queue_offset=3),
}
for name, block in blocks.items():
    for header in (b"\x00\x00\x00", b"\x05\x01\x01", b"\x80\x07\x00"):
        (out / f"{name}-{header.hex()}").write_bytes(header + block)

v2 = {
    "v2_plain": [frame(0), frame(1, tag=None, keys=(), props={}), frame(2, tag="TagB", attempt=3)],
    "v2_flag_unicode": [frame(5, topic="", props={FLAG_PROPERTY: "-7", "n": "\u4e2d"}, keys=("\u00e9", ""))],
    "v2_gzip": [frame(0, body=b"x", encoding=GZIP)],
}
for name, frames in v2.items():
    assert all(len(f) < 256 for f in frames)
    for header in (b"\x00\x00\x02", b"\x05\x01\x03", b"\x80\x07\x02"):
        (out / f"{name}-{header.hex()}").write_bytes(header + b"".join(bytes([len(f)]) + f for f in frames))
print(len(list(out.iterdir())), "seeds")
