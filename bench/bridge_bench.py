"""Benchmark of the bridge: what relaying costs, measured against the fake vLLM directly in the same
run.

For each stream count N (default 16, 64, 200), each of `--repeats` runs, and each bridge version
given with `--bridge LABEL=DIR` (DIR: the folder that holds the package `bridge/`, a checkout's
`services/`, or `container/` in a checkout from before services/; default: this checkout's
`services/`), back to back in that order (A, B, A, B, ...), so that the versions share the
machine's load:

1. Start the fake vLLM (devtools/voice_devtools/local/fake_vllm.py of this checkout, generating as
   vLLM does: a delta per 80 ms of audio once 0.6 s is buffered) and a fresh bridge (`python -m
   bridge` run from DIR), each in its own process, on 127.0.0.1.
2. Paced, directly against the fake, then through the bridge: N streams, started evenly over
   `--ramp` seconds, each sending a 4096-byte PCM16 append (128 ms of 16 kHz audio) every 128 ms for
   `--seconds` seconds. Recorded: append-to-delta round trip (p50, p99: from sending an append to
   the first delta its audio releases, `answered_append`; a stream's first 4 appends, within the
   audio the model buffers before its first delta, and appends whose delta has not arrived when the
   stream closes have none and are not counted), accept latency (connect to `session.created`, p99),
   relayed frames per second (appends + deltas), the bridge's CPU time from /proc/<pid>/stat (utime
   + stime) per 1000 relayed frames over the steady window, and its resident memory (VmRSS) with N
   streams open, minus its resident memory before the streams opened, per stream.
3. Unpaced, directly then through the bridge: N streams each keeping `--inflight` appends in flight
   (beyond the audio the model holds before it answers) for `--unpaced-seconds` seconds, in
   generations of 30 s of audio; the bridged frames per second as a fraction of the direct figure.
   This measures the relay's capacity, so the bridge runs with its per-stream audio rate limit
   (AUDIO_RATE_LIMIT, 32 x real time by default, a policy) set out of the
   way: at 16 and 64 streams these synthetic streams exceed it. The audio rate per stream is printed
   (`unpaced_x_real_time`), to compare with that default.

With `--token TOKEN`, every bridge runs with BRIDGE_TOKEN=TOKEN and every bridged client sends
`Authorization: Bearer TOKEN` on its upgrade (a version without the check ignores both), so the
token check is in the figures (accept latency; it runs once per upgrade, never per frame).

With `--held N`, one more phase per run and version, as a hostile client tried it: a fake vLLM that
stops reading after each session's commit, N streams pushing 4 MiB appends without pause (rate limit
and stall detection set out of the way), the bridge's resident memory per stream after 2 s, what
stays resident 3 s after the clients left, and the slowest `/ping` answer meanwhile.

Prints one line per run, a table of medians per version, and, with two versions, the second against
the first next to the targets it must keep (CPU per 1000 frames and memory per stream at most 10 %
above the first version's, added p99 at most 1.5 ms, accept p99 under 15 ms, unpaced at least 0.5 of
direct). Every phase is bounded in time; the script stops by itself and kills the processes it
started. The machine's cores are shared: compare versions only within one run, and run it more than
once.

    git worktree add ../bridge-base <commit>     # the previous version, checked out beside this one
    .venv/bin/python bench/bridge_bench.py --streams 200 --repeats 3 \
        --bridge old=../bridge-base/container --bridge new=container
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from process_stats import cpu_seconds, free_port, percentile, rss_bytes
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from contracts.bridge_env import BridgeEnvironment
from voice_client.realtime.policy import GENERATION_TARGET_S
from voice_devtools.local.fake_vllm import SAMPLES_PER_TOKEN, STREAM_LAG_SAMPLES

REPO = Path(__file__).resolve().parent.parent
#: One append: 4096 bytes of PCM16 = 2048 samples = 128 ms at 16 kHz (the clients' pacing,
#: voice_client.audio.CHUNK_BYTES).
APPEND_BYTES = 4096
APPEND_PERIOD_S = 0.128
#: PCM16 samples in one append (2 bytes each).
APPEND_SAMPLES = APPEND_BYTES // 2
GENERATION_APPENDS = round(GENERATION_TARGET_S / APPEND_PERIOD_S)
"""Appends per generation in the unpaced phase, then a final commit and a new generation: the
client's GENERATION_TARGET_S of audio (30 s, voice_client/realtime/policy.py). One endless
generation, sent unpaced (50 to 80 x real time on 2 cores), reaches the bridge's session_limit (0.9
of the 32768 tokens the bench gives it, less 49: 2355 s of audio) within a minute and the fake's
max_model_len (45000 tokens of 80 ms: 3600 s) soon after, which kills vLLM 0.31.0's engine and the
fake's (devtools/voice_devtools/local/fake_vllm.py): a longer `--unpaced-seconds` would measure a
dead stream."""
TRANSCRIPTION_DONE_MARKER = '"type":"transcription.done"'
"""How a generation's end reads in vLLM's compact JSON (pydantic's `model_dump_json`;
services/bridge/protocol.py TRANSCRIPTION_DONE_PREFIX, devtools/voice_devtools/local/fake_vllm.py
send_event); the bridge relays it unchanged."""
TRANSCRIPTION_DELTA_MARKER = '"type":"transcription.delta"'
"""How a delta reads in the same JSON (services/bridge/stream.py _DELTA_MARKER)."""


def answered_append(delta: int) -> int:
    """The append (1-based, counted from the generation's commit) whose arrival releases the
    generation's delta number `delta` (1-based), with appends of APPEND_SAMPLES.

    The rule is the fake's (devtools/voice_devtools/local/fake_vllm.py,
    `FakeSession._handle_message` on an append,
    then `_generate`), which mirrors vLLM 0.31.0: after each append the generation has sent max(0,
    (samples - STREAM_LAG_SAMPLES) // SAMPLES_PER_TOKEN) deltas, `samples` being its audio so far.
    So delta c leaves once the audio reaches STREAM_LAG_SAMPLES + c * SAMPLES_PER_TOKEN samples: on
    the arrival of append k = ceil((STREAM_LAG_SAMPLES + c * SAMPLES_PER_TOKEN) / APPEND_SAMPLES).
    The answer to append k, the delta its audio completes, is the first such c; it is not the first
    c with STREAM_LAG_SAMPLES + c * SAMPLES_PER_TOKEN >= k * APPEND_SAMPLES, which (unless the two
    are equal) needs audio of append k + 1 and leaves 128 ms later. With 2048-sample appends and
    1280-sample tokens: appends 1-4 (up to 8192 samples, within the 8320 buffered) release no delta,
    append 5 releases delta 1, append 6 deltas 2 and 3, and every later append one or two."""
    return -(-(STREAM_LAG_SAMPLES + delta * SAMPLES_PER_TOKEN) // APPEND_SAMPLES)


@dataclass
class Recording:
    """What one paced phase measured; times in seconds."""

    window: tuple[float, float]
    #: Per append sent in the window: send to the first delta it releases (`answered_append`).
    rtts: list[float] = field(default_factory=list)
    accepts: list[float] = field(default_factory=list)
    frames: int = 0
    errors: int = 0

    def in_window(self, t: float) -> bool:
        return self.window[0] <= t < self.window[1]


def _frames(model: str) -> tuple[str, str, str]:
    pcm = bytes(range(256)) * (APPEND_BYTES // 256)
    audio = base64.b64encode(pcm).decode()
    return (
        json.dumps({"type": "session.update", "model": model}),
        json.dumps({"type": "input_audio_buffer.commit"}),
        json.dumps({"type": "input_audio_buffer.append", "audio": audio}, separators=(",", ":")),
    )


async def _open(url: str, model: str, headers: dict[str, str] | None = None):
    update, commit, _ = _frames(model)
    ws = await connect(
        url,
        compression=None,
        ping_interval=None,
        proxy=None,
        max_size=None,
        open_timeout=10,
        additional_headers=headers,
    )
    created = json.loads(await ws.recv())
    assert created["type"] == "session.created", created
    await ws.send(update)
    await ws.send(commit)
    return ws


async def paced_stream(
    url: str,
    model: str,
    start_at: float,
    stop_at: float,
    rec: Recording,
    offset: float,
    headers: dict[str, str] | None = None,
) -> None:
    """One stream: connect at `start_at`, an append every 128 ms until `stop_at`, in one generation.

    Each delta is matched to the append whose audio released it (`answered_append`, counting the
    generation's deltas); an append's round trip runs from its send to the first of its deltas. An
    append that released no delta (the first 4: their audio is within the model's buffered lag) or
    whose delta had not arrived when the stream closed has no round trip and is not counted. Frames:
    the appends sent in the window and every delta answering one of them. A delta for an append not
    yet sent (a model whose rule differs from the fake's) counts as an error."""
    clock = time.perf_counter
    await asyncio.sleep(max(0.0, start_at - clock()))
    t0 = clock()
    try:
        ws = await _open(url, model, headers)
    except Exception:  # counted, not fatal: the figures say how many streams failed
        rec.errors += 1
        return
    rec.accepts.append(clock() - t0)
    append = _frames(model)[2]
    sent_at: list[float] = []  # send time of each append of the generation, in order

    async def read() -> None:
        deltas = answered = (
            0  # the generation's deltas so far; the append (1-based) the last of them answered
        )
        with contextlib.suppress(Exception):
            async for message in ws:
                now = clock()
                if not (isinstance(message, str) and TRANSCRIPTION_DELTA_MARKER in message):
                    continue
                deltas += 1
                append_index = answered_append(deltas)
                if append_index > len(sent_at):
                    rec.errors += 1
                    return
                sent = sent_at[append_index - 1]
                if rec.in_window(sent):
                    rec.frames += 1
                    if append_index > answered:
                        rec.rtts.append(now - sent)
                answered = append_index

    reader = asyncio.create_task(read())
    next_at = clock() + offset
    try:
        while next_at < stop_at:
            await asyncio.sleep(max(0.0, next_at - clock()))
            sent = clock()
            sent_at.append(sent)
            await ws.send(append)
            if rec.in_window(sent):
                rec.frames += 1
            next_at += APPEND_PERIOD_S
        await asyncio.sleep(0.2)  # last deltas
    except Exception:
        rec.errors += 1
    finally:
        await ws.close()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def paced_phase(
    url: str,
    model: str,
    streams: int,
    ramp_s: float,
    seconds: float,
    pid: int | None,
    headers: dict[str, str] | None = None,
) -> dict[str, float]:
    """Run N paced streams; return figures (ms, frames/s, CPU ms per 1000 frames, KiB per
    stream)."""
    clock = time.perf_counter
    warm = await _open(
        url, model, headers
    )  # first connection of the phase pays one-off costs: keep it out
    await warm.close()
    begin = clock() + 0.2
    window = (begin + ramp_s + 0.5, begin + ramp_s + seconds)
    rec = Recording(window=window)
    rss_before = rss_bytes(pid) if pid else 0
    tasks = [
        asyncio.create_task(
            paced_stream(
                url,
                model,
                begin + ramp_s * i / streams,
                window[1] + 0.1,
                rec,
                APPEND_PERIOD_S * ((i * 7919) % streams) / streams,
                headers,
            )
        )
        for i in range(streams)
    ]
    cpu = {}
    rss_open = 0

    async def sample() -> None:
        nonlocal rss_open
        await asyncio.sleep(max(0.0, window[0] - clock()))
        if pid:
            cpu["start"] = cpu_seconds(pid)
        await asyncio.sleep(max(0.0, (window[0] + window[1]) / 2 - clock()))
        if pid:
            rss_open = rss_bytes(pid)
        await asyncio.sleep(max(0.0, window[1] - clock()))
        if pid:
            cpu["end"] = cpu_seconds(pid)

    await asyncio.gather(sample(), *tasks)
    span = window[1] - window[0]
    figures = {
        "rtt_p50_ms": percentile(rec.rtts, 0.50) * 1000,
        "rtt_p99_ms": percentile(rec.rtts, 0.99) * 1000,
        "accept_p99_ms": percentile(rec.accepts, 0.99) * 1000,
        "frames_per_s": rec.frames / span,
        "errors": rec.errors,
    }
    if pid:
        figures["cpu_ms_per_1000_frames"] = (
            (cpu["end"] - cpu["start"]) * 1000 / max(rec.frames, 1) * 1000
        )
        figures["rss_kib_per_stream"] = (rss_open - rss_before) / 1024 / streams
    return figures


async def unpaced_phase(
    url: str,
    model: str,
    streams: int,
    inflight: int,
    seconds: float,
    ramp_s: float,
    headers: dict[str, str] | None = None,
) -> tuple[float, float, int]:
    """N streams (started over `ramp_s`) each keeping `inflight` appends outstanding, in generations
    of GENERATION_APPENDS; frames per second (appends sent + messages received) and appends per
    second in the window after every stream has started, and how many streams failed to open or were
    ended by the server before the window closed. Every wait ends with the window."""
    clock = time.perf_counter
    start = clock()
    window = (start + ramp_s + 1.0, start + ramp_s + 1.0 + seconds)
    counted = sent = ended = 0

    async def one(index: int) -> None:
        nonlocal counted, sent, ended
        await asyncio.sleep(ramp_s * index / streams)
        try:
            ws = await _open(url, model, headers)
        except Exception:  # counted, not fatal, as in paced_stream
            ended += 1
            return
        _, commit, append = _frames(model)
        final = json.dumps({"type": "input_audio_buffer.commit", "final": True})
        # The model answers a delta per SAMPLES_PER_TOKEN of audio once STREAM_LAG_SAMPLES are
        # buffered, so it holds between STREAM_LAG_SAMPLES and one token more unanswered: `inflight`
        # appends beyond that are in flight. (Credit per message deadlocked: no delta answers the
        # first 4 appends, so 2 in flight waited for ever.)
        room = STREAM_LAG_SAMPLES + inflight * APPEND_SAMPLES
        appends = deltas = 0  # this generation's
        done = False  # this generation's transcription.done arrived
        arrived = asyncio.Event()  # a message arrived or the stream ended

        async def read() -> None:
            nonlocal counted, deltas, done
            try:
                async for message in ws:
                    if isinstance(message, str) and TRANSCRIPTION_DELTA_MARKER in message:
                        deltas += 1
                    elif isinstance(message, str) and TRANSCRIPTION_DONE_MARKER in message:
                        done = True
                    if window[0] <= clock() < window[1]:
                        counted += 1
                    arrived.set()
            except ConnectionClosed:
                pass
            finally:
                arrived.set()

        async def until(condition) -> bool:
            """Wait until `condition()`; False if the stream ended or the window closed first."""
            while not condition():
                if reader.done() or clock() >= window[1]:
                    return False
                arrived.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(window[1] - clock()):
                        await arrived.wait()
            return True

        reader = asyncio.create_task(read())
        try:
            while clock() < window[1]:
                if (
                    appends == GENERATION_APPENDS
                ):  # vLLM drops audio sent between a final commit and its done
                    done = False
                    await ws.send(final)
                    if not await until(lambda: done):  # noqa: B023 (read() updates it meanwhile)
                        break
                    appends = deltas = 0
                    await ws.send(commit)

                # B023 is expected: read() updates appends and deltas while until() polls the
                # condition.
                def in_room() -> bool:
                    return appends * APPEND_SAMPLES - deltas * SAMPLES_PER_TOKEN < room  # noqa: B023

                if not await until(in_room):
                    break
                await ws.send(append)
                appends += 1
                if window[0] <= clock() < window[1]:
                    counted += 1
                    sent += 1
        except ConnectionClosed:
            pass
        finally:
            if (
                clock() < window[1]
            ):  # the loop left before the window closed: the server ended the stream
                ended += 1
            await ws.close()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    await asyncio.gather(*(one(i) for i in range(streams)))
    return counted / seconds, sent / seconds, ended


async def wait_ready(port: int, path: str, timeout_s: float = 20) -> None:
    """Wait until GET `path` on `port` answers 200."""
    sys.path.insert(0, str(REPO / "services"))
    from bridge.health import http_get

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, TimeoutError, ValueError):
            if (await http_get("127.0.0.1", port, path, 1.0))[0] == 200:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"port {port} did not answer 200 on {path} within {timeout_s} s")


def bridge_process_env(bridge_dir: Path, **settings: object) -> dict[str, str]:
    """The environment of a bridge run as `python -m bridge` from `bridge_dir` (the folder that
    holds the package: a checkout's services/, or container/ before services/): this process's,
    that checkout's root on PYTHONPATH (the bridge imports the contracts/ there) and `settings`
    (fields of contracts.bridge_env.BridgeEnvironment)."""
    return {
        **os.environ,
        "PYTHONPATH": str(bridge_dir.resolve().parent),
        **BridgeEnvironment(**settings).to_env(),
    }


def _start(
    bridge_dir: Path, vllm_args: list[str], extra: dict[str, object]
) -> tuple[subprocess.Popen, subprocess.Popen, int, int]:
    """Start the fake vLLM (with `vllm_args`) and a bridge from `bridge_dir` (with the
    BridgeEnvironment fields `extra`); return (fake, bridge, vLLM port, bridge port)."""
    model = "mistralai/Voxtral-Mini-4B-Realtime-2602"
    vllm_port, bridge_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    fake = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voice_devtools.local.fake_vllm",
            "--port",
            str(vllm_port),
            *vllm_args,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    bridge_env = bridge_process_env(
        bridge_dir,
        **{
            "host": "127.0.0.1",
            "port": bridge_port,
            "vllm_port": vllm_port,
            "max_streams": 1000,
            "served_model": model,
            "idle_timeout_s": 60,
            "metrics_interval_s": 3600,
            "log_level": "WARNING",
            "vllm_max_model_len": 32768,
            **extra,
        },
    )
    bridge = subprocess.Popen(
        [sys.executable, "-m", "bridge"], cwd=bridge_dir, env=bridge_env, stdout=subprocess.DEVNULL
    )
    return fake, bridge, vllm_port, bridge_port


def token_env(token: str | None) -> dict[str, object]:
    """The bridge's setting for `--token`: its bearer token (a version without the check ignores
    it)."""
    return {} if token is None else {"bridge_token": token}


def auth_headers(token: str | None) -> dict[str, str] | None:
    """What a bridged client sends with `--token`: `Authorization: Bearer <token>` on the
    upgrade."""
    return None if token is None else {"Authorization": f"Bearer {token}"}


def _stop(*processes: subprocess.Popen) -> None:
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


#: Asks GET /ping on port argv[1] every 50 ms for argv[2] seconds; prints the slowest answer,
#: seconds (inf: none).
_PINGER = """
import sys, time, urllib.request
port, seconds, slowest = sys.argv[1], float(sys.argv[2]), 0.0
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    asked = time.perf_counter()
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2).read()
        slowest = max(slowest, time.perf_counter() - asked)
    except OSError:
        slowest = float("inf")
    time.sleep(0.05)
print(slowest)
"""


async def held_phase(streams: int, bridge_dir: Path, token: str | None = None) -> dict[str, float]:
    """N streams push 4 MiB appends into a vLLM that stopped reading: MiB held per stream, MiB left
    after, /ping max ms."""
    fake, bridge, vllm_port, bridge_port = _start(
        bridge_dir,
        ["--hang-after-commit"],
        {
            "upstream_stall_s": 600,
            "idle_timeout_s": 600,
            "audio_rate_limit": 1_000_000,
            "audio_burst_s": 1_000_000,
            **token_env(token),
        },
    )
    model = "mistralai/Voxtral-Mini-4B-Realtime-2602"
    pcm = bytes(3 * 1024 * 1024 - 96)  # base64 in the canonical layout: just under 4 MiB
    big = json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()},
        separators=(",", ":"),
    )
    try:
        await wait_ready(vllm_port, "/health")
        await wait_ready(bridge_port, "/ping")
        url = f"ws://127.0.0.1:{bridge_port}/invocations-bidirectional-stream"
        baseline = rss_bytes(bridge.pid)
        clients = [await _open(url, model, auth_headers(token)) for _ in range(streams)]
        quiet = await _slowest_ping(bridge_port, 1.0)  # the machine's own noise, before the attack

        async def push(ws) -> None:
            with contextlib.suppress(Exception):
                for _ in range(20):
                    await ws.send(big)

        pushers = [asyncio.create_task(push(ws)) for ws in clients]
        slowest = await _slowest_ping(bridge_port, 2.0)
        held = rss_bytes(bridge.pid) - baseline
        for task in pushers:
            task.cancel()
        for ws in clients:
            ws.transport.abort()
        await asyncio.sleep(3.0)
        left = rss_bytes(bridge.pid) - baseline
    finally:
        _stop(bridge, fake)
    return {
        "held_mib_per_stream": held / 2**20 / streams,
        "left_mib_after_close": left / 2**20,
        "held_ping_max_ms": slowest * 1000,
        "quiet_ping_max_ms": quiet * 1000,
    }


async def _slowest_ping(port: int, seconds: float) -> float:
    """The slowest of GET /ping every 50 ms for `seconds`, seconds, asked from a process of its own
    (this one may be busy masking 4 MiB frames)."""
    pinger = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PINGER, str(port), str(seconds), stdout=subprocess.PIPE
    )
    return float((await pinger.communicate())[0] or "nan")


async def one_run(streams: int, args: argparse.Namespace, bridge_dir: Path) -> dict[str, float]:
    """One run for N streams: fresh fake vLLM and bridge (from `bridge_dir`) processes; paced and
    unpaced, direct and bridged (and held, with `--held`)."""
    model = "mistralai/Voxtral-Mini-4B-Realtime-2602"
    fake, bridge, vllm_port, bridge_port = _start(
        bridge_dir,
        ["--delta-per-append"],
        {"audio_rate_limit": 1_000_000, "audio_burst_s": 1_000_000, **token_env(args.token)},
    )
    headers = auth_headers(args.token)
    try:
        await wait_ready(vllm_port, "/health")
        await wait_ready(bridge_port, "/ping")
        direct_url = f"ws://127.0.0.1:{vllm_port}/v1/realtime"
        bridged_url = f"ws://127.0.0.1:{bridge_port}/invocations-bidirectional-stream"
        direct = await paced_phase(direct_url, model, streams, args.ramp, args.seconds, None)
        bridged = await paced_phase(
            bridged_url, model, streams, args.ramp, args.seconds, bridge.pid, headers
        )
        unpaced_direct, _, direct_ended = await unpaced_phase(
            direct_url, model, streams, args.inflight, args.unpaced_seconds, args.ramp
        )
        unpaced_bridged, bridged_appends, bridged_ended = await unpaced_phase(
            bridged_url, model, streams, args.inflight, args.unpaced_seconds, args.ramp, headers
        )
    finally:
        _stop(bridge, fake)
    held = await held_phase(args.held, bridge_dir, args.token) if args.held else {}
    return {
        "added_p50_ms": bridged["rtt_p50_ms"] - direct["rtt_p50_ms"],
        "added_p99_ms": bridged["rtt_p99_ms"] - direct["rtt_p99_ms"],
        "direct_p99_ms": direct["rtt_p99_ms"],
        "bridged_p99_ms": bridged["rtt_p99_ms"],
        "frames_per_s": bridged["frames_per_s"],
        "cpu_ms_per_1000_frames": bridged["cpu_ms_per_1000_frames"],
        "rss_kib_per_stream": bridged["rss_kib_per_stream"],
        "accept_p99_ms": bridged["accept_p99_ms"],
        "direct_accept_p99_ms": direct["accept_p99_ms"],
        "unpaced_fraction": unpaced_bridged / unpaced_direct if unpaced_direct else float("nan"),
        "unpaced_direct_fps": unpaced_direct,
        "unpaced_bridged_fps": unpaced_bridged,
        # Each append carries 128 ms of audio.
        "unpaced_x_real_time": bridged_appends / streams * APPEND_PERIOD_S,
        "unpaced_ended": direct_ended
        + bridged_ended,  # streams not opened or ended early by the server (0 expected)
        "errors": direct["errors"] + bridged["errors"],
        **held,
    }


COLUMNS = [
    ("added_p50_ms", "added p50 ms", "{:.2f}"),
    ("added_p99_ms", "added p99 ms", "{:.2f}"),
    ("frames_per_s", "frames/s", "{:.0f}"),
    ("cpu_ms_per_1000_frames", "CPU ms/1000 frames", "{:.0f}"),
    ("rss_kib_per_stream", "KiB/stream", "{:.0f}"),
    ("accept_p99_ms", "accept p99 ms", "{:.1f}"),
    ("unpaced_fraction", "unpaced max / direct", "{:.2f}"),
    ("errors", "errors", "{:.0f}"),
]
HELD_COLUMNS = [
    ("held_mib_per_stream", "held MiB/stream", "{:.1f}"),
    ("left_mib_after_close", "MiB left after close", "{:.0f}"),
    ("held_ping_max_ms", "/ping max ms meanwhile", "{:.0f}"),
    ("quiet_ping_max_ms", "/ping max ms before", "{:.0f}"),
]


def targets(new: dict[str, float], old: dict[str, float] | None) -> list[tuple[str, str, bool]]:
    """The figures to keep, as (what, measured, met) for the medians `new` (against `old`, if
    given)."""
    rows = []
    if old is not None:
        for key, what in (
            ("cpu_ms_per_1000_frames", "CPU per 1000 frames"),
            ("rss_kib_per_stream", "memory per stream"),
        ):
            ratio = new[key] / old[key] if old[key] else float("inf")
            rows.append(
                (
                    f"{what} <= 1.10 x first version",
                    f"{new[key]:.1f} vs {old[key]:.1f} ({ratio:.2f} x)",
                    ratio <= 1.10,
                )
            )
    rows.append(
        ("added p99 <= 1.5 ms", f"{new['added_p99_ms']:.2f} ms", new["added_p99_ms"] <= 1.5)
    )
    rows.append(("accept p99 < 15 ms", f"{new['accept_p99_ms']:.1f} ms", new["accept_p99_ms"] < 15))
    rows.append(
        (
            "unpaced >= 0.5 of direct",
            f"{new['unpaced_fraction']:.2f}",
            new["unpaced_fraction"] >= 0.5,
        )
    )
    return rows


def parse_bridges(values: list[str]) -> list[tuple[str, Path]]:
    """`LABEL=DIR` arguments as (label, absolute folder holding the package `bridge/`: a checkout's
    services/, or container/ before services/), checked to hold a bridge package."""
    bridges = []
    for value in values:
        label, sep, directory = value.partition("=")
        if not sep or not label:
            raise SystemExit(
                f"--bridge {value!r}: expected LABEL=DIR, e.g. old=../bridge-base/services"
            )
        path = Path(directory).resolve()
        if not (path / "bridge" / "__main__.py").is_file():
            raise SystemExit(
                f"--bridge {value!r}: {path} holds no bridge package (bridge/__main__.py)"
            )
        bridges.append((label, path))
    return bridges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="16,64,200", help="comma-separated stream counts")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per stream count (medians are reported)"
    )
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="paced measuring window, seconds"
    )
    parser.add_argument(
        "--ramp", type=float, default=1.0, help="seconds over which the streams start"
    )
    parser.add_argument(
        "--unpaced-seconds", type=float, default=3.0, help="unpaced measuring window, seconds"
    )
    parser.add_argument(
        "--inflight",
        type=int,
        default=2,
        help="unpaced: appends outstanding per stream (beyond the audio the model holds before a "
        "delta)",
    )
    parser.add_argument(
        "--held",
        type=int,
        default=0,
        metavar="N",
        help="also measure N streams of 4 MiB appends held by a stopped vLLM (0: skip)",
    )
    parser.add_argument(
        "--bridge",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="a bridge version to measure: the folder holding its package bridge/, a checkout's "
        "services/ (container/ before services/; repeat; default: this checkout's services/)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        help="run every bridge with BRIDGE_TOKEN=TOKEN and send Authorization: Bearer TOKEN on "
        "each bridged upgrade (a version without the check ignores both), so the check is "
        "measured",
    )
    args = parser.parse_args()
    bridges = parse_bridges(args.bridge) or [("this", REPO / "services")]
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    table = []
    for streams in (int(n) for n in args.streams.split(",")):
        runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in bridges}
        for repeat in range(args.repeats):
            for label, directory in bridges:
                figures = runner(one_run(streams, args, directory))
                runs[label].append(figures)
                print(
                    f"N={streams} {label} run {repeat + 1}: "
                    + ", ".join(f"{k}={v:.2f}" for k, v in figures.items()),
                    flush=True,
                )
        for label, _ in bridges:
            table.append(
                (
                    streams,
                    label,
                    {
                        key: statistics.median(run[key] for run in runs[label])
                        for key in runs[label][0]
                    },
                )
            )
    print(
        f"\nMedians of {args.repeats} runs (this machine: {os.cpu_count()} cores, shared; load "
        f"average {os.getloadavg()[0]:.1f} at the end):"
    )
    columns = COLUMNS + (HELD_COLUMNS if args.held else [])
    print("| streams | version | " + " | ".join(title for _, title, _ in columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for streams, label, medians in table:
        print(
            f"| {streams} | {label} | "
            + " | ".join(fmt.format(medians[key]) for key, _, fmt in columns)
            + " |"
        )
    if len(bridges) >= 2:
        first, last = bridges[0][0], bridges[-1][0]
        print(f"\nTargets, {last} against {first}:")
        for streams in sorted({row[0] for row in table}):
            medians = {label: figures for n, label, figures in table if n == streams}
            for what, measured, met in targets(medians[last], medians[first]):
                print(f"N={streams}: {what}: {measured}: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
