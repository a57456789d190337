"""The Python floor under a broker's cost per small request: the C floor server's job (bench/loadgen/floor-server.c)
done by the runtime Odradek runs on, so bench/request_cost.py --floor can show how much of a request's CPU the
interpreter and the event loop take before a broker does anything.

uvloop's loop and an asyncio.Protocol, as Odradek's network shell: for every whole frame (a 4-byte big-endian size,
then the request) in what a receive brought, a fixed answer (a size, the request's correlation id, ANSWER_BODY zero
bytes: what the C floor answers), all of one receive's answers in one write. No request is decoded, nothing is
stored.

usage: python -m bench.python_floor PORT   (prints "ready" once listening; runs until killed)
"""

from __future__ import annotations

import asyncio
import sys

import uvloop

ANSWER_BODY = bytes(52)
ANSWER_SIZE = (4 + len(ANSWER_BODY)).to_bytes(4, "big")


class FloorProtocol(asyncio.Protocol):
    """One connection: the bytes of a frame not yet whole, kept until the rest arrives."""

    def __init__(self):
        self.transport = None
        self.held = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.held:
            data = self.held + data
        answers = []
        position = 0
        end = len(data)
        while end - position >= 4:
            size = int.from_bytes(data[position:position + 4], "big")
            if end - position - 4 < size:
                break
            answers.append(ANSWER_SIZE + data[position + 8:position + 12] + ANSWER_BODY)
            position += 4 + size
        self.held = data[position:]
        if answers:
            self.transport.write(b"".join(answers))


async def serve(port: int) -> None:
    await asyncio.get_running_loop().create_server(FloorProtocol, "127.0.0.1", port)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
