"""Where every figure of a run is collected, summarised and compared: one flat list of rows, one per metric.

A row names its workload, metric, unit and direction (higher or lower is better, or neither) and holds the repeated
samples of each subject (a broker, or "machine" for the machine's own limits). Keeping every workload's output in
this one shape is what lets the suite print one table, draw one chart and write one JSON without knowing any
workload, and it keeps medians, spreads and ratios computed in exactly one place.
"""

from __future__ import annotations

import statistics

MACHINE = "machine"


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
        to the best peer (above 1 means Odradek is better, whichever the direction)."""
        out = []
        for row in self._rows.values():
            summary = {subject: summarise(values) for subject, values in row["samples"].items()}
            peers = {s: v["median"] for s, v in summary.items() if s not in ("odradek", MACHINE)}
            ratio = best_peer = None
            if "odradek" in summary and peers and row["better"]:
                ours = summary["odradek"]["median"]
                if row["better"] == "higher":
                    best_peer = max(peers, key=peers.get)
                    ratio = ours / peers[best_peer] if peers[best_peer] else None
                else:
                    best_peer = min(peers, key=peers.get)
                    ratio = peers[best_peer] / ours if ours else None
            out.append({**row, "summary": summary, "best_peer": best_peer, "ratio_to_best_peer": ratio})
        return out

    def median(self, workload: str, metric: str, subject: str) -> float | None:
        row = self._rows.get((workload, metric))
        values = row["samples"].get(subject) if row else None
        return statistics.median(values) if values else None


def summarise(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[index]
