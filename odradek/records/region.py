"""A run of whole record batches inside a segment file, handed from the log to the socket without a copy.

The log answers a read with a `FileRegion`; the protocol encoder places it where a `records` field goes, and the
network shell sends it with `os.sendfile` (or `read_bytes()` where sendfile cannot be used, e.g. TLS or tests).
The file descriptor belongs to the segment: a region stays readable after its segment is deleted from the
directory, because the segment closes its file only after `file.delete.delay.ms`.
"""

from __future__ import annotations

import os
import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class FileRegion:
    fd: int
    position: int
    length: int

    def read_bytes(self) -> bytes:
        return os.pread(self.fd, self.length, self.position)
