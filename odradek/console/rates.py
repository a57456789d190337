"""Produce and fetch rates over time from the brokers' Prometheus metrics, and consumer-group lag over time.

The brokers count records and bytes in and out (odradek.metrics); a rate is the difference of two scrapes over the
time between them, summed over every broker and topic. A sampler thread scrapes every `interval` seconds and keeps
a bounded history, so the overview's chart has data from the moment the console starts and no page waits on a
scrape. Lag has no history in Kafka; a second sampler thread reads every group's total lag (the first LAG_GROUPS by
name) at the same interval from the console's start, and a group page adds a point each time it reads the group, so
a group's chart goes back to the console's start, not to when its page opened. Both histories are bounded
(RATE_SAMPLES a series, LAG_SAMPLES for each of at most LAG_GROUPS groups). A share group's page scrapes its
share-partitions' in-flight records by state when it is read, so they are as the broker has them then.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable

from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger("odradek.console")

RATE_SAMPLES = 720  # an hour at the default 5 s
LAG_SAMPLES = 720
LAG_GROUPS = 200  # groups whose lag history is kept, the least recently watched dropped first
# counter family -> the series it becomes
COUNTERS = {"odradek_topic_messages_in": "produced", "odradek_topic_messages_out": "fetched",
            "odradek_topic_bytes_in": "produced_bytes", "odradek_topic_bytes_out": "fetched_bytes"}
LOG_SIZE = "odradek_log_size_bytes"
SHARE_RECORDS = "odradek_share_partition_records"


def parse_scrape(text: str) -> tuple[dict[str, float], dict[tuple[str, int], float]]:
    """(each series' total over all topics, each partition's log size) from one /metrics text."""
    totals = dict.fromkeys(COUNTERS.values(), 0.0)
    sizes: dict[tuple[str, int], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in COUNTERS:
            series = COUNTERS[family.name]
            totals[series] += sum(sample.value for sample in family.samples if sample.name.endswith("_total"))
        elif family.name == LOG_SIZE:
            for sample in family.samples:
                sizes[(sample.labels["topic"], int(sample.labels["partition"]))] = sample.value
    return totals, sizes


def parse_share_records(text: str) -> dict[tuple[str, str, int], dict[str, int]]:
    """Each share-partition's in-flight records by state, {(group, topic, partition): {state: records}}, from one
    /metrics text."""
    records: dict[tuple[str, str, int], dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        if family.name == SHARE_RECORDS:
            for sample in family.samples:
                labels = sample.labels
                records.setdefault((labels["group"], labels["topic"], int(labels["partition"])), {})[
                    labels["state"]] = int(sample.value)
    return records


class RateHistory:
    """Scrapes (time, totals) in order; rates between neighbours, per second."""

    def __init__(self, limit: int = RATE_SAMPLES):
        self._samples: collections.deque[tuple[float, dict[str, float]]] = collections.deque(maxlen=limit + 1)
        self._lock = threading.Lock()

    def add(self, at: float, totals: dict[str, float]) -> None:
        with self._lock:
            self._samples.append((at, totals))

    def series(self) -> dict[str, list[float]]:
        """{"time": [unix seconds], "produced": [records/s], ...} for uPlot, one point per scrape after the first.
        A counter that went down (a broker restarted) counts from zero."""
        with self._lock:
            samples = list(self._samples)
        result: dict[str, list[float]] = {"time": [], **{name: [] for name in COUNTERS.values()}}
        for (before, old), (at, new) in zip(samples, samples[1:]):
            seconds = max(at - before, 1e-3)
            result["time"].append(round(at, 3))
            for name in COUNTERS.values():
                delta = new[name] - old[name]
                result[name].append(round((delta if delta >= 0 else new[name]) / seconds, 3))
        return result


class MetricsSampler:
    """A daemon thread scraping the brokers' /metrics every `interval` seconds into a RateHistory; `log_sizes` is
    the latest scrape's bytes per partition."""

    def __init__(self, urls: Iterable[str], interval: float = 5.0):
        self.urls = list(urls)
        self.interval = interval
        self.history = RateHistory()
        self.log_sizes: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="odradek-console-metrics", daemon=True)

    def start(self) -> "MetricsSampler":
        if self.urls:
            self._thread.start()
        return self

    def _scrapes(self):
        """Each broker's metrics text, read now; a broker that does not answer is logged and left out."""
        for url in self.urls:
            try:
                yield urllib.request.urlopen(url, timeout=self.interval).read().decode()
            except OSError as exc:
                log.warning("cannot scrape %s: %s", url, exc)

    def scrape(self) -> None:
        totals = dict.fromkeys(COUNTERS.values(), 0.0)
        sizes: dict[tuple[str, int], float] = {}
        for text in self._scrapes():
            broker_totals, broker_sizes = parse_scrape(text)
            for name, value in broker_totals.items():
                totals[name] += value
            for partition, size in broker_sizes.items():  # a leader and its followers hold the same log
                sizes[partition] = max(size, sizes.get(partition, 0.0))
        self.history.add(time.time(), totals)
        self.log_sizes = sizes

    def share_records(self) -> dict[tuple[str, str, int], dict[str, int]] | None:
        """The share-partitions' in-flight records by state, scraped now (a page shows them as they are, not as
        they were at the last interval); None without metrics or when no broker answers."""
        found: dict[tuple[str, str, int], dict[str, int]] | None = None
        for text in self._scrapes():
            found = (found or {}) | parse_share_records(text)  # a share-partition lives on one broker
        return found

    def _run(self) -> None:
        while not self._stop.is_set():
            self.scrape()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()


class LagHistory:
    """Each watched group's total lag at the times it was read."""

    def __init__(self, limit: int = LAG_SAMPLES, groups: int = LAG_GROUPS):
        self._limit = limit
        self._groups = groups
        self._history: collections.OrderedDict[str, collections.deque] = collections.OrderedDict()
        self._lock = threading.Lock()

    def record(self, group_id: str, at: float, lag: int) -> None:
        with self._lock:
            samples = self._history.pop(group_id, None) or collections.deque(maxlen=self._limit)
            samples.append((round(at, 3), lag))
            self._history[group_id] = samples
            while len(self._history) > self._groups:
                self._history.popitem(last=False)

    def series(self, group_id: str) -> dict[str, list]:
        with self._lock:
            samples = list(self._history.get(group_id, ()))
        return {"time": [at for at, _ in samples], "lag": [lag for _, lag in samples]}


class LagSampler:
    """A daemon thread that every `interval` seconds reads (group id, total lag) pairs with `read` and records them
    in `history`; a failed read (a cluster down) is logged and tried again at the next interval."""

    def __init__(self, read: Callable[[], Iterable[tuple[str, int | None]]], history: LagHistory,
                 interval: float = 5.0):
        self.history = history
        self.interval = interval
        self._read = read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="odradek-console-lag", daemon=True)

    def start(self) -> "LagSampler":
        self._thread.start()
        return self

    def sample(self) -> None:
        at = time.time()
        for group_id, lag in self._read():
            if lag is not None:
                self.history.record(group_id, at, lag)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - any client failure: the next interval tries again
                log.warning("cannot read the groups' lag: %s", exc)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
