"""The bridge reads vLLM's own report of its KV cache (`vllm:cache_config_info` num_gpu_blocks on `/metrics`), logs it
beside MAX_STREAMS, emits it as KvCacheStreams and lowers its stream cap when vLLM holds fewer live streams."""

from __future__ import annotations

import json
import logging

from tests.bridge.bridge_testkit import closed_within, open_stream, recv_event, running_bridge, started_stream
from bridge.health import parse_num_gpu_blocks
from bridge.settings import Settings
from voicectl.local.fake_vllm import FakeVllm

ONE_SECOND = 1.0


def test_a_smaller_kv_cache_lowers_the_stream_cap_with_a_warning(run, caplog, capsys):
    caplog.set_level(logging.INFO, logger="bridge")

    async def scenario():
        # 83 blocks per live stream (one L4 at 45000 tokens); vLLM reports 200 blocks: 2 streams, below MAX_STREAMS=4.
        async with FakeVllm(num_gpu_blocks=200) as vllm, \
                running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge:
            assert (bridge.health.num_gpu_blocks, bridge.stream_cap) == (200, 2)
            first, _ = await started_stream(bridge, vllm, 0)
            second, _ = await started_stream(bridge, vllm, 1)
            extra = await open_stream(bridge)
            busy = await recv_event(extra)
            assert (busy["code"], busy["max_streams"]) == ("server_busy", 2)
            assert await closed_within(extra, ONE_SECOND) == (1013, "server_busy")
            bridge.metrics.flush()
            for ws in (first, second):
                await ws.close()

    run(scenario())
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert ("INFO", "vLLM KV cache: 200 blocks, 2 live streams at KV_BLOCKS_PER_STREAM=83; stream cap MAX_STREAMS=4") \
        in messages
    assert any(level == "WARNING" and "fewer than MAX_STREAMS=4: the stream cap is now 2" in text
               for level, text in messages)
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    kv_streams = [line["KvCacheStreams"] for line in emf if "KvCacheStreams" in line]
    assert kv_streams and set(kv_streams) == {2}  # every interval's line (here ours and the shutdown's) carries it
    # StreamCapUsed is a share of the cap in force: 2 live streams of the lowered cap of 2.
    assert 100.0 in [line["StreamCapUsed"] for line in emf if "StreamCapUsed" in line]


def test_a_larger_kv_cache_keeps_max_streams_and_no_report_leaves_it_unchecked(run):
    async def scenario():
        async with FakeVllm(num_gpu_blocks=2000) as vllm, \
                running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge:
            assert (bridge.stream_cap, bridge.metrics.kv_cache_streams) == (4, 24)
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge:
            assert (bridge.stream_cap, bridge.health.num_gpu_blocks, bridge.health.on_kv_cache) == (4, None, None)
        async with FakeVllm(num_gpu_blocks=10) as vllm, running_bridge(vllm.port, max_streams=4) as bridge:
            assert (bridge.stream_cap, bridge.health.num_gpu_blocks) == (4, None)  # no KV_BLOCKS_PER_STREAM: not read

    run(scenario())


def test_parse_num_gpu_blocks_and_the_setting():
    exposition = (b"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                  b'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="669",'
                  b'num_gpu_blocks_override="None"} 1.0\n')
    assert parse_num_gpu_blocks(exposition) == 669
    assert parse_num_gpu_blocks(b'vllm:cache_config_info{num_gpu_blocks="None"} 1.0\n') is None
    assert parse_num_gpu_blocks(b'vllm:cache_config_info{num_gpu_blocks_override="5"} 1.0\n') is None
    assert parse_num_gpu_blocks(b"vllm:num_requests_running 0\n") is None
    assert Settings.from_env({"KV_BLOCKS_PER_STREAM": "83"}).kv_blocks_per_stream == 83
    assert Settings.from_env({}).kv_blocks_per_stream is None
