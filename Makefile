# Two entry points: `make serve` runs a broker on 127.0.0.1:9092, `make test` runs every test.
# Both set up what they need on a fresh machine: a venv with the package and its test extras, and (as root)
# the Debian packages the tests use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BENCH_INSTALLED := $(VENV)/.installed-bench

.PHONY: serve test dist bench bench-packages loadgen fuzz chaos interop system-packages java-jars iceberg-spark

$(INSTALLED): pyproject.toml setup.py odradek/records/_walk.c odradek/records/_crc32c.c odradek/records/_batch.c \
		odradek/broker/_frame_buffer.c odradek/protocol/_codec.c odradek/storage/_offset_map.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -e '.[test,spark,console,registry,iceberg]' --config-settings editable_mode=compat
	touch $@

# kcat, ZooKeeper for the cluster tests (Debian's package: the server jars in /usr/share/java; the tests start
# their own server from them on a free 127.0.0.1 port, never the package's service), librdkafka's headers for the
# tests of the C load generator (tests/loadgen), and Chromium for the console's browser tests (Playwright drives
# Debian's chromium; its own browser download is not used).
system-packages:
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	test -f /usr/include/librdkafka/rdkafka.h || missing="$$missing librdkafka-dev"; \
	test -x /usr/bin/chromium && command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium chromium-driver"; \
	ls /usr/share/java/zookeeper-*.jar >/dev/null 2>&1 && command -v java >/dev/null 2>&1 || missing="$$missing zookeeper"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing and we are not root:$$missing (their tests will be skipped)"; fi; \
	fi

serve: $(INSTALLED)
	$(BIN)/odradek serve --data-dir data

# The modules run on TEST_WORKERS workers (a module's tests stay on one, sharing its broker, JVM or Spark session):
# most of the suite waits on broker processes, ZooKeeper and JVMs, not on the CPU (a cluster module used 22% of a
# core), so three workers on 2 cores take well under half the time of one. TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= 3
test: $(INSTALLED) system-packages java-jars iceberg-spark
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Apache Kafka's jars (4.3 for the clients, tools, Streams, Connect and the reference broker; 3.9 for a ZooKeeper-mode
# reference), Spark's Kafka connector and Apache Iceberg's Spark runtime for Spark 4.1, from Maven Central into
# build/java/ (ignored), for the tests only: each set is fetched again only when its pom changes.
JAVA_SETS := build/java/kafka-4.3.1/.fetched build/java/kafka-3.9.1/.fetched build/java/spark-kafka/.fetched \
	build/java/iceberg-spark/.fetched
java-jars: $(JAVA_SETS)
build/java/kafka-4.3.1/.fetched: tests/java/pom.xml
build/java/kafka-3.9.1/.fetched: tests/java/kafka-3.9/pom.xml
build/java/spark-kafka/.fetched: tests/java/spark-kafka/pom.xml
build/java/iceberg-spark/.fetched: tests/java/iceberg-spark/pom.xml
$(JAVA_SETS):
	rm -rf $(@D)
	mvn -q -B -f $< dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(abspath $(@D))
	touch $@

# pyspark 4.1 beside the venv's 4.3, for tests/iceberg/test_iceberg_spark_runtime.py alone (no Iceberg Spark runtime
# runs on 4.3: docs/iceberg.md, "Spark"): installed once from PyPI into build/spark-4.1/python (ignored; about
# 490 MB, half a minute), again only when ICEBERG_PYSPARK changes.
ICEBERG_PYSPARK := 4.1.4
ICEBERG_SPARK := build/spark-4.1/.installed-$(ICEBERG_PYSPARK)
iceberg-spark: $(ICEBERG_SPARK)
$(ICEBERG_SPARK): | $(INSTALLED)
	rm -rf $(@D)
	$(BIN)/pip install -q --disable-pip-version-check --target $(@D)/python pyspark==$(ICEBERG_PYSPARK)
	touch $@

# A wheel of this checkout in dist/ (built in an isolated environment with the setuptools pyproject.toml asks for;
# the C extensions make it a platform wheel): pip install dist/odradek-*.whl installs it elsewhere.
dist:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip wheel -q --disable-pip-version-check --no-deps -w dist .

# Structure-aware fuzzing of a real broker for FUZZ_SECONDS (default an hour) with a random seed, printed;
# FUZZ_SEED=n replays one (no pytest timeout here). The suite runs the same test for a fixed seed and 3,000 cases
# (tests/broker/fuzz.py).
FUZZ_SECONDS ?= 3600
fuzz: $(INSTALLED)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_SEED=$(FUZZ_SEED) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
	  -o timeout=0 tests/broker/test_fuzz.py

# Jepsen-style fault runs against three brokers and ZooKeeper for CHAOS_SECONDS (default 10 minutes), runs of up to
# 120 s with seeds CHAOS_SEED, +1, ... (random unless given, printed); prints the table of runs, faults, operations
# and anomalies (docs/chaos.md). CHAOS_RF/CHAOS_MIN_ISR/CHAOS_UNCLEAN set the topic (default 1/1/off).
CHAOS_SECONDS ?= 600
chaos: $(INSTALLED) system-packages
	CHAOS_SECONDS=$(CHAOS_SECONDS) CHAOS_SEED=$(CHAOS_SEED) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
	  -o timeout=0 tests/chaos/test_chaos.py -k long

# The Java ecosystem and Apache Kafka beside Odradek for INTEROP_SECONDS (default 10 minutes): the long versions of
# tests/interop (soaks, many restarts of Streams and Connect) and tests/differential (the fuzzer's generator run
# against Kafka and Odradek with INTEROP_SEED, random unless given, printed). The suite runs a short one of each.
INTEROP_SECONDS ?= 600
interop: $(INSTALLED) system-packages java-jars
	INTEROP_SECONDS=$(INTEROP_SECONDS) INTEROP_SEED=$(INTEROP_SEED) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
	  -o timeout=0 tests/interop tests/differential -k long

$(BENCH_INSTALLED): $(INSTALLED)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[test,bench]'
	touch $@

# What the benchmark needs from Debian (as root): iperf3 for the machine's loopback limit, gcc and librdkafka-dev
# for the C load generator.
bench-packages:
	@missing=""; \
	command -v iperf3 >/dev/null 2>&1 || missing="$$missing iperf3"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	test -f /usr/include/librdkafka/rdkafka.h || missing="$$missing librdkafka-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing and we are not root:$$missing (the workloads that need them will be skipped)"; fi; \
	fi

# The C load generator (bench/loadgen): producer and consumer over librdkafka, and the wire producer and consumer that
# encode the protocol themselves (bench/loadgen/__init__.py says why), built here, never committed. They link
# the librdkafka inside the venv's confluent-kafka wheel when there is one (the Python client's own version, and
# Debian 12's 2.0.2 cannot parse Tansu's ApiVersions v3 answer), else Debian's; the headers are Debian's.
LOADGEN := build/loadgen
LOADGEN_COMMON := bench/loadgen/common.c bench/loadgen/common.h
RDKAFKA_WHEEL := $(firstword $(wildcard $(abspath $(VENV))/lib/python3*/site-packages/confluent_kafka.libs/librdkafka*.so*))
comma := ,
RDKAFKA := $(if $(RDKAFKA_WHEEL),$(RDKAFKA_WHEEL) -Wl$(comma)-rpath$(comma)$(dir $(RDKAFKA_WHEEL)),-lrdkafka)
$(LOADGEN)/loadgen-%: bench/loadgen/%.c $(LOADGEN_COMMON)
	@mkdir -p $(LOADGEN)
	gcc -O2 -Wall -Wextra -Werror -o $@ $< bench/loadgen/common.c $(RDKAFKA)

$(LOADGEN)/loadgen-wire-%: bench/loadgen/wire-%.c bench/loadgen/wire.c bench/loadgen/wire.h $(LOADGEN_COMMON)
	@mkdir -p $(LOADGEN)
	gcc -O2 -Wall -Wextra -Werror -o $@ $< bench/loadgen/wire.c bench/loadgen/common.c $(RDKAFKA)

$(LOADGEN)/floor-server: bench/loadgen/floor-server.c
	@mkdir -p $(LOADGEN)
	gcc -O2 -Wall -Wextra -Werror -o $@ $<

loadgen: $(LOADGEN)/loadgen-producer $(LOADGEN)/loadgen-consumer $(LOADGEN)/loadgen-wire-producer \
	$(LOADGEN)/loadgen-wire-consumer $(LOADGEN)/floor-server

# Odradek beside Tansu, noida-db, Apache Kafka 4.3.1 (its jars: java-jars) and the machine's limits (bench/suite.py):
# bench/results/<date>-<workloads>.json and .png (bench/results/README.md).
# Without a C compiler or librdkafka-dev the load generator's workloads are skipped, the rest still run.
bench: $(BENCH_INSTALLED) bench-packages java-jars
	@$(MAKE) --no-print-directory loadgen || echo "no load generator: its workloads will be skipped"
	$(BIN)/python -m bench.suite
