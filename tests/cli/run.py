"""Run the `odradek` command as a user does: `python -m odradek ...` in a subprocess."""

from __future__ import annotations

import subprocess
import sys


def odradek(broker, *args, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "odradek", *args]
    if broker is not None:
        command += ["--bootstrap-server", broker.bootstrap_servers]
    return subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout)
