"""The voice agent (``services/agent/``) end to end on loopback: a page's WebSocket -> the bot ->
Voxtral through the local front door, the real bridge and the fake vLLM -> the Bedrock stand-in
(boto3) -> Sonic through the front door and its stand-in -> the page. The user's speech is
espeak-ng's, so that Silero VAD hears speech."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")

import websockets

from tests.e2e.local.agent_testkit import SILENCE, Page, keep_silent, open_page
from tests.e2e.local.conftest import DELTAS


def test_a_turn_gives_the_user_transcript_the_agent_text_and_audio(agent, utterance):
    async def converse() -> Page:
        page = await open_page(agent.url)
        await page.speak(SILENCE * 10 + utterance)
        spoken = asyncio.Event()
        silence = asyncio.create_task(keep_silent(page, spoken))
        latency = await page.wait_for("latency")
        await page.wait_for("agent_text")
        while not [e for e in page.events("agent_text") if e["final"]]:
            await asyncio.sleep(0.05)
        spoken.set()
        await silence
        await page.websocket.close()
        await page.reader
        return page, latency

    page, latency = asyncio.run(converse())
    finals = [event["text"] for event in page.events("user_transcript") if event["final"]]
    assert finals[0].startswith("".join(DELTAS).strip())  # the fake vLLM's scripted words
    answer = next(event["text"] for event in page.events("agent_text") if event["final"])
    assert answer.startswith("You said: " + finals[0].rstrip(".!? "))
    assert page.audio_bytes() > 0
    assert page.audio_bytes() % 2 == 0
    assert latency["VoiceToVoice"] > 0 and latency["TimeToFinalTranscript"] > 0
    assert agent.bedrock.calls[0].model_id == "local.test-model"
    user = agent.bedrock.calls[0].request["messages"][-1]
    assert user == {"role": "user", "content": [{"text": finals[0]}]}
    turns = [json.loads(line) for line in agent.metrics if "VoiceToVoiceMs" in line]
    assert turns[0]["Deployment"] == "e2e"
    assert turns[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "VoiceAgent"
    # One measurement: the metric keeps 0.1 ms, the page event whole ms (752.53 -> 752.5 and 753).
    assert turns[0]["VoiceToVoiceMs"] == pytest.approx(latency["VoiceToVoice"], abs=0.5)
    assert turns[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"] == "Milliseconds"


def test_barge_in_cancels_sonic_and_no_old_audio_follows_the_interrupt(
    agent, utterance, client_env
):
    async def converse() -> Page:
        page = await open_page(agent.url)
        await page.speak(SILENCE * 10 + utterance, then_silence_s=0.5)
        idle = asyncio.Event()
        silence = asyncio.create_task(keep_silent(page, idle))
        await page.wait_for("turn", 1)
        while not [e for e in page.events("turn") if e["state"] == "agent_speaking"]:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # the agent is speaking; Sonic is still streaming
        idle.set()
        await silence
        await page.speak(utterance, then_silence_s=0.5)  # the user speaks over it
        await page.wait_for("interrupt")
        idle.clear()
        silence = asyncio.create_task(keep_silent(page, idle))
        await page.wait_for("latency", 2)  # the second answer's first audio
        idle.set()
        await silence
        await page.websocket.close()
        await page.reader
        return page

    page = asyncio.run(converse())
    assert len(page.events("interrupt")) == 1
    first_call = client_env.sonic.calls[0]
    assert first_call.cancelled  # the stand-in saw the stream closed before all of its audio
    tags = [
        (
            tag,
            item.get("type") if tag == "event" else None,
            item.get("state") if tag == "event" else None,
        )
        for tag, item in page.received
    ]
    after = tags[tags.index(("event", "interrupt", None)) + 1 :]
    thinking = after.index(("event", "turn", "agent_thinking"))
    assert [tag for tag, _, _ in after[:thinking]].count("audio") == 0
    assert any(tag == "audio" for tag, _, _ in after[thinking:])
    counted = [json.loads(line) for line in agent.metrics if '"Interruptions"' in line]
    assert [line["Interruptions"] for line in counted] == [1]


def test_two_sessions_do_not_mix(agent, utterance):
    async def converse() -> tuple[Page, Page]:
        talker, quiet = await open_page(agent.url), await open_page(agent.url)
        idle = asyncio.Event()
        silence = asyncio.create_task(keep_silent(quiet, idle))
        await talker.speak(SILENCE * 10 + utterance)
        await talker.wait_for("latency")
        await asyncio.sleep(0.5)
        idle.set()
        await silence
        for page in (talker, quiet):
            await page.websocket.close()
            await page.reader
        return talker, quiet

    talker, quiet = asyncio.run(converse())
    assert talker.events("ready")[0]["session_id"] != quiet.events("ready")[0]["session_id"]
    assert talker.audio_bytes() > 0 and talker.events("user_transcript")
    assert quiet.audio_bytes() == 0
    assert [item["type"] for tag, item in quiet.received if tag == "event"] == ["ready", "end"] or [
        item["type"] for tag, item in quiet.received if tag == "event"
    ] == ["ready"]


def test_closing_the_socket_frees_the_slot_and_closes_sonic(agent, utterance, client_env):
    async def converse() -> dict[str, Any]:
        page = await open_page(agent.url)
        assert agent.health()["sessions"] == 1
        await page.speak(SILENCE * 10 + utterance, then_silence_s=0.5)
        idle = asyncio.Event()
        silence = asyncio.create_task(keep_silent(page, idle))
        while not [e for e in page.events("turn") if e["state"] == "agent_speaking"]:
            await asyncio.sleep(0.02)
        idle.set()
        await silence
        await page.websocket.close()  # mid-answer
        deadline = time.monotonic() + 10
        while agent.health()["sessions"] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return agent.health()

    health = asyncio.run(converse())
    assert health == {"status": "ok", "sessions": 0, "max_sessions": 2}
    deadline = time.monotonic() + 30
    while client_env.sonic.generations and time.monotonic() < deadline:
        time.sleep(0.05)
    call = client_env.sonic.calls[-1]  # the answer's request, cut short: not left to its end
    assert call.cancelled, (call.client_closed, len(call.audio), call.full_audio_bytes)
    assert client_env.sonic.generations == 0


def test_a_full_bot_refuses_with_503(agent):
    async def converse() -> int:
        pages = [await open_page(agent.url), await open_page(agent.url)]
        try:
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(agent.url)
            return refused.value.response.status_code
        finally:
            for page in pages:
                await page.websocket.close()

    assert asyncio.run(converse()) == 503


def test_voicectl_talk_relays_a_turn_and_guards_its_origin(agent, utterance):
    """voicectl talk's server between a page and the bot: its page at GET /, its WebSocket relayed
    (the user's words, the agent's text and audio, the latency event), foreign Host/Origin
    refused."""
    from voice_client.talk import TalkRelay

    relay = agent.call(TalkRelay(agent.url, port=0, log=lambda line: None).start())
    origin = f"http://127.0.0.1:{relay.port}"

    async def converse() -> Page:
        page = Page(
            await websockets.connect(
                f"ws://127.0.0.1:{relay.port}/relay", max_size=None, origin=origin
            )
        )
        page.reader = asyncio.create_task(page.read())
        await page.wait_for("ready")
        await page.speak(SILENCE * 10 + utterance)
        spoken = asyncio.Event()
        silence = asyncio.create_task(keep_silent(page, spoken))
        await page.wait_for("latency")
        while not [e for e in page.events("agent_text") if e["final"]]:
            await asyncio.sleep(0.05)
        spoken.set()
        await silence
        await page.websocket.close()
        await page.reader
        return page

    async def refused(**kwargs: Any) -> int:
        with pytest.raises(websockets.InvalidStatus) as refusal:
            await websockets.connect(f"ws://127.0.0.1:{relay.port}/relay", **kwargs)
        return refusal.value.response.status_code

    try:
        with urllib.request.urlopen(origin + "/", timeout=5) as response:
            html = response.read().decode()
            assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        assert '"/relay"' in html and "interrupt" in html
        page = asyncio.run(converse())
        assert asyncio.run(refused(origin="http://evil.example")) == 403
        rebound = urllib.request.Request(origin + "/", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as foreign:
            urllib.request.urlopen(rebound, timeout=5)  # a DNS-rebinding page's request
        assert foreign.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(origin + "/upload", timeout=5)
        assert missing.value.code == 404
    finally:
        agent.call(relay.stop())
    finals = [event["text"] for event in page.events("user_transcript") if event["final"]]
    assert finals[0].startswith("".join(DELTAS).strip())
    answer = next(event["text"] for event in page.events("agent_text") if event["final"])
    assert answer.startswith("You said: ")
    assert page.audio_bytes() > 0
    assert page.events("latency")[0]["VoiceToVoice"] > 0
    assert relay.relayed == 1
    assert relay.guard.refused == {"origin": 1, "host": 1, "route": 1}
