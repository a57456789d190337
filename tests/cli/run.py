"""Run the `odradek` command as a user does: `python -m odradek ...` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys


def odradek_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "odradek", *args]


def odradek(broker, *args, input: str | None = None, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`broker`: passed as --bootstrap-server, or None; `env`: variables added to this process's environment."""
    command = odradek_command(*args)
    if broker is not None:
        command += ["--bootstrap-server", broker.bootstrap_servers]
    return subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
