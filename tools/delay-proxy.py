#!/usr/bin/env python3
"""A TCP forwarder that adds a fixed one-way delay in both directions.

Stands in for `tc netem delay` where the kernel has no netem (the dev and CI VMs run a kernel
without sch_netem): every chunk read from one side is written to the other side no earlier
than DELAY after it arrived, in order. Put it in front of a node whose mesh listens elsewhere:

    tpnode ... --node-id 0 --peers 10.0.0.1:9500,10.0.0.2:9500 --mesh-listen 10.0.0.1:9501
    tools/delay-proxy.py --listen 10.0.0.1:9500 --target 10.0.0.1:9501 --delay-ms 1

Every node dials node 0 at 10.0.0.1:9500 and so crosses the proxy; round trips grow by
2 x DELAY (asyncio's timer granularity adds up to ~1 ms more). Bounded: exits after
--max-seconds. Prints "ready" on stdout once listening.
"""
import argparse
import asyncio
import sys
import time


def host_port(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"'{text}' is not host:port")
    return host, int(port)


async def pump(reader, writer, delay):
    """Copies reader -> writer, releasing each chunk `delay` seconds after it was read."""
    queue = asyncio.Queue()

    async def read_side():
        try:
            while True:
                data = await reader.read(1 << 16)
                await queue.put((time.monotonic() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((time.monotonic(), b""))

    async def write_side():
        try:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    writer.write_eof() if writer.can_write_eof() else writer.close()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    await asyncio.gather(read_side(), write_side())


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", type=host_port, required=True)
    ap.add_argument("--target", type=host_port, required=True)
    ap.add_argument("--delay-ms", type=float, default=1.0, help="one-way delay per direction")
    ap.add_argument("--max-seconds", type=float, default=300, help="exit after this long")
    args = ap.parse_args()
    delay = args.delay_ms / 1000.0

    async def handle(client_reader, client_writer):
        try:
            target_reader, target_writer = await asyncio.open_connection(*args.target)
        except OSError as e:
            print(f"delay-proxy: cannot reach {args.target}: {e}", file=sys.stderr)
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, target_writer, delay),
                             pump(target_reader, client_writer, delay))
        for w in (client_writer, target_writer):
            w.close()

    server = await asyncio.start_server(handle, *args.listen)
    print("ready", flush=True)
    async with server:
        try:
            await asyncio.wait_for(server.serve_forever(), timeout=args.max_seconds)
        except asyncio.TimeoutError:
            pass


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
