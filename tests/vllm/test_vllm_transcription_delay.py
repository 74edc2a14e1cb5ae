"""voxtral.transcription_delay_ms against vLLM's real server: the tokenizer directory the image's
entrypoint writes (`delayed_tokenizer`) and the command line it builds from it (`vllm_command`)
make vLLM run at that delay, on the checkpoint's weights where they are; the bridge's session
limit counts the delay's tokens.

What the real server showed (vLLM 0.31.0's CPU build, at 160, 480 and 2400 ms, before these tests
were written): at a delay of d tokens (80 ms each) `usage.prompt_tokens` is 33 + d (BOS, 32
left-pad tokens, the delay); no delta comes before d + 1 tokens of audio and the 2.5 ms look-ahead
are in, so with whole-token appends the first delta follows the (d + 2)nd token; and
`completion_tokens` is the audio's tokens + 10 at every delay. Counts, not times: they hold on any
machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.entrypoint import TEKKEN_FILE, delayed_tokenizer, vllm_command
from bridge.server import STREAM_PATH
from tests.bridge.bridge_testkit import running_bridge
from tests.vllm import realtime_script as script
from tests.vllm.conftest import RealVllm, serving
from tests.vllm.test_vllm_bridge import vllm_idle
from voice_devtools.local import real_vllm
from voice_devtools.local.fake_vllm import free_port

pytestmark = pytest.mark.vllm

#: The second server's delay: the longest the model card allows, so that its prompt and first
#: delta differ most from the checkpoint's, and its 30 delay tokens weigh most in the session limit.
DELAY_MS = 2400
#: The checkpoint's own delay (devtools/voice_devtools/local/tiny_voxtral.py, as in the real
#: tekken.json).
CHECKPOINT_DELAY_MS = 480
TOKEN_MS = 80


@pytest.fixture(scope="module")
def delayed(vllm_server: RealVllm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllm]:
    """A second vLLM on the session server's checkpoint, started as the entrypoint starts it with
    TRANSCRIPTION_DELAY_MS=2400: `delayed_tokenizer` writes the tokenizer directory and
    `vllm_command` the flags (its fixed port 8081 swapped for a free one: this tier runs beside
    other servers)."""
    directory = tmp_path_factory.mktemp("vllm-delayed")
    server = [str(real_vllm.python()), "-m", "vllm.entrypoints.openai.api_server"]
    env = {
        "VLLM_COMMAND": json.dumps(server),
        "SM_VLLM_MODEL": vllm_server.model,
        "SM_VLLM_TOKENIZER_MODE": "mistral",
        "SM_VLLM_CONFIG_FORMAT": "mistral",
        "SM_VLLM_LOAD_FORMAT": "mistral",
        "SM_VLLM_MAX_MODEL_LEN": str(real_vllm.MAX_MODEL_LEN),
        "SM_VLLM_ENFORCE_EAGER": "true",
    }
    env["SM_VLLM_TOKENIZER"] = str(delayed_tokenizer(env, DELAY_MS, directory / "tokenizer"))
    command = vllm_command(env)
    port = free_port()
    command[command.index("--port") + 1] = str(port)
    with serving(command, port, vllm_server.model, directory / "vllm.log") as started:
        yield started


def bridge_url(bridge) -> str:
    return f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}"


async def first_delta_session(url: str, delay_tokens: int) -> tuple[script.Transcript, int]:
    """d + 1 tokens of audio (no delta yet), one more (the first delta), ten more, the final
    commit: the transcript, and the number of deltas before the (d + 2)nd token."""
    t = await script.open_session(url)
    await t.send(script.event("session.update", model="any-name"))
    await t.send(script.event("input_audio_buffer.commit"))
    await t.send(script.append(delay_tokens + 1))
    await t.mark(f"{delay_tokens + 1} tokens of audio")
    early = len(t.deltas())
    await t.send(script.append(1))
    await t.until(script.count_is("transcription.delta", 1))
    await t.send(script.append(10))
    await t.send(script.event("input_audio_buffer.commit", final=True))
    await t.until(script.count_is("transcription.done", 1))
    await t.ws.close()
    return t, early


def test_the_entrypoints_tokenizer_is_the_checkpoints_with_only_the_delay_replaced(delayed):
    args = delayed.process.args
    tokenizer = Path(args[args.index("--tokenizer") + 1])
    assert [path.name for path in tokenizer.iterdir()] == [TEKKEN_FILE]  # all vLLM needed
    original = json.loads((Path(delayed.model) / TEKKEN_FILE).read_text())
    patched = json.loads((tokenizer / TEKKEN_FILE).read_text())
    delays = [tekken["audio"]["transcription_delay_ms"] for tekken in (original, patched)]
    assert delays == [CHECKPOINT_DELAY_MS, DELAY_MS]
    patched["audio"]["transcription_delay_ms"] = CHECKPOINT_DELAY_MS
    assert patched == original
    assert args[args.index("--model") + 1] == delayed.model  # the same weights


@pytest.mark.parametrize("server, delay_ms", [("vllm", CHECKPOINT_DELAY_MS), ("delayed", DELAY_MS)])
def test_vllm_runs_at_the_delay_of_the_tokenizer_it_was_given(server, delay_ms, request, run):
    """The same session through the bridge against the session's server (the checkpoint's 480 ms)
    and the delayed one: the prompt holds the delay's tokens, and the first delta waits for them
    (after the 8th token at 480 ms, the 32nd at 2400 ms)."""
    vllm = request.getfixturevalue(server)
    delay_tokens = delay_ms // TOKEN_MS

    async def scenario():
        async with running_bridge(vllm.port, transcription_delay_ms=delay_ms) as bridge:
            return await first_delta_session(bridge_url(bridge), delay_tokens)

    t, early = run(scenario())
    usage = t.done()["usage"]
    audio_tokens = delay_tokens + 1 + 1 + 10
    assert early == 0
    assert usage["prompt_tokens"] == 1 + 32 + delay_tokens
    assert usage["completion_tokens"] == audio_tokens + 10 == len(t.deltas())
    assert usage["total_tokens"] == audio_tokens + 43 + delay_tokens


def test_the_session_limit_counts_the_delays_tokens_so_the_final_padding_fits(delayed, run):
    """At 2400 ms a generation holds its audio + 73 tokens once the final commit's padding is
    decoded (33 + 30 in the prompt, 10 past the audio). The bridge's limit at max_model_len 160 is
    (160 - 73) x 0.9 = 78.3 tokens, 6.264 s: seven appends of 10 tokens fit and their generation
    ends whole (143 tokens); an eighth is refused. Counted as at 480 ms (49 tokens) the limit
    would be 7.99 s: nine appends and a final commit were seen to take the generation past
    max_model_len while its padding streamed in, which killed vLLM's engine (EngineDeadError:
    every session ended with 1012)."""

    async def scenario():
        async with running_bridge(
            delayed.port, max_model_len=real_vllm.MAX_MODEL_LEN, transcription_delay_ms=DELAY_MS
        ) as bridge:
            t = await script.open_session(bridge_url(bridge))
            await t.send(script.event("session.update", model="any-name"))
            await t.send(script.event("input_audio_buffer.commit"))
            for _ in range(7):
                await t.send(script.append(10))
            await t.send(script.event("input_audio_buffer.commit", final=True))
            await t.until(script.count_is("transcription.done", 1))
            await t.send(script.event("input_audio_buffer.commit"))
            for _ in range(8):
                await t.send(script.append(10))
            await t.closed()
        return t, await vllm_idle(delayed)

    t, idle = run(scenario())
    assert t.done()["usage"]["total_tokens"] == 70 + 73 <= real_vllm.MAX_MODEL_LEN
    assert t.done()["usage"]["completion_tokens"] == 70 + 10  # every token of the audio decoded
    (limit,) = [e for e in t.events if e["type"] == "error"]
    assert limit["code"] == "session_limit" and limit["audio_s"] == pytest.approx(5.6)
    limit_s = (real_vllm.MAX_MODEL_LEN - 73) * 0.9 / 12.5
    assert limit["limit_s"] == pytest.approx(limit_s, abs=0.001)
    assert t.close_code == 1000 and not any(idle.values())
    assert delayed.get("/health")[0] == 200
