"""Every stream the bridge takes ends in one log line saying how (the code it sent, or how the
client left) and how long it lasted; streams refused at MAX_STREAMS are logged too, at most one
line a minute with a count (a caller retrying at once must not flood the log)."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.bridge.bridge_testkit import (
    LIVENESS_S,
    append,
    closed_within,
    open_stream,
    recv_event,
    running_bridge,
    started_stream,
)
from voice_devtools.local.fake_vllm import FakeVllm, free_port

LINE = re.compile(r"^stream from 127\.0\.0\.1:\d+ ended after \d+\.\d{3} s: (?P<outcome>.+)$")


async def outcomes(caplog, count: int) -> list[str]:
    """The outcomes of the stream lines, once ``count`` are logged (a stream's line is written
    when the bridge is done with it, which may be just after the client is)."""
    for _ in range(int(LIVENESS_S / 0.01)):
        lines = [
            record.getMessage()
            for record in caplog.records
            if record.getMessage().startswith("stream from ")
        ]
        if len(lines) >= count:
            break
        await asyncio.sleep(0.01)
    matches = [LINE.match(line) for line in lines]
    assert all(matches), lines
    return [match["outcome"] for match in matches]


def test_a_stream_the_client_closes_is_one_line(run, caplog):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            ws, _ = await started_stream(bridge, vllm)
            await ws.send(append())
            await ws.close()
            assert await outcomes(caplog, 1) == ["client closed (1000)"]

    run(scenario())


def test_a_stream_refused_at_max_streams_is_logged_and_the_others_end_with_their_line(run, caplog):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_streams=1) as bridge:
            admitted, _ = await started_stream(bridge, vllm)
            for _ in range(3):
                extra = await open_stream(bridge)
                assert (await recv_event(extra))["code"] == "server_busy"
                assert await closed_within(extra, LIVENESS_S) == (1013, "server_busy")
            refusals = [
                record.getMessage()
                for record in caplog.records
                if record.getMessage().startswith("refused")
            ]
            # The first at once; the next two wait for the interval (REFUSED_LOG_INTERVAL_S).
            assert refusals == ["refused a stream: server_busy, MAX_STREAMS=1 (close 1013)"]
            await admitted.close()
            assert await outcomes(caplog, 1) == ["client closed (1000)"]

    run(scenario())


def test_a_stream_the_bridge_ends_says_the_code_it_sent(run, caplog):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, idle_timeout_s=0.4) as bridge:
            silent, _ = await started_stream(bridge, vllm)
            assert (await recv_event(silent))["code"] == "idle_timeout"
            assert await closed_within(silent, LIVENESS_S) == (1000, "idle_timeout")
            assert await outcomes(caplog, 1) == ["idle_timeout (close 1000)"]

    run(scenario())


@pytest.mark.usefixtures("open_timeout_beyond_wait")
def test_a_stream_vllm_does_not_accept_says_so(run, caplog):
    async def scenario():
        async with running_bridge(free_port()) as bridge:
            ws = await open_stream(bridge)
            assert (await recv_event(ws))["code"] == "upstream_unavailable"
            assert (await closed_within(ws, LIVENESS_S))[0] == 1011
            assert await outcomes(caplog, 1) == ["upstream_unavailable (close 1011)"]

    run(scenario())
