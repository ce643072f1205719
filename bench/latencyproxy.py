"""A TCP proxy on the loopback interface that delays each request by a fixed time.

``python -m replaydb.bench.latencyproxy LISTEN_PORT TARGET_PORT DELAY_MS``: every connection to
``127.0.0.1:LISTEN_PORT`` is forwarded to ``127.0.0.1:TARGET_PORT``; each chunk a client sends
is held ``DELAY_MS`` before it is forwarded (an HTTP request of a read arrives as one chunk, so
each request waits that long, as it would on a distant object store); replies pass at once.
"""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay: float) -> None:
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _serve(listen: int, target: int, delay: float) -> None:
    async def handle(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cwriter.close()
            return
        await asyncio.gather(_pipe(creader, swriter, delay), _pipe(sreader, cwriter, 0.0))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    listen, target, delay_ms = int(argv[0]), int(argv[1]), float(argv[2])
    asyncio.run(_serve(listen, target, delay_ms / 1000.0))


if __name__ == "__main__":
    main(sys.argv[1:])
