"""The README's "Using it" commands, run as written (through bash) against a real broker whose data directory is
./data, as under `make serve`: each must finish by itself and succeed. The mirror line names placeholder hosts and
the serve line starts a broker, so those two are left out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SKIPPED = ("odradek mirror ", "odradek serve ")


def using_it_commands() -> list[str]:
    section = README.read_text().split("## Using it", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    commands = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [command for command in commands if command and not command.startswith(SKIPPED)]


def test_readme_commands_run_as_written(broker, tmp_path):
    (tmp_path / "data").symlink_to(broker.data_dir)
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVER": broker.bootstrap_servers}
    shell_prelude = f'odradek() {{ "{sys.executable}" -m odradek "$@"; }}\n'
    commands = using_it_commands()
    assert len(commands) == 10 and any("dump-log" in command for command in commands)
    outputs = {}
    for command in commands:
        run = subprocess.run(["bash", "-c", shell_prelude + command], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, (command, run.stderr)
        outputs[command] = run.stdout
    consumed = [out for command, out in outputs.items() if command.startswith("odradek consume")]
    assert [len(out.splitlines()) for out in consumed] == [2, 2]  # both records, and each consume stopped
