"""The network shell in-process, for what a real broker's handlers cannot be made to do on purpose (a handler whose
answer is still being awaited when its connection ends) or a real broker does not show from outside (how many
writes its answers take)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import tempfile
import time

from odradek.broker.network import MAX_IN_FLIGHT, RECV_SIZE, Connection, ConnectionQuotas, NetworkServer, listen
from odradek.config import Listener
from odradek.protocol import RequestHeader, api, decode_response, encode_request
from odradek.records.region import FileRegion

API_VERSIONS = api("ApiVersions")
FETCH = api("Fetch")


def serving(handler, key: int = API_VERSIONS.key) -> tuple[NetworkServer, socket.socket, asyncio.Future]:
    """A server answering api `key` with `handler` on a port of its own: (server, listening socket, its task)."""
    quotas = ConnectionQuotas(max_connections=10, max_per_ip=10, per_ip_overrides={}, max_creation_rate=1000)
    server = NetworkServer({key: handler}, max_request_bytes=1 << 20, max_unauthenticated_bytes=1 << 19, idle_ms=0,
                           unsupported_version_answer=lambda h: None, quotas=quotas)
    server_socket = listen("127.0.0.1", 0)
    server.accept_on(server_socket, Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", server_socket.getsockname()[1]))
    return server, server_socket, asyncio.ensure_future(server.serve())


def held_until(release: asyncio.Event):
    """A handler whose ApiVersions answers are being worked on until `release` is set."""
    async def held_answer():
        await release.wait()
        return API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)

    return lambda connection, header, request: held_answer()


def api_versions_request(correlation_id: int) -> bytes:
    return encode_request(RequestHeader(api_key=18, api_version=0, correlation_id=correlation_id, client_id="t"),
                          API_VERSIONS.request())


async def shut_down(server: NetworkServer, server_socket: socket.socket, task: asyncio.Future, writer) -> None:
    """Close the client's connection (`writer`), then the server, as the tests end."""
    writer.close()
    task.cancel()
    await server.close()
    server_socket.close()


async def answered_ids(reader: asyncio.StreamReader, count: int) -> list[int]:
    """The correlation ids of the next `count` answers on `reader`."""
    ids = []
    for _ in range(count):
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5), "big")
        ids.append(int.from_bytes((await reader.readexactly(size))[:4], "big"))
    return ids


def test_an_answer_finished_after_its_connection_closed_is_dropped_quietly():
    """The writer awaits a handler's answer; the peer closes; the connection ends and its queue is cleared. A handler
    that finishes anyway (it returns a value when cancelled, as a long poll cut short may) must not make the writer
    take from the cleared queue (an IndexError in a task nobody awaits: the chaos runs logged it)."""
    errors: list = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        cancelled = asyncio.Event()

        async def stubborn_answer():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                return API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)

        server, server_socket, task = serving(lambda connection, header, request: stubborn_answer())
        client = socket.create_connection(server_socket.getsockname()[:2])
        client.sendall(api_versions_request(1))
        while not server.connections or not any(c._pending for c in server.connections):
            await asyncio.sleep(0.01)
        client.close()
        await asyncio.wait_for(cancelled.wait(), 5)
        for _ in range(20):  # let the writer run to its end
            await asyncio.sleep(0.01)
        task.cancel()
        await server.close()
        server_socket.close()

    asyncio.run(main())
    assert not [e for e in errors if isinstance(e.get("exception"), IndexError)], errors


def count_writes(monkeypatch) -> list[str]:
    """The names of the connection's write calls as they happen: `_send_now` (the reader's or the writer task's: a
    sendmsg, and a sendfile per large file region, `_sendfile_now`) and `_sendfile_now`."""
    calls: list[str] = []
    for name in ("_send_now", "_sendfile_now"):
        original = getattr(Connection, name)
        monkeypatch.setattr(Connection, name, lambda connection, arg, name=name, original=original: (
            calls.append(name), original(connection, arg))[1])
    return calls


def test_a_pipelined_burst_is_answered_in_one_write(monkeypatch):
    """64 requests sent in one piece are answered in order, in one sendmsg (a few at most, should the burst arrive
    in several receives), not one write per answer: each write is a system call, which for one-record produce
    requests was a fifth of the broker's CPU."""
    writes = count_writes(monkeypatch)
    answer = API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)
    answers = asyncio.run(exchange(lambda connection, header, request: answer, API_VERSIONS.key,
                                   [api_versions_request(n) for n in range(64)]))
    assert [int.from_bytes(frame[:4], "big") for frame in answers] == list(range(64))
    assert 1 <= len(writes) <= 3, writes


async def exchange(handler, key: int, requests: list[bytes]) -> list[bytes]:
    """Send `requests` in one piece to a server answering `key` with `handler`; the answers' frames (no size)."""
    server, server_socket, task = serving(handler, key)
    reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
    writer.write(b"".join(requests))
    answers = []
    for _ in requests:
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5), "big")
        answers.append(await reader.readexactly(size))
    await shut_down(server, server_socket, task, writer)
    return answers


def test_small_fetch_answers_go_out_in_one_write_with_their_records(monkeypatch, tmp_path):
    """Records of a few KB are copied into the answers' write instead of a sendfile each (between two more writes
    of the bytes around them): 16 pipelined fetches of 1 KB cost one sendmsg, not 48 system calls."""
    calls = count_writes(monkeypatch)
    segment = tmp_path / "segment"
    segment.write_bytes(bytes(range(256)) * 8)
    fd = os.open(segment, os.O_RDONLY)
    region = FileRegion(fd, 512, 1024)
    response = FETCH.response(responses=[FETCH.response.FetchableTopicResponse(topic="t", partitions=[
        FETCH.response.PartitionData(partition_index=0, high_watermark=1, records=region)])])
    request = FETCH.request(max_wait_ms=0, min_bytes=0, topics=[])
    try:
        answers = asyncio.run(exchange(lambda connection, header, request: response, FETCH.key, [
            encode_request(RequestHeader(api_key=FETCH.key, api_version=12, correlation_id=n, client_id="t"),
                           request) for n in range(16)]))
    finally:
        os.close(fd)
    assert [decode_response(FETCH.key, 12, frame) for frame in answers] == [
        (n, FETCH.response(responses=[FETCH.response.FetchableTopicResponse(topic="t", partitions=[
            FETCH.response.PartitionData(partition_index=0, high_watermark=1, records=(bytes(range(256)) * 4))])]))
        for n in range(16)]
    assert calls.count("_sendfile_now") == 0 and 1 <= len(calls) <= 3, calls


def test_a_closing_server_answers_what_it_read_and_reads_nothing_more():
    """close(drain_seconds), as a stopping broker calls it: a request being handled when the close begins is
    answered; one sent after that is not read (a stopping broker takes no new work, as Kafka's processors stop
    reading at shutdown, so a client that keeps sending cannot hold the stop up); the connection closes as soon as
    its answers are out, not at the drain's bound."""
    async def main():
        release = asyncio.Event()
        server, server_socket, task = serving(held_until(release))
        reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
        writer.write(api_versions_request(1))
        while not any(c._pending for c in server.connections):
            await asyncio.sleep(0.01)
        started = asyncio.get_running_loop().time()
        closing = asyncio.ensure_future(server.close(drain_seconds=30))
        await asyncio.sleep(0.05)
        writer.write(api_versions_request(2))
        await asyncio.sleep(0.3)  # the second request has arrived
        release.set()
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5), "big")
        first = await reader.readexactly(size)
        rest = await asyncio.wait_for(reader.read(), 5)
        await asyncio.wait_for(closing, 5)
        closed_after = asyncio.get_running_loop().time() - started
        writer.close()
        task.cancel()
        server_socket.close()
        return first, rest, closed_after

    first, rest, closed_after = asyncio.run(main())
    assert int.from_bytes(first[:4], "big") == 1
    assert rest == b"", "the request sent after the close began was read and answered"
    assert closed_after < 5


def test_answers_a_full_socket_did_not_take_go_out_in_order_once_the_peer_reads():
    """A client that pipelines 32 fetches of 512 KB answers and reads nothing for a while (16 MB: more than the
    socket buffers hold) gets every answer, whole and in order, once it reads: what the reader's write could not
    send waits for the writer task, ahead of the answers behind it; every fourth answer's records are a file region
    too large to copy, sent with sendfile."""
    size = 512 * 1024

    async def main(path: str) -> list:
        fd = os.open(path, os.O_RDONLY)
        try:
            def answer(connection, header, request):
                correlation_id = header.correlation_id
                records = FileRegion(fd, 0, size) if correlation_id % 4 == 3 else bytes([correlation_id]) * size
                return FETCH.response(responses=[FETCH.response.FetchableTopicResponse(topic="t", partitions=[
                    FETCH.response.PartitionData(partition_index=0, high_watermark=1, records=records)])])

            server, server_socket, task = serving(answer, FETCH.key)
            reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
            request = FETCH.request(max_wait_ms=0, min_bytes=0, topics=[])
            writer.write(b"".join(encode_request(RequestHeader(api_key=FETCH.key, api_version=12, correlation_id=n,
                                                               client_id="t"), request) for n in range(32)))
            await asyncio.sleep(0.5)  # the server's writes fill both socket buffers meanwhile
            answers = []
            for _ in range(32):
                frame_size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
                correlation_id, response = decode_response(FETCH.key, 12, await reader.readexactly(frame_size))
                answers.append((correlation_id, response.responses[0].partitions[0].records))
            await shut_down(server, server_socket, task, writer)
            return answers
        finally:
            os.close(fd)

    with tempfile.NamedTemporaryFile() as segment:
        segment.write(b"\xee" * size)
        segment.flush()
        answers = asyncio.run(main(segment.name))
    assert [correlation_id for correlation_id, _ in answers] == list(range(32))
    for correlation_id, records in answers:
        assert records == (b"\xee" * size if correlation_id % 4 == 3 else bytes([correlation_id]) * size)


def fetch_answers_of_region(region_of, requests: int) -> list:
    """Send `requests` pipelined fetches to a server that answers each with the file region `region_of(fd)` of a
    64 KB file of 0xee bytes, on a first connection and then on a second one that sends one fetch: [(connection,
    correlation id, records)] of the answers that came whole, and (connection, "closed", None) where a connection
    ended before its answers did."""
    async def main(path: str):
        fd = os.open(path, os.O_RDONLY)
        try:
            def answer(connection, header, request):
                return FETCH.response(responses=[FETCH.response.FetchableTopicResponse(topic="t", partitions=[
                    FETCH.response.PartitionData(partition_index=0, high_watermark=1, records=region_of(fd))])])

            server, server_socket, task = serving(answer, FETCH.key)
            request = FETCH.request(max_wait_ms=0, min_bytes=0, topics=[])
            frames = [encode_request(RequestHeader(api_key=FETCH.key, api_version=12, correlation_id=n,
                                                   client_id="t"), request) for n in range(requests)]
            answers = []
            for connection in range(2):
                reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
                writer.write(b"".join(frames if connection == 0 else frames[:1]))
                try:
                    for _ in range(requests if connection == 0 else 1):
                        frame_size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
                        correlation_id, response = decode_response(FETCH.key, 12,
                                                                   await reader.readexactly(frame_size))
                        answers.append((connection, correlation_id, response.responses[0].partitions[0].records))
                except (asyncio.IncompleteReadError, ConnectionError):
                    answers.append((connection, "closed", None))
                writer.close()
            await shut_down(server, server_socket, task, writer)
            return answers
        finally:
            os.close(fd)

    with tempfile.NamedTemporaryFile() as segment:
        segment.write(b"\xee" * 65536)
        segment.flush()
        return asyncio.run(main(segment.name))


def test_a_file_region_past_the_end_of_its_file_closes_only_that_connection():
    """A region handed out longer than its segment file now is (a truncation raced the read) cannot be sent whole:
    the connection is closed rather than left waiting for bytes that will never come, or answered with a frame
    whose records are short; the server goes on answering other connections."""
    answered = []

    def region_of(fd):  # the first answer's region is cut short, the later ones are whole
        answered.append(fd)
        return FileRegion(fd, 32768, 65536 if len(answered) == 1 else 32768)

    answers = fetch_answers_of_region(region_of, 2)
    assert answers == [(0, "closed", None), (1, 0, b"\xee" * 32768)]


def test_a_file_region_sendfile_cannot_send_is_read_and_sent(monkeypatch):
    """Where sendfile refuses the pair of file and socket (EINVAL, ENOSYS), the region's bytes are read and sent
    instead, in order with everything around them."""
    def no_sendfile(*args):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "sendfile", no_sendfile)
    answers = fetch_answers_of_region(lambda fd: FileRegion(fd, 1000, 60000), 3)
    assert answers == [(0, n, b"\xee" * 60000) for n in range(3)] + [(1, 0, b"\xee" * 60000)]


def loop_cpu_while(held_for: float) -> float:
    """The CPU seconds this process (the server's event loop) uses while `held_for` seconds pass."""
    started = time.process_time()
    time.sleep(held_for)
    return time.process_time() - started


def test_a_connection_at_its_limit_of_requests_in_flight_leaves_the_loop_idle():
    """MAX_IN_FLIGHT requests being worked on and more waiting unread in the socket: the reader waits for a free
    slot without the event loop waking again and again for the unread bytes (the socket's read registration is
    level-triggered, so it is dropped while the reader waits on something else); once the answers come, every
    request is answered in order."""
    async def main():
        release = asyncio.Event()
        server, server_socket, task = serving(held_until(release))
        reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
        writer.write(b"".join(api_versions_request(n) for n in range(MAX_IN_FLIGHT)))
        while not any(len(c._pending) == MAX_IN_FLIGHT for c in server.connections):
            await asyncio.sleep(0.01)
        writer.write(b"".join(api_versions_request(n) for n in range(MAX_IN_FLIGHT, MAX_IN_FLIGHT + 8)))
        await asyncio.sleep(0.05)
        cpu = await asyncio.get_running_loop().run_in_executor(None, loop_cpu_while, 0.5)
        release.set()
        correlation_ids = await answered_ids(reader, MAX_IN_FLIGHT + 8)
        await shut_down(server, server_socket, task, writer)
        return cpu, correlation_ids

    cpu, correlation_ids = asyncio.run(main())
    assert correlation_ids == list(range(MAX_IN_FLIGHT + 8))
    assert cpu < 0.15, f"{cpu:.2f} s of CPU in 0.5 s of waiting"


def test_a_muted_connection_leaves_the_loop_idle():
    """A throttled client's channel is muted (KIP-219): requests it sends meanwhile wait unread in the socket,
    without the event loop waking for them on every turn, and are answered once the mute ends."""
    async def main():
        def answer(connection, header, request):
            if header.correlation_id == 1:
                connection.mute(1500)
            return API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)

        server, server_socket, task = serving(answer)
        reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
        writer.write(api_versions_request(1))
        first = await answered_ids(reader, 1)
        writer.write(api_versions_request(2))  # read, then held by the mute
        await asyncio.sleep(0.1)
        writer.write(api_versions_request(3))  # left in the socket meanwhile
        await asyncio.sleep(0.05)
        cpu = await asyncio.get_running_loop().run_in_executor(None, loop_cpu_while, 0.5)
        rest = await answered_ids(reader, 2)
        await shut_down(server, server_socket, task, writer)
        return cpu, first + rest

    cpu, correlation_ids = asyncio.run(main())
    assert correlation_ids == [1, 2, 3]
    assert cpu < 0.15, f"{cpu:.2f} s of CPU in 0.5 s of waiting"


def test_answers_ready_behind_one_still_being_worked_on_wait_for_it():
    """A long poll, then two requests answered at once, pipelined: nothing goes out while the long poll waits (the
    answers ready behind it would overtake it), then all three in request order as soon as it is done."""
    async def main():
        release = asyncio.Event()
        held = held_until(release)
        ready = API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)
        server, server_socket, task = serving(
            lambda connection, header, request: held(connection, header, request) if header.correlation_id == 0
            else ready)
        reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
        writer.write(b"".join(api_versions_request(n) for n in range(3)))
        early = None
        try:
            early = await asyncio.wait_for(reader.readexactly(4), 0.5)
        except asyncio.TimeoutError:
            pass
        release.set()
        correlation_ids = await answered_ids(reader, 3)
        await shut_down(server, server_socket, task, writer)
        return early, correlation_ids

    early, correlation_ids = asyncio.run(main())
    assert early is None, "an answer went out while the first request's was still being worked on"
    assert correlation_ids == [0, 1, 2]


def test_a_large_request_arriving_in_pieces_is_handled_whole_and_the_loop_idles_between_them():
    """A Produce frame three times the size of one receive, sent in pieces with pauses (received in place by the
    read callback): the event loop stays idle while the rest is missing, the handler gets every byte, and the answer
    comes. A second client that closes in the middle of a large request loses only its own connection."""
    produce = api("Produce")
    received = []

    def answer(connection, header, request):
        received.append(bytes(request.topic_data[0].partition_data[0].records))
        return produce.response(responses=[], throttle_time_ms=0)

    def large_frame(correlation_id: int, records: bytes) -> bytes:
        data = produce.request.PartitionProduceData(index=0, records=records)
        body = produce.request(transactional_id=None, acks=1, timeout_ms=1000,
                               topic_data=[produce.request.TopicProduceData(name="t", partition_data=[data])])
        return encode_request(RequestHeader(api_key=produce.key, api_version=7, correlation_id=correlation_id,
                                            client_id="t"), body)

    records = os.urandom(RECV_SIZE * 3)
    frame = large_frame(7, records)

    async def main():
        server, server_socket, task = serving(answer, produce.key)
        address = server_socket.getsockname()[:2]
        _, quitter = await asyncio.open_connection(*address)
        quitter.write(large_frame(8, os.urandom(RECV_SIZE * 3))[:RECV_SIZE * 2])
        await quitter.drain()
        quitter.close()
        reader, writer = await asyncio.open_connection(*address)
        cpu = []
        for start in range(0, len(frame), RECV_SIZE + 4097):  # pieces that straddle the receives' boundaries
            writer.write(frame[start:start + RECV_SIZE + 4097])
            await writer.drain()
            await asyncio.sleep(0.05)
            cpu.append(await asyncio.get_running_loop().run_in_executor(None, loop_cpu_while, 0.2))
        correlation_ids = await answered_ids(reader, 1)
        connections = len(server.connections)
        await shut_down(server, server_socket, task, writer)
        return cpu, correlation_ids, connections

    cpu, correlation_ids, connections = asyncio.run(main())
    assert correlation_ids == [7]
    assert received == [records]
    assert connections == 1  # the client that left inside its request is gone
    assert max(cpu) < 0.06, f"{max(cpu):.2f} s of CPU in 0.2 s of waiting for the rest of a request"
