"""Where the Python reader's time goes, on real pulled data.

Reads ``messages`` messages (spread over all queues of the topic) through the connector's executor path
(``partition_reader.read_ranges``: pulls in flight, decode, Arrow batches) under cProfile, and measures each stage on
its own:

1. pull only (``RangeReader``: requests out, frames in, no decoding),
2. the connector's decode (``ArrowBatchDecoder``: the blocks of step 1, already in memory, straight into Arrow
   batches),
3. the per-message path for comparison (the test oracle's ``decode_messages`` into ``Message`` objects, then its
   ``to_record_batch`` over them),
4. the whole executor path, plain and under cProfile, with the CPU time of each thread (the caller, and each
   connection's socket-reader thread) from /proc/self/task.

Run on its own: ``python -m benchmarks.profile_reader --name-server HOST:PORT --topic T [--messages 500000]``;
``python -m benchmarks.run`` runs it after the throughput lines.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import threading
import time
from collections import defaultdict
from pathlib import Path

from rmq_spark.client import RemotingClient
from rmq_spark.client.model import MessageQueue

_TICK = os.sysconf("SC_CLK_TCK")


def _thread_cpu() -> dict[str, float]:
    """CPU seconds (user+system) of each thread of this process, by thread name (summed over equal names)."""
    out: dict[str, float] = defaultdict(float)
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        name = names.get(int(tid), f"native-{tid}")
        if name.startswith("rmq-conn-"):
            name = "socket reader (rmq-conn-*)"
        elif name == "MainThread":
            name = "caller (pulls out, decode to Arrow)"
        out[name] += cpu
    return dict(out)


def _ranges(client: RemotingClient, topic: str, messages: int) -> list[tuple[MessageQueue, int, int]]:
    queues = client.queues(topic, refresh=True)
    mins = client.min_offsets(queues)
    maxs = client.max_offsets(queues)
    per = max(1, messages // len(queues))
    return [(q, mins[q], min(maxs[q], mins[q] + per)) for q in queues]


def _category(filename: str, func: str) -> str | None:
    """The stage a profiled function belongs to, by its module; None for C built-ins (charged to their caller)."""
    f = filename.replace("\\", "/")
    if f == "~":
        return None
    if "rmq_spark/client/remoting/connection" in f or f.endswith("/socket.py"):
        return "socket send/receive"
    if "rmq_spark/client/remoting/frame" in f or "/json/" in f:
        return "frame/header codec"
    if "reference_codec" in f:
        return "record scan / per-message decode (the reference codec)"
    if "arrow_decoder" in f or "rmq_spark/source/schema" in f or "pyarrow" in f:
        return "columnar build (arrow_decoder + Arrow kernels)"
    if f.endswith("/threading.py"):
        return "waiting for responses (events, locks)"
    if "range_reader" in f or "remoting/client" in f or "remoting/broker" in f:
        return "pull bookkeeping"
    if "partition_reader" in f:
        return "partition reader loop"
    return "other"


def _categories(stats: pstats.Stats) -> dict[str, float]:
    """Own time per stage; a C built-in (str.split, socket.sendall, lock.acquire, pa.array...) counts for the stage
    of the Python function that called it most."""
    raw = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = defaultdict(float)
    for (filename, _line, func), (_cc, _nc, tt, _ct, callers) in raw.items():
        cat = _category(filename, func)
        if cat is None:
            cat = "other"
            best = None
            for (cf, _cl, cfn), vals in callers.items():
                c = _category(cf, cfn)
                if c is not None and (best is None or vals[3] > best[0]):
                    best = (vals[3], c)
            if best is not None:
                cat = best[1]
            if "lock" in func and ("acquire" in func or "wait" in func):
                cat = "waiting for responses (events, locks)"
        out[cat] += tt
    return out


class _Blocks:
    """A chunk builder that keeps each pulled block with its window."""

    nbytes = 0

    def __init__(self) -> None:
        self.chunks: list = []

    rows = property(lambda self: len(self.chunks))

    def native_target(self) -> None:
        return None

    def add(self, block: bytes, low: int, high: int) -> None:
        from rmq_spark.client.range_reader import RangeChunk

        self.chunks.append(RangeChunk(block, low, high))


def profile(name_server: str, topic: str, messages: int = 500_000, out_dir: Path | None = None, depth: int = 8) -> dict:
    from rmq_spark.client.range_reader import RangeReader
    from rmq_spark.options import parse_options
    from rmq_spark.source.offsets import QueueRange
    from rmq_spark.source.partition_reader import read_ranges
    from tests.support.reference_codec import decode_messages, to_record_batch

    result: dict = {"messages_requested": messages, "depth": depth}
    with RemotingClient(name_server) as client:
        ranges = _ranges(client, topic, messages)
        total = sum(e - s for _, s, e in ranges)
        result["messages"] = total

        # 1. pull only: each pulled block kept as it came (the native loop hands every block to Python then)
        chunks = []
        t0 = time.perf_counter()
        for mq, s, e in ranges:
            blocks = _Blocks()
            for _ in RangeReader(client, mq, s, e, depth=depth, group="rmq_spark_bench").fill(blocks):
                pass
            chunks.extend((mq, c) for c in blocks.chunks)
        pull_s = time.perf_counter() - t0
        block_bytes = sum(len(c.body) for _, c in chunks)

        # 2. the connector's decode: the pulled blocks straight into Arrow batches (ArrowBatchDecoder), flushed
        #    every ~8192 rows as partition_reader does
        columnar_s = None
        try:
            from rmq_spark.source.arrow_decoder import ArrowBatchDecoder

            t0 = time.perf_counter()
            rows_columnar = 0
            decoder = None
            current = None
            for mq, c in chunks:
                if decoder is None or mq != current:
                    if decoder is not None:
                        rows_columnar += decoder.flush().num_rows
                    decoder, current = ArrowBatchDecoder(mq.broker_name, tags=None), mq
                decoder.add(c.body, c.low, c.high)
                if decoder.rows >= 8192 - 31:
                    rows_columnar += decoder.flush().num_rows
            if decoder is not None:
                rows_columnar += decoder.flush().num_rows
            columnar_s = time.perf_counter() - t0
        except ImportError:
            rows_columnar = 0

        # 3. the per-message path (the test oracle): Message objects, then (as the connector did before the
        #    columnar decoder) Arrow built from them
        decoded = []
        t0 = time.perf_counter()
        for mq, c in chunks:
            for m in decode_messages(c.body, mq.broker_name, tags=None):
                if c.low <= m.queue_offset < c.high:
                    decoded.append(m)
        decode_s = time.perf_counter() - t0
        chunks.clear()
        t0 = time.perf_counter()
        for i in range(0, len(decoded), 8192):
            to_record_batch(decoded[i : i + 8192])
        arrow_s = time.perf_counter() - t0
        n_decoded = len(decoded)
        decoded.clear()

    # 4. the whole executor path, first plain, then under cProfile with per-thread CPU
    options = parse_options({"nameServer": name_server, "topic": topic, "pullDepth": str(depth)})
    t0 = time.perf_counter()
    plain_rows = 0
    for mq, s, e in ranges:
        for batch in read_ranges(options, [QueueRange(mq, s, e)]):
            plain_rows += batch.num_rows
    plain_s = time.perf_counter() - t0
    prof = cProfile.Profile()
    cpu0 = _thread_cpu()
    rows = 0
    t0 = time.perf_counter()
    prof.enable()
    for mq, s, e in ranges:
        for batch in read_ranges(options, [QueueRange(mq, s, e)]):
            rows += batch.num_rows
    prof.disable()
    e2e_s = time.perf_counter() - t0
    cpu1 = _thread_cpu()
    thread_cpu = {
        k: round(cpu1.get(k, 0.0) - cpu0.get(k, 0.0), 2) for k in cpu1 if cpu1.get(k, 0.0) - cpu0.get(k, 0.0) > 0.005
    }

    by_cat = _categories(pstats.Stats(prof))
    profiled_total = sum(by_cat.values()) or 1.0
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(20)

    result.update(
        {
            "stages": {
                "pull_only": {
                    "seconds": round(pull_s, 3),
                    "msgs_per_s": round(total / pull_s),
                    "block_mb": round(block_bytes / 1e6, 1),
                },
                "columnar_decode_to_arrow": (
                    {
                        "seconds": round(columnar_s, 3),
                        "msgs_per_s": round(rows_columnar / columnar_s),
                        "rows": rows_columnar,
                    }
                    if columnar_s
                    else None
                ),
                "per_message_decode": {"seconds": round(decode_s, 3), "msgs_per_s": round(n_decoded / decode_s)},
                "arrow_from_messages": (
                    {"seconds": round(arrow_s, 3), "msgs_per_s": round(n_decoded / arrow_s)} if arrow_s else None
                ),
                "end_to_end": {
                    "seconds": round(plain_s, 3),
                    "msgs_per_s": round(plain_rows / plain_s),
                    "rows": plain_rows,
                },
                "end_to_end_profiled": {
                    "seconds": round(e2e_s, 3),
                    "msgs_per_s": round(rows / e2e_s),
                    "rows": rows,
                    "note": "under cProfile (adds overhead to the caller thread)",
                },
            },
            "thread_cpu_seconds": thread_cpu,
            "caller_tottime_by_category": {
                k: {"seconds": round(v, 3), "share": round(v / profiled_total, 3)}
                for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])
            },
        }
    )
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "profile.txt").write_text(json.dumps(result, indent=2) + "\n\n" + text.getvalue())
        prof.dump_stats(str(out_dir / "profile.pstats"))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile_reader", description=__doc__.split("\n")[0])
    ap.add_argument("--name-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = ap.parse_args(argv)
    print(json.dumps(profile(a.name_server, a.topic, a.messages, Path(a.out), a.depth), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
