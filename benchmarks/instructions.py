"""Instructions per message of the executor path, counted by callgrind: a figure that does not move with the
machine's load, to track between commits.

The decode paths turn the same recorded pull bodies (32 messages of 100-byte bodies with typical properties per
body, as the broker answers a pull) into Arrow batches of 4,096 rows, as ``partition_reader`` flushes them:

- ``native``: ``ArrowBatchDecoder`` (the native core's gather, then the Arrow kernels), every column;
- ``native-narrow``: the same with the columns ``queueOffset, body`` only;
- ``reference``: the pure-Python codec, the test oracle (``tests/support/reference_codec.py``: ``decode_messages``
  into ``Message`` objects, then ``to_record_batch``).

The executor paths read messages loaded into the embedded RocketMQ (``produce_bulk``: 100-byte bodies, three
tags, a key each, in 4 queues) through ``partition_reader.read_ranges``, the code a Spark task runs: the native pull
loop (requests, answers, the cursor's verdicts) and the decode into Arrow batches of ``rowsPerBatch`` rows. Only
the reading process is counted, in user space (the kernel's share of its system calls and the broker are not):

- ``executor``: every column;
- ``executor-narrow``: ``queueOffset, body``.

A path's count is (set-up and work) minus (set-up only), over the message count; both runs do the work once on a
little data first (the first body; one message of each queue), so the interpreter's start-up, the imports,
first-call set-up, the connections and the building of the bodies cancel out. Run:
``python -m benchmarks.instructions [--messages 100000] [--paths native,executor]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("native", "native-narrow", "reference", "executor", "executor-narrow")
NARROW = ("queueOffset", "body")
PER_BODY = 32
FLUSH_ROWS = 4096
PROPERTIES = {
    "TAGS": "TagA",
    "KEYS": "order-1 order-2",
    "UNIQ_KEY": "7F00000100002A9F0000000000000001",
    "WAIT": "true",
    "CLUSTER": "DefaultCluster",
    "MIN_OFFSET": "0",
    "MAX_OFFSET": "1000",
}


def _bodies(messages: int) -> list[bytes]:
    from tests.support.stored_messages import encode_stored_message

    return [
        b"".join(
            encode_stored_message(
                body=bytes([i % 251]) * 100,
                queue_offset=i,
                commit_log_offset=200 * i,
                properties={**PROPERTIES, "UNIQ_KEY": f"{i:032X}"},
            )
            for i in range(start, min(start + PER_BODY, messages))
        )
        for start in range(0, messages, PER_BODY)
    ]


def _decode(path: str, bodies: list[bytes]) -> int:
    rows = 0
    if path == "reference":
        from tests.support.reference_codec import decode_messages, to_record_batch

        pending: list = []
        for body in bodies:
            pending += decode_messages(body, "broker-a")
            if len(pending) >= FLUSH_ROWS:
                rows += to_record_batch(pending).num_rows
                pending = []
        return rows + (to_record_batch(pending).num_rows if pending else 0)
    from rmq_spark.source.arrow_decoder import ArrowBatchDecoder

    columns = NARROW if path == "native-narrow" else None
    decoder = ArrowBatchDecoder("broker-a", **({"columns": columns} if columns else {}))
    for body in bodies:
        decoder.add(body, 0, 1 << 62)
        if decoder.rows >= FLUSH_ROWS:
            rows += decoder.flush().num_rows
    return rows + decoder.flush().num_rows


def _read(source: dict[str, str], narrow: bool, first_only: bool) -> int:
    """Messages read from every queue of the source's topic through partition_reader (one of each queue with
    ``first_only``)."""
    from rmq_spark.client_pool import shared_client
    from rmq_spark.options import parse_options
    from rmq_spark.source.offsets import QueueRange
    from rmq_spark.source.partition_reader import read_ranges
    from rmq_spark.source.schema import COLUMNS

    options = parse_options(source)
    with shared_client(options) as client:
        queues = client.queues(options.topics[0])
        starts, ends = client.min_offsets(queues), client.max_offsets(queues)
    rows = 0
    for q in queues:
        end = min(ends[q], starts[q] + 1) if first_only else ends[q]
        for batch in read_ranges(options, [QueueRange(q, starts[q], end)], NARROW if narrow else COLUMNS):
            rows += batch.num_rows
    return rows


def _worker(path: str, messages: int, decode: bool, source: dict[str, str]) -> None:
    if path.startswith("executor"):
        _read(source, path == "executor-narrow", first_only=True)
        if decode:
            rows = _read(source, path == "executor-narrow", first_only=False)
            assert rows == messages, f"{path} read {rows} of {messages} messages"
        return
    bodies = _bodies(messages)
    _decode(path, bodies[:1])  # in both runs: imports and first-call set-up cancel out
    if decode:
        rows = _decode(path, bodies)
        assert rows == messages, f"{path} decoded {rows} of {messages} messages"


def _instructions(path: str, messages: int, decode: bool, source: dict[str, str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--worker",
            path,
            "--messages",
            str(messages),
            "--source",
            json.dumps(source),
        ]
        if decode:
            cmd.append("--decode")
        # one BLAS thread: numpy (imported by pyarrow) otherwise starts OpenBLAS's pool, whose idle threads spin
        # for a while and add instructions that depend on how long the run takes
        env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"callgrind run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError("callgrind wrote no summary line")
        return int(match.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--worker", choices=PATHS, help=argparse.SUPPRESS)
    ap.add_argument("--decode", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--source", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.worker, args.messages, args.decode, json.loads(args.source))
        return
    paths = args.paths.split(",")
    report = {"messages": args.messages}
    with contextlib.ExitStack() as stack:
        source: dict[str, str] = {}
        if any(p.startswith("executor") for p in paths):
            from rmq_spark_testing.embedded import EmbeddedRocketMQ

            mq = stack.enter_context(EmbeddedRocketMQ(brokers=1))
            mq.create_topic("instructions", queues=4)
            mq.produce_bulk("instructions", args.messages, 100, tags=["TagA", "TagB", "TagC"])
            source = {"nameServer": mq.name_server, "topic": "instructions"}
        for path in paths:
            total = _instructions(path, args.messages, True, source) - _instructions(path, args.messages, False, source)
            report[path] = round(total / args.messages)
            print(f"{path}: {report[path]:,} instructions per message", flush=True)
    if "native" in report and "reference" in report:
        report["reference_over_native"] = round(report["reference"] / report["native"], 2)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
