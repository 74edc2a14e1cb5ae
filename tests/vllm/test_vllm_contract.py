"""The fake vLLM (devtools/voice_devtools/local/fake_vllm.py) against vLLM's real realtime server:
the same scripted sessions run against both, and the servers must answer with the same event types,
fields and order (ids, times and texts aside).

Each session is a row of what the fake must follow: deltas only after ~0.6 s of buffered audio, one
per 80 ms and the rest after the final commit; a second utterance from zero; `"final": "no"`; every
in-band error; a binary frame; usage; `/metrics`; SIGTERM (last: it stops the session's vLLM)."""

from __future__ import annotations

import asyncio
import re
import urllib.request

import pytest

from bridge.server import STREAM_PATH
from tests.bridge.bridge_testkit import running_bridge
from tests.vllm import realtime_script as script
from voice_devtools.local import real_vllm
from voice_devtools.local.fake_vllm import CPU_BLOCK_SIZE, FakeVllm

pytestmark = pytest.mark.vllm


def fake_for(vllm) -> FakeVllm:
    """The fake as the fast tests use it in generate mode, serving the real server's model name and
    limits."""
    return FakeVllm(model=vllm.model, generate=True, max_model_len=real_vllm.MAX_MODEL_LEN)


async def both(vllm, session, *args):
    """Run `session` against the real server, then against a fresh fake; return (real, fake)
    transcripts."""
    real = await session(vllm.url, vllm.model, *args)
    async with fake_for(vllm) as fake:
        faked = await session(fake.url, vllm.model, *args)
    return real, faked


def check_generation_invariants(transcript: script.Transcript) -> None:
    """What holds on either server: each done's text is its own generation's deltas, one completion
    token each."""
    deltas: list[str] = []
    for received in transcript.events:
        if received["type"] == "transcription.delta":
            deltas.append(received["delta"])
        elif received["type"] == "transcription.done":
            assert received["text"] == "".join(deltas)
            assert received["usage"]["completion_tokens"] == len(deltas)
            assert received["usage"]["total_tokens"] == received["usage"]["prompt_tokens"] + len(
                deltas
            )
            deltas = []


@pytest.mark.parametrize("name", list(script.SESSIONS))
def test_the_fake_answers_each_scripted_session_as_the_real_server_does(vllm, run, name):
    real, faked = run(both(vllm, script.SESSIONS[name]))
    assert faked.entries == real.entries
    check_generation_invariants(real)
    check_generation_invariants(faked)


def test_the_real_server_sends_what_the_rows_say(vllm, run):
    """The rows themselves, on the real server (so that a change in vLLM shows which row moved)."""
    lifecycle = run(script.lifecycle(vllm.url, vllm.model))
    marks = [entry for entry in lifecycle.entries if entry[0] != "session.created"]
    assert marks[0] == ("mark", "7 tokens of audio")  # nothing before ~0.6 s of audio
    assert lifecycle.count("transcription.delta") == 30  # 20 tokens of audio + 10
    usage = lifecycle.done()["usage"]
    assert usage["completion_tokens_details"] is None and usage["prompt_tokens"] == 39
    second = run(script.second_utterance(vllm.url, vllm.model))
    first, again = second.done(0), second.done(1)
    assert first["usage"] == again["usage"]  # from zero: the same audio gives the same usage
    assert run(script.binary_frame(vllm.url, vllm.model)).close_code == 1006


def prometheus_families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.M))


def cache_config_labels(text: str) -> dict[str, str]:
    labels = re.search(r"^vllm:cache_config_info\{([^}]*)\}", text, flags=re.M).group(1)
    return dict(re.findall(r'(\w+)="([^"]*)"', labels))


def test_the_fakes_metrics_are_the_real_servers_prometheus_text(vllm, run):
    status, real_text = vllm.get("/metrics")
    assert status == 200

    async def fake_metrics() -> str:
        async with fake_for(vllm) as fake:
            return await asyncio.to_thread(
                lambda: (
                    urllib.request.urlopen(f"http://127.0.0.1:{fake.port}/metrics", timeout=10)
                    .read()
                    .decode()
                )
            )

    fake_text = run(fake_metrics())
    real_families, fake_families = prometheus_families(real_text), prometheus_families(fake_text)
    assert {name for name in fake_families if name.startswith("vllm:")} == {
        name for name in real_families if name.startswith("vllm:")
    }
    # The HTTP families (prometheus-fastapi-instrumentator) grow with the handlers a server has
    # answered.
    assert fake_families <= real_families
    real_labels, fake_labels = cache_config_labels(real_text), cache_config_labels(fake_text)
    assert fake_labels.keys() == real_labels.keys()
    assert real_labels["block_size"] == fake_labels["block_size"] == str(CPU_BLOCK_SIZE)
    assert (
        real_labels["num_gpu_blocks"] == fake_labels["num_gpu_blocks"] == "2048"
    )  # 1 GiB of CPU KV cache


async def generating(url: str, model: str) -> script.Transcript:
    """A session with a generation running: 10 tokens of audio sent, their 3 deltas received."""
    t = await script.open_session(url)
    await t.send(script.event("session.update", model=model))
    await t.send(script.event("input_audio_buffer.commit"))
    await t.send(script.append(10))
    await t.until(script.count_is("transcription.delta", 3))
    await t.mark("generating")
    return t


@pytest.mark.stops_vllm
def test_sigterm_ends_every_session_as_the_fake_does_and_the_bridge_says_so(vllm, run):
    """SIGTERM (the last test: it stops the session's vLLM): each open session gets vLLM's answer
    and close 1012; a client behind the bridge gets what vLLM sent, then `upstream_closed` naming
    1012."""

    async def scenario():
        async with fake_for(vllm) as fake:
            faked = await generating(fake.url, vllm.model)
            await fake.stop()
            await faked.closed()
        async with running_bridge(vllm.port) as bridge:
            real = await generating(vllm.url, vllm.model)
            relayed = await generating(f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}", "any-name")
            await asyncio.to_thread(vllm.sigterm)
            await asyncio.gather(real.closed(), relayed.closed())
        return faked, real, relayed

    faked, real, relayed = run(scenario())
    assert real.close_code == 1012
    # Up to the mark, the same. After it (deltas aside: vLLM may flush one as it stops) the running
    # generation's `processing_error`, then 1012. vLLM sometimes closes before its generation task
    # notices and sends no error (seen both ways): the fake always sends it.
    assert until_mark(faked.entries) == until_mark(real.entries)
    assert after_mark(faked.entries) == [STOPPED, ("closed", 1012)]
    assert after_mark(real.entries) in ([STOPPED, ("closed", 1012)], [("closed", 1012)])
    assert vllm.process.wait(60) is not None  # vLLM exited
    upstream = [e for e in relayed.events if e.get("code") == "upstream_closed"]
    assert len(upstream) == 1 and upstream[0]["upstream_close_code"] == 1012
    assert relayed.close_code == 1011
    assert until_mark(relayed.entries) == until_mark(real.entries)
    bridge_error = ("error", ("code", "error", "type", "upstream_close_code"), "upstream_closed")
    assert [entry for entry in after_mark(relayed.entries) if entry != STOPPED] == [
        bridge_error,
        ("closed", 1011),
    ]


#: What a running generation gets when vLLM stops.
STOPPED = ("error", ("code", "error", "type"), "processing_error")


def until_mark(entries: list[tuple]) -> list[tuple]:
    return entries[: entries.index(("mark", "generating")) + 1]


def after_mark(entries: list[tuple]) -> list[tuple]:
    rest = entries[entries.index(("mark", "generating")) + 1 :]
    return [entry for entry in rest if entry[0] != "transcription.delta"]
