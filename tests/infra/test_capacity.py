"""The capacity model (constructs_lib/capacity.py): vLLM 0.31.0's KV-cache accounting for Voxtral Realtime, pinned per
supported GPU and context length. A change of a fact or an estimate shows here as a changed figure."""

from __future__ import annotations

import pytest

from constructs_lib import capacity
from constructs_lib.instance_types import lookup

MiB = 2**20


def test_layout_follows_vllm_page_unification_and_grouping():
    layout = capacity.kv_layout()
    # Decoder page 8 heads x 16 tokens x (128 + 128) x 2 B = 64 KiB; encoder 32 heads x 64 states x 128 x 2 B = 512 KiB.
    assert layout.page_bytes == 512 * 1024
    assert layout.decoder_block_tokens == 128  # 16 x 512 KiB / 64 KiB
    assert layout.encoder_block_tokens == 16
    assert layout.layer_slots == 32  # max(26, 32): 32 < 1.5 x 26, so the decoder group gets 6 padding layers
    assert layout.block_bytes == 16 * MiB
    assert layout.encoder_window_tokens == 189  # cdiv(750, 4) + 1, in pooled (decoder-token) units


def test_per_token_kv_bytes():
    assert capacity.VOXTRAL_REALTIME.decoder_kv_bytes_per_token == 106_496
    assert capacity.VOXTRAL_REALTIME.encoder_kv_bytes_per_token == 1 * MiB


@pytest.mark.parametrize("max_model_len,in_flight,blocks", [
    # SlidingWindowSpec.max_admission_blocks_per_request, decoder + encoder group.
    (45000, 64, (66 + 17)),      # cdiv(8191 + 64, 128) + 1 = 66; cdiv(188 + 64, 16) + 1 = 17
    (45000, 4096, (97 + 269)),   # vLLM's startup figure on a 24 GB GPU: 2 batches of 2048 tokens in flight
    (3750, 64, (31 + 17)),       # a window longer than the request: cdiv(3750, 128) + 1 = 31
    (100, 4096, (1 + 1 + 7 + 1)),
])
def test_request_blocks(max_model_len, in_flight, blocks):
    assert capacity.request_blocks(max_model_len, in_flight) == blocks


def test_vllm_default_max_num_batched_tokens_by_gpu_memory():
    assert capacity.default_max_num_batched_tokens(capacity.GPUS["NVIDIA L4"].memory_bytes) == 2048
    assert capacity.default_max_num_batched_tokens(capacity.GPUS["NVIDIA L40S"].memory_bytes) == 2048
    assert capacity.default_max_num_batched_tokens(capacity.GPUS["NVIDIA H100"].memory_bytes) == 8192
    assert capacity.default_max_num_batched_tokens(80 * 2**30, "NVIDIA A100-SXM4-80GB") == 2048
    assert capacity.default_max_num_batched_tokens(180 * 2**30) == 16384


# instance type, max_model_len (tokens; 3750 = 5 min, 7500 = 10 min, 45000 = 60 min of audio), pool blocks, blocks
# per live stream, vLLM's logged maximum concurrency, streams that fit, compute cap, auto.
TABLE = [
    ("ml.g6.4xlarge", 3750, 669, 48, 2.51, 13, 8, 8),
    ("ml.g6.4xlarge", 7500, 669, 77, 2.03, 8, 5, 5),
    ("ml.g6.4xlarge", 45000, 669, 83, 1.83, 8, 4, 4),
    ("ml.g5.4xlarge", 3750, 668, 48, 2.50, 13, 24, 13),
    ("ml.g5.4xlarge", 7500, 668, 77, 2.03, 8, 16, 8),
    ("ml.g5.4xlarge", 45000, 668, 83, 1.83, 8, 15, 8),
    ("ml.g6e.xlarge", 3750, 1964, 48, 7.36, 40, 49, 40),
    ("ml.g6e.xlarge", 7500, 1964, 77, 5.97, 25, 30, 25),
    ("ml.g6e.xlarge", 45000, 1964, 83, 5.37, 23, 28, 23),
    ("ml.p5.4xlarge", 3750, 3865, 48, 14.48, 80, 224, 80),
    ("ml.p5.4xlarge", 7500, 3865, 77, 7.29, 50, 141, 50),
    ("ml.p5.4xlarge", 45000, 3865, 83, 3.14, 46, 132, 46),
]


@pytest.mark.parametrize("instance_type,max_model_len,blocks,stream_blocks,vllm_concurrency,fit,cap,streams", TABLE)
def test_streams_per_gpu(instance_type, max_model_len, blocks, stream_blocks, vllm_concurrency, fit, cap, streams):
    result = capacity.fit(instance_type, max_model_len, 0.9)
    assert result.num_blocks == blocks
    assert result.stream_blocks == stream_blocks
    assert result.stream_kv_bytes == stream_blocks * 16 * MiB
    assert result.vllm_max_concurrency == pytest.approx(vllm_concurrency, abs=0.005)
    assert (result.fit, result.compute_cap, result.streams) == (fit, cap, streams)
    assert result.budget_bytes == result.weight_bytes + result.overhead_bytes + result.kv_bytes


def test_every_pinned_gpu_is_in_the_catalogue():
    pinned = {lookup(row[0]).gpu_model for row in TABLE}
    assert pinned == set(capacity.GPUS)


def test_a_gpu_without_pinned_facts_uses_the_catalogue_memory_and_has_no_compute_cap():
    result = capacity.fit("ml.g4dn.xlarge", 45000, 0.9)  # NVIDIA T4, 16 GiB in the catalogue
    assert result.gpu.memory_bytes == 16 * 2**30
    assert (result.fit, result.compute_cap, result.streams, result.limited_by) == (3, None, 3, "memory")


def test_more_memory_for_vllm_means_more_streams_and_bad_input_is_refused():
    assert capacity.fit("ml.g6.4xlarge", 45000, 0.98).fit == 9  # 0.9 gives 8
    with pytest.raises(ValueError, match="not a GPU instance type"):
        capacity.fit("ml.m5.xlarge", 45000)
    with pytest.raises(ValueError, match="not a GPU instance type"):
        capacity.fit("ml.g6.huge", 45000)
    with pytest.raises(ValueError, match="max_model_len=0"):
        capacity.fit("ml.g6.4xlarge", 0)
