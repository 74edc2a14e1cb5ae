"""What unauthenticated peers can make the local front door hold: its memory (RSS) while many
streams wait on a flow-control window of 0, after the server resets them, and after many 1 MiB
header blocks.

    .venv/bin/python bench/front_door_bounds_bench.py [--connections 72] [--rounds 3]
        [--headers 200] [--server-root PATH]

The front door runs as its own process (``python -m voicectl local-runtime``, default limits,
voice_devtools.local.bounds), from this checkout or ``--server-root`` (another checkout, to
compare). Per round, ``--connections`` TLS connections each set SETTINGS_INITIAL_WINDOW_SIZE 0 and
open 100 unsigned calls: each is refused (403) but its answer cannot be sent. Printed: the
connections the server took, the streams it reset and how, RSS while they are held and once they are
reset and the connections closed. Then ``--headers`` connections (32 at a time) each send a 1 MiB
header block, read until the server closes and drop the connection without TLS's close_notify, as a
simple client does: printed are the GOAWAY codes received, RSS, and the server's log lines about
them and its tracebacks (counted 35 s later: asyncio gives up on a TLS close after 30 s).
RSS is the server's VmRSS (/proc, Linux); Python keeps freed memory for reuse, so a release shows
as RSS that stops growing from one round to the next.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from hpack.hpack import encode_integer
from hyperframe.frame import ContinuationFrame, HeadersFrame

ROOT = Path(__file__).resolve().parents[1]
STREAMS_PER_CONNECTION = 100
PATH = "/endpoints/voxtral-realtime/invocations-bidirectional-stream"
HEADER_VALUE_BYTES = 1 << 20
FRAME_BYTES = 16384  # SETTINGS_MAX_FRAME_SIZE's initial value (RFC 9113 section 6.5.2)
STALL_WAIT_S = 20.0 + 40.0  # voice_devtools.local.bounds.STALLED_SEND_TIMEOUT_S and a margin
HEADER_BATCH = 32  # header blocks in flight at once (under MAX_CONNECTIONS)
TLS_CLOSE_WAIT_S = 35.0  # asyncio's TLS close times out after 30 s, with a traceback in the log


def rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident memory now and at its peak (VmRSS, VmHWM), MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def cpu_ticks(pid: int) -> int:
    """The process's user and system CPU time so far, in clock ticks (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def wait_idle(pid: int, quiet_s: float = 1.0, limit_s: float = 60.0) -> None:
    """Wait until the server has used no CPU for ``quiet_s`` (it has handled what it was sent)."""
    deadline = time.monotonic() + limit_s
    last = cpu_ticks(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet_s)
        now = cpu_ticks(pid)
        if now == last:
            return
        last = now


def start_server(root: Path, state: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    log = state / "front-door.log"
    command = [
        sys.executable,
        "-m",
        "voicectl",
        "local-runtime",
        "--port",
        "0",
        "--host",
        "127.0.0.1",
        "--endpoint",
        "voxtral-realtime=ws://127.0.0.1:9",
        "--ca-file",
        str(state / "ca.pem"),
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=root, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text()
        if "ready" in text:
            return process, int(re.search(r"https://127\.0\.0\.1:(\d+)", text)[1]), log
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"the front door did not start:\n{log.read_text()}")


def tls_context(ca_file: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_file))
    context.set_alpn_protocols(["h2"])
    return context


async def window_zero_connection(
    port: int,
    context: ssl.SSLContext,
    ended: Counter,
    opened: asyncio.Event,
    closing: asyncio.Event,
) -> None:
    """One connection with a window of 0 and 100 refused calls; counts in ``ended`` how its
    streams (or the connection) ended."""
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost"
        )
    except (OSError, ssl.SSLError):
        ended["connections refused"] += 1
        opened.set()
        return
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    connection.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    for _ in range(STREAMS_PER_CONNECTION):
        connection.send_headers(
            connection.get_next_available_stream_id(),
            [
                (":method", "POST"),
                (":path", PATH),
                (":scheme", "https"),
                (":authority", f"localhost:{port}"),
            ],
            end_stream=True,
        )
    writer.write(connection.data_to_send())
    opened.set()
    stop = asyncio.ensure_future(closing.wait())
    answered = False
    try:
        while True:
            read = asyncio.ensure_future(reader.read(65536))
            await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                read.cancel()
                break
            if not read.result():
                ended[
                    "connections closed by the server" if answered else "connections refused"
                ] += 1
                break
            for event in connection.receive_data(read.result()):
                if isinstance(event, h2.events.RemoteSettingsChanged) and not answered:
                    answered = True
                    ended["connections served"] += 1
                elif isinstance(event, h2.events.StreamReset):
                    ended[f"streams reset {event.error_code.name}"] += 1
                elif isinstance(event, h2.events.ConnectionTerminated):
                    ended[f"GOAWAY {event.error_code.name}"] += 1
            writer.write(connection.data_to_send())  # SETTINGS ACK and PING answers only
    except (ConnectionError, ssl.SSLError):
        ended["connections refused" if not answered else "connections reset"] += 1
    finally:
        stop.cancel()
        writer.transport.abort()


async def window_zero_round(
    port: int, context: ssl.SSLContext, connections: int, pid: int
) -> tuple[Counter, float, float]:
    """Open the connections, wait until the server has reset every stream it took (or
    STALL_WAIT_S), close them; the highest RSS meanwhile, and RSS after."""
    ended: Counter = collections.Counter()
    opened = [asyncio.Event() for _ in range(connections)]
    closing = asyncio.Event()
    tasks = [
        asyncio.ensure_future(window_zero_connection(port, context, ended, event, closing))
        for event in opened
    ]
    await asyncio.gather(*(event.wait() for event in opened))
    held = rss_mb(pid)[0]
    deadline = time.monotonic() + STALL_WAIT_S
    while time.monotonic() < deadline:
        held = max(held, rss_mb(pid)[0])
        resets = sum(count for kind, count in ended.items() if kind.startswith("streams reset"))
        if resets >= ended["connections served"] * STREAMS_PER_CONNECTION:
            break
        await asyncio.sleep(0.5)
    closing.set()
    await asyncio.gather(*tasks)
    await wait_idle(pid)  # the server has handled the closed connections
    return ended, held, rss_mb(pid)[0]


def header_block(port: int) -> bytes:
    """HEADERS and CONTINUATION frames carrying one request with a 1 MiB header value, Huffman-coded
    as h2's encoder codes it (RFC 7541 appendix B: "a" is the 5 bits 00011, so 8 of them are these
    5 bytes): 640 KiB, 40 frames, built without encoding a megabyte in Python."""
    encoder = h2.connection.H2Connection().encoder
    block = bytes(
        encoder.encode(
            [
                (":method", "POST"),
                (":path", PATH),
                (":scheme", "https"),
                (":authority", f"localhost:{port}"),
            ]
        )
    )
    name = b"x-large"
    value = bytes([0x18, 0xC6, 0x31, 0x8C, 0x63]) * (HEADER_VALUE_BYTES // 8)
    length = encode_integer(len(value), 7)
    length[0] |= 0x80  # Huffman-coded (RFC 7541 section 5.2)
    block += b"\x00" + bytes(encode_integer(len(name), 7)) + name + bytes(length) + value
    frames = []
    for offset in range(0, len(block), FRAME_BYTES):
        frame = HeadersFrame(1) if offset == 0 else ContinuationFrame(1)
        frame.data = block[offset : offset + FRAME_BYTES]
        if offset == 0:
            frame.flags.add("END_STREAM")
        if offset + FRAME_BYTES >= len(block):
            frame.flags.add("END_HEADERS")
        frames.append(frame.serialize())
    return b"".join(frames)


def large_header(port: int, context: ssl.SSLContext, frames: bytes) -> str:
    """Send one 1 MiB header block over a blocking socket, read until the server closes the
    connection (or 15 s pass), then close the socket without TLS's close_notify, as a simple
    client does; how the server answered."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    outcome = "no answer"
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=15) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as sock,
        ):
            # The server may stop reading: its answer may still be there.
            with contextlib.suppress(OSError, ssl.SSLError):
                sock.sendall(connection.data_to_send() + frames)
            while data := sock.recv(65536):
                for event in connection.receive_data(data):
                    if isinstance(event, h2.events.ConnectionTerminated):
                        outcome = f"GOAWAY {event.error_code.name}"
                    elif isinstance(event, h2.events.ResponseReceived):
                        outcome = f"HTTP {dict(event.headers)[b':status'].decode()}"
    except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as error:
        outcome += f" then {type(error).__name__}"
    return outcome


async def main(arguments: argparse.Namespace) -> None:
    state = Path(tempfile.mkdtemp(prefix="front-door-bounds-bench-"))
    process, port, log = start_server(arguments.server_root.resolve(), state)
    context = tls_context(state / "ca.pem")
    try:
        print(f"front door from {arguments.server_root.resolve()}, pid {process.pid}")
        print(f"RSS at start: {rss_mb(process.pid)[0]:.1f} MB")
        print(
            f"\nwindow 0: {arguments.connections} connections x {STREAMS_PER_CONNECTION} "
            "refused calls per round"
        )
        for number in range(1, arguments.rounds + 1):
            ended, held, after = await window_zero_round(
                port, context, arguments.connections, process.pid
            )
            kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(ended.items()))
            print(
                f"  round {number}: RSS {held:.1f} MB at most while held, {after:.1f} MB after; "
                f"{kinds or 'no stream reset'}"
            )
        frames = header_block(port)
        outcomes: Counter = collections.Counter()
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(HEADER_BATCH) as pool:
            outcomes.update(
                await asyncio.gather(
                    *(
                        loop.run_in_executor(pool, large_header, port, context, frames)
                        for _ in range(arguments.headers)
                    )
                )
            )
        await wait_idle(process.pid)
        rss, peak = rss_mb(process.pid)
        await asyncio.sleep(TLS_CLOSE_WAIT_S)  # what the closes write to the log
        text = log.read_text()
        print(
            f"\n{arguments.headers} header blocks of {HEADER_VALUE_BYTES >> 10} KiB: "
            + ", ".join(f"{count} {kind}" for kind, count in sorted(outcomes.items()))
        )
        print(f"  RSS after: {rss:.1f} MB (peak over the run {peak:.1f} MB)")
        print(
            f"  server log: {text.count('ENHANCE_YOUR_CALM')} GOAWAY lines, "
            f"{text.count('refused a connection')} refused-connection lines, "
            f"{text.count('reset (CANCEL)')} access lines of reset streams, "
            f"{text.count('Traceback')} tracebacks"
        )
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--connections",
        type=int,
        default=72,
        help="connections per round (default 72: 8 over MAX_CONNECTIONS)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--headers", type=int, default=200)
    parser.add_argument(
        "--server-root",
        type=Path,
        default=ROOT,
        help="the checkout whose front door runs (default: this one)",
    )
    asyncio.run(main(parser.parse_args()))
