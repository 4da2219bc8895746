"""The Python client on its own: read queue ranges with the client of a transport (``RemotingClient`` through the
name server, ``GrpcClient`` through the pull gateway), in this process or in child processes.

``source`` is the connection part of the source options: ``{"nameServer": ...}`` or ``{"endpoint": ...}``.

Three ways to read, all over exact ``[min, max)`` ranges taken before the clock starts:

- ``decode``: ``RemotingClient.read_range`` (pulls in flight, decoded ``Message`` objects) — what an application
  using the client gets;
- ``raw``: ``RangeReader`` only (pulled blocks walked, no column built): the transport's share of the cost;
- ``arrow``: the connector's executor path, ``partition_reader.read_ranges`` (decode + Arrow batches of the output
  schema), without Spark.

In one process, queues are read by ``threads`` threads (each takes the next unread queue); with ``processes``
> 1 the queues are dealt round-robin to spawned child processes that start reading together (process start-up is
not timed).
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import threading
import time
from dataclasses import dataclass

from rmq_spark.client.base import BaseClient
from rmq_spark.client.gathering import Gatherer
from rmq_spark.client.model import MessageQueue
from rmq_spark.client_pool import new_client
from rmq_spark.options import parse_options


@dataclass(frozen=True)
class Range:
    broker: str
    queue_id: int
    start: int
    end: int


def connect(source: dict[str, str], topic: str) -> BaseClient:
    """A new client of the transport ``source`` selects."""
    return new_client(parse_options({**source, "topic": topic}))


def plan(source: dict[str, str], topic: str) -> list[Range]:
    """Every queue of the topic with its current [min, max)."""
    with connect(source, topic) as client:
        queues = client.queues(topic, refresh=True)
        mins = client.min_offsets(queues)
        maxs = client.max_offsets(queues)
    return [Range(q.broker_name, q.queue_id, mins[q], maxs[q]) for q in queues]


def walked(mq: MessageQueue) -> Gatherer:
    """A chunk builder that walks the records of each pulled block and builds no column: the pulls' share of the
    executor path (rows in their windows, bytes of whole records)."""
    return Gatherer((), mq)


def _read_one(
    client: BaseClient, topic: str, r: Range, depth: int, mode: str, source: dict[str, str]
) -> tuple[int, int]:
    mq = MessageQueue(topic, r.broker, r.queue_id)
    n = 0
    nbytes = 0
    if mode == "decode":
        for m in client.read_range(mq, r.start, r.end, depth=depth):
            n += 1
            nbytes += len(m.body)
    elif mode == "raw":
        from rmq_spark.client.range_reader import RangeReader

        builder = walked(mq)
        for _ in RangeReader(client, mq, r.start, r.end, depth=depth, group="rmq_spark_bench").fill(builder, 8192):
            n, nbytes = n + builder.rows, nbytes + builder.nbytes
            builder.take_columns()
        n, nbytes = n + builder.rows, nbytes + builder.nbytes  # whole pulled records, not just bodies
    elif mode == "arrow":
        import pyarrow.compute as pc

        from rmq_spark.source.offsets import QueueRange
        from rmq_spark.source.partition_reader import read_ranges

        options = parse_options({**source, "topic": topic, "pullDepth": str(depth)})
        for batch in read_ranges(options, [QueueRange(mq, r.start, r.end)]):
            n += batch.num_rows
            nbytes += pc.sum(pc.binary_length(batch.column("body"))).as_py() or 0
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return n, nbytes


def read_in_process(
    source: dict[str, str], topic: str, ranges: list[Range], *, depth: int = 8, threads: int = 1, mode: str = "decode"
) -> dict:
    """Read the ranges here; returns messages, bodyBytes, seconds (first pull to last message)."""
    client = connect(source, topic)
    try:
        client.queues(topic)  # route cached: set-up, not timed
        todo: queue_mod.SimpleQueue = queue_mod.SimpleQueue()
        for r in ranges:
            todo.put(r)
        totals = [0, 0]
        errors: list[BaseException] = []
        lock = threading.Lock()

        def work() -> None:
            try:
                while True:
                    try:
                        r = todo.get_nowait()
                    except queue_mod.Empty:
                        return
                    n, b = _read_one(client, topic, r, depth, mode, source)
                    with lock:
                        totals[0] += n
                        totals[1] += b
            except BaseException as e:  # reported below
                errors.append(e)

        t0 = time.perf_counter()
        if threads <= 1:
            work()
        else:
            pool = [threading.Thread(target=work, name=f"bench-reader-{i}") for i in range(threads)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
        seconds = time.perf_counter() - t0
        if errors:
            raise errors[0]
        return {"messages": totals[0], "bodyBytes": totals[1], "seconds": seconds}
    finally:
        client.close()


def _child(
    source: dict[str, str], topic: str, ranges: list[Range], depth: int, threads: int, mode: str, ready, go, out
) -> None:
    try:
        with connect(source, topic) as client:
            client.queues(topic)
        ready.wait()  # a Barrier: every child set up
        go.wait()
        t0 = time.time()
        r = read_in_process(source, topic, ranges, depth=depth, threads=threads, mode=mode)
        out.put({"ok": True, "start": t0, "end": time.time(), **r})
    except BaseException as e:
        out.put({"ok": False, "error": f"{type(e).__name__}: {e}"})


def read_in_processes(
    source: dict[str, str],
    topic: str,
    ranges: list[Range],
    *,
    processes: int,
    depth: int = 8,
    threads: int = 1,
    mode: str = "decode",
    timeout: float = 1800.0,
) -> dict:
    """Deal the ranges round-robin to ``processes`` spawned children; seconds = first start to last end."""
    ctx = mp.get_context("spawn")
    shares = [ranges[i::processes] for i in range(processes)]
    shares = [s for s in shares if s]
    ready = ctx.Barrier(len(shares) + 1)
    go = ctx.Event()
    out = ctx.Queue()
    children = [
        ctx.Process(
            target=_child,
            args=(source, topic, s, depth, threads, mode, ready, go, out),
            name=f"bench-client-{i}",
            daemon=True,
        )
        for i, s in enumerate(shares)
    ]
    for c in children:
        c.start()
    try:
        ready.wait(timeout=120)
        go.set()
        results = [out.get(timeout=timeout) for _ in children]
    finally:
        for c in children:
            c.join(30)
            if c.is_alive():
                c.kill()
    failed = [r["error"] for r in results if not r["ok"]]
    if failed:
        raise RuntimeError("client child process failed: " + "; ".join(failed))
    return {
        "messages": sum(r["messages"] for r in results),
        "bodyBytes": sum(r["bodyBytes"] for r in results),
        "seconds": max(r["end"] for r in results) - min(r["start"] for r in results),
    }
