"""What the tests of Kafka's command-line tools share: a shell that runs Kafka's tools one after another in one JVM
(tests/java/src/odradek/interop/tools/ToolShell.java: each tool's main class called with the arguments its
bin/kafka-*.sh script passes, its exit code the one it gives Kafka's Exit), because a JVM's start is most of a short
tool's time; the tables the tools print as rows of named columns; and `odradek`'s own commands beside them, for the
facts both show. A tool that runs in the background (a consumer, a verifiable client) is tests/jvm.py's start_tool,
a JVM of its own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

from tests.jvm import TOOLS, compiled_classes, java_command

# What must never be in a tool's output: a Java exception's trace line, or Kafka's "Error while executing" wrapper.
TOOL_FAILURE = re.compile(r"^\s+at [\w$.]+\(|Exception in thread|Error while executing", re.M)


class ToolShell:
    """`shell.run("kafka-topics", "--bootstrap-server", ..., "--list")`: one tool run to its end in the shell's JVM,
    which must succeed with no stack trace unless `expect_failure` (then it must fail); a CompletedProcess."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        with open(log_path, "ab") as log:  # what the tools log (log4j's console appender: the JVM's own stderr)
            self.process = subprocess.Popen(java_command("odradek.interop.tools.ToolShell",
                                                         extra_classpath=[compiled_classes()]),
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                            encoding="utf-8")
        self.lock = threading.Lock()

    def run(self, name: str, *args: object, input: str | None = None, expect_failure: bool | None = False,
            timeout: float = 120) -> subprocess.CompletedProcess:
        """The tool's run, asserted to succeed (or, with expect_failure, to fail; None: either, the caller
        looks at what it printed)."""
        arguments = [str(arg) for arg in args]
        with self.lock:
            logged_before = self.log_path.stat().st_size
            self.process.stdin.write(json.dumps({"main": TOOLS[name], "args": arguments, "input": input}) + "\n")
            self.process.stdin.flush()
            answers: list[str] = []
            reader = threading.Thread(target=lambda: answers.append(self.process.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            with open(self.log_path, "rb") as log:
                log.seek(logged_before)
                logged = log.read().decode(errors="replace")
        if not answers or not answers[0]:
            self.close()
            raise AssertionError(f"{name} {' '.join(arguments)} did not finish in {timeout} s:\n{logged}")
        answer = json.loads(answers[0])
        done = subprocess.CompletedProcess([name, *arguments], answer["rc"], answer["stdout"],
                                           answer["stderr"] + logged)
        ok = done.returncode == 0 and not TOOL_FAILURE.search(done.stdout + done.stderr)
        assert expect_failure is None or ok != expect_failure, (f"{name} {' '.join(arguments)} exited {done.returncode}:\n"
                                      f"{done.stdout}\n{done.stderr}")
        return done

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def table(text: str, column: str) -> list[dict[str, str]]:
    """The rows of the whitespace-aligned table whose header line names `column`, as dicts (the tools print a
    header line of upper-case names, then one line a row, until a blank line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if column in line.split())
    header = lines[start].split()
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(dict(zip(header, line.split())))
    return rows


def tab_table(text: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated table: a header line, then a line a row."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = [cell.strip() for cell in lines[0].split("\t")]
    return [dict(zip(header, (cell.strip() for cell in line.split("\t")))) for line in lines[1:]]


def described_partitions(text: str) -> dict[tuple[str, int], dict[str, str]]:
    """The partition lines of `kafka-topics --describe` or `odradek topics describe` (tab-separated `Key: value`
    fields), by (topic, partition)."""
    partitions = {}
    for line in text.splitlines():
        fields = dict(field.split(": ", 1) if ": " in field else (field.rstrip(":"), "")
                      for field in line.strip().split("\t") if field)
        if "Partition" in fields and "Leader" in fields:
            partitions[fields["Topic"], int(fields["Partition"])] = fields
    return partitions


def odradek(*args: object, input: str | None = None) -> str:
    """Run `odradek ...` to success; its stdout."""
    done = subprocess.run([sys.executable, "-m", "odradek", *map(str, args)], capture_output=True, text=True,
                          input=input, timeout=120)
    assert done.returncode == 0, f"odradek {' '.join(map(str, args))}: {done.stdout}{done.stderr}"
    return done.stdout


def odradek_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """(earliest, latest) by partition, as `odradek topics describe` shows them."""
    described = described_partitions(odradek("topics", "describe", topic, "-b", bootstrap))
    return {partition: tuple(int(end) for end in fields["Offsets"].split(".."))
            for (_, partition), fields in described.items()}
