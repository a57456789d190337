"""Activity stream: page views -> Structured Streaming -> views per page per minute, for monitoring and reporting.

Two queries read the same page-view topic through format("odradek"), because the two uses want different output
modes. Monitoring wants every change at once: an update-mode query writes the running count of each (page, minute)
to a compacted topic keyed by "<page>|<minute>", where compaction keeps the latest count per key. Python data
sources take only append-mode streams, so that query hands each micro-batch to the batch sink (foreachBatch); a
retried micro-batch writes the same counts under the same keys again, which the compacted topic absorbs. Reporting wants
final figures: an append-mode query writes each minute to Parquet once the event-time watermark has closed it. The
event time is the record's timestamp, which producers of page views set to the time of the view.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, functions as F
from pyspark.sql.streaming import StreamingQuery

from odradek.spark.kafka_io import ensure_topic
from odradek.spark.source import SOURCE_NAME

PAGE_VIEW_SCHEMA = "page string, user string, referrer string"


def views_per_minute(page_views: DataFrame, watermark: str) -> DataFrame:
    """(window_start, window_end, page, views) per page and event-time minute."""
    events = page_views.select(F.from_json(F.col("value").cast("string"), PAGE_VIEW_SCHEMA).alias("view"),
                               F.col("timestamp").alias("event_time"))
    return (events.where(F.col("view.page").isNotNull())
            .withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), F.col("view.page").alias("page"))
            .agg(F.count(F.lit(1)).alias("views"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "page", "views"))


def activity_stream(spark, client_config: dict[str, str], input_topic: str, output_topic: str,
                    output: str | Path, checkpoint: str | Path, *, watermark: str = "1 minute",
                    available_now: bool = False, trigger_seconds: int = 10,
                    max_offsets_per_trigger: int | None = None) -> list[StreamingQuery]:
    """Start both queries and return them; with available_now they stop once the topic's current end is processed."""
    ensure_topic(client_config, output_topic, 1, {"cleanup.policy": "compact"})
    reader = (spark.readStream.format(SOURCE_NAME).option("subscribe", input_topic)
              .option("startingOffsets", "earliest"))
    for key, value in client_config.items():
        reader = reader.option(f"kafka.{key}", value)
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    counts = views_per_minute(reader.load(), watermark)
    trigger = {"availableNow": True} if available_now else {"processingTime": f"{trigger_seconds} seconds"}
    checkpoint = Path(checkpoint)

    def write_counts_to_topic(updated: DataFrame, batch_id: int) -> None:
        writer = (updated.select(F.concat_ws("|", "page", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm'Z'"))
                                 .alias("key"),
                                 F.to_json(F.struct("page", "window_start", "window_end", "views")).alias("value"))
                  .write.format(SOURCE_NAME).mode("append").option("topic", output_topic))
        for key, value in client_config.items():
            writer = writer.option(f"kafka.{key}", value)
        writer.save()

    to_topic = (counts.writeStream.outputMode("update").foreachBatch(write_counts_to_topic)
                .option("checkpointLocation", str(checkpoint / "topic")).trigger(**trigger))
    to_parquet = (counts.writeStream.format("parquet").outputMode("append").option("path", str(output))
                  .option("checkpointLocation", str(checkpoint / "parquet")).trigger(**trigger))
    return [to_topic.queryName(f"activity-counts-to-{output_topic}").start(),
            to_parquet.queryName("activity-counts-to-parquet").start()]
