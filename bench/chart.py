"""The PNG beside each results JSON: what a reader should see at a glance, drawn from the suite's rows alone.

Five panels: Odradek's ratio to the best peer without a JVM for every compared broker metric, then its ratio to Kafka
(the better of its two configurations; both log scale, 1x and the 1.5x goal marked, so "better" always points right
whatever the metric's direction), produce/consume throughput per broker with the spread as error bars (replication's
rows after the single brokers': Odradek's and Kafka's clusters), end-to-end latency percentiles per broker (then
replication's), and the cores the broker and the C load generator kept busy (which side saturated). matplotlib with the Agg backend, so it needs no display.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"odradek": "#1b7837", "tansu": "#762a83", "noida-db": "#e08214", "kafka": "#2166ac",
          "kafka-tuned": "#67a9cf"}


def _label(row: dict) -> str:
    return f"{row['workload']}\n{row['metric']}".replace(", ", "\n", 1)


def _grouped(axis, rows: list[dict], brokers: list[str], scale: float, label=_label) -> None:
    width = 0.8 / max(1, len(brokers))
    for offset, broker in enumerate(brokers):
        xs, medians, low, high = [], [], [], []
        for x, row in enumerate(rows):
            summary = row["summary"].get(broker)
            if summary is not None:
                xs.append(x + (offset - (len(brokers) - 1) / 2) * width)
                medians.append(summary["median"] / scale)
                low.append((summary["median"] - summary["min"]) / scale)
                high.append((summary["max"] - summary["median"]) / scale)
        axis.bar(xs, medians, width, yerr=[low, high], capsize=2, label=broker, color=COLORS.get(broker))
    axis.set_xticks(range(len(rows)))
    axis.set_xticklabels([label(row) for row in rows], fontsize=7, rotation=0)
    axis.legend(fontsize=8)


def _ratios(axis, rows: list[dict], key: str, versus: str) -> None:
    """Odradek's ratio `key` of every row as a bar from 1 on a log scale, green where Odradek is better."""
    values = [row[key] for row in rows]
    axis.barh([f"{row['workload']}: {row['metric']}" for row in rows], [v - 1 for v in values], left=1,
              color=["#1b7837" if v >= 1 else "#b2182b" for v in values])
    axis.set_xscale("log")
    axis.axvline(1, color="black", linewidth=0.8)
    axis.axvline(1.5, color="grey", linestyle="--", linewidth=0.8, label="goal 1.5x")
    axis.invert_yaxis()
    axis.tick_params(axis="y", labelsize=7)
    axis.set_xlabel(f"Odradek / {versus} (right of 1 = Odradek better; medians)")
    axis.legend(fontsize=8)


def draw(rows: list[dict], brokers: list[str], meta: dict, path: Path) -> None:
    compared = [row for row in rows if row["ratio_to_best_peer"] and not row["metric"].startswith("client CPU")]
    versus_kafka = [row for row in rows if row["ratio_to_kafka"] and not row["metric"].startswith("client CPU")]
    replication = [row for row in rows if row["workload"] == "replication"]  # Odradek's and Kafka's clusters
    rates = [row for row in rows if row["unit"] == "records/s" and len(row["summary"]) > 1  # brokers side by side
             and row["workload"] not in ("codecs", "replication")] + \
        [row for row in replication if row["unit"] == "records/s"]  # codecs' rates: their ratios are in panel 1
    latencies = [row for row in rows if row["unit"] == "ms" and row["workload"] in ("latency", "replication")
                 and not row["metric"].startswith("producer behind")]
    busy = [row for row in rows if row["unit"] == "cores" and row["workload"] in ("loadgen", "small requests")]
    figure, (ratios, kafka, throughput, latency, cores) = plt.subplots(
        5, 1, figsize=(14, 10 + 0.22 * (len(compared) + len(versus_kafka))),
        gridspec_kw={"height_ratios": [max(3, len(compared) / 4), max(3, len(versus_kafka) / 4), 2, 2, 2]})
    _ratios(ratios, compared, "ratio_to_best_peer", "best peer without a JVM")
    _ratios(kafka, versus_kafka, "ratio_to_kafka", "Kafka (the better configuration)")

    _grouped(throughput, rates, brokers, 1e6)
    throughput.set_ylabel("million records/s")
    _grouped(latency, latencies, brokers, 1)
    latency.set_yscale("log")
    latency.set_ylabel("ms (log)")
    _grouped(cores, busy, brokers, 1, label=lambda row: "\n".join(  # workload, side, what, variant
        [row["workload"]] + [row["metric"].split(", ")[i] for i in (0, 1, -1)]))
    cores.set_ylabel("cores busy (C load generator)")

    others = meta["others_busy_before_workload"].values()
    figure.suptitle(f"Odradek beside its peers, {meta['date']}, {meta['cpus']} CPUs, other processes busy "
                    f"{min(others):.2f}-{max(others):.2f} CPUs; median of {meta['sizes']['repeat']}, bars = spread",
                    fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
