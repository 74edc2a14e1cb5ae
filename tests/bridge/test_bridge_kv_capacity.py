"""The bridge reads vLLM's own report of its KV cache (`vllm:cache_config_info` num_gpu_blocks on `/metrics`), logs it
beside MAX_STREAMS, emits it as KvCacheStreams and lowers its stream cap when vLLM holds fewer live streams."""

from __future__ import annotations

import json
import logging

from tests.bridge.bridge_testkit import closed_within, open_stream, recv_event, running_bridge, started_stream
from bridge.health import parse_block_size, parse_num_gpu_blocks
from bridge.settings import Settings
from voicectl.local.fake_vllm import FakeVllm

ONE_SECOND = 1.0


def test_a_smaller_kv_cache_lowers_the_stream_cap_with_a_warning(run, caplog, capsys):
    caplog.set_level(logging.INFO, logger="bridge")

    async def scenario():
        # 83 blocks per live stream (one L4 at 45000 tokens); vLLM reports 200 blocks: 2 streams, below MAX_STREAMS=4.
        async with FakeVllm(num_gpu_blocks=200, block_size=16) as vllm, \
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


def test_a_larger_kv_cache_keeps_max_streams_and_no_report_leaves_it_unchecked(run):
    async def scenario():
        async with FakeVllm(num_gpu_blocks=2000, block_size=16) as vllm, \
                running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge:
            assert (bridge.stream_cap, bridge.metrics.kv_cache_streams) == (4, 24)
        async with FakeVllm(num_gpu_blocks=None) as vllm, \
                running_bridge(vllm.port, max_streams=4, kv_blocks_per_stream=83) as bridge:
            assert (bridge.stream_cap, bridge.health.num_gpu_blocks, bridge.health.on_kv_cache) == (4, None, None)
        async with FakeVllm(num_gpu_blocks=10) as vllm, running_bridge(vllm.port, max_streams=4) as bridge:
            assert (bridge.stream_cap, bridge.health.num_gpu_blocks) == (4, None)  # no KV_BLOCKS_PER_STREAM: not read

    run(scenario())


def test_blocks_of_another_size_are_converted_to_vllms_before_dividing(run, caplog):
    caplog.set_level(logging.INFO, logger="bridge")

    async def scenario():
        # vLLM's CPU build: 2048 blocks of 128 tokens. 83 blocks of 16 tokens per stream = 1328 tokens = 10.4 blocks
        # of 128, rounded up to 11, plus one per KV-cache group (2): 13 per stream, 2048 // 13 = 157 streams.
        async with FakeVllm(num_gpu_blocks=2048, block_size=128) as vllm, \
                running_bridge(vllm.port, max_streams=200, kv_blocks_per_stream=83) as bridge:
            assert (bridge.health.block_size, bridge.metrics.kv_cache_streams, bridge.stream_cap) == (128, 157, 157)
        # A finer block than KV_BLOCK_SIZE: 83 blocks of 16 tokens are 166 blocks of 8 (no rounding to add).
        async with FakeVllm(num_gpu_blocks=1000, block_size=8) as vllm, \
                running_bridge(vllm.port, max_streams=200, kv_blocks_per_stream=83) as bridge:
            assert bridge.metrics.kv_cache_streams == 1000 // 166

    run(scenario())
    assert ("INFO", "vLLM's KV-cache blocks hold 128 tokens, KV_BLOCKS_PER_STREAM=83 counts blocks of 16: 13 of "
            "vLLM's blocks per stream") in [(r.levelname, r.getMessage()) for r in caplog.records]


def test_parse_num_gpu_blocks_and_the_setting():
    exposition = (b"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                  b'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="669",'
                  b'num_gpu_blocks_override="None"} 1.0\n')
    assert parse_num_gpu_blocks(exposition) == 669
    assert parse_block_size(exposition) == 16
    assert parse_block_size(b'vllm:cache_config_info{num_gpu_blocks="669"} 1.0\n') is None
    assert parse_num_gpu_blocks(b'vllm:cache_config_info{num_gpu_blocks="None"} 1.0\n') is None
    assert parse_num_gpu_blocks(b'vllm:cache_config_info{num_gpu_blocks_override="5"} 1.0\n') is None
    assert parse_num_gpu_blocks(b"vllm:num_requests_running 0\n") is None
    assert Settings.from_env({"KV_BLOCKS_PER_STREAM": "83"}).kv_blocks_per_stream == 83
    assert Settings.from_env({}).kv_blocks_per_stream is None
    assert (Settings.from_env({}).kv_block_size, Settings.from_env({"KV_BLOCK_SIZE": "128"}).kv_block_size) == (16, 128)
