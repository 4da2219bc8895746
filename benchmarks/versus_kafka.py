"""CPU per message by process kind, and the connector's Spark lines against Spark's Kafka source (issue 28's
targets)."""
from __future__ import annotations

# (ours, theirs): msgs/s of ours over theirs, reported without a target (on one shared box the wall clock mostly
# compares the brokers)
WALL_PAIRS = [("spark-batch", "spark-kafka"), ("spark-batch", "spark-kafka-tuned"),
              ("spark-batch-narrow", "spark-kafka"), ("spark-batch-narrow", "spark-kafka-tuned"),
              ("spark-batch-narrow", "spark-kafka-narrow")]
# (ours, theirs, target): engine-side CPU per message (Spark's JVM + Python workers) of ours over theirs, at most
# the target
CPU_TARGETS = [("spark-batch-narrow", "spark-kafka-narrow", 0.7), ("spark-batch", "spark-kafka-tuned", 1.3)]


def cpu_per_million(cpu_seconds: dict[str, float], messages: int, broker: str) -> dict[str, float]:
    """CPU-s per 1M messages of Spark's JVM, the Python workers, the broker's JVM (the ``broker`` label of
    ``cpu_seconds``: "kafka" or "shim") and the engine side (Spark's JVM + Python workers)."""
    per = 1e6 / messages if messages else 0.0
    spark = cpu_seconds.get("spark", 0.0) * per
    py = cpu_seconds.get("python_workers", 0.0) * per
    return {"spark": spark, "python_workers": py, "broker": cpu_seconds.get(broker, 0.0) * per,
            "engine": spark + py}


def ratios(rows: list[dict]) -> list[dict]:
    """The ratios of the pairs whose both lines were measured; rows carry ``line``, ``msgs_per_s`` and
    ``cpu_per_1m``."""
    by = {r["line"]: r for r in rows if r.get("msgs_per_s")}
    out = []
    for ours, theirs in WALL_PAIRS:
        if ours in by and theirs in by:
            out.append({"measure": "msgs/s", "ours": ours, "theirs": theirs,
                        "ratio": by[ours]["msgs_per_s"] / by[theirs]["msgs_per_s"], "target": None, "met": None})
    for ours, theirs, target in CPU_TARGETS:
        if ours in by and theirs in by and by[theirs]["cpu_per_1m"]["engine"] > 0:
            ratio = by[ours]["cpu_per_1m"]["engine"] / by[theirs]["cpu_per_1m"]["engine"]
            out.append({"measure": "engine CPU per message", "ours": ours, "theirs": theirs, "ratio": ratio,
                        "target": target, "met": ratio <= target})
    return out


def ratios_md(found: list[dict]) -> str:
    """The ratios as a markdown table (empty when there are none)."""
    if not found:
        return ""
    out = ["\nAgainst Spark's Kafka source (engine CPU = Spark's JVM + our Python workers, per message)\n",
           "| measure | ours | Kafka line | ours / Kafka | target | met |\n|---|---|---|---:|---:|:-:|\n"]
    for r in found:
        target = "" if r["target"] is None else f"<= {r['target']}"
        met = "" if r["met"] is None else ("yes" if r["met"] else "NOT MET")
        out.append(f"| {r['measure']} | {r['ours']} | {r['theirs']} | {r['ratio']:.2f} | {target} | {met} |\n")
    return "".join(out)
