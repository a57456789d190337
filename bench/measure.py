"""Where every figure of a run is collected, summarised and compared: one flat list of rows, one per metric.

A row names its workload, metric, unit and direction (higher or lower is better, or neither) and holds the repeated
samples of each subject (a broker, or "machine" for the machine's own limits). Keeping every workload's output in
this one shape is what lets the suite print one table, draw one chart and write one JSON without knowing any
workload, and it keeps medians, spreads and ratios computed in exactly one place.

Two ratios per row: to the best peer among the brokers without a JVM (Tansu, noida-db: the peers issue 18's goals
were set against), and to Apache Kafka, the better of its two configurations (KAFKA).
"""

from __future__ import annotations

import statistics

MACHINE = "machine"
KAFKA = ("kafka", "kafka-tuned")  # bench/peers.py's KAFKAS


class Results:
    def __init__(self):
        self._rows: dict[tuple[str, str], dict] = {}

    def _row(self, workload: str, metric: str, unit: str, better: str) -> dict:
        key = (workload, metric)
        if key not in self._rows:
            self._rows[key] = {"workload": workload, "metric": metric, "unit": unit, "better": better,
                               "samples": {}, "errors": {}, "notes": []}
        return self._rows[key]

    def add(self, workload: str, metric: str, subject: str, value: float, *, unit: str,
            better: str | None = "higher") -> None:
        """One sample; better is "higher", "lower", or None for a figure that describes rather than ranks (cores
        busy), which gets no ratio to the peers."""
        self._row(workload, metric, unit, better)["samples"].setdefault(subject, []).append(value)

    def error(self, workload: str, metric: str, subject: str, message: str, *, unit: str,
              better: str = "higher") -> None:
        self._row(workload, metric, unit, better)["errors"][subject] = message

    def note(self, workload: str, metric: str, text: str, *, unit: str = "", better: str = "higher") -> None:
        self._row(workload, metric, unit, better)["notes"].append(text)

    def rows(self) -> list[dict]:
        """Every row with a summary per subject and, where Odradek and a peer both have figures, Odradek's ratio
        to the best peer without a JVM and to the better Kafka (above 1 means Odradek is better, whichever the
        direction)."""
        out = []
        for row in self._rows.values():
            summary = {subject: summarise(values) for subject, values in row["samples"].items()}
            medians = {s: v["median"] for s, v in summary.items() if s not in ("odradek", MACHINE)}
            best_peer, ratio = best_of(summary, {s: v for s, v in medians.items() if s not in KAFKA}, row["better"])
            kafka, to_kafka = best_of(summary, {s: v for s, v in medians.items() if s in KAFKA}, row["better"])
            out.append({**row, "summary": summary, "best_peer": best_peer, "ratio_to_best_peer": ratio,
                        "kafka": kafka, "ratio_to_kafka": to_kafka})
        return out

    def median(self, workload: str, metric: str, subject: str) -> float | None:
        row = self._rows.get((workload, metric))
        values = row["samples"].get(subject) if row else None
        return statistics.median(values) if values else None


def best_of(summary: dict, peers: dict[str, float], better: str | None) -> tuple[str | None, float | None]:
    """The best of `peers` (name to median) in the row's direction and Odradek's ratio to it, above 1 when Odradek
    is better; (None, None) without Odradek, peers or a direction."""
    if "odradek" not in summary or not peers or not better:
        return None, None
    ours = summary["odradek"]["median"]
    if better == "higher":
        best = max(peers, key=peers.get)
        return best, ours / peers[best] if peers[best] else None
    best = min(peers, key=peers.get)
    return best, peers[best] / ours if ours else None


def summarise(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[index]
