"""Spark as its users deploy it, against a real broker: format("odradek") with no register call in sessions made
by spark-submit and by a plain script run by the venv's python with the venv not on PATH and no PYSPARK_PYTHON
(PySpark 4's automatic registration of the pyspark_odradek module, whose lookup must never fail, since one failing
module hides every Python data source, and whose workers must run the driver's python, not PATH's python3), a
shipped pipeline run by the `odradek` command on a Spark standalone cluster (a master and two workers started from
pyspark's own spark-class on 127.0.0.1), not only on local[N], and the one line that command prints when the
master cannot be reached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odradek.embedded import free_port
from odradek.spark.generators import produce_orders

from .helpers import create_topic, produce

SPARK_HOME = Path(__import__("pyspark").__file__).parent
SPARK_ENV = {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
             "PYSPARK_DRIVER_PYTHON": sys.executable}
READ_SCRIPT = """
import json, sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("no-register").config("spark.ui.enabled", "false").getOrCreate()
rows = (spark.read.format("odradek").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", sys.argv[2])
        .load().selectExpr("CAST(value AS STRING) AS value").collect())
print(json.dumps(sorted(row.value for row in rows)))
spark.stop()
"""


def _environment() -> dict[str, str]:
    return {**os.environ, **SPARK_ENV}


def _venv_not_activated(tmp_path: Path) -> dict[str, str]:
    """A shell where the venv is not activated: no PYSPARK_* variables, and PATH's python3 is the interpreter the
    venv was made from, which has neither pyspark nor odradek."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    venv_bin = str(Path(sys.executable).parent)
    path = [str(bin_dir), *(d for d in os.environ["PATH"].split(os.pathsep) if d != venv_bin)]
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("PYSPARK_", "VIRTUAL_"))}
    environment.update(SPARK_LOCAL_IP="127.0.0.1", PATH=os.pathsep.join(path))
    found = subprocess.run(["python3", "-c", "import pyspark"], env=environment, capture_output=True)
    assert found.returncode != 0, "PATH's python3 has pyspark: this shell would not show the venv's problem"
    return environment


@pytest.mark.timeout(900)  # a JVM of its own: minutes on a loaded 2-core machine
@pytest.mark.parametrize("launcher", ["spark-submit", "python"])
def test_format_odradek_works_in_a_new_session_without_a_register_call(broker, topic_name, tmp_path, launcher):
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(6)])
    script = tmp_path / "read.py"
    script.write_text(READ_SCRIPT)
    if launcher == "spark-submit":
        command, environment = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]"], _environment()
    else:
        command, environment = [sys.executable], _venv_not_activated(tmp_path)
    # from a directory of the user's, not the checkout: Spark's lookup lists sys.path's modules, where make's editable
    # install (editable_mode=compat) puts the checkout and a wheel puts pyspark_odradek in site-packages
    run = subprocess.run([*command, str(script), broker.bootstrap_servers, topic_name], capture_output=True,
                         text=True, timeout=800, env=environment, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == [f"v{i}" for i in range(6)]

LOOKUP_SCRIPT = """
import io, struct, sys
if sys.argv[1] == "without-pyarrow":
    sys.modules["pyarrow"] = None  # as if the spark extra were not installed
from pyspark.sql.worker.lookup_data_sources import _main

out = io.BytesIO()
_main(io.BytesIO(), out)  # what Spark's lookup worker answers the JVM: a count, then (name, pickled source) pairs
data = out.getvalue()
names, position = [], 4
for _ in range(struct.unpack(">i", data[:4])[0]):
    for field in range(2):
        size = struct.unpack(">i", data[position:position + 4])[0]
        if field == 0:
            names.append(data[position + 4:position + 4 + size].decode())
        position += 4 + size
print(names)
"""


@pytest.mark.parametrize("extra, found", [("installed", "['odradek']"), ("without-pyarrow", "[]")])
def test_spark_lookup_finds_odradek_and_never_fails_without_the_spark_extra(extra, found):
    """A module that fails to import makes Spark skip every Python data source: without pyarrow, none is offered."""
    lookup = subprocess.run([sys.executable, "-c", LOOKUP_SCRIPT, extra], capture_output=True, text=True, timeout=60)
    assert lookup.returncode == 0, lookup.stderr[-2000:]
    assert lookup.stdout.strip() == found


def test_an_unreachable_master_is_one_line_and_a_failed_exit(broker, topic_name, tmp_path):
    master = f"spark://127.0.0.1:{free_port()}"  # nothing listens there
    run = subprocess.run([sys.executable, "-m", "odradek", "pipeline", "warehouse-load", "--master", master,
                          "--bootstrap-server", broker.bootstrap_servers, "--topics", topic_name,
                          "--output", str(tmp_path / "warehouse")], capture_output=True, text=True, timeout=240,
                         env=_environment())
    assert run.returncode == 1
    assert run.stderr.splitlines() == [f"odradek: cannot reach the Spark master {master} "
                                       f"({master.removeprefix('spark://')}: [Errno 111] Connection refused)"]
    assert not (tmp_path / "warehouse").exists()


def _wait_for(log: Path, text: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, f"{log.name} exited: {log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} in {log.name}: {log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """spark://127.0.0.1:<port>: a master and two one-core, 1 GB workers, each a spark-class process; yields the
    master URL and the workers' log files."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                   "--webui-port", "0"],
        **{f"worker-{n}": [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                           "--cores", "1", "--memory", "1g", "--webui-port", "0",
                           "--work-dir", str(logs / f"work-{n}"), master_url] for n in (1, 2)},
    }
    processes: dict[str, subprocess.Popen] = {}
    try:
        for name, command in commands.items():
            log = logs / f"{name}.log"
            with log.open("wb") as output:
                processes[name] = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                                   env=_environment())
            _wait_for(log, "Starting Spark master" if name == "master" else "Successfully registered with master",
                      processes[name])
        yield master_url, [logs / "worker-1.log", logs / "worker-2.log"]
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def test_warehouse_load_pipeline_runs_on_a_standalone_cluster(broker, topic_name, tmp_path, standalone_cluster):
    master_url, worker_logs = standalone_cluster
    produce_orders(broker.bootstrap_servers, topic_name, 400, partitions=4, seed=3)
    output = tmp_path / "warehouse"
    run = subprocess.run([sys.executable, "-m", "odradek", "pipeline", "warehouse-load", "--master", master_url,
                          "--bootstrap-server", broker.bootstrap_servers, "--topics", topic_name,
                          "--output", str(output)], capture_output=True, text=True, timeout=300,
                         env=_environment())
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1] == f"loaded 400 rows from 4 partition ranges into {output}"
    table = pq.read_table(output / f"topic={topic_name}").to_pydict()
    assert len({json.loads(value)["order_id"] for value in table["value"]}) == 400
    assert all("Asked to launch executor" in log.read_text() for log in worker_logs)  # both workers ran tasks
