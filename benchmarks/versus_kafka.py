"""CPU per message by process kind, and the connector's Spark lines against their two anchors: the official Java
client (java-litepull) and Spark's Kafka source, each ratio with its target."""

from __future__ import annotations

# (ours, theirs): msgs/s of ours over theirs, reported without a target (on one shared box the wall clock mostly
# compares the brokers)
WALL_PAIRS = [
    ("spark-batch", "spark-kafka"),
    ("spark-batch", "spark-kafka-tuned"),
    ("spark-batch-narrow", "spark-kafka"),
    ("spark-batch-narrow", "spark-kafka-tuned"),
    ("spark-batch-narrow", "spark-kafka-narrow"),
]
# (ours, theirs, target): engine-side CPU per message (Spark's JVM + Python workers) of ours over theirs, at most
# the target (spark-batch reads the default row, without the properties map, as Kafka's has no headers)
CPU_TARGETS = [("spark-batch-narrow", "spark-kafka-narrow", 0.7), ("spark-batch", "spark-kafka-tuned", 1.2)]
# (ours, anchor, target): msgs/s of ours over the anchor's, at least the target
LITEPULL_TARGETS = [("spark-batch", "java-litepull", 1.25)]


def cpu_per_million(cpu_seconds: dict[str, float], messages: int, broker: str) -> dict[str, float]:
    """CPU-s per 1M messages of Spark's JVM, the Python workers, the broker's JVM (the ``broker`` label of
    ``cpu_seconds``: "kafka" or "shim") and the engine side (Spark's JVM + Python workers)."""
    per = 1e6 / messages if messages else 0.0
    spark = cpu_seconds.get("spark", 0.0) * per
    py = cpu_seconds.get("python_workers", 0.0) * per
    return {"spark": spark, "python_workers": py, "broker": cpu_seconds.get(broker, 0.0) * per, "engine": spark + py}


def ratios(rows: list[dict]) -> list[dict]:
    """The ratios of the pairs whose both lines were measured; rows carry ``line``, ``msgs_per_s`` and
    ``cpu_per_1m``."""
    by = {r["line"]: r for r in rows if r.get("msgs_per_s")}
    out = []
    for ours, theirs in WALL_PAIRS:
        if ours in by and theirs in by:
            out.append(
                {
                    "measure": "msgs/s",
                    "ours": ours,
                    "theirs": theirs,
                    "ratio": by[ours]["msgs_per_s"] / by[theirs]["msgs_per_s"],
                    "target": None,
                    "met": None,
                }
            )
    for ours, theirs, target in LITEPULL_TARGETS:
        if ours in by and theirs in by:
            ratio = by[ours]["msgs_per_s"] / by[theirs]["msgs_per_s"]
            out.append(
                {
                    "measure": "msgs/s",
                    "ours": ours,
                    "theirs": theirs,
                    "ratio": ratio,
                    "target": target,
                    "at_least": True,
                    "met": ratio >= target,
                }
            )
    for ours, theirs, target in CPU_TARGETS:
        if ours in by and theirs in by and by[theirs]["cpu_per_1m"]["engine"] > 0:
            ratio = by[ours]["cpu_per_1m"]["engine"] / by[theirs]["cpu_per_1m"]["engine"]
            out.append(
                {
                    "measure": "engine CPU per message",
                    "ours": ours,
                    "theirs": theirs,
                    "ratio": ratio,
                    "target": target,
                    "met": ratio <= target,
                }
            )
    return out


def ratios_md(found: list[dict]) -> str:
    """The ratios against both anchors, with their targets, as one markdown table (empty when there are none)."""
    if not found:
        return ""
    out = [
        "\nAgainst the anchors, java-litepull and Spark's Kafka source (engine CPU = Spark's JVM + our Python "
        "workers, per message; latency: steady state, ours with a consumer group)\n",
        "| measure | ours | anchor | ours / anchor | target | met |\n|---|---|---|---:|---:|:-:|\n",
    ]
    for r in found:
        target = "" if r["target"] is None else f"{'>=' if r.get('at_least') else '<='} {r['target']}"
        met = "" if r["met"] is None else ("yes" if r["met"] else "NOT MET")
        out.append(f"| {r['measure']} | {r['ours']} | {r['theirs']} | {r['ratio']:.2f} | {target} | {met} |\n")
    return "".join(out)


# percentile -> target: the steady-state latency of ours (with a consumer group) over Spark's Kafka source tuned's,
# at most the target
LATENCY_TARGETS = {"p50": 0.75, "p99": 0.65}


def latency_ratios(ours: dict | None, theirs: dict | None) -> list[dict]:
    """Ours over theirs per percentile of ``LATENCY_TARGETS``, when both latency lines measured a steady state."""
    if not ours or not theirs or "latency_ms" not in ours or "latency_ms" not in theirs:
        return []
    out = []
    for p, target in LATENCY_TARGETS.items():
        a, b = ours["latency_ms"][p], theirs["latency_ms"][p]
        if b and b == b and a == a:  # measured (not NaN) on both sides
            out.append(
                {
                    "measure": f"latency {p}",
                    "ours": "rocketmq",
                    "theirs": "spark-kafka-tuned",
                    "ours_ms": a,
                    "theirs_ms": b,
                    "ratio": a / b,
                    "target": target,
                    "met": a / b <= target,
                }
            )
    return out


def latency_md(latency: dict | None) -> str:
    """The latency lines of each round as a markdown table (empty when not measured); their ratios are in
    ``ratios_md``."""
    if not latency or not latency.get("rounds"):
        return ""
    out = [
        f"\nLatency at {latency['rate']:,} msg/s for {latency['seconds']:.0f} s, steady state (ms; rocketmq with a "
        "consumer group, spark-kafka-tuned = Spark's Kafka source tuned)\n",
        "| round | order | line | p50 | p90 | p99 | max | received | addBatch p50 | walCommit p50 "
        "| triggerExecution p50 |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    ]
    for i, rnd in enumerate(latency["rounds"], 1):
        for name, r in rnd["lines"].items():
            if "latency_ms" not in r:
                out.append(
                    f"| {i} | {' then '.join(rnd['order'])} | {name} | failed: {r.get('error')} | | | | | | | |\n"
                )
                continue
            lat, ph = r["latency_ms"], r["phases_ms"]
            out.append(
                f"| {i} | {' then '.join(rnd['order'])} | {name} | {lat['p50']:.0f} | {lat['p90']:.0f} | "
                f"{lat['p99']:.0f} | {lat['max'] or 0:.0f} | {r['messages']:,} of {r['sent']:,} | "
                f"{ph['addBatch']['p50']:.0f} | {ph['walCommit']['p50']:.0f} | "
                f"{ph['triggerExecution']['p50']:.0f} |\n"
            )
    return "".join(out)


def all_ratios(rows: list[dict], latency: dict | None) -> list[dict]:
    """Every ratio against an anchor: the lines' (``ratios``) and each latency round's."""
    found = ratios(rows)
    for i, rnd in enumerate((latency or {}).get("rounds", []), 1):
        found += [{**r, "measure": f"{r['measure']} (round {i}: {rnd['order'][0]} first)"} for r in rnd["ratios"]]
    return found
