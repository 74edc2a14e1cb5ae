"""The bridge's HTTP paths and relay behaviour over real sockets: /ping, POST /invocations, frames, pings,
drain, metrics."""

from __future__ import annotations

import asyncio
import json
import time

from websockets.asyncio.client import connect

from bridge.health import FAILURES_BEFORE_UNHEALTHY, http_get
from tests.bridge.bridge_testkit import (
    PCM_CHUNK,
    append,
    closed_within,
    event,
    http_exchange,
    open_stream,
    ping_status,
    recv_event,
    running_bridge,
    started_stream,
)
from voicectl.local.fake_vllm import FakeVllm


def test_ping_follows_vllm_health_and_answers_within_100ms_even_if_vllm_hangs(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            status, body = await http_get("127.0.0.1", bridge.port, "/ping", 1.0)
            assert (status, json.loads(body)) == (200, {"status": "healthy"})
            vllm.health_status = 503
            for _ in range(FAILURES_BEFORE_UNHEALTHY):
                await bridge.health.probe_once()
            assert await ping_status(bridge) == 503
            vllm.health_hangs = True
            probe = asyncio.create_task(bridge.health.probe_once())  # blocks for PROBE_TIMEOUT_S
            await asyncio.sleep(0.05)
            assert await ping_status(bridge) == 503
            assert not probe.done()  # answered from the last state while the probe still waits on vLLM
            assert await probe is False
            vllm.health_hangs, vllm.health_status = False, 200
            assert await bridge.health.probe_once() is True
            assert await ping_status(bridge) == 200

    run(scenario())


def test_post_invocations_points_to_the_streaming_path(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            body = b'{"audio": "' + b"A" * 20000 + b'"}'
            head, payload = await http_exchange(
                bridge, b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body, 1.0)
            assert head.startswith(b"HTTP/1.1 400 ")
            assert b"Content-Type: application/json" in head
            answer = json.loads(payload)
            assert answer["code"] == "use_bidirectional_stream"
            assert "/invocations-bidirectional-stream" in answer["error"]
            status, payload = await http_get("127.0.0.1", bridge.port, "/nothing", 1.0)
            assert status == 404 and "/ping" in json.loads(payload)["error"]

    run(scenario())


def test_frames_relay_unchanged_both_ways_and_binary_frames_are_read_as_json(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            ws, session = await started_stream(bridge, vllm)
            await ws.send(append().encode())  # a binary frame holding the JSON
            await ws.send(b"\xff\xfe not utf-8")
            error = await recv_event(ws)
            assert error["code"] == "invalid_json"
            await ws.send("{not json")
            assert (await recv_event(ws))["code"] == "invalid_json"
            await ws.send(event("input_audio_buffer.commit", final=True))
            await session.wait_for_event("input_audio_buffer.commit", count=2)
            assert session.event_types() == [
                "session.update", "input_audio_buffer.commit", "input_audio_buffer.append", "input_audio_buffer.commit",
            ]
            assert bytes(session.audio) == PCM_CHUNK
            assert (await recv_event(ws))["type"] == "transcription.done"  # the final commit ended generation
            await session.send_delta("héllo ")  # non-ASCII text relayed byte for byte
            assert await ws.recv() == '{"type":"transcription.delta","delta":"héllo "}'
            await session.send_error("Unknown event type: x", "unknown_event")  # vLLM's errors pass through
            assert await recv_event(ws) == {"type": "error", "error": "Unknown event type: x", "code": "unknown_event"}

    run(scenario())


def test_vllm_errors_pass_through_commit_before_update(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            ws = await open_stream(bridge)
            created = await recv_event(ws)
            assert created["type"] == "session.created" and created["id"].startswith("sess-")
            await ws.send(event("input_audio_buffer.commit"))
            error = await recv_event(ws)
            assert error["code"] == "model_not_validated"

    run(scenario())


def test_pings_are_answered_and_fragmented_messages_reassembled(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            ws, session = await started_stream(bridge, vllm)
            latency = await asyncio.wait_for(await ws.ping(b"sagemaker"), 1.0)
            assert latency >= 0
            text = append()
            await ws.send([text[:100], text[100:3000], text[3000:]])  # one message in three frames
            await session.wait_for_event("input_audio_buffer.append")
            assert bytes(session.audio) == PCM_CHUNK

    run(scenario())


def test_frames_over_the_size_limit_close_with_1009(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            ws = await connect(f"ws://127.0.0.1:{bridge.port}/invocations-bidirectional-stream", max_size=None)
            await recv_event(ws)
            await ws.send("x" * (bridge.settings.max_frame_bytes + 1))
            code, _ = await closed_within(ws, 2.0)
            assert code == 1009

    run(scenario())


def test_the_start_up_and_drain_logs_name_vllm_s_address_and_count_in_the_singular(run, caplog):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_streams=1) as bridge:
            assert (f"bridge listening on 127.0.0.1:{bridge.port}, vLLM at ws://127.0.0.1:{vllm.port}/v1/realtime, "
                    "max 1 stream, bearer token not checked, ECS task scale-in protection off") in caplog.messages
            await started_stream(bridge, vllm, 0)
            await bridge.shutdown(drain_s=0.1)
            assert "draining 1 open stream for up to 0 s" in caplog.messages

    run(scenario())


def test_drain_lets_open_streams_finish_then_ends_the_rest(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            finishing, finishing_session = await started_stream(bridge, vllm, 0)
            lingering, _ = await started_stream(bridge, vllm, 1)
            shutdown = asyncio.create_task(bridge.shutdown(drain_s=0.6))
            await asyncio.sleep(0.1)
            try:  # no new streams while draining
                refused = await open_stream(bridge)
                await refused.close()
                raise AssertionError("a new stream was accepted while draining")
            except OSError:
                pass
            await finishing.send(append())  # open streams keep relaying during the drain
            await finishing_session.wait_for_event("input_audio_buffer.append")
            await finishing.close()
            error = await recv_event(lingering, timeout=1.5)
            assert error["code"] == "server_shutdown"
            assert await closed_within(lingering, 1.0) == (1001, "server_shutdown")
            await shutdown

    run(scenario())


def test_metrics_are_emf_lines_with_the_stream_figures(run, capsys):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_streams=1, metrics_namespace="Test/Bridge",
                                                      endpoint_name="voxtral", variant_name="AllTraffic") as bridge:
            capsys.readouterr()
            ws, session = await started_stream(bridge, vllm)
            busy = await open_stream(bridge)
            await closed_within(busy, 1.0)
            await session.send_delta("a")
            await recv_event(ws)
            await ws.close()
            await session.wait_closed()
            await asyncio.sleep(0.05)
            bridge.metrics.flush()

    run(scenario())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    record = lines[0]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Test/Bridge"
    assert directive["Dimensions"] == [["EndpointName", "VariantName"]]
    assert (record["EndpointName"], record["VariantName"]) == ("voxtral", "AllTraffic")
    units = {metric["Name"]: metric["Unit"] for metric in directive["Metrics"]}
    assert units == {
        "ActiveStreams": "Count", "StreamsStarted": "Count", "StreamsRejected": "Count", "UpstreamErrors": "Count",
        "TimeToFirstDelta": "Milliseconds", "StreamSeconds": "Seconds", "StreamCapUsed": "Percent",
    }
    assert (record["ActiveStreams"], record["StreamsStarted"], record["StreamsRejected"], record["UpstreamErrors"]) == (1, 1, 1, 0)
    assert record["StreamCapUsed"] == 100.0  # 1 of MAX_STREAMS=1
    assert 0 < record["TimeToFirstDelta"] < 1000
    assert 0 < record["StreamSeconds"] < 5


def test_no_metrics_are_written_before_vllm_is_first_healthy(run, capsys):
    """An instance still loading the model must not report ActiveStreams=0 (autoscaling averages over instances)."""

    def emf_lines() -> list[dict]:
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]

    async def scenario():
        vllm = FakeVllm()
        vllm.health_status = 503
        async with vllm, running_bridge(vllm.port, metrics_interval_s=0.1) as bridge:
            capsys.readouterr()
            await asyncio.sleep(0.5)  # five intervals while vLLM is not ready
            assert not bridge.health.healthy
            assert emf_lines() == []
            vllm.health_status = 200
            await bridge.health.probe_once()
            await asyncio.sleep(0.35)
            assert len(emf_lines()) >= 2

    run(scenario())
