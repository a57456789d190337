"""Runs one of tests/java/src/odradek/interop/clients' scenario programs (ClientScenarios, AdminScenarios,
SecuredScenarios) once and gives its JSON lines by scenario name, for the test modules that assert on them
(test_java_clients*.py, test_java_admin*.py): one JVM per group of scenarios, since a JVM's start and a client's
first connection cost seconds on a loaded machine, and independent programs side by side (run_together)."""

from __future__ import annotations

import concurrent.futures
import json
import os
from typing import Callable, Sequence

from tests.jvm import java_program


def run_scenarios(program: str, *args: object, scenarios: Sequence[str], timeout: float = 600) -> dict[str, dict]:
    """{name: {"ok", "ms", "details"}} for every scenario asked; an error naming the program's stderr tail if one
    is missing (the program died before printing it)."""
    done = java_program(f"odradek.interop.clients.{program}", *map(os.fspath, args), ",".join(scenarios),
                        timeout=timeout)
    lines = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            parsed = json.loads(line)
            if "name" in parsed:
                lines[parsed["name"]] = parsed
    missing = [name for name in scenarios if name not in lines]
    if missing:
        raise AssertionError(f"{program} printed no line for {missing} (exit {done.returncode}):\n"
                             + "\n".join(done.stderr.splitlines()[-40:]))
    return lines


def run_together(*runs: Callable[[], dict[str, dict]]) -> list[dict[str, dict]]:
    """Several programs' runs (each a run_scenarios call) side by side: a JVM mostly waits on the broker, so two
    overlap well even on two cores."""
    with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
        return [future.result() for future in [pool.submit(run) for run in runs]]


def passed(lines: dict[str, dict], name: str) -> dict:
    """The details of a scenario that ran to its end (the exception it threw otherwise, in the failure)."""
    line = lines[name]
    assert line["ok"], f"{name}: {line['details']}"
    return line["details"]
