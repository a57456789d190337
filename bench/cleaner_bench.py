"""Cleaner throughput: MB of dirty log compacted per second on one core, and the offset map's bytes per key.

A compacted log is filled with `--mib` MiB of updates (100-byte values by default, keys drawn uniformly from
`--keys`, 100 records a batch, uncompressed or `--codec`) in 16 MiB segments plus an active one, then one cleaning
runs on the calling thread with an unthrottled `Cleaner` and the whole dedupe buffer. Reported: the dirty bytes
cleaned per second of wall time (map build plus recopy plus swap), the records per second, the bytes written, and
the map's memory per key mapped at its size and at a full load (24 bytes a slot at load factor 0.9). A second,
smaller run fills the map to its limit with one call to measure the probe cost at full load.
Run: `python bench/cleaner_bench.py [--mib 64] [--keys 100000] [--codec 0] [--dir /path]`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import threading
import time
from array import array
from itertools import accumulate
from pathlib import Path

from odradek.config import LogConfig
from odradek.records.batch import Record, encode_batch, validate_batches
from odradek.storage.cleaner import Cleaner, Throttler, cleanable_log
from odradek.storage.log import Log
from odradek.storage.offset_map import OffsetMap

MIB = 1 << 20


def fill(log: Log, mib: int, keys: int, value_size: int, codec: int) -> int:
    rng = random.Random(1)
    value = b"v" * value_size
    now = int(time.time() * 1000)
    records = 0
    while log.size_bytes < mib * MIB:
        batch = encode_batch([Record(index, now, b"user-%08d" % rng.randrange(keys), value) for index in range(100)],
                             compression=codec)
        log.append(batch, validate_batches(batch))
        records += 100
    log.roll()
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--codec", type=int, default=0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.dir))
    try:
        config = LogConfig(cleanup_policy=("compact",), segment_bytes=16 * MIB, min_cleanable_dirty_ratio=0.0)
        log = Log.open(base / "bench-0", config, clean_shutdown=True)
        started = time.perf_counter()
        records = fill(log, args.mib, args.keys, args.value_size, args.codec)
        dirty_bytes = log.size_bytes
        print(f"filled {dirty_bytes / MIB:.1f} MiB, {records} records, {args.keys} keys "
              f"in {time.perf_counter() - started:.1f}s")
        stop = threading.Event()
        cleaner = Cleaner(128 * MIB, Throttler(float("inf"), stop), stop)
        started = time.perf_counter()
        stats = cleaner.clean(cleanable_log(("bench", 0), log, None, int(time.time() * 1000)))
        elapsed = time.perf_counter() - started
        print(f"cleaned {dirty_bytes / MIB:.1f} MiB in {elapsed:.2f}s: {dirty_bytes / MIB / elapsed:.1f} MiB/s, "
              f"{stats.records_read / elapsed:,.0f} records/s; {stats.bytes_read / MIB:.1f} MiB read, "
              f"{stats.bytes_written / MIB:.1f} MiB written, {stats.records_retained} records kept")
        print(f"offset map: {stats.map_entries} keys in {stats.map_bytes} bytes = "
              f"{stats.map_bytes / stats.map_entries:.1f} bytes/key at {100 * stats.map_utilization:.0f}% load")
        log.close()
        full = OffsetMap(1 << 20)
        keys = [b"user-%08d" % index for index in range(full.max_entries)]
        starts = array("q", accumulate(map(len, keys), initial=0))
        started = time.perf_counter()
        full.put_records(b"".join(keys), starts[:-1], array("q", map(len, keys)), 0, array("q", range(len(keys))))
        elapsed = time.perf_counter() - started
        print(f"full map: {full.size} keys in {full.memory_bytes} bytes = {full.memory_bytes / full.size:.1f} "
              f"bytes/key, {elapsed / full.size * 1e6:.2f} us a put up to load factor 0.9")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
