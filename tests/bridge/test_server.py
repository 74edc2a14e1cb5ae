"""services/bridge/server.py (`Bridge`) over real sockets on 127.0.0.1, in front of the fake vLLM
(devtools/voice_devtools/local/fake_vllm.py, in the test's event loop): its plain HTTP paths
(`/ping` following vLLM's health, `POST /invocations` and other paths, the health probe's bounded
read), admitting a stream (vLLM down, MAX_STREAMS, a client leaving before vLLM accepted; 500
cycles leave nothing behind), and its start-up log, drain and metrics. (One relayed stream:
test_stream.py; the idle and stall clocks: test_sweep.py; the same HTTP answers from the request
head alone: test_plain_http.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time

import pytest

from bridge.health import FAILURES_BEFORE_UNHEALTHY, MAX_RESPONSE_BYTES, http_get
from tests.bridge.bridge_testkit import (
    LIVENESS_S,
    append,
    closed_within,
    handshake_never_answered,
    http_exchange,
    open_stream,
    ping_status,
    recv_event,
    running_bridge,
    started_stream,
)
from voice_devtools.local.fake_vllm import FakeVllm, free_port

# ---- Plain HTTP: /ping, POST /invocations and other paths, and the health probe behind /ping.


def test_ping_follows_vllm_health_and_answers_within_100ms_even_if_vllm_hangs(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            status, body = await http_get("127.0.0.1", bridge.port, "/ping", LIVENESS_S)
            assert (status, json.loads(body)) == (200, {"status": "healthy"})
            vllm.health_status = 503
            for _ in range(FAILURES_BEFORE_UNHEALTHY):
                await bridge.health.probe_once()
            assert await ping_status(bridge) == 503
            vllm.health_hangs = True
            probe = asyncio.create_task(bridge.health.probe_once())  # blocks for PROBE_TIMEOUT_S
            await asyncio.sleep(0.05)
            assert await ping_status(bridge) == 503
            assert (
                not probe.done()
            )  # answered from the last state while the probe still waits on vLLM
            assert await probe is False
            vllm.health_hangs, vllm.health_status = False, 200
            assert await bridge.health.probe_once() is True
            assert await ping_status(bridge) == 200

    run(scenario())


def test_ping_has_hysteresis_one_failed_probe_does_not_flip_it(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            assert await ping_status(bridge) == 200
            vllm.health_status = 503
            for _ in range(2):  # a momentarily failing or slow probe
                assert await bridge.health.probe_once() is False
                assert await ping_status(bridge) == 200
            assert await bridge.health.probe_once() is False  # the third failure in a row
            assert await ping_status(bridge) == 503
            vllm.health_status = 200
            assert (
                await bridge.health.probe_once() is True
            )  # one good answer is enough to serve again
            assert await ping_status(bridge) == 200

    run(scenario())


@pytest.mark.usefixtures(
    "answer_drop_beyond_wait"
)  # the read ends at the bridge's half-close, not its drop
def test_post_invocations_points_to_the_streaming_path(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            body = b'{"audio": "' + b"A" * 20000 + b'"}'
            head, payload = await http_exchange(
                bridge,
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
                LIVENESS_S,
            )
            assert head.startswith(b"HTTP/1.1 400 ")
            assert b"Content-Type: application/json" in head
            answer = json.loads(payload)
            assert answer["code"] == "use_bidirectional_stream"
            assert "/invocations-bidirectional-stream" in answer["error"]
            status, payload = await http_get("127.0.0.1", bridge.port, "/nothing", LIVENESS_S)
            assert status == 404 and "/ping" in json.loads(payload)["error"]

    run(scenario())


@pytest.mark.usefixtures(
    "answer_drop_beyond_wait"
)  # the read ends at the bridge's half-close, not its drop
def test_post_invocations_body_in_later_reads_is_discarded_not_parsed_as_a_request(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge_.port)
            writer.write(
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n"
                + b"A" * 100
            )
            await writer.drain()
            await asyncio.sleep(0.05)  # the rest of the body comes in another read
            writer.write(b"B" * 19_900)
            response = await asyncio.wait_for(reader.read(), LIVENESS_S)
            writer.close()
            assert (
                response.count(b"HTTP/1.1 ") == 1
            )  # only the bridge's answer, no second (bogus) one
            assert response.startswith(b"HTTP/1.1 400 ")
            assert (
                json.loads(response.partition(b"\r\n\r\n")[2])["code"] == "use_bidirectional_stream"
            )

    run(scenario())


def test_health_probe_reads_at_most_max_response_bytes(run):
    # A misbehaving server behind VLLM_PORT sending an endless answer must not fill the bridge's
    # memory.
    async def scenario():
        async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * (4 * MAX_RESPONSE_BYTES)
            )
            with contextlib.suppress(OSError):
                await writer.drain()
            writer.close()

        server_ = await asyncio.start_server(flood, "127.0.0.1", 0)
        try:
            with pytest.raises(ValueError, match="larger than"):
                await http_get(
                    "127.0.0.1", server_.sockets[0].getsockname()[1], "/health", LIVENESS_S
                )
        finally:
            server_.close()

    run(scenario())


# ---- Admitting a stream: vLLM down or slow to accept, the stream cap, many short streams.
#
# The "within 1 s" tests below: 1 s is the target for how soon the bridge reacts, not
# something these tests time (on a loaded machine one answer has taken over 1 s; latency figures
# are bench/bridge_bench.py's). Each asserts the behaviour instead: what ended the stream and how
# (error code, close code and reason, `upstream_close_code`, counts, metrics), waiting for it up to
# LIVENESS_S, a liveness bound. No bridge timer can give the same outcome within that wait:
# IDLE_TIMEOUT_S (60 s by default) is longer; a stall (UPSTREAM_STALL_S, 5 s) is told as
# upstream_closed without an upstream_close_code; and where a shorter timer would end the stream
# the same way (UPSTREAM_OPEN_TIMEOUT_S, 5 s), the test sets it past the wait (BEYOND_LIVENESS_S).


# vLLM is down when a client connects.
@pytest.mark.usefixtures(
    "open_timeout_beyond_wait"
)  # the refusal is told, not the open timeout's same error
def test_vllm_down_gives_error_and_1011_within_1s_and_ping_503(run):
    async def scenario():
        async with running_bridge(free_port()) as bridge:
            assert await ping_status(bridge) == 503
            ws = await open_stream(bridge)
            error = await recv_event(ws)
            assert error["type"] == "error"
            assert error["code"] == "upstream_unavailable"
            assert "TimeoutError" not in error["error"]  # the refusal named, not a timeout
            code, _ = await closed_within(ws, LIVENESS_S)
            assert code == 1011
            assert await ping_status(bridge) == 503
            assert bridge.active_streams == 0

    run(scenario())


# More concurrent streams than MAX_STREAMS.
def test_stream_over_max_streams_gets_server_busy_and_1013_others_untouched(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_streams=2) as bridge:
            first, first_session = await started_stream(bridge, vllm, 0)
            second, second_session = await started_stream(bridge, vllm, 1)
            extra = await open_stream(bridge)
            busy = await recv_event(extra)
            assert busy["type"] == "error"
            assert busy["code"] == "server_busy"
            assert "2 streams" in busy["error"]
            code, reason = await closed_within(extra, LIVENESS_S)
            assert (code, reason) == (1013, "server_busy")
            assert len(vllm.sessions) == 2  # the extra client never reached vLLM
            # The open streams still relay both ways.
            for ws, session, text in (
                (first, first_session, "one "),
                (second, second_session, "two "),
            ):
                await ws.send(append())
                await session.wait_for_event("input_audio_buffer.append")
                await session.send_delta(text)
                assert await recv_event(ws) == {"type": "transcription.delta", "delta": text}
            assert bridge.metrics.rejected == 1
            assert bridge.active_streams == 2

    run(scenario())


@pytest.mark.parametrize("how", ["close frame", "tcp drop"])
@pytest.mark.usefixtures(
    "open_timeout_beyond_wait"
)  # only the client's leaving can end the connect
def test_client_leaving_while_vllm_has_not_accepted_cancels_the_connect_within_1s(run, how):
    # A vLLM that accepts TCP but never answers the WebSocket handshake.
    async def scenario():
        async with (
            handshake_never_answered() as (port, upstream_gone),
            running_bridge(port) as bridge_,
        ):
            ws = await open_stream(bridge_)
            await asyncio.sleep(0.1)  # the bridge is waiting for vLLM's handshake answer
            assert bridge_.active_streams == 1
            if how == "close frame":
                await ws.close()
            else:
                ws.transport.abort()
            async with asyncio.timeout(LIVENESS_S):
                await upstream_gone.wait()
                while bridge_.active_streams:
                    await asyncio.sleep(0.02)
            assert (
                bridge_.metrics.upstream_errors == 0
            )  # cancelled, not a connect that failed (the timeout's count)

    run(scenario())


# 500 connect/disconnect cycles.
def test_500_cycles_return_fds_tasks_and_streams_to_baseline(run):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def scenario():
        async with FakeVllm(record_audio=False) as vllm, running_bridge(vllm.port) as bridge:
            ws, _ = await started_stream(bridge, vllm)  # warm up imports and caches
            await ws.close()
            # The baseline is taken once the warm-up stream is gone on both sides and the descriptor
            # count holds still: under load its sockets can close after a fixed pause, which left
            # three extra in the baseline.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(20):
                    while bridge.active_streams or vllm.open_sessions():
                        await asyncio.sleep(0.05)
            fds = open_fds()
            for _ in range(10):
                await asyncio.sleep(0.05)
                fds, previous = open_fds(), fds
                if fds == previous:
                    break
            tasks = len(asyncio.all_tasks())
            for cycle in range(500):
                ws = await open_stream(bridge)
                await recv_event(ws)
                if cycle % 3 == 0:
                    await ws.send(append())
                if cycle % 2:
                    ws.transport.abort()
                else:
                    await ws.close()

            # Everything returns to the baseline, however slowly: wait for all of it at once (the
            # bound is on waiting, not a speed target: on a loaded machine the last closes take
            # seconds, and a connect the bridge gave up on can reach the fake vLLM's listener after
            # the bridge's stream is gone, a handshake task that ends at its EOF), then assert each,
            # so a leak is named.
            def settled() -> bool:
                return (
                    not bridge.active_streams
                    and not vllm.open_sessions()
                    and len(asyncio.all_tasks()) == tasks
                    and open_fds() == fds
                )

            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(20):
                    while not settled():
                        await asyncio.sleep(0.05)
            assert len(vllm.sessions) == 501
            assert bridge.active_streams == 0
            assert bridge.metrics.active_streams == 0
            assert len(asyncio.all_tasks()) == tasks
            assert open_fds() == fds

    run(scenario())


# ---- Start-up log, drain on shutdown, metrics.


def test_the_start_up_and_drain_logs_name_vllm_s_address_and_count_in_the_singular(run, caplog):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_streams=1) as bridge:
            assert (
                f"bridge listening on 127.0.0.1:{bridge.port}, vLLM at "
                f"ws://127.0.0.1:{vllm.port}/v1/realtime, max 1 stream, bearer token not "
                "checked, ECS task scale-in protection off"
            ) in caplog.messages
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
            error = await recv_event(lingering)
            assert error["code"] == "server_shutdown"
            assert await closed_within(lingering, LIVENESS_S) == (1001, "server_shutdown")
            await shutdown

    run(scenario())


def test_metrics_are_emf_lines_with_the_stream_figures(run, capsys):
    async def scenario():
        async with (
            FakeVllm() as vllm,
            running_bridge(
                vllm.port,
                max_streams=1,
                metrics_namespace="Test/Bridge",
                endpoint_name="voxtral",
                variant_name="AllTraffic",
            ) as bridge,
        ):
            capsys.readouterr()
            ws, session = await started_stream(bridge, vllm)
            busy = await open_stream(bridge)
            await closed_within(busy, LIVENESS_S)
            await session.send_delta("a")
            await recv_event(ws)
            await ws.close()
            await session.wait_closed()
            await asyncio.sleep(0.05)
            bridge.metrics.flush()

    started = time.monotonic()
    run(scenario())
    scenario_s = time.monotonic() - started
    lines = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    record = lines[0]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Test/Bridge"
    assert directive["Dimensions"] == [["EndpointName", "VariantName"]]
    assert (record["EndpointName"], record["VariantName"]) == ("voxtral", "AllTraffic")
    units = {metric["Name"]: metric["Unit"] for metric in directive["Metrics"]}
    assert units == {
        "ActiveStreams": "Count",
        "StreamsStarted": "Count",
        "StreamsRejected": "Count",
        "UpstreamErrors": "Count",
        "TimeToFirstDelta": "Milliseconds",
        "StreamSeconds": "Seconds",
        "StreamCapUsed": "Percent",
    }
    assert (
        record["ActiveStreams"],
        record["StreamsStarted"],
        record["StreamsRejected"],
        record["UpstreamErrors"],
    ) == (1, 1, 1, 0)
    assert record["StreamCapUsed"] == 100.0  # 1 of MAX_STREAMS=1
    # The figures' sizes, at any machine speed: the stream lasted no longer than the scenario that
    # held it (StreamSeconds in seconds), and its first delta came before it ended (TimeToFirstDelta
    # in milliseconds); 1 ms for the rounding.
    assert 0 < record["StreamSeconds"] <= scenario_s + 0.001
    assert 0 < record["TimeToFirstDelta"] <= record["StreamSeconds"] * 1000 + 1


def test_no_metrics_are_written_before_vllm_is_first_healthy(run, capsys):
    """An instance still loading the model must not report ActiveStreams=0 (autoscaling averages
    over instances)."""

    def emf_lines() -> list[dict]:
        return [
            json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line
        ]

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
            written: list[dict] = []
            async with asyncio.timeout(
                LIVENESS_S
            ):  # a line every interval from now on, however slow the loop
                while len(written) < 2:
                    await asyncio.sleep(0.05)
                    written += emf_lines()

    run(scenario())
