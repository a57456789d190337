"""Changelog snapshot: a compacted topic -> a table of the latest value per key, tombstones honoured.

This is the compaction design's state-restore use case: a service rebuilds its state from the table, then consumes
the topic from the offsets the table covers, which are saved beside it in _offsets.json (Spark's Kafka offset JSON,
usable as startingOffsets). The end offsets are fixed on the driver before reading, so table and offsets agree.
The snapshot does not rely on the cleaner having run: within a key's partition the highest offset wins, and a key
whose latest record is a tombstone (null value) is left out, so an uncompacted log gives the same table.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from pyspark.sql import functions as F

from odradek.spark.kafka_io import LogLookup, committed_reads
from odradek.spark.options import Subscription
from odradek.spark.source import SOURCE_NAME

OFFSETS_FILE = "_offsets.json"
LOOKUP_TIMEOUT_S = 30.0


def latest_per_key(records):
    """Rows (key, value, partition, offset, timestamp) of each key's last record, keys whose last is a tombstone left out.

    Kafka routes a key to one partition and orders a partition by offset, so the highest offset is the latest.
    """
    last = (records.where(F.col("key").isNotNull())
            .groupBy("key")
            .agg(F.max_by(F.struct("value", "partition", "offset", "timestamp"), F.col("offset")).alias("last")))
    return last.where(F.col("last.value").isNotNull()).select("key", "last.*")


def changelog_snapshot(spark, client_config: dict[str, str], topic: str, output: str | os.PathLike) -> dict:
    """Write the snapshot to output (replacing an older one) and return the offsets it covers (committed records:
    read_committed unless the settings say otherwise)."""
    client_config = committed_reads(client_config)
    with LogLookup(client_config, LOOKUP_TIMEOUT_S) as lookup:
        topic_partitions = lookup.partitions_of(Subscription(topics=(topic,)))
        marks = lookup.watermarks(topic_partitions)
    end_offsets = {topic: {str(p): marks[(t, p)][1] for t, p in topic_partitions}}
    reader = (spark.read.format(SOURCE_NAME).option("subscribe", topic).option("startingOffsets", "earliest")
              .option("endingOffsets", json.dumps(end_offsets)))
    for key, value in client_config.items():
        reader = reader.option(f"kafka.{key}", value)
    output = Path(output).resolve()
    staging = output.with_name(f".{output.name}.{uuid.uuid4().hex}.tmp")
    latest_per_key(reader.load()).write.parquet(str(staging))
    (staging / OFFSETS_FILE).write_text(json.dumps(end_offsets))
    _replace_directory(staging, output)
    return end_offsets


def _replace_directory(new: Path, target: Path) -> None:
    """Swap the new snapshot in; the old one is moved aside first and removed only after the swap."""
    old = target.with_name(f".{target.name}.{uuid.uuid4().hex}.old")
    if target.exists():
        os.rename(target, old)
    os.rename(new, target)
    shutil.rmtree(old, ignore_errors=True)
