"""The committed message modules are what proto/ generates, and they are wire-compatible with the public API."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_modules_match_proto(tmp_path):
    gen = _generator()
    for fresh in gen.generate(tmp_path):
        committed = gen.DEFAULT_OUT / fresh.name
        assert committed.read_text() == fresh.read_text(), (
            f"{committed} is stale: regenerate it with `python proto/generate.py` after editing proto/"
        )


def test_pull_request_bytes_follow_the_public_field_numbers():
    # PullMessageRequest{group=1, message_queue=2, offset=3, batch_size=4}; MessageQueue{topic=1, id=2, broker=4}
    r = svc.PullMessageRequest(
        group=pb.Resource(name="g"),
        offset=300,
        batch_size=32,
        message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=3, broker=pb.Broker(name="b")),
    )
    assert r.SerializeToString() == (
        b"\x0a\x03\x12\x01g\x12\x0c\x0a\x03\x12\x01T\x10\x03\x22\x03\x0a\x01b\x18\xac\x02\x20\x20"
    )


def test_pull_response_oneof_and_status_codes():
    frames = [svc.PullMessageResponse(status=pb.Status(code=pb.Code.OK)), svc.PullMessageResponse(next_offset=7)]
    assert [f.SerializeToString() for f in frames] == [b"\x0a\x04\x08\xa0\x9c\x01", b"\x18\x07"]
    assert (pb.Code.MESSAGE_NOT_FOUND, pb.Code.ILLEGAL_OFFSET, pb.Code.OFFSET_NOT_FOUND) == (40401, 40019, 40404)
    assert svc.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name["PullMessage"].server_streaming
