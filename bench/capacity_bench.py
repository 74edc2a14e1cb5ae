"""Streams per GPU, measured: N concurrent real-time streams through the bridge, per N the
first-delta latency and the real-time factor.

For each stream count N (default 1, 2, 4, 8), N streams start evenly over `--ramp` seconds. Each
opens the bridge's WebSocket, sends `session.update` and a (non-final) commit, then appends
`--seconds` seconds of audio in real time (4096 bytes of PCM16 = 128 ms of 16 kHz mono per append,
every 128 ms), then commits with `{"final": true}` and waits for `transcription.done`. Recorded per
stream:

- first-delta latency: first append sent -> first `transcription.delta` received, ms;
- real-time factor: (transcription.done received - start of the audio) / audio seconds, where the
  audio started 128 ms before the first append was sent (an append leaves once its 128 ms is
  captured). Just above 1.0 is keeping up; well above 1 the GPU falls behind the speaker (the lag
  grows with the session);
- tail: last append sent -> transcription.done, ms (how far behind the transcript ends).

Prints one line per stream count: p50/p90 first-delta latency, p50/max real-time factor, p90 tail,
streams that failed (refused with server_busy, cut, or no transcription.done within
`--done-timeout`).

Against a real vLLM on a GPU host (the image running with its GPU, e.g. `docker run --gpus all -p
8080:8080 -v $PWD/model:/opt/ml/model -e SM_VLLM_MAX_NUM_SEQS=16 <image> serve`), with real speech
so the deltas are real:

    .venv/bin/python bench/capacity_bench.py \\
        --url ws://127.0.0.1:8080/invocations-bidirectional-stream \\
        --audio speech-16k-mono.wav --streams 1,2,4,8,12,16 --seconds 120

The largest N whose real-time factor stays at about 1 and whose first-delta latency stays within the
alarm (`voxtral.alarm_time_to_first_delta_p90_ms`, 2000 ms) is the GPU's compute bound; compare it
with `voicectl capacity`. The first delta waits for the transcription delay's audio (delay + 82.5
ms: config/models.py), so `--transcription-delay-ms` names the server's delay in the header (the
bench cannot ask for it). Without `--url` the script starts the fake vLLM
(devtools/voice_devtools/local/fake_vllm.py, one delta per append) and the bridge on 127.0.0.1,
which proves the harness, not the GPU:

    .venv/bin/python bench/capacity_bench.py --streams 1,2,4,8 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import time
import wave
from dataclasses import dataclass
from pathlib import Path

from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bridge_bench import REPO, bridge_process_env, wait_ready
from process_stats import free_port, percentile

MODEL = "mistralai/Voxtral-Mini-4B-Realtime-2602"
APPEND_BYTES = 4096  # 128 ms of PCM16 at 16 kHz mono
APPEND_PERIOD_S = 0.128


@dataclass
class StreamResult:
    """One stream's figures (seconds); None where it did not get that far."""

    first_delta_s: float | None = None
    rtf: float | None = None
    tail_s: float | None = None
    error: str | None = None


def load_audio(path: Path | None, seconds: float) -> list[bytes]:
    """`seconds` of audio cut into 4096-byte PCM16 appends: the WAV file (16 kHz, mono, 16-bit)
    looped, or a synthetic tone when no file is given.

    Raises:
        ValueError: the file is not 16 kHz mono 16-bit PCM.
    """
    count = max(1, round(seconds / APPEND_PERIOD_S))
    if path is None:
        pcm = bytes(range(256)) * (APPEND_BYTES // 256)
        return [pcm] * count
    with wave.open(str(path), "rb") as wav:
        if (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) != (16000, 1, 2):
            raise ValueError(
                f"{path}: need 16 kHz mono 16-bit PCM, got {wav.getframerate()} Hz, "
                f"{wav.getnchannels()} channel(s), {8 * wav.getsampwidth()}-bit"
            )
        data = wav.readframes(wav.getnframes())
    data = data * (1 + count * APPEND_BYTES // max(1, len(data)))
    return [data[i * APPEND_BYTES : (i + 1) * APPEND_BYTES] for i in range(count)]


async def one_stream(
    url: str, model: str, appends: list[bytes], start_at: float, done_timeout_s: float
) -> StreamResult:
    """Run one real-time stream; never raises (the error is recorded)."""
    clock = time.perf_counter
    result = StreamResult()
    await asyncio.sleep(max(0.0, start_at - clock()))
    try:
        async with connect(
            url, compression=None, ping_interval=None, proxy=None, max_size=None, open_timeout=10
        ) as ws:
            created = json.loads(await ws.recv())
            if created.get("type") != "session.created":
                result.error = f"first event {created.get('type')}: {created}"
                return result
            await ws.send(json.dumps({"type": "session.update", "model": model}))
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            first_sent: list[float] = []
            last_sent: list[float] = []
            done = asyncio.get_running_loop().create_future()

            async def read() -> None:
                async for message in ws:
                    event = json.loads(message)
                    kind = event.get("type")
                    if (
                        kind == "transcription.delta"
                        and result.first_delta_s is None
                        and first_sent
                    ):
                        result.first_delta_s = clock() - first_sent[0]
                    elif kind == "transcription.done":
                        done.set_result(clock())
                        return
                    elif kind == "error":
                        done.set_exception(
                            RuntimeError(f"{event.get('code')}: {event.get('error')}")
                        )
                        return
                if not done.done():
                    done.set_exception(RuntimeError(f"closed {ws.close_code} {ws.close_reason}"))

            reader = asyncio.create_task(read())
            next_at = clock()
            for pcm in appends:
                await asyncio.sleep(max(0.0, next_at - clock()))
                now = clock()
                if not first_sent:
                    first_sent.append(now)
                last_sent[:] = [now]
                await ws.send(
                    json.dumps(
                        {
                            "type": "input_audio_buffer.append",
                            "audio": base64.b64encode(pcm).decode(),
                        }
                    )
                )
                next_at += APPEND_PERIOD_S
                if done.done():
                    break
            await ws.send(json.dumps({"type": "input_audio_buffer.commit", "final": True}))
            try:
                finished = await asyncio.wait_for(asyncio.shield(done), done_timeout_s)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
            audio_s = len(appends) * APPEND_PERIOD_S
            # The speaker began one append before the first was sent (an append is sent once its 128
            # ms is captured).
            result.rtf = (finished - first_sent[0] + APPEND_PERIOD_S) / audio_s
            result.tail_s = finished - last_sent[0]
    except Exception as error:  # recorded: the figures say how many streams failed and why
        result.error = f"{type(error).__name__}: {error}"
    return result


async def run_level(
    url: str, model: str, streams: int, appends: list[bytes], ramp_s: float, done_timeout_s: float
) -> list[StreamResult]:
    """N streams started evenly over `ramp_s` seconds."""
    start = time.perf_counter() + 0.1
    return list(
        await asyncio.gather(
            *(
                one_stream(url, model, appends, start + ramp_s * i / streams, done_timeout_s)
                for i in range(streams)
            )
        )
    )


def summary(streams: int, results: list[StreamResult]) -> str:
    first = [r.first_delta_s * 1000 for r in results if r.first_delta_s is not None]
    rtf = [r.rtf for r in results if r.rtf is not None]
    tail = [r.tail_s * 1000 for r in results if r.tail_s is not None]
    errors = [r.error for r in results if r.error]

    def fmt(values: list[float], fraction: float, spec: str) -> str:
        return format(percentile(values, fraction), spec) if values else "n/a"

    line = (
        f"{streams:>7} | {fmt(first, 0.5, '18.0f')} | {fmt(first, 0.9, '6.0f')} | "
        f"{fmt(rtf, 0.5, '7.3f')} | {(format(max(rtf), '7.3f') if rtf else 'n/a'):>7} | "
        f"{fmt(tail, 0.9, '11.0f')} | {len(errors):>6}"
    )
    if errors:
        line += f"  ({errors[0]})"
    return line


def delay_label(delay_ms: int | None, real: bool) -> str:
    """The server's transcription delay for the header: as given, or what not giving it means."""
    if not real:
        return "n/a (the fake vLLM scripts its deltas, whatever the delay)"
    if delay_ms is not None:
        return f"{delay_ms} ms"
    return "not given (the checkpoint's 480 ms unless the server sets another)"


HEADER = "streams | first-delta p50 ms | p90 ms | RTF p50 | RTF max | tail p90 ms | failed"


@contextlib.asynccontextmanager
async def local_bridge(max_streams: int):
    """The fake vLLM and a bridge on 127.0.0.1 (their own processes); yields the bridge's WebSocket
    URL."""
    vllm_port, bridge_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # ASYNC220: Popen returns once the process starts; the bench waits for readiness itself.
    fake = subprocess.Popen(  # noqa: ASYNC220
        [
            sys.executable,
            "-m",
            "voice_devtools.local.fake_vllm",
            "--port",
            str(vllm_port),
            "--delta-per-append",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    bridge_env = bridge_process_env(
        REPO / "services",
        host="127.0.0.1",
        port=bridge_port,
        vllm_port=vllm_port,
        max_streams=max_streams,
        served_model=MODEL,
        metrics_interval_s=3600,
        log_level="WARNING",
    )
    bridge = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-m", "bridge"],
        cwd=REPO / "services",
        env=bridge_env,
        stdout=subprocess.DEVNULL,
    )
    try:
        await wait_ready(vllm_port, "/health")
        await wait_ready(bridge_port, "/ping")
        yield f"ws://127.0.0.1:{bridge_port}/invocations-bidirectional-stream"
    finally:
        for process in (bridge, fake):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


async def main_async(args: argparse.Namespace) -> None:
    levels = [int(n) for n in args.streams.split(",")]
    appends = load_audio(args.audio, args.seconds)
    target = (
        f"against {args.url}"
        if args.url
        else "against the fake vLLM behind a local bridge (harness check)"
    )
    print(
        f"{len(appends)} appends of 128 ms ({len(appends) * APPEND_PERIOD_S:.1f} s of audio) per "
        f"stream; {target}"
    )
    print(f"transcription delay: {delay_label(args.transcription_delay_ms, bool(args.url))}")
    print(HEADER)
    for streams in levels:
        if args.url:
            results = await run_level(
                args.url, args.model, streams, appends, args.ramp, args.done_timeout
            )
        else:
            async with local_bridge(max(levels)) as url:
                results = await run_level(
                    url, args.model, streams, appends, args.ramp, args.done_timeout
                )
        print(summary(streams, results), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", help="the bridge's WebSocket URL (default: start the fake vLLM and a bridge)"
    )
    parser.add_argument(
        "--audio", type=Path, help="16 kHz mono PCM16 WAV to stream (looped); default a tone"
    )
    parser.add_argument("--streams", default="1,2,4,8", help="comma-separated stream counts")
    parser.add_argument("--seconds", type=float, default=5.0, help="audio seconds per stream")
    parser.add_argument(
        "--ramp", type=float, default=1.0, help="seconds over which the streams start"
    )
    parser.add_argument(
        "--done-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for transcription.done after the final commit",
    )
    parser.add_argument("--model", default=MODEL, help="the served model name (session.update)")
    parser.add_argument(
        "--transcription-delay-ms",
        type=int,
        metavar="MS",
        help="the transcription delay the server runs at, for the header",
    )
    args = parser.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
