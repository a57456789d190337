"""What a user sees when the command's surroundings go wrong, run as the user runs it: a consumer whose reader went
away (`| head -1`), a data directory `odradek serve` cannot use, a corrupted record batch on the broker's disk."""

from __future__ import annotations

import subprocess
import sys

from odradek.client import Admin, Producer
from odradek.embedded import BrokerProcess

from .run import odradek


def test_consume_into_head_ends_quietly_and_commits_what_it_printed(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(20_000):
            producer.send(topic_name, f"record {i:05d} " + "x" * 40)
    group = f"g-{topic_name}"
    piped = subprocess.run(["bash", "-c", f'"{sys.executable}" -m odradek consume {topic_name} --bootstrap-server '
                                          f'{broker.bootstrap_servers} --group {group} --from-beginning | head -1; '
                                          'echo "consume exited ${PIPESTATUS[0]}"'],
                           capture_output=True, text=True, timeout=120)
    assert piped.stdout == "record 00000 " + "x" * 40 + "\nconsume exited 0\n"
    lines = piped.stderr.splitlines()
    assert lines[0] == "Unable to write to standard out, closing consumer.", piped.stderr  # Kafka's words
    assert lines[1].startswith("Processed a total of ") and len(lines) == 2, piped.stderr
    printed = int(lines[1].split()[4])
    # what went into the pipe before head left counts as printed, and that is what the group committed
    assert 0 < printed < 20_000
    assert Admin(broker.bootstrap_servers).committed_offsets(group) == {(topic_name, 0): printed}


def test_a_data_directory_serve_cannot_use_is_one_line(tmp_path):
    a_file = tmp_path / "data"
    a_file.write_text("not a directory")
    for directory, said in ((a_file, f"odradek: data directory {a_file} (log.dirs) is a file, not a directory"),
                            (a_file / "below", f"odradek: cannot create data directory {a_file / 'below'} "
                                               "(log.dirs): Not a directory")):
        served = odradek(None, "serve", "--port", "0", "--data-dir", str(directory), timeout=60)
        assert served.returncode == 1 and served.stderr == said + "\n", served.stderr


def test_a_corrupted_batch_is_an_error_naming_partition_and_offset(tmp_path, topic_name):
    """A byte of a record flipped in the segment of a stopped broker (cleanly stopped, so its recovery does not look
    at the batches again): the consumer's CRC check (check.crcs) stops at it, as Kafka's Java consumer does."""
    served = BrokerProcess(tmp_path / "data")
    with served:
        Admin(served.bootstrap_servers).create_topic(topic_name, 1)
        with Producer(served.bootstrap_servers, linger_ms=0) as producer:
            for i in range(3):
                producer.send_sync(topic_name, f"value-{i}-" + "z" * 30)
    segment = tmp_path / "data" / f"{topic_name}-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[data.index(b"value-1-") + 3] ^= 0x01
    segment.write_bytes(bytes(data))
    with served:
        consumed = odradek(served, "consume", topic_name, "--from-beginning", "--idle-timeout-ms", "3000")
    assert consumed.returncode == 1, consumed.stderr
    assert consumed.stderr.startswith(f"odradek: Record batch for partition {topic_name}-0 at offset 1 is invalid, "
                                      "cause: ") and "CRC" in consumed.stderr, consumed.stderr
    assert "value-1-" not in consumed.stdout and "value-2-" not in consumed.stdout
