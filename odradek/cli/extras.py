"""Which extra of the package brings an optional dependency, for the one line a command prints when it is missing.

A command that needs a module no core dependency installs (the web stack of the console, the schema registry and
the REST proxy, the schema formats' parsers, pyiceberg, Spark) imports it when it runs; main() turns the
ModuleNotFoundError into `odradek: <command> needs pip install 'odradek[<extra>]'` and exit 1 instead of a
traceback. A module that several extras bring (starlette, uvicorn, pyarrow) is named by the extra of the command
that needs it; for any other command, by the first extra here that brings it.
"""

from __future__ import annotations

# extra in pyproject.toml -> the modules it installs that odradek imports (a package's parent counts: `google`)
MODULES_OF_EXTRA = {
    "console": ("starlette", "uvicorn", "jinja2", "multipart", "python_multipart"),
    "registry": ("starlette", "uvicorn", "fastavro", "jsonschema", "google.protobuf", "grpc_tools"),
    "spark": ("pyspark", "pyarrow"),
    "iceberg": ("pyiceberg", "pyarrow"),
    "bench": ("matplotlib",),
}
EXTRA_OF_COMMAND = {"console": "console", "schema-registry": "registry", "rest-proxy": "registry",
                    "iceberg": "iceberg", "pipeline": "spark"}


def _brings(module: str, missing: str) -> bool:
    """Whether installing `module` installs the missing one: it, a submodule of it, or a package it is in."""
    return missing == module or missing.startswith(f"{module}.") or module.startswith(f"{missing}.")


def missing_extra_line(command: str | None, exc: ModuleNotFoundError) -> str | None:
    """The line naming the extra that would install the module `exc` did not find, or None when that module is no
    optional dependency."""
    extras = [extra for extra, modules in MODULES_OF_EXTRA.items()
              if any(_brings(module, exc.name or "") for module in modules)]
    if not extras:
        return None
    extra = EXTRA_OF_COMMAND.get(command or "")
    extra = extra if extra in extras else extras[0]
    return f"odradek: {command or 'this command'} needs pip install 'odradek[{extra}]'"
