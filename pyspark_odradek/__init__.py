"""format("odradek") in every Spark session, with no register call: PySpark 4's automatic registration.

When a session first resolves a data source name, Spark's JVM asks a Python worker
(pyspark/sql/worker/lookup_data_sources.py) to import every top-level module whose name starts with `pyspark_` and
to register the `DefaultSource` each one has under its name(). This module is that hook, so spark-submit jobs, the
pyspark shell and notebooks find format("odradek") once the package is installed; the source itself lives in
odradek.spark.source, and odradek.spark.session.register() still works for sessions made before it or elsewhere.
One module failing to import makes Spark skip the lookup of every Python data source, so without the spark extra's
imports (pyarrow) this module offers no DefaultSource instead of failing.
"""

try:
    from odradek.spark.source import OdradekDataSource as DefaultSource
except ImportError:
    pass
