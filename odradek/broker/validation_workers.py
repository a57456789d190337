"""Worker processes that check produced records (records.validation) off the event loop.

Plain child processes (`python -m odradek.broker.validation_workers`) that read a request from stdin and write the
answer to stdout, rather than multiprocessing's pools: those start their workers by re-running the parent's main
module (spawn, forkserver), which an embedded broker's host program need not guard, or by forking a process that has
threads (fork). Processes rather than threads because cramjam holds the GIL while it decompresses, which is most of
the time a bomb costs. A worker exits when its stdin closes, so workers never outlive the broker, even after kill
-9. At most `size` workers run, which bounds the memory such checks take; a request waits for an idle one. A worker
starts when a request first needs one, not before: most brokers never need one (a client's batches are checked on
the event loop), and each costs an interpreter's start (0.05 s of CPU) and 24 MB of memory; the first such request
waits for that start (0.07 s).

A request is a small fixed header (_REQUEST: the record bytes' length, the time range, whether keys are required,
the topic-partition's name) followed by the record bytes as they came, which the worker reads into one buffer and
walks in place, its batch headers read again from the bytes (they passed the broker's checks already); pickling
them cost two more copies of every byte. The answer is a length-prefixed pickle of the refusal, empty if the records
pass.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
import sys

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import whole_batches
from odradek.records.validation import RecordsRefused, refusal

_LENGTH = struct.Struct(">Q")
_REQUEST = struct.Struct(">Q??qqH")  # records' length, time range?, keys required?, earliest, latest, name's length


class ValidationWorkers:
    """Up to `size` worker processes, started as needed and kept while they serve."""

    def __init__(self, size: int):
        self.size = size
        self._idle: list[asyncio.subprocess.Process] = []
        self._running = 0
        self._freed: asyncio.Condition | None = None

    async def check(self, records, topic_partition: str, keys_required: bool,
                    create_time_range: tuple[int, int] | None) -> None:
        """records.validation.validate_records in a worker (of batches through batch.validate_batches already);
        raises what it would raise."""
        name = topic_partition.encode()
        earliest, latest = create_time_range or (0, 0)
        worker = await self._take()
        try:
            worker.stdin.write(_REQUEST.pack(len(records), create_time_range is not None, keys_required, earliest,
                                             latest, len(name)) + name)
            worker.stdin.write(records)
            await worker.stdin.drain()
            (size,) = _LENGTH.unpack(await worker.stdout.readexactly(_LENGTH.size))
            refused = pickle.loads(await worker.stdout.readexactly(size)) if size else None
        except BaseException as exc:  # a dead worker, or a cancelled check whose answer would be left in the pipe
            try:
                worker.kill()
            except ProcessLookupError:
                pass
            await self._release(None)
            if isinstance(exc, (OSError, asyncio.IncompleteReadError)):
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "Record validation worker failed") from None
            raise
        await self._release(worker)
        if refused is not None:
            code, message, record_errors = refused
            if record_errors:
                raise RecordsRefused(ErrorCode(code), message, record_errors)
            raise KafkaError(ErrorCode(code), message)

    async def _take(self) -> asyncio.subprocess.Process:
        if self._freed is None:
            self._freed = asyncio.Condition()
        async with self._freed:
            while not self._idle and self._running >= self.size:
                await self._freed.wait()
            while self._idle:
                worker = self._idle.pop()
                if worker.returncode is None:
                    return worker
                self._running -= 1  # it died while idle (killed, out of memory): start another instead
            self._running += 1
        try:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "odradek.broker.validation_workers",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        except BaseException:
            await self._release(None)
            raise

    async def _release(self, worker: asyncio.subprocess.Process | None) -> None:
        """Hand `worker` back as idle, or (None) count one worker gone."""
        async with self._freed:
            if worker is None:
                self._running -= 1
            else:
                self._idle.append(worker)
            self._freed.notify()


def serve(requests, answers) -> None:
    """A worker's loop: requests from `requests`, answers to `answers`, until `requests` ends."""
    while True:
        head = requests.read(_REQUEST.size)
        if len(head) < _REQUEST.size:
            return
        size, timed, keys_required, earliest, latest, name_size = _REQUEST.unpack(head)
        topic_partition = requests.read(name_size).decode()
        records = requests.read(size)
        headers = [header for header, _ in whole_batches(records)]
        refused = refusal(records, headers, topic_partition, keys_required, (earliest, latest) if timed else None)
        answer = b"" if refused is None else pickle.dumps(refused)
        answers.write(_LENGTH.pack(len(answer)) + answer)
        answers.flush()


if __name__ == "__main__":
    import odradek.records.walk  # noqa: F401  (loaded before the first request, not by it)

    serve(sys.stdin.buffer, sys.stdout.buffer)
