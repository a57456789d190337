"""Storage throughput beside the disk's own: is the partition log a thin layer over sequential I/O?

Appends of 1 MiB record batches through `Log.append` are timed against writing the same bytes with plain
`os.write` to a file on the same disk in the same run, once with the default flush policy (page cache, the OS
writes back) and once with flush.messages=1 (fdatasync per append) against write+fdatasync. Reads send
`FileRegion`s from `Log.read` with `os.sendfile` to a loopback TCP socket, beside a plain `pread` of the file and a
raw `sendfile` of it. Run: `python bench/storage_bench.py [--mib 256] [--dir /path]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

from odradek.config import LogConfig
from odradek.records.batch import Record, encode_batch, validate_batches
from odradek.storage.log import Log

MIB = 1 << 20


RECORDS_PER_BATCH = 1028


def one_mib_batch() -> bytes:
    """An uncompressed batch of 1 KiB records, just under 1 MiB so it passes the default max.message.bytes."""
    value = os.urandom(1000)
    return encode_batch([Record(index, 1_700_000_000_000, b"key-%05d" % index, value)
                         for index in range(RECORDS_PER_BATCH)])


def rate(nbytes: int, seconds: float) -> float:
    return nbytes / MIB / seconds


def raw_write(path: Path, data: bytes, count: int, *, sync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, data)
        if sync:
            os.fdatasync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return rate(len(data) * count, elapsed)


def log_append(directory: Path, data: bytes, count: int, config: LogConfig) -> tuple[float, Log]:
    log = Log.open(directory, config, clean_shutdown=True)
    headers = validate_batches(data)
    start = time.perf_counter()
    for _ in range(count):
        log.append(data, headers)
    elapsed = time.perf_counter() - start
    return rate(len(data) * count, elapsed), log


def best_of_rounds(root: Path, data: bytes, count: int, rounds: int, *, sync: bool) -> tuple[float, float]:
    """Best raw and best Log MB/s over alternating rounds, each on fresh files removed afterwards, so that neither
    side benefits from page-cache state the other left behind."""
    config = LogConfig(flush_messages=1) if sync else LogConfig()
    raw_rates, log_rates = [], []
    for round_number in range(rounds):
        raw_path = root / f"raw-{round_number}.bin"
        raw_rates.append(raw_write(raw_path, data, count, sync=sync))
        raw_path.unlink()
        log_rate, log = log_append(root / f"bench-{round_number}", data, count, config)
        log_rates.append(log_rate)
        log.delete_all()
    return max(raw_rates), max(log_rates)


class Drain:
    """A loopback TCP connection whose far end discards everything it receives (in a thread)."""

    def __init__(self):
        listener = socket.create_server(("127.0.0.1", 0))
        self.sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
        listener.close()
        self.thread = threading.Thread(target=self._discard, args=(receiver,), daemon=True)
        self.thread.start()

    @staticmethod
    def _discard(receiver: socket.socket) -> None:
        buffer = bytearray(4 * MIB)
        while receiver.recv_into(buffer):
            pass
        receiver.close()

    def close(self) -> None:
        self.sender.close()
        self.thread.join()


def sendfile_all(sock: socket.socket, fd: int, position: int, length: int) -> None:
    while length:
        sent = os.sendfile(sock.fileno(), fd, position, length)
        position += sent
        length -= sent


def read_benchmarks(log: Log, batch_size: int) -> dict[str, float]:
    segment = log.segments[0]
    total = segment.size
    results = {}

    start = time.perf_counter()
    for position in range(0, total, MIB):
        os.pread(segment.fd, MIB, position)
    results["pread 1 MiB chunks"] = rate(total, time.perf_counter() - start)

    drain = Drain()
    start = time.perf_counter()
    sendfile_all(drain.sender, segment.fd, 0, total)
    results["raw sendfile of the file"] = rate(total, time.perf_counter() - start)

    sent = 0
    offset = log.log_start_offset
    start = time.perf_counter()
    while (region := log.read(offset, MIB)) is not None:
        sendfile_all(drain.sender, region.fd, region.position, region.length)
        sent += region.length
        offset += RECORDS_PER_BATCH * (region.length // batch_size)  # every batch is the same here
    results["Log.read + sendfile (1 MiB fetches)"] = rate(sent, time.perf_counter() - start)
    drain.close()
    return results


def run(mib: int, sync_mib: int, rounds: int, directory: str | None = None) -> dict[str, float]:
    """Every figure of this benchmark in MB/s, by name (the suite puts them in its results)."""
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=directory))
    try:
        data = one_mib_batch()
        figures = {}
        figures["raw write"], figures["Log.append, default flush policy"] = best_of_rounds(
            root, data, mib, rounds, sync=False)
        figures["write+fdatasync"], figures["Log.append, flush.messages=1"] = best_of_rounds(
            root, data, sync_mib, rounds, sync=True)
        start = time.perf_counter()
        for _ in range(64):
            validate_batches(data)
        figures["validate_batches (CRC-32C, produce path)"] = rate(64 * len(data), time.perf_counter() - start)
        _, log = log_append(root / "read-0", data, mib, LogConfig())
        figures.update({f"read, {name}": value for name, value in read_benchmarks(log, len(data)).items()})
        log.close()
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB appended with the default flush policy")
    parser.add_argument("--sync-mib", type=int, default=64, help="MiB appended with flush.messages=1")
    parser.add_argument("--rounds", type=int, default=3, help="alternating raw/log rounds; the best of each counts")
    parser.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    args = parser.parse_args()
    figures = run(args.mib, args.sync_mib, args.rounds, args.dir)
    print(f"1 MiB batches, {args.mib} MiB default policy, {args.sync_mib} MiB fdatasync'd, best of {args.rounds}")
    print(f"append, default flush policy: {figures['Log.append, default flush policy']:8.1f} MB/s   "
          f"raw write:       {figures['raw write']:8.1f} MB/s")
    print(f"append, flush.messages=1:     {figures['Log.append, flush.messages=1']:8.1f} MB/s   "
          f"write+fdatasync: {figures['write+fdatasync']:8.1f} MB/s")
    for name, value in figures.items():
        if name.startswith(("read", "validate")):
            print(f"{name:48s} {value:8.1f} MB/s")


if __name__ == "__main__":
    main()
