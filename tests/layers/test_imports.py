"""Every import inside odradek/ points down the layers docs/architecture.md lists (issue 46), and bench/ uses the
library, never the CLI.

The layers, bottom up: config, errors, clock and periodic under everything; then records, protocol, storage,
security, cluster, coordinator, broker (with metrics, its Prometheus endpoint), embedded (brokers in a process),
client, console (with the schema registry and the REST proxy beside it, and http_server, how the three are
served), iceberg (its writer uses the registry's schemas), spark and the CLI, which with the package's entry points
(__init__, __main__, pytest_plugin) may import anything. A module imports its own layer and those below it.
Imports inside functions count as much as those at the top: a lazy import is still an arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOTTOM = ("config", "errors", "clock", "periodic")
LAYERS = ("records", "protocol", "storage", "security", "cluster", "coordinator", ("broker", "metrics"), "embedded",
          "client", ("console", "registry", "restproxy", "http_server"), "iceberg", "spark",
          ("cli", "__init__", "__main__", "pytest_plugin"))
RANK = {name: 0 for name in BOTTOM} | {name: rank for rank, layer in enumerate(LAYERS, 1)
                                       for name in ((layer,) if isinstance(layer, str) else layer)}
TOP = RANK["cli"]


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of odradek.* in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "odradek" else [f"odradek.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.startswith("odradek.")]
    return found


def layer_of(module: str) -> str:
    return module.split(".")[1]


def test_every_import_in_odradek_points_down_the_layers():
    upward = []
    for path in sorted((ROOT / "odradek").rglob("*.py")):
        parts = path.relative_to(ROOT / "odradek").with_suffix("").parts
        source = parts[0]
        assert source in RANK, f"{path}: odradek/{source} is in no layer; give it one here and in the docs"
        if RANK[source] == TOP:
            continue
        for line, module in imported(path):
            target = layer_of(module)
            assert target in RANK, f"{path}:{line}: {module} is in no layer"
            if RANK[target] > RANK[source]:
                upward.append(f"odradek/{path.relative_to(ROOT / 'odradek')}:{line}: {source} imports {module}")
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_bench_uses_the_library_not_the_cli():
    via_cli = [f"{path.relative_to(ROOT)}:{line}: {module}" for path in sorted((ROOT / "bench").rglob("*.py"))
               for line, module in imported(path) if layer_of(module) == "cli"]
    assert not via_cli, "bench imports the CLI:\n" + "\n".join(via_cli)
