"""What the local SageMaker runtime adds to a realtime round trip: the same appends, one at a time,
each waiting for its delta, straight to the bridge (WebSocket, ``--url``) and through the front door
with the client's SageMaker transport (awscrt HTTP/2, TLS, SigV4-signed events), in the same run.

    .venv/bin/python bench/local_runtime_bench.py [--appends 200] [--repeats 3]

Everything runs in this process's event loop except awscrt's own I/O thread: the fake vLLM (one
delta per append), the bridge (services/bridge) and the front door. Printed per path:
append-to-delta round trip p50 / p99 in ms (medians over the repeats), and the time to open a stream
(first ``session.created``) in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "services")]

from voice_client.realtime import (  # noqa: E402
    WebSocketTransport,
    append_event,
    commit_event,
    session_update_event,
)
from voice_devtools.local.fake_vllm import FakeVllm  # noqa: E402
from voice_devtools.local.runtime import LocalEndpoint, LocalRuntime  # noqa: E402
from voice_devtools.local.serving import listen_sockets, make_certificate, serve_asgi  # noqa: E402
from voice_devtools.local.sigv4 import LocalCredentials  # noqa: E402

KEY_ID, SECRET, REGION = "AKIABENCH000000000", "bench-secret", "us-east-1"
CHUNK = bytes(4096)  # 128 ms of PCM16 at 16 kHz


async def round_trips(opener, appends: int) -> tuple[float, list[float]]:
    """Open a stream, then send ``appends`` appends one at a time, each after the previous one's
    delta."""
    start = time.perf_counter()
    transport = await opener()
    assert json.loads(await transport.receive_text())["type"] == "session.created"
    opened_ms = (time.perf_counter() - start) * 1000
    await transport.send_text(session_update_event("mistralai/Voxtral-Mini-4B-Realtime-2602"))
    await transport.send_text(commit_event())
    samples = []
    for _ in range(appends):
        sent = time.perf_counter()
        await transport.send_text(append_event(CHUNK))
        while json.loads(await transport.receive_text())["type"] != "transcription.delta":
            pass
        samples.append((time.perf_counter() - sent) * 1000)
    await transport.close()
    return opened_ms, samples


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def main(appends: int, repeats: int) -> None:
    import boto3

    from bridge.server import Bridge
    from contracts.bridge_env import BridgeEnvironment
    from voice_client.sagemaker_client import BotocoreCredentialsResolver, create_client
    from voice_client.sagemaker_stream import SageMakerStreamTransport

    vllm = await FakeVllm(generate=True, record_audio=False).start()
    settings = BridgeEnvironment.defaults(
        host="127.0.0.1", port=0, vllm_port=vllm.port, drain_s=0, metrics_interval_s=3600
    )
    bridge = await Bridge(settings).start()
    tls = make_certificate(Path(tempfile.mkdtemp(prefix="local-runtime-bench-")))
    runtime = LocalRuntime(
        endpoints=[LocalEndpoint.parse(f"voxtral=ws://127.0.0.1:{bridge.port}")],
        credentials=LocalCredentials(KEY_ID, SECRET),
        region=REGION,
    )
    sockets = listen_sockets("127.0.0.1", 0)
    url = f"https://localhost:{sockets[0].getsockname()[1]}"
    shutdown = asyncio.Event()
    server = asyncio.ensure_future(serve_asgi(runtime, sockets, shutdown, tls=tls))
    os.environ.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET)
    client = await create_client(
        REGION,
        BotocoreCredentialsResolver(boto3.Session(region_name=REGION)),
        endpoint_uri=url,
        ca_bundle=str(tls.ca_file),
    )
    paths = {
        "bridge direct (WebSocket)": lambda: WebSocketTransport.connect(
            f"ws://127.0.0.1:{bridge.port}/invocations-bidirectional-stream"
        ),
        "front door (SDK, HTTP/2, TLS, SigV4)": lambda: SageMakerStreamTransport.open(
            client, "voxtral"
        ),
    }
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in paths}
    for _ in range(repeats):
        for name, opener in paths.items():  # back to back in the same run
            opened_ms, samples = await round_trips(opener, appends)
            results[name].append((percentile(samples, 0.5), percentile(samples, 0.99), opened_ms))
    print(f"{appends} appends per run, {repeats} runs; medians of the runs")
    print(f"{'path':<40} {'p50 ms':>8} {'p99 ms':>8} {'open ms':>8}")
    for name, runs in results.items():
        p50, p99, opened = (statistics.median(run[i] for run in runs) for i in range(3))
        print(f"{name:<40} {p50:>8.2f} {p99:>8.2f} {opened:>8.1f}")
    await (
        client._config.transport.close()
    )  # awscrt's pooled connection, so that the server can close cleanly
    shutdown.set()
    await asyncio.wait({server}, timeout=3)
    await bridge.shutdown(drain_s=0)
    await vllm.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.appends, arguments.repeats))
