"""The Iceberg writer beside a broker (`odradek serve`): a task on the broker's event loop that starts the writer
(odradek/iceberg/writer.py) the first time a topic has odradek.iceberg.mode other than disabled, so that pyiceberg is
imported then and not by every broker, and stops it, off the loop, when the task is cancelled (before the broker
stops: the writer's round may wait on the loop for a read). Without the iceberg extra installed: one error in the
log, no table written. Light to import: nothing of pyiceberg until a topic asks for it."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("odradek.iceberg")


def _wanted(broker) -> bool:
    return any(topic.configs.get("odradek.iceberg.mode", "disabled") != "disabled"
               for topic in broker.metadata.topics.values())


async def serve_beside(broker) -> None:
    """Run until cancelled."""
    check_s = min(broker.config["iceberg.commit.interval.ms"], 1000) / 1000
    writer = None
    try:
        while not _wanted(broker):
            await asyncio.sleep(check_s)
        try:
            from odradek.iceberg.writer import IcebergWriter
        except ModuleNotFoundError as exc:
            log.error("odradek.iceberg.mode is set but the iceberg extra is not installed (%s): no table is written",
                      exc)
            return
        writer = IcebergWriter(broker, asyncio.get_running_loop())
        writer.start()
        await asyncio.Event().wait()
    finally:
        if writer is not None:
            await asyncio.to_thread(writer.stop)
