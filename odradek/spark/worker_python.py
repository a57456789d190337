"""Which Python Spark's Python workers run when the user has not said: the driver's own interpreter.

Spark starts its Python workers (the lookup that finds format("odradek") on a session's first data source name, the
read and write tasks) with $PYSPARK_PYTHON, else with `python3` from PATH. A script run by a venv's python that is
not activated would get another interpreter, without pyspark or odradek, and Spark would report only that it cannot
find the data source. spark-submit turns spark.pyspark.python into $PYSPARK_PYTHON for the driver, so the variable
is where both of the user's settings show; when it is unset this sets it to sys.executable, before any Spark JVM is
launched (the JVM's lookup worker takes it from the environment it was started with).

The odradek-spark.pth file the package installs calls watch_for_pyspark() at every start of the interpreter, which
only adds a meta path finder that finds nothing: on pyspark's first import it sets the default. A process that never
imports pyspark keeps its environment as it was.
"""

from __future__ import annotations

import os
import sys


def default_to_this_python() -> None:
    """Spark's Python workers run sys.executable unless $PYSPARK_PYTHON names one."""
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


class _PysparkImport:
    """A meta path finder that never finds a module: it sees the first import of pyspark and sets the default."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pyspark":
            default_to_this_python()
        return None


def watch_for_pyspark() -> None:
    if "pyspark" in sys.modules:
        default_to_this_python()
    elif _PysparkImport not in sys.meta_path:
        sys.meta_path.insert(0, _PysparkImport)
