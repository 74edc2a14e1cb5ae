"""The bridge reads vLLM's own report of its KV cache (`vllm:cache_config_info` num_gpu_blocks on
`/metrics`), logs it beside MAX_STREAMS, emits it as KvCacheStreams and lowers its stream cap when
vLLM holds fewer live streams."""

from __future__ import annotations

import json
import logging

from bridge.health import parse_block_size, parse_num_gpu_blocks
from contracts.bridge_env import BridgeEnvironment
from tests.bridge.bridge_testkit import (
    LIVENESS_S,
    closed_within,
    open_stream,
    recv_event,
    running_bridge,
    started_stream,
)
from voice_devtools.local.fake_vllm import FakeVllm


def test_a_smaller_kv_cache_lowers_the_stream_cap_with_a_warning(run, caplog, capsys):
    caplog.set_level(logging.INFO, logger="bridge")

    async def scenario():
        # 83 blocks per live stream (one L4 at 45000 tokens); vLLM reports 200 blocks: 2 streams,
        # below MAX_STREAMS=4.
        async with (
            FakeVllm(num_gpu_blocks=200, block_size=16) as vllm,
            running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge,
        ):
            assert (bridge.health.num_gpu_blocks, bridge.stream_cap) == (200, 2)
            first, _ = await started_stream(bridge, vllm, 0)
            second, _ = await started_stream(bridge, vllm, 1)
            extra = await open_stream(bridge)
            busy = await recv_event(extra)
            assert (busy["code"], busy["max_streams"]) == ("server_busy", 2)
            assert await closed_within(extra, LIVENESS_S) == (
                1013,
                "server_busy",
            )  # a liveness bound, not a latency
            bridge.metrics.flush()
            for ws in (first, second):
                await ws.close()

    run(scenario())
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert (
        "INFO",
        "vLLM KV cache: 200 blocks, 2 live streams at KV_BLOCKS_PER_STREAM=83; stream cap "
        "MAX_STREAMS=4",
    ) in messages
    assert any(
        level == "WARNING" and "fewer than MAX_STREAMS=4: the stream cap is now 2" in text
        for level, text in messages
    )
    emf = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    kv_streams = [line["KvCacheStreams"] for line in emf if "KvCacheStreams" in line]
    assert kv_streams and set(kv_streams) == {
        2
    }  # every interval's line (here ours and the shutdown's) carries it
    # StreamCapUsed is a share of the cap in force: 2 live streams of the lowered cap of 2.
    assert 100.0 in [line["StreamCapUsed"] for line in emf if "StreamCapUsed" in line]


def test_a_larger_kv_cache_keeps_max_streams_and_no_report_leaves_it_unchecked(run):
    async def scenario():
        async with (
            FakeVllm(num_gpu_blocks=2000, block_size=16) as vllm,
            running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge,
        ):
            assert (bridge.stream_cap, bridge.metrics.kv_cache_streams) == (4, 24)
        async with (
            FakeVllm(num_gpu_blocks=None) as vllm,
            running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge,
        ):
            assert (bridge.stream_cap, bridge.health.num_gpu_blocks, bridge.health.on_kv_cache) == (
                4,
                None,
                None,
            )
        async with (
            FakeVllm(num_gpu_blocks=10) as vllm,
            running_bridge(vllm.port, max_streams=4) as bridge,
        ):
            assert (bridge.stream_cap, bridge.health.num_gpu_blocks) == (
                4,
                None,
            )  # no KV_BLOCKS_PER_STREAM: not read

    run(scenario())


def test_blocks_of_another_size_are_converted_to_vllms_before_dividing(run, caplog):
    caplog.set_level(logging.INFO, logger="bridge")

    async def scenario():
        # vLLM's CPU build: 2048 blocks of 128 tokens. 83 blocks of 16 tokens per stream = 1328
        # tokens = 10.4 blocks of 128, rounded up to 11, plus one per KV-cache group (2): 13 per
        # stream, 2048 // 13 = 157 streams.
        async with (
            FakeVllm(num_gpu_blocks=2048, block_size=128) as vllm,
            running_bridge(vllm.port, max_streams=200, kv_blocks_per_stream=83) as bridge,
        ):
            assert (
                bridge.health.block_size,
                bridge.metrics.kv_cache_streams,
                bridge.stream_cap,
            ) == (128, 157, 157)
        # A finer block than KV_BLOCK_SIZE: 83 blocks of 16 tokens are 166 blocks of 8 (no rounding
        # to add).
        async with (
            FakeVllm(num_gpu_blocks=1000, block_size=8) as vllm,
            running_bridge(vllm.port, max_streams=200, kv_blocks_per_stream=83) as bridge,
        ):
            assert bridge.metrics.kv_cache_streams == 1000 // 166

    run(scenario())
    assert (
        "INFO",
        "vLLM's KV-cache blocks hold 128 tokens, KV_BLOCKS_PER_STREAM=83 counts blocks of 16: 13 "
        "of vLLM's blocks per stream",
    ) in [(r.levelname, r.getMessage()) for r in caplog.records]


def test_parse_num_gpu_blocks_and_the_setting():
    exposition = (
        b"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        b'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="669",'
        b'num_gpu_blocks_override="None"} 1.0\n'
    )
    assert parse_num_gpu_blocks(exposition) == 669
    assert parse_block_size(exposition) == 16
    assert parse_block_size(b'vllm:cache_config_info{num_gpu_blocks="669"} 1.0\n') is None
    assert parse_num_gpu_blocks(b'vllm:cache_config_info{num_gpu_blocks="None"} 1.0\n') is None
    assert (
        parse_num_gpu_blocks(b'vllm:cache_config_info{num_gpu_blocks_override="5"} 1.0\n') is None
    )
    assert parse_num_gpu_blocks(b"vllm:num_requests_running 0\n") is None
    assert BridgeEnvironment.from_env({"KV_BLOCKS_PER_STREAM": "83"}).kv_blocks_per_stream == 83
    assert BridgeEnvironment.from_env({}).kv_blocks_per_stream is None
    assert (
        BridgeEnvironment.from_env({}).kv_block_size,
        BridgeEnvironment.from_env({"KV_BLOCK_SIZE": "128"}).kv_block_size,
    ) == (16, 128)


class HostileMetricsVllm:
    """A "vLLM" on 127.0.0.1 whose `/health` answers 200 at once and whose `/metrics` is
    `metrics_bytes` long (larger than the bridge reads) or arrives after `metrics_delay_s`; counts
    the requests per path."""

    def __init__(self, metrics_bytes: int = 0, metrics_delay_s: float = 0.0) -> None:
        self.metrics_bytes, self.metrics_delay_s = metrics_bytes, metrics_delay_s
        self.requests: dict[str, int] = {}
        self.port = 0
        self._server = None

    async def __aenter__(self):
        import asyncio

        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info):
        self._server.close()

    async def _handle(self, reader, writer):
        import asyncio

        try:
            path = (await reader.readline()).split()[1].decode()
            self.requests[path] = self.requests.get(path, 0) + 1
            if path == "/metrics":
                await asyncio.sleep(self.metrics_delay_s)
                body = b"#" * self.metrics_bytes
            else:
                body = b""
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
        except (ConnectionError, IndexError):
            pass
        finally:
            writer.close()


import pytest  # noqa: E402


@pytest.mark.parametrize(
    "hostile",
    [{"metrics_bytes": 9 * 1024 * 1024}, {"metrics_delay_s": 1.5}],
    ids=["9-MiB", "1.5-s"],
)
def test_a_huge_or_slow_metrics_is_retried_backed_off_then_given_up_with_one_warning(
    run, caplog, monkeypatch, hostile
):
    import asyncio

    from bridge import health
    from bridge.health import HealthProbe

    delays = (0.01, 0.02, 0.04)
    monkeypatch.setattr(health, "METRICS_RETRY_DELAYS_S", delays)
    # The size bound must be what stops the 9 MiB answer, whatever the machine's speed: a long
    # timeout there.
    monkeypatch.setattr(health, "METRICS_TIMEOUT_S", 30.0 if "metrics_bytes" in hostile else 0.5)
    monkeypatch.setattr(health, "PROBE_INTERVAL_S", 0.01)
    caplog.set_level(logging.INFO, logger="bridge")
    found: list[int] = []

    async def scenario():
        async with HostileMetricsVllm(**hostile) as vllm:
            probe = HealthProbe("127.0.0.1", vllm.port, served_model="m", on_kv_cache=found.append)
            probe.start()
            try:
                while probe.on_kv_cache is not None:  # until it gives up
                    await asyncio.sleep(0.01)
                health_before = vllm.requests["/health"]
                while (
                    vllm.requests["/health"] < health_before + 5
                ):  # probing goes on, /metrics is not read again
                    await asyncio.sleep(0.01)
            finally:
                await probe.stop()
            return dict(vllm.requests), probe

    requests, probe = run(scenario())
    assert requests["/metrics"] == len(delays) + 1 == probe.metrics_reads
    assert found == [] and probe.healthy
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        f"gave up reading vLLM's KV-cache size from /metrics after {len(delays) + 1} "
        "attempts (last: "
    )
    assert (
        "larger than 8388608 bytes" if "metrics_bytes" in hostile else "within 0.5 s"
    ) in warnings[0]
