"""The leader epoch cache of a log and its `leader-epoch-checkpoint` file: entries as batches of new epochs are
appended, the file's text, read back after a restart, rebuilt from the batches when missing or damaged, cut with the
log at both ends, and OffsetForLeaderEpoch's answers."""

from __future__ import annotations

from odradek.config import LogConfig
from odradek.storage.leader_epochs import LEADER_EPOCH_CHECKPOINT
from odradek.storage.log import Log

from .conftest import append, batch

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=300)


def epochs_log(directory, clock) -> Log:
    """Offsets 0-9 in epoch 0, 10-19 in epoch 2, 20-29 in epoch 5."""
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    for epoch in (0, 2, 5):
        for _ in range(5):
            append(log, batch(2, value_size=100), partition_leader_epoch=epoch)
    return log


def test_entries_file_and_restart(tmp_path, clock):
    directory = tmp_path / "topic-0"
    log = epochs_log(directory, clock)
    assert log.leader_epochs.entries == [(0, 0), (2, 10), (5, 20)]
    assert (directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n2 10\n5 20\n"
    log.leader_epochs.assign(7, log.log_end_offset)  # a leader taking over starts its epoch at its log end
    log.close()
    reopened = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert reopened.leader_epochs.entries == [(0, 0), (2, 10), (5, 20), (7, 30)]  # from the file: epoch 7 has no batch


def test_rebuilt_from_the_batches_when_missing_or_damaged(tmp_path, clock):
    directory = tmp_path / "topic-0"
    epochs_log(directory, clock).close()
    path = directory / LEADER_EPOCH_CHECKPOINT
    for damage in (path.unlink, lambda: path.write_text("0\n3\n0 0\n2 10\n"), lambda: path.write_text("1\n0\n")):
        damage()
        log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
        assert log.leader_epochs.entries == [(0, 0), (2, 10), (5, 20)]
        assert path.read_text() == "0\n3\n0 0\n2 10\n5 20\n"
        log.close()


def test_cut_with_the_log_at_both_ends(tmp_path, clock):
    log = epochs_log(tmp_path / "topic-0", clock)
    log.truncate_to(20)
    assert log.leader_epochs.entries == [(0, 0), (2, 10)]
    log.truncate_to(14)
    assert log.leader_epochs.entries == [(0, 0), (2, 10)]
    log.delete_records_before(4)
    assert log.leader_epochs.entries == [(0, 4), (2, 10)]
    log.delete_records_before(12)
    assert log.leader_epochs.entries == [(2, 12)]
    log.truncate_fully_and_start_at(50)
    assert log.leader_epochs.entries == []


def test_end_offsets_for_leader_epochs(tmp_path, clock):
    log = epochs_log(tmp_path / "topic-0", clock)
    cache = log.leader_epochs
    assert cache.end_offset_for(0, 30) == (0, 10)
    assert cache.end_offset_for(1, 30) == (0, 10)  # the largest epoch at or below the one asked
    assert cache.end_offset_for(2, 30) == (2, 20)
    assert cache.end_offset_for(4, 30) == (2, 20)
    assert cache.end_offset_for(5, 30) == (5, 30)  # the latest epoch ends at the log end
    assert cache.end_offset_for(6, 30) == (-1, -1)
    assert cache.end_offset_for(-1, 30) == (-1, -1)
