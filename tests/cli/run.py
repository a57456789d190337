"""Run the `odradek` command as a user does: `python -m odradek ...` in a subprocess (or several at once)."""

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


def odradek_together(*commands: tuple[str, ...], input: str | None = None,
                     timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Independent commands (each a tuple of `odradek` arguments) run at once, as a user's terminals would: their
    results in the same order."""
    running = [(args, subprocess.Popen(odradek_command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)) for args in commands]
    results = []
    for args, process in running:
        out, err = process.communicate(input, timeout=timeout)
        results.append(subprocess.CompletedProcess(args, process.returncode, out, err))
    return results
