"""The capacity model (constructs_lib/facts/capacity.py): vLLM 0.31.0's KV-cache accounting for
Voxtral Realtime, pinned per supported GPU and context length. A change of a fact or an estimate
shows here as a changed figure."""

from __future__ import annotations

import pytest

from constructs_lib.facts import capacity
from constructs_lib.facts.instance_types import lookup

MiB = 2**20


def test_layout_follows_vllm_page_unification_and_grouping():
    layout = capacity.kv_layout()
    # Decoder page 8 heads x 16 tokens x (128 + 128) x 2 B = 64 KiB; encoder 32 heads x 64 states x
    # 128 x 2 B = 512 KiB.
    assert layout.page_bytes == 512 * 1024
    assert layout.decoder_block_tokens == 128  # 16 x 512 KiB / 64 KiB
    assert layout.encoder_block_tokens == 16
    assert (
        layout.layer_slots == 32
    )  # max(26, 32): 32 < 1.5 x 26, so the decoder group gets 6 padding layers
    assert layout.block_bytes == 16 * MiB
    assert layout.encoder_window_tokens == 189  # cdiv(750, 4) + 1, in pooled (decoder-token) units


def test_per_token_kv_bytes():
    assert capacity.VOXTRAL_REALTIME.decoder_kv_bytes_per_token == 106_496
    assert capacity.VOXTRAL_REALTIME.encoder_kv_bytes_per_token == 1 * MiB


@pytest.mark.parametrize(
    "max_model_len,in_flight,blocks",
    [
        # SlidingWindowSpec.max_admission_blocks_per_request, decoder + encoder group.
        (45000, 64, (66 + 17)),  # cdiv(8191 + 64, 128) + 1 = 66; cdiv(188 + 64, 16) + 1 = 17
        (
            45000,
            4096,
            (97 + 269),
        ),  # vLLM's startup figure on a 24 GB GPU: 2 batches of 2048 tokens in flight
        (3750, 64, (31 + 17)),  # a window longer than the request: cdiv(3750, 128) + 1 = 31
        (100, 4096, (1 + 1 + 7 + 1)),
    ],
)
def test_request_blocks(max_model_len, in_flight, blocks):
    assert capacity.request_blocks(max_model_len, in_flight) == blocks


def test_vllm_default_max_num_batched_tokens_by_gpu_memory():
    assert capacity.default_max_num_batched_tokens(capacity.GPUS["NVIDIA L4"].memory_bytes) == 2048
    assert (
        capacity.default_max_num_batched_tokens(capacity.GPUS["NVIDIA L40S"].memory_bytes) == 2048
    )
    assert (
        capacity.default_max_num_batched_tokens(capacity.GPUS["NVIDIA H100"].memory_bytes) == 8192
    )
    assert capacity.default_max_num_batched_tokens(80 * 2**30, "NVIDIA A100-SXM4-80GB") == 2048
    assert capacity.default_max_num_batched_tokens(180 * 2**30) == 16384


# instance type, max_model_len (tokens; 3750 = 5 min, 7500 = 10 min, 45000 = 60 min of audio), pool
# blocks, blocks per live stream, vLLM's logged maximum concurrency, streams that fit, compute cap,
# auto.
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


@pytest.mark.parametrize(
    "instance_type,max_model_len,blocks,stream_blocks,vllm_concurrency,fit,cap,streams", TABLE
)
def test_streams_per_gpu(
    instance_type, max_model_len, blocks, stream_blocks, vllm_concurrency, fit, cap, streams
):
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
    assert (result.fit, result.compute_cap, result.streams, result.limited_by) == (
        3,
        None,
        3,
        "memory",
    )


def test_more_memory_for_vllm_means_more_streams_and_bad_input_is_refused():
    assert capacity.fit("ml.g6.4xlarge", 45000, 0.98).fit == 9  # 0.9 gives 8
    with pytest.raises(ValueError, match="not a GPU instance type"):
        capacity.fit("ml.m5.xlarge", 45000)
    with pytest.raises(ValueError, match="not a GPU instance type"):
        capacity.fit("ml.g6.huge", 45000)
    with pytest.raises(ValueError, match="max_model_len=0"):
        capacity.fit("ml.g6.4xlarge", 0)


# --- FP8 KV cache -------------------------------------------------------------------------------


def test_fp8_halves_the_pages_and_keeps_the_tokens_per_block():
    auto = capacity.kv_layout()
    fp8 = capacity.kv_layout(capacity.with_kv_cache_dtype(capacity.VOXTRAL_REALTIME, "fp8"))
    # Decoder page 8 x 16 x 256 x 1 B = 32 KiB, encoder 256 KiB: unification still gives 128-token
    # decoder blocks.
    assert (fp8.page_bytes, fp8.block_bytes) == (256 * 1024, 8 * MiB)
    assert (fp8.decoder_block_tokens, fp8.encoder_block_tokens) == (
        auto.decoder_block_tokens,
        auto.encoder_block_tokens,
    )


@pytest.mark.parametrize(
    "instance_type,auto_fit,fp8_fit,auto_cap,fp8_cap",
    [
        ("ml.p5.4xlarge", 46, 93, 132, 247),
        ("ml.g6e.xlarge", 23, 47, 28, 55),
        ("ml.g6.4xlarge", 8, 16, 4, 9),
    ],
)
def test_fp8_doubles_the_kv_bound_and_raises_the_compute_bound(
    instance_type, auto_fit, fp8_fit, auto_cap, fp8_cap
):
    auto = capacity.fit(instance_type, 45000, 0.9)
    fp8 = capacity.fit(instance_type, 45000, 0.9, kv_cache_dtype="fp8")
    assert fp8.num_blocks == 2 * auto.num_blocks or fp8.num_blocks == 2 * auto.num_blocks + 1
    assert fp8.stream_blocks == auto.stream_blocks == 83
    assert fp8.stream_kv_bytes * 2 == auto.stream_kv_bytes
    assert (auto.fit, fp8.fit) == (auto_fit, fp8_fit) and fp8.fit >= 2 * auto.fit
    assert (auto.compute_cap, fp8.compute_cap) == (
        auto_cap,
        fp8_cap,
    )  # half the KV read per step; same weights


def test_fp8_kv_is_refused_off_hopper_with_the_reason_and_the_vllm_files():
    assert capacity.fp8_kv_cache_problem("NVIDIA H100") is None
    assert capacity.fp8_kv_cache_problem("NVIDIA H200") is None
    for gpu in (
        "NVIDIA L4",
        "NVIDIA L40S",
        "NVIDIA A10G",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    ):
        reason = capacity.fp8_kv_cache_problem(gpu)
        assert "FlashAttention 3 on compute capability 9.x" in reason
        assert (
            "vllm/model_executor/models/whisper_causal.py" in reason
            and "vllm/platforms/cuda.py" in reason
        )
    assert "8.9" in capacity.fp8_kv_cache_problem("NVIDIA L4")
    with pytest.raises(ValueError, match="kv_cache_dtype='int8'"):
        capacity.fit("ml.p5.4xlarge", 45000, kv_cache_dtype="int8")


def test_a_gpu_without_bf16_does_not_serve_the_checkpoint():
    assert "vLLM refuses the BF16 checkpoint below 8.0" in capacity.serving_problem("NVIDIA T4")
    assert capacity.serving_problem("NVIDIA L4") is None


# --- Uncertainty --------------------------------------------------------------------------------


def test_every_assumption_has_a_range_and_the_measurement_that_replaces_it():
    assert [(a.value, a.low, a.high) for a in capacity.ASSUMPTIONS] == [
        ("0.8", "0.65", "0.9"),
        ("0.4", "0.25", "0.6"),
        ("0.75", "0.65", "0.85"),
        ("1.5", "3.0 (x2)", "0.75 (x0.5)"),
        ("64", "128", "16"),
    ]
    assert all("capacity_bench.py" in a.measured_by for a in capacity.ASSUMPTIONS)
    # The ends the range is worked out at are the ends of the table.
    assert capacity.Estimates(0.65, 0.25, 0.65, 2.0, 128) == capacity.PESSIMISTIC
    assert capacity.Estimates(0.9, 0.6, 0.85, 0.5, 16) == capacity.OPTIMISTIC


@pytest.mark.parametrize(
    "instance_type,low,streams,high",
    [
        (
            "ml.g6.4xlarge",
            1,
            4,
            8,
        ),  # the L4 is compute bound: at 65 % of its 300 GB/s the weights leave room for 1
        ("ml.g6e.xlarge", 17, 23, 25),
        ("ml.g5.xlarge", 6, 8, 8),
        ("ml.p5.4xlarge", 42, 46, 49),
    ],
)
def test_the_range_brackets_the_estimate(instance_type, low, streams, high):
    result = capacity.fit(instance_type, 45000, 0.9)
    assert result.streams_range == (low, high) and low <= result.streams == streams <= high
