"""`odradek cluster up` as a developer runs it: what it prints, the line that restarts a broker by hand (run as
printed), the broker death it reports, and the same ports again when run again on the same --data-dir."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from .run import odradek, odradek_command

READY_LINE = "Ctrl-C stops them all.\n"


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def _serving_child(pid: int) -> int:
    [broker] = [child for child in _children(pid)
                if b"serve" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")]
    return broker


def _up(data_dir: Path) -> tuple[subprocess.Popen, list[str]]:
    up = subprocess.Popen(odradek_command("cluster", "up", "--brokers", "1", "--data-dir", str(data_dir)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    while not lines or lines[-1] != READY_LINE:
        line = up.stdout.readline()
        assert line, (lines, up.stderr.read() if up.poll() is not None else "")
        lines.append(line)
    return up, lines


def _down(up: subprocess.Popen) -> str:
    up.send_signal(signal.SIGINT)
    _, errors = up.communicate(timeout=120)
    assert up.returncode == 0, errors
    return errors


def test_cluster_up_reports_a_dead_broker_restarts_by_the_printed_line_and_keeps_its_ports(tmp_path):
    data_dir = tmp_path / "cluster"
    up, lines = _up(data_dir)
    try:
        ports = re.findall(r"127\.0\.0\.1:(\d+)", "".join(lines[:2]))
        by_hand = lines[lines.index("To restart one broker by hand (after it stopped), with exactly its settings:\n")
                        + 1].strip()
        assert by_hand.startswith(f"odradek serve --data-dir {data_dir / 'broker-1'} --host 127.0.0.1 "
                                  f"--port {ports[1]} ") and f"zookeeper.connect=127.0.0.1:{ports[0]}" in by_hand

        os.kill(_serving_child(up.pid), signal.SIGKILL)
        assert up.stderr.readline() == (f"odradek: broker 1 (127.0.0.1:{ports[1]}) died with exit code -9; see "
                                        f"{data_dir / 'broker-1.broker.log'}\n")
        shell = f'odradek() {{ "{sys.executable}" -m odradek "$@"; }}\n{by_hand}'
        restarted = subprocess.Popen(["bash", "-c", shell], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        try:
            assert f"ready on 127.0.0.1:{ports[1]}" in restarted.stdout.readline()
            listed = odradek(None, "brokers", "list", "--bootstrap-server", f"127.0.0.1:{ports[1]}")
            assert listed.returncode == 0 and listed.stdout.splitlines()[2].split()[:3] == ["1", "127.0.0.1",
                                                                                           ports[1]]
        finally:
            os.killpg(restarted.pid, signal.SIGTERM)
            restarted.wait(60)
    finally:
        _down(up)

    again, lines_again = _up(data_dir)
    _down(again)
    assert re.findall(r"127\.0\.0\.1:(\d+)", "".join(lines_again[:2])) == ports
