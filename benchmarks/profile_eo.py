"""Where the exactly-once sink's time goes, without Spark: one task's ``write_task`` (exactly_once, a streaming
micro-batch: every row keyed, a half message each) and then the driver's commit of its halves
(``RocketMQStreamWriter.commit``: the commit records and one END_TRANSACTION per half), each under cProfile, on the
embedded broker. For comparison the same rows at least once (the native core's batches).

usage: python -m benchmarks.profile_eo [--messages 50000] [--body-size 100] [--queues 8] [--top 25]

Per phase it prints the wall seconds, the process's CPU seconds (every thread: the connections' reader threads
decode the answers), the main thread's CPU seconds (wall minus that is the main thread waiting: on the broker, or
on the GIL while a reader thread runs), the broker JVM's CPU seconds, and the profile of the main thread (own time,
then cumulative time of the functions in FOCUS); ``--top 0`` runs without cProfile, for the plain timings.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
import uuid
from unittest import mock

from benchmarks.run import BENCH_JVM_FLAGS

FOCUS = (
    "to_rows",
    "row_key",
    "blake2b",
    "wire_message",
    "send_half_async",
    "send_async",
    "send_encoded_async",
    "_request",
    "result",
    "end_transaction_async",
    "end_halves",
    "commit_batch",
    "check",
    "route",
    "add",
)


def _phase(name: str, fn, top: int, labels: dict[int, str]) -> tuple[object, dict]:
    """``fn()`` timed, its CPU counted (this process, its main thread, the broker's JVM), under cProfile unless
    ``top`` is 0."""
    from benchmarks.rss import TreeSampler

    prof = cProfile.Profile() if top else None
    with TreeSampler(jvm_labels=labels) as sampler:
        w0, p0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
        if prof is not None:
            prof.enable()
        out = fn()
        if prof is not None:
            prof.disable()
        wall, cpu, main = time.perf_counter() - w0, time.process_time() - p0, time.thread_time() - t0
    broker = sampler.peaks.cpu_seconds.get("shim", 0.0)
    print(
        f"== {name}: wall {wall:.2f} s, process CPU {cpu:.2f} s, main thread CPU {main:.2f} s "
        f"(main thread not running: {wall - main:.2f} s), broker JVM CPU {broker:.2f} s"
    )
    if prof is not None:
        s = io.StringIO()
        stats = pstats.Stats(prof, stream=s)
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats("|".join(FOCUS), top)
        print(s.getvalue())
    return out, {"wall": wall, "cpu": cpu, "main_cpu": main, "broker_cpu": broker}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile_eo", description=__doc__)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--body-size", type=int, default=100)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--rows-per-batch", type=int, default=10_000, help="Arrow batch size (Spark's default)")
    ap.add_argument("--top", type=int, default=25, help="rows of each profile; 0: no cProfile (plain timings)")
    args = ap.parse_args(argv)

    import pyarrow as pa

    from rmq_spark.client_pool import shared_client
    from rmq_spark.options import parse_sink_options
    from rmq_spark.sink import writers
    from rmq_spark.sink.writers import MicroBatch, RocketMQStreamWriter, write_task
    from rmq_spark_testing.embedded import EmbeddedRocketMQ

    n, size = args.messages, args.body_size
    bodies = [str(i).rjust(size, "x").encode() for i in range(n)]
    step = args.rows_per_batch

    def batches():
        return iter(pa.RecordBatch.from_pydict({"body": bodies[i : i + step]}) for i in range(0, n, step))

    summary = {}
    with EmbeddedRocketMQ(brokers=1, jvm_flags=BENCH_JVM_FLAGS) as mq:
        labels = {mq.pid: "shim"} if mq.pid is not None else {}

        def options(eo: bool):
            topic = f"profile-eo-{uuid.uuid4().hex[:8]}"
            mq.create_topic(topic, queues=args.queues)
            raw = {"nameServer": mq.name_server, "topic": topic}
            if eo:
                raw |= {"deliveryGuarantee": "exactly_once", "producerGroup": f"pg-{topic}"}
            o = parse_sink_options(raw)
            with shared_client(o) as client:
                client.route(topic, refresh=True)
            return o, topic

        def held(topic: str) -> int:
            return sum(o["maxOffset"] - o["minOffset"] for o in mq.offsets(topic))

        with mock.patch.object(writers, "_partition", return_value=0):
            warm, _ = options(True)  # connections, routes, the JVM's send path warmed: not profiled
            query = str(uuid.uuid4())
            RocketMQStreamWriter(warm).commit([write_task(warm, batches(), MicroBatch(query, 0))], 0)

            alo, alo_topic = options(False)
            _, summary["at-least-once task"] = _phase(
                "at-least-once task (write_task)", lambda: write_task(alo, batches()), args.top, labels
            )
            assert held(alo_topic) == n

            eo, eo_topic = options(True)
            query = str(uuid.uuid4())
            commit, summary["exactly-once task"] = _phase(
                "exactly-once task (write_task, halves)",
                lambda: write_task(eo, batches(), MicroBatch(query, 0)),
                args.top,
                labels,
            )
            _, summary["exactly-once driver commit"] = _phase(
                "exactly-once driver commit (RocketMQStreamWriter.commit)",
                lambda: RocketMQStreamWriter(eo).commit([commit], 0),
                args.top,
                labels,
            )
            assert held(eo_topic) == n
    print(f"{n:,} messages x {size} B, {args.queues} queues, one task")
    for name, s in summary.items():
        print(
            f"{name:<28} wall {s['wall']:6.2f} s  {n / s['wall']:>9,.0f} msgs/s  process CPU {s['cpu']:6.2f} s  "
            f"main thread CPU {s['main_cpu']:6.2f} s  ({1e6 * s['main_cpu'] / n:.0f} us/row)  "
            f"broker CPU {s['broker_cpu']:6.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
