"""Which extra of the package brings an optional dependency, for the one line a command prints when it is missing.

A command that needs a module no core dependency installs (the console's web stack, Spark) imports it when it runs;
main() turns the ModuleNotFoundError into `odradek: <command> needs pip install 'odradek[<extra>]'` and exit 1
instead of a traceback.
"""

from __future__ import annotations

# top-level module name -> the extra in pyproject.toml that installs it
EXTRA_OF_MODULE = {
    "starlette": "console",
    "uvicorn": "console",
    "jinja2": "console",
    "multipart": "console",
    "python_multipart": "console",
    "pyspark": "spark",
    "pyarrow": "spark",
    "matplotlib": "bench",
}


def missing_extra_line(command: str | None, exc: ModuleNotFoundError) -> str | None:
    """The line naming the extra that would install the module `exc` did not find, or None when that module is no
    optional dependency."""
    extra = EXTRA_OF_MODULE.get((exc.name or "").split(".")[0])
    if extra is None:
        return None
    return f"odradek: {command or 'this command'} needs pip install 'odradek[{extra}]'"
