"""The single-node catalogue's journal (docs/metadata-format.md): a topic created appends one line instead of
rewriting the catalogue; after kill -9 a torn last line is dropped and every topic created before it is back; the
journal is folded into the snapshot when it outgrows it; damage before readable lines stops the start."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster import metadata as catalogue_module
from odradek.cluster.catalogue_journal import encode_entry
from odradek.cluster.metadata import METADATA_FILE, METADATA_JOURNAL, ClusterMetadata, DamagedFileError
from odradek.embedded import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("journal")) as broker:
        yield broker


def create(broker, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in names]).values():
        future.result(15)


def listed(broker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return set(admin.list_topics(timeout=10).topics)


def test_a_topic_created_appends_to_the_journal_and_leaves_the_snapshot_alone(broker):
    snapshot = broker.data_dir / METADATA_FILE
    before = snapshot.read_bytes(), snapshot.stat().st_ino
    create(broker, "appended")
    assert (snapshot.read_bytes(), snapshot.stat().st_ino) == before
    assert b'"name":"appended"' in (broker.data_dir / METADATA_JOURNAL).read_bytes()


@pytest.mark.parametrize("tail", [b"", b"0badc0de {\"topic\":", b"\x00" * 37, b"garbage without a newline"])
def test_after_kill_9_a_torn_last_line_is_dropped_and_the_topics_before_it_come_back(broker, tail):
    names = [f"kept-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    create(broker, *names)
    broker.kill()
    journal = broker.data_dir / METADATA_JOURNAL
    whole = encode_entry({"deleted_topic": names[0]})
    with open(journal, "ab") as file:  # a deletion cut short mid-line: it must not count
        file.write(whole[:len(whole) // 2] + tail)
    broker.start()
    assert set(names) <= listed(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(names[0], b"still here")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([names[0]])
    message = None
    for _ in range(100):
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            break
    consumer.close()
    assert message is not None and message.value() == b"still here"
    later = f"after-the-tear-{uuid.uuid4().hex[:8]}"
    create(broker, later)  # the journal goes on past the dropped tail
    broker.kill()
    broker.start()
    assert {*names, later} <= listed(broker)


def test_the_journal_is_folded_into_the_snapshot_once_it_outgrows_it(tmp_path, monkeypatch):
    monkeypatch.setattr(catalogue_module, "MIN_JOURNAL_BYTES_TO_COMPACT", 4096)
    catalogue = ClusterMetadata.load(tmp_path, 1)
    for index in range(200):
        catalogue.create_topic(f"t-{index:03d}", 2, 1, {})
    catalogue.delete_topic("t-000")
    catalogue.allocate_producer_id_block(1000)
    journal, snapshot = (tmp_path / METADATA_JOURNAL).stat().st_size, (tmp_path / METADATA_FILE).stat().st_size
    assert 0 < journal <= max(snapshot, 4096)  # folded in along the way, so neither is rewritten per create
    assert snapshot > 4096
    reloaded = ClusterMetadata.load(tmp_path, 1)
    assert sorted(reloaded.topics) == sorted(catalogue.topics) and "t-000" not in reloaded.topics
    assert reloaded.topics_by_id.keys() == catalogue.topics_by_id.keys()
    assert reloaded.next_producer_id_block == 1000
    assert (tmp_path / METADATA_JOURNAL).stat().st_size == 0  # a start folds the journal in


def test_an_unreadable_line_before_readable_ones_is_damage_and_stops_the_load(tmp_path):
    catalogue = ClusterMetadata.load(tmp_path, 1)
    catalogue.create_topic("first", 1, 1, {})
    with open(tmp_path / METADATA_JOURNAL, "ab") as file:
        file.write(b"not an entry\n" + encode_entry({"deleted_topic": "first"}))
    with pytest.raises(DamagedFileError, match=METADATA_JOURNAL):
        ClusterMetadata.load(tmp_path, 1)
