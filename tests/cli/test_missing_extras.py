"""A command whose optional dependency (an extra) is not installed says which extra in one line and exits 1."""

from __future__ import annotations

import subprocess
import sys

import pytest

# sys.modules[name] = None makes `import name` raise ModuleNotFoundError, as if the extra were not installed
_RUN = "import sys\n{blocked}\nfrom odradek.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"


def _odradek_without(modules: list[str], *argv: str) -> subprocess.CompletedProcess:
    blocked = "\n".join(f"sys.modules[{name!r}] = None" for name in modules)
    return subprocess.run([sys.executable, "-c", _RUN.format(blocked=blocked), *argv],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("module", ["uvicorn", "starlette"])
def test_console_without_its_extra(module):
    result = _odradek_without([module],
                              "console", "--port", "0")
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == ["odradek: console needs pip install 'odradek[console]'"]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("module", "command"), [
    ("uvicorn", ["schema-registry", "--port", "0"]), ("fastavro", ["schema-registry", "--port", "0"]),
    ("jsonschema", ["schema-registry", "--port", "0"]), ("google.protobuf", ["schema-registry", "--port", "0"]),
    ("grpc_tools", ["schema-registry", "--port", "0"]), ("starlette", ["rest-proxy", "--port", "0"]),
    ("google.protobuf", ["rest-proxy", "--port", "0"]), ("pyiceberg", ["iceberg", "describe", "t"]),
    ("pyarrow", ["iceberg", "describe", "t"])])
def test_the_registry_proxy_and_iceberg_without_their_extras(module, command):
    """The registry and the proxy need the registry extra (the console's web stack is in it too), iceberg its own
    (pyarrow is in spark's too): each command names the one it needs, before it reaches for a cluster."""
    result = _odradek_without([module], *command, "--bootstrap-server", "127.0.0.1:1")
    extra = "iceberg" if command[0] == "iceberg" else "registry"
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [f"odradek: {command[0]} needs pip install 'odradek[{extra}]'"]


def test_a_missing_core_module_is_still_a_traceback():
    """Only the extras' modules get the one line: anything else missing is a bug to see whole."""
    from odradek.cli.extras import missing_extra_line

    assert missing_extra_line("serve", ModuleNotFoundError("no", name="cramjam")) is None
    assert missing_extra_line("console", ModuleNotFoundError("no", name="jinja2.ext")) == \
        "odradek: console needs pip install 'odradek[console]'"
    assert missing_extra_line("schema-registry", ModuleNotFoundError("no", name="google")) == \
        "odradek: schema-registry needs pip install 'odradek[registry]'"  # no google package at all
    assert missing_extra_line("serve", ModuleNotFoundError("no", name="pyarrow")) == \
        "odradek: serve needs pip install 'odradek[spark]'"  # a command with no extra of its own: the first
