"""Idempotent producers against a real broker: hand-made duplicate, out-of-order and stale-epoch batches, and
kafka-python's default idempotent producer retrying through a proxy that cuts connections after forwarding produce
requests (so the broker has written batches whose answers never arrive) without leaving a duplicate."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from odradek.embedded import BrokerProcess
from odradek.errors import ErrorCode
from odradek.protocol import api
from odradek.records.batch import Record, encode_batch

from broker.raw_client import RawClient  # tests/ is the rootdir on sys.path

Produce = api("Produce").request
PRODUCE_KEY = api("Produce").key


def create_topic(bootstrap: str, name: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(name, 1, 1)])[name].result(10)


@pytest.fixture
def client(broker):
    raw = RawClient(broker.port)
    yield raw
    raw.close()


def produce(client, topic: str, producer_id: int, epoch: int, sequence: int, count: int = 2):
    records = encode_batch([Record(i, 1_700_000_000_000, None, b"v%d" % (sequence + i)) for i in range(count)],
                           producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    answer = client.call("Produce", 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)])])
    partition = answer.responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def test_duplicates_out_of_order_and_stale_epochs(broker, client, topic_name):
    create_topic(broker.bootstrap_servers, topic_name)
    init = client.call("InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                       producer_epoch=-1)
    assert init.error_code == ErrorCode.NONE and init.producer_epoch == 0
    pid = init.producer_id
    assert produce(client, topic_name, pid, 0, 0) == (ErrorCode.NONE, 0)
    assert produce(client, topic_name, pid, 0, 2) == (ErrorCode.NONE, 2)
    assert produce(client, topic_name, pid, 0, 0) == (ErrorCode.NONE, 0)  # a retry: answered, not written
    assert produce(client, topic_name, pid, 0, 7)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic_name, pid, 1, 3)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic_name, pid, 1, 0) == (ErrorCode.NONE, 4)  # a new epoch starts over at 0
    assert produce(client, topic_name, pid, 0, 4)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(client, topic_name, pid, 1, 2) == (ErrorCode.NONE, 6)
    described = client.call("DescribeProducers", 0, topics=[
        api("DescribeProducers").request.TopicRequest(name=topic_name, partition_indexes=[0])])
    (state,) = described.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, 1, 3)


class DroppingProxy:
    """Forwards 127.0.0.1:port to the broker; after forwarding every `every`-th Produce request it swallows what the
    broker answers and closes the connection, as a network failure after the write would."""

    def __init__(self, every: int = 3):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream_port = 0
        self.every = every
        self.produce_requests = 0
        self.dropped = 0
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [downstream, upstream]
            cut = threading.Event()
            threading.Thread(target=self._requests, args=(downstream, upstream, cut), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, downstream, cut), daemon=True).start()

    @staticmethod
    def _read_exactly(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _requests(self, downstream, upstream, cut) -> None:
        try:
            while True:
                size = self._read_exactly(downstream, 4)
                body = self._read_exactly(downstream, struct.unpack(">i", size)[0])
                drop = False
                if struct.unpack_from(">h", body)[0] == PRODUCE_KEY:
                    self.produce_requests += 1
                    drop = self.produce_requests % self.every == 1
                if drop:
                    cut.set()
                upstream.sendall(size + body)
                if drop:
                    self.dropped += 1
                    time.sleep(0.3)  # let the broker write the batch
                    raise ConnectionError
        except OSError:
            pass
        finally:
            for sock in (downstream, upstream):
                sock.close()

    @staticmethod
    def _answers(upstream, downstream, cut) -> None:
        try:
            while data := upstream.recv(65536):
                if not cut.is_set():
                    downstream.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


def test_kafka_python_retries_after_lost_answers_write_no_duplicates(tmp_path, topic_name):
    proxy = DroppingProxy()
    broker = BrokerProcess(tmp_path / "data", settings={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    try:
        proxy.upstream_port = broker.port
        create_topic(f"127.0.0.1:{broker.port}", topic_name)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", linger_ms=20, retries=20,
                                 retry_backoff_ms=50, request_timeout_ms=5000)
        futures = [producer.send(topic_name, f"m{i}".encode()) for i in range(200)]
        producer.flush(60)
        offsets = sorted(future.get(10).offset for future in futures)
        producer.close()
        assert proxy.dropped > 0
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_auto_commit=False,
                                 consumer_timeout_ms=2000)
        consumer.assign([TopicPartition(topic_name, 0)])
        consumer.seek_to_beginning()
        values = [record.value for record in consumer]
        consumer.close()
        assert sorted(values) == sorted(f"m{i}".encode() for i in range(200))  # each once
        assert offsets == list(range(200))
    finally:
        proxy.close()
        broker.stop()


def test_a_retried_kip_360_epoch_bump_is_answered_with_the_bumped_epoch(broker, client, topic_name):
    """InitProducerId naming the producer's id and epoch bumps the epoch; the same request again (a retry whose
    answer was lost) gets the same bumped epoch, as from Kafka, where it was PRODUCER_FENCED (fatal to librdkafka);
    an epoch older than that stays fenced."""
    def init(producer_id: int, epoch: int):
        answer = client.call("InitProducerId", 4, transactional_id=topic_name, transaction_timeout_ms=60000,
                             producer_id=producer_id, producer_epoch=epoch)
        return ErrorCode(answer.error_code), answer.producer_id, answer.producer_epoch

    code, pid, epoch = init(-1, -1)
    assert code == ErrorCode.NONE
    bumped = init(pid, epoch)
    assert bumped == (ErrorCode.NONE, pid, epoch + 1)
    assert init(pid, epoch) == bumped
    assert init(pid, epoch + 1) == (ErrorCode.NONE, pid, epoch + 2)
    assert init(pid, epoch)[0] == ErrorCode.PRODUCER_FENCED
