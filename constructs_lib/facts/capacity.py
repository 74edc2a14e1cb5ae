"""Streams per GPU for Voxtral-Mini-4B-Realtime-2602 on vLLM: a capacity model that follows vLLM's
own KV-cache accounting, and a compute budget for real-time decoding.

Pure (facts and arithmetic, no ``aws_cdk``): the settings (``voxtral.max_num_seqs`` = ``auto``),
``voicectl capacity`` and other apps' instance pools call :func:`fit`.

What vLLM does (read in the source of vLLM 0.31.0, the version of the SageMaker DLC the image is
built on):

- KV cache spec per attention layer. All 26 decoder layers are sliding-window layers:
  ``params.json`` gives one ``sliding_window`` (8192) for the decoder and
  ``_remap_mistral_sliding_window`` (vllm/transformers_utils/configs/mistral.py) turns it into
  ``layer_types = ["sliding_attention"] * n_layers``, so each layer's
  ``Attention.get_kv_cache_spec`` is a ``SlidingWindowSpec``; there is no full-attention layer. The
  causal audio encoder keeps its own KV cache in the same pool: its 32 layers are
  ``WhisperCausalAttentionWithBlockPooling`` (vllm/model_executor/models/whisper_causal.py),
  sliding-window ``SlidingWindowSpec`` layers with ``tokens_per_state = 1/block_pool_size`` (4
  encoder frames per decoder token: ``block_pool_size = downsample_factor``,
  ``_remap_mistral_audio_args``) and the window in pooled units, ``cdiv(750, 4) + 1 = 189``
  (``get_kv_cache_spec`` there).
- Page size (vllm/v1/kv_cache_interface.py, ``AttentionSpec.page_size_bytes``): KV heads x states
  per block x (K + V head dims) x dtype bytes. Decoder: 8 x 16 x 256 x 2 = 64 KiB per 16-token
  block; encoder: 32 x 64 x 128 x 2 = 512 KiB per 16-token block. ``unify_kv_cache_spec_page_size``
  (vllm/v1/core/kv_cache_utils.py) raises the decoder's block size to 128 tokens so both pages are
  512 KiB; ``_get_kv_cache_groups_uniform_page_size`` puts each layer type in one group of max(26,
  32) = 32 layer slots (26 < 32 < 1.5 x 26, so the decoder's group gets 6 padding layers). One block
  of the shared pool is one page in each of the 32 slots: 16 MiB
  (``_get_kv_cache_bytes_per_block``). (With a block-outermost KV layout vLLM packs the two page
  sizes side by side instead, ``_get_packed_kv_cache_groups``, a layout this model does not follow:
  the bytes per token are the same, the padding differs; vLLM's own report of its pool at run time
  is the check.)
- Blocks per request (``SlidingWindowSpec.max_admission_blocks_per_request``): ``cdiv(min(window - 1
  + in_flight_tokens, max_model_len), block_size) + 1`` per group. vLLM's startup figure, logged as
  "GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: Yx"
  (``update_kv_cache_capacity``, ``get_max_concurrency_for_kv_cache_config``), takes
  ``in_flight_tokens = VllmConfig.max_in_flight_tokens`` = ``max_concurrent_batches`` (2 with async
  scheduling, vllm/config/vllm.py) x ``max_num_batched_tokens`` (default 2048 for the OpenAI server
  on GPUs under 70 GiB, 8192 at 70 GiB and more, 16384 at 160 GiB and more:
  ``EngineArgs.get_batch_defaults``, vllm/engine/arg_utils.py): the worst case of a request that
  prefills a full batch. That figure is a guarantee, not the admission rule: the scheduler allocates
  the blocks a request really holds (``SingleTypeKVCacheManager.get_num_blocks_to_allocate``, capped
  by the figure above) and frees the blocks that leave the window
  (``SlidingWindowManager.remove_skipped_blocks``).
- A real-time stream is not a prefill: it feeds one token per 80 ms step (12.5 audio tokens per
  second) after a short streaming prefix (vllm/model_executor/models/voxtral_realtime.py,
  ``VoxtralRealtimeBuffer``). Its blocks plateau at the same formula with ``in_flight_tokens`` =
  :data:`STREAM_TOKENS_IN_FLIGHT`. Streams that fit = pool blocks // that, which is what this model
  calls "fit"; vLLM's worst-case figure is reported beside it.
- Pool size (vllm/v1/worker/gpu_worker.py, ``determine_available_memory``): GPU memory x
  ``gpu_memory_utilization`` minus the weights, the peak activations of ``profile_run`` (a dummy
  batch of ``max_num_batched_tokens`` tokens, including the encoder's budget from
  ``compute_mm_encoder_budget``, vllm/v1/core/encoder_cache_manager.py), the CUDA-graph pool and
  memory outside torch. The last three are estimates here (:data:`NON_TORCH_BYTES`,
  :data:`CUDA_GRAPH_BYTES`, :data:`ACTIVATION_BYTES_PER_BATCHED_TOKEN`); the bridge reads the real
  pool from vLLM at run time and lowers its stream cap when it is smaller.

Compute budget (an estimate; ``bench/capacity_bench.py`` measures it on a GPU host): every live
stream needs one decode step per 80 ms. A decode step over B streams reads the weights once and, per
stream, its KV window (decoder window + pooled encoder window), and does ~2 FLOPs per parameter per
token (the encoder runs 4 frames per token). Step time = weights / (bandwidth x
:data:`BANDWIDTH_EFFICIENCY`) + B x (window bytes / (bandwidth x :data:`BANDWIDTH_EFFICIENCY`) +
FLOPs / (peak x :data:`COMPUTE_EFFICIENCY`)); the cap is the largest B whose step fits
:data:`STEP_BUDGET_FRACTION` of 80 ms (the rest for scheduling, sampling and the mel/conv front
end).

FP8 KV cache (``voxtral.kv_cache_dtype = fp8``, vLLM ``--kv-cache-dtype fp8``):
``CacheConfig.cache_dtype`` sets the dtype of every ``AttentionSpec``
(``Attention.get_kv_cache_spec``, vllm/model_executor/layers/attention), the encoder's block-pooled
layers included (``WhisperCausalAttentionWithBlockPooling`` passes ``cache_config`` on), so both
pages halve (decoder 32 KiB per 16 tokens, encoder 256 KiB); page unification still raises the
decoder's block to 128 tokens, a pool block is 8 MiB and holds the same tokens, so a stream holds as
many blocks and the pool twice as many. The compute budget reads half the KV bytes per stream; the
weights stay BF16. vLLM's encoder *output* cache (``EncoderCacheManager``) holds embeddings in the
model dtype, not KV, and is unchanged. Where vLLM 0.31.0 cannot run FP8 for this model
(:func:`fp8_kv_cache_support`), the settings refuse it.

Uncertainty: the figures rest on the estimates and assumptions in :data:`ASSUMPTIONS`, each with a
plausible range and the ``bench/capacity_bench.py`` measurement on a GPU that replaces it;
:attr:`Capacity.streams_range` is the streams per GPU at the pessimistic and the optimistic end of
all of them at once.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from constructs_lib.facts.instance_types import InstanceSpec, lookup
from contracts.bridge_env import DEFAULT_KV_BLOCK_SIZE

GiB = 2**30
MiB = 2**20


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- Model facts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFacts:
    """Shape facts of one Voxtral Realtime checkpoint (bf16).

    Sources: ``params.json`` of mistralai/Voxtral-Mini-4B-Realtime-2602 as independent
    implementations record it: pytorch/executorch ``examples/models/voxtral_realtime/model.py``
    (``VoxtralRealtimeConfig.from_params_json``: decoder dim 3072, 26 layers, 8 KV heads, head_dim
    128; encoder 32 layers, 32 heads, head_dim 64, downsample_factor 4) and johnnyshields/voxmic
    ``patches/voxtral-mini-realtime/src/models/config.rs`` (its test of the actual params.json:
    decoder ``sliding_window`` 8192, encoder ``sliding_window`` 750, ``frame_rate`` 12.5). Weights:
    the model card (consolidated.safetensors, ~8.9 GB); parameter split ~3.4 B decoder / ~0.6 B
    encoder (executorch's model.md).
    """

    decoder_layers: int = 26
    decoder_kv_heads: int = 8
    decoder_head_dim: int = 128
    decoder_sliding_window: int = 8192
    encoder_layers: int = 32
    encoder_kv_heads: int = 32
    encoder_head_dim: int = 64
    encoder_sliding_window: int = 750
    #: Encoder frames per decoder token (``downsample_factor``; vLLM's ``block_pool_size``).
    block_pool_size: int = 4
    #: Bytes per KV element: 2 (BF16, vLLM ``--kv-cache-dtype auto`` for a BF16 model) or 1
    #: (``fp8``, E4M3).
    dtype_bytes: int = 2
    weight_bytes: int = 8_900_000_000
    decoder_params: float = 3.4e9
    encoder_params: float = 0.6e9
    #: Audio tokens per second of audio (``frame_rate``): one decode step per 80 ms per live stream.
    tokens_per_audio_s: float = 12.5

    @property
    def decoder_kv_bytes_per_token(self) -> int:
        """K and V of every decoder layer for one token: 2 x 26 x 8 x 128 x 2 = 106,496 bytes."""
        return (
            2
            * self.decoder_layers
            * self.decoder_kv_heads
            * self.decoder_head_dim
            * self.dtype_bytes
        )

    @property
    def encoder_kv_bytes_per_token(self) -> int:
        """K and V of every encoder layer for the 4 frames of one decoder token: 2 x 32 x 32 x 64 x
        2 x 4 = 1 MiB."""
        return (
            2
            * self.encoder_layers
            * self.encoder_kv_heads
            * self.encoder_head_dim
            * self.dtype_bytes
            * self.block_pool_size
        )

    @property
    def flops_per_token(self) -> float:
        """Matrix FLOPs of one decode step for one stream: 2 per parameter, the encoder 4 frames per
        token."""
        return 2 * (self.decoder_params + self.block_pool_size * self.encoder_params)


VOXTRAL_REALTIME = ModelFacts()

#: ``voxtral.kv_cache_dtype`` -> bytes per KV element (vLLM ``STR_DTYPE_TO_TORCH_DTYPE``: ``auto``
#: is the model's dtype, BF16; ``fp8`` is ``float8_e4m3fn`` on CUDA).
KV_CACHE_DTYPE_BYTES = {"auto": 2, "fp8": 1}


def with_kv_cache_dtype(model: ModelFacts, kv_cache_dtype: str) -> ModelFacts:
    """``model`` with the KV element size of ``kv_cache_dtype`` (``auto`` or ``fp8``).

    Raises:
        ValueError: another dtype.
    """
    if kv_cache_dtype not in KV_CACHE_DTYPE_BYTES:
        raise ValueError(
            f"kv_cache_dtype={kv_cache_dtype!r}: expected one of {sorted(KV_CACHE_DTYPE_BYTES)}"
        )
    return dataclasses.replace(model, dtype_bytes=KV_CACHE_DTYPE_BYTES[kv_cache_dtype])


# --- GPU facts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as vLLM sees it.

    Attributes:
        memory_bytes: memory CUDA reports (``torch.cuda.mem_get_info`` total; ``nvidia-smi``
            memory.total), bytes. Less than the marketing "24 GB": vLLM's ``gpu_memory_utilization``
            is a fraction of this.
        bandwidth_bytes_per_s: peak memory bandwidth, bytes per second (NVIDIA data sheet).
        bf16_flops: peak dense BF16 tensor throughput, FLOP/s (NVIDIA data sheet, without sparsity).
    """

    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    bf16_flops: float


#: The GPUs the capacity model is pinned for, keyed by the catalogue's ``gpu_model``
#: (constructs_lib/facts/instance_types.py). Memory: nvidia-smi memory.total on the instance (L4
#: 23,034 MiB; A10G 23,028 MiB; L40S 46,068 MiB; H100 80GB HBM3 81,559 MiB). Bandwidth and BF16:
#: NVIDIA data sheets (L4 300 GB/s, 121 TFLOPS; A10G 600 GB/s, 70 TFLOPS (AWS's A10G figure); L40S
#: 864 GB/s, 362 TFLOPS; H100 SXM 3.35 TB/s, 989 TFLOPS).
GPUS: dict[str, GpuFacts] = {
    "NVIDIA L4": GpuFacts("NVIDIA L4", 23_034 * MiB, 300e9, 121e12),
    "NVIDIA A10G": GpuFacts("NVIDIA A10G", 23_028 * MiB, 600e9, 70e12),
    "NVIDIA L40S": GpuFacts("NVIDIA L40S", 46_068 * MiB, 864e9, 362e12),
    "NVIDIA H100": GpuFacts("NVIDIA H100", 81_559 * MiB, 3.35e12, 989e12),
}


#: CUDA compute capability per catalogue ``gpu_model`` (NVIDIA "CUDA GPUs - Compute Capability"
#: table). vLLM picks its attention backend and checks BF16 by it.
COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {
    "NVIDIA T4": (7, 5),
    "NVIDIA A10G": (8, 6),
    "NVIDIA A100 40GB": (8, 0),
    "NVIDIA A100 80GB": (8, 0),
    "NVIDIA L4": (8, 9),
    "NVIDIA L40S": (8, 9),
    "NVIDIA H100": (9, 0),
    "NVIDIA H200": (9, 0),
    "NVIDIA RTX PRO 4500 Blackwell Server Edition": (12, 0),
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": (12, 0),
}

#: Why a GPU below compute capability 8.0 does not serve the checkpoint: vLLM refuses BF16 there
#: (``CudaPlatformBase.check_if_supports_dtype``, vllm/platforms/cuda.py: "Bfloat16 is only
#: supported on GPUs with compute capability of at least 8.0"), and the checkpoint is BF16.
BF16_MIN_CAPABILITY = (8, 0)


def serving_problem(gpu_model: str) -> str | None:
    """Why vLLM 0.31.0 cannot serve the BF16 checkpoint on ``gpu_model`` as this project configures
    it, or None."""
    capability = COMPUTE_CAPABILITY.get(gpu_model)
    if capability is not None and capability < BF16_MIN_CAPABILITY:
        return (
            f"{gpu_model} (compute capability {capability[0]}.{capability[1]}) has no BF16: vLLM "
            "refuses the BF16 checkpoint below 8.0 (check_if_supports_dtype, "
            "vllm/platforms/cuda.py)"
        )
    return None


#: Where FP8 KV cache is refused, and why (read in vLLM 0.31.0). vLLM chooses one attention backend
#: for all layers from ``_get_backend_priorities`` (vllm/platforms/cuda.py): on compute capability
#: other than 10.x the order is FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION, taking the
#: first whose ``validate_configuration`` accepts the KV dtype. FLASH_ATTN accepts FP8 only as
#: FlashAttention 3 on compute capability 9.x (``supports_kv_cache_dtype``,
#: vllm/v1/attention/backends/flash_attn.py; ``flash_attn_supports_fp8``,
#: vllm/v1/attention/backends/fa_utils.py), so elsewhere the choice falls to FLASHINFER. The causal
#: audio encoder's block-pooled attention wraps the chosen backend and raises NotImplementedError
#: for any backend but FlashAttention, Triton, ROCm and AITER
#: (``create_whisper_attention_backend_with_block_pooling``,
#: vllm/model_executor/models/whisper_causal.py): vLLM would fail at start-up (unconfirmed on a GPU;
#: an image without FlashInfer would fall through to Triton). (Forcing ``--attention-backend
#: TRITON_ATTN`` might run FP8 there; that is untested and not offered.)
FP8_KV_FILES = (
    "vllm/platforms/cuda.py",
    "vllm/v1/attention/backends/flash_attn.py",
    "vllm/v1/attention/backends/fa_utils.py",
    "vllm/model_executor/models/whisper_causal.py",
)


def fp8_kv_cache_problem(gpu_model: str) -> str | None:
    """Why vLLM 0.31.0 cannot run this model with ``--kv-cache-dtype fp8`` on ``gpu_model``, or None
    (Hopper: FlashAttention 3 takes FP8 for the sliding-window decoder layers and, through the
    block-pooling wrapper, for the causal encoder's cache). See :data:`FP8_KV_FILES`."""
    capability = COMPUTE_CAPABILITY.get(gpu_model)
    if capability is None:
        return (
            f"{gpu_model}: no compute capability on record in constructs_lib/facts/capacity.py, "
            "so FP8 KV is not offered"
        )
    if capability[0] == 9:
        return None
    return (
        f"{gpu_model} (compute capability {capability[0]}.{capability[1]}): vLLM 0.31.0's "
        "FlashAttention takes an FP8 KV cache only as FlashAttention 3 on compute capability "
        "9.x (flash_attn_supports_fp8, vllm/v1/attention/backends/fa_utils.py), so vLLM picks "
        "FlashInfer (_get_backend_priorities, vllm/platforms/cuda.py), which the causal audio "
        "encoder's block-pooled attention refuses "
        "(create_whisper_attention_backend_with_block_pooling, "
        "vllm/model_executor/models/whisper_causal.py): vLLM would fail at start-up"
    )


# --- vLLM facts and our estimates ---------------------------------------------------------------

#: ``CacheConfig.block_size`` default on CUDA (vllm/config/cache.py): tokens per block before page
#: unification; the blocks the bridge's KV_BLOCKS_PER_STREAM counts in, so the contract's
#: (contracts.bridge_env).
VLLM_BLOCK_SIZE = DEFAULT_KV_BLOCK_SIZE
#: ``VllmConfig.max_concurrent_batches`` with async scheduling (on by default for this model),
#: pipeline size 1.
VLLM_MAX_CONCURRENT_BATCHES = 2
#: Tokens one real-time stream has scheduled and not yet settled at most: the streaming prefix of
#: its first step (BOS and padding tokens, tens of tokens) plus one token per step in flight. An
#: assumption, rounded up.
STREAM_TOKENS_IN_FLIGHT = 64
#: Memory outside torch's allocator (CUDA context, cuBLAS workspaces, NCCL): an estimate.
NON_TORCH_BYTES = 512 * MiB
#: CUDA-graph pool of the PIECEWISE capture sizes (config/bridge.py COMPILATION_CONFIG): an
#: estimate.
CUDA_GRAPH_BYTES = 512 * MiB
#: Peak activations of ``profile_run`` per batched token (decoder and the encoder's 4 frames per
#: token): an estimate.
ACTIVATION_BYTES_PER_BATCHED_TOKEN = 256 * 1024
#: Fraction of peak memory bandwidth a decode step reaches (weights and KV reads): an assumption.
BANDWIDTH_EFFICIENCY = 0.8
#: Fraction of peak BF16 a decode step's small matrix products reach: an assumption.
COMPUTE_EFFICIENCY = 0.4
#: Fraction of the 80 ms between steps the decode step may take: the rest for scheduling, sampling,
#: the mel/conv front end and jitter. An assumption.
STEP_BUDGET_FRACTION = 0.75


@dataclass(frozen=True)
class Estimates:
    """The estimates and assumptions one capacity figure rests on (see :data:`ASSUMPTIONS`).

    Attributes:
        bandwidth_efficiency: fraction of peak memory bandwidth a decode step reaches.
        compute_efficiency: fraction of peak BF16 a decode step reaches.
        step_budget_fraction: fraction of the 80 ms between steps the decode step may take.
        overhead_scale: factor on the memory overhead estimates (activations, CUDA graphs, outside
            torch).
        stream_tokens_in_flight: tokens one live stream has scheduled and not settled at most.
    """

    bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY
    compute_efficiency: float = COMPUTE_EFFICIENCY
    step_budget_fraction: float = STEP_BUDGET_FRACTION
    overhead_scale: float = 1.0
    stream_tokens_in_flight: int = STREAM_TOKENS_IN_FLIGHT


@dataclass(frozen=True)
class Assumption:
    """One estimate of the model: its value, a plausible range, and what replaces it.

    Attributes:
        name: what is assumed. value / low / high: the value used and the pessimistic and optimistic
            ends (units as the name says). measured_by: the ``bench/capacity_bench.py`` run on a GPU
            host (or vLLM's own log) whose figure replaces the assumption.
    """

    name: str
    value: str
    low: str
    high: str
    measured_by: str


#: Every assumption the figures rest on. The ranges are judgement, not measurement: none of them has
#: been measured for this model, since no GPU was at hand (README "Capacity").
ASSUMPTIONS: tuple[Assumption, ...] = (
    Assumption(
        "memory bandwidth a decode step reaches, share of peak",
        f"{BANDWIDTH_EFFICIENCY:g}",
        "0.65",
        "0.9",
        "capacity_bench.py --streams 1,2,4,8,... on the GPU: the largest N whose real-time "
        "factor stays near 1 is the compute bound that this and the next two set",
    ),
    Assumption(
        "BF16 throughput a decode step reaches, share of peak",
        f"{COMPUTE_EFFICIENCY:g}",
        "0.25",
        "0.6",
        "the same capacity_bench.py run (it measures the compute bound the three shares set "
        "together)",
    ),
    Assumption(
        "share of the 80 ms step the decode may take",
        f"{STEP_BUDGET_FRACTION:g}",
        "0.65",
        "0.85",
        "the same capacity_bench.py run: the first-delta p90 stays under the 2000 ms alarm up to "
        "that N",
    ),
    Assumption(
        "memory overhead: activations of max_num_batched_tokens, CUDA graphs, outside torch, GiB "
        "on a 24 GB GPU",
        "1.5",
        "3.0 (x2)",
        "0.75 (x0.5)",
        "capacity_bench.py's target bridge on the GPU: vLLM's start-up log 'GPU KV cache size: N "
        "tokens' and the bridge's KvCacheStreams metric give the real pool",
    ),
    Assumption(
        "tokens one live stream has in flight",
        str(STREAM_TOKENS_IN_FLIGHT),
        "128",
        "16",
        "capacity_bench.py with SM_VLLM_MAX_NUM_SEQS above the KV fit: the N at which streams "
        "start to fail or stall (vLLM preempting for want of blocks) is the real KV bound",
    ),
)

#: The ends of :data:`ASSUMPTIONS`, all at once.
PESSIMISTIC = Estimates(0.65, 0.25, 0.65, 2.0, 128)
OPTIMISTIC = Estimates(0.9, 0.6, 0.85, 0.5, 16)


def default_max_num_batched_tokens(memory_bytes: int, gpu_name: str = "") -> int:
    """vLLM's default ``max_num_batched_tokens`` for ``vllm serve``
    (``EngineArgs.get_batch_defaults``): 16384 at 160 GiB and more, 8192 at 70 GiB and more (not
    A100), else 2048."""
    if memory_bytes >= 160 * GiB:
        return 16384
    if memory_bytes >= 70 * GiB and "a100" not in gpu_name.lower():
        return 8192
    return 2048


# --- The pool -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KvLayout:
    """How vLLM lays out this model's KV cache (see the module docstring).

    Attributes:
        decoder_block_tokens: tokens per block of the decoder group after page unification (128).
        encoder_block_tokens: decoder tokens (pooled encoder states) per block of the encoder group
            (16).
        page_bytes: one layer's page, the same for both groups (512 KiB).
        layer_slots: layers per group, padding included (32).
        block_bytes: one block of the shared pool: page x slots (16 MiB).
        encoder_window_tokens: the encoder window in pooled units, ``cdiv(750, 4) + 1`` (189).
    """

    decoder_block_tokens: int
    encoder_block_tokens: int
    page_bytes: int
    layer_slots: int
    block_bytes: int
    encoder_window_tokens: int


def kv_layout(model: ModelFacts = VOXTRAL_REALTIME, block_size: int = VLLM_BLOCK_SIZE) -> KvLayout:
    """The KV layout of ``model`` (``unify_kv_cache_spec_page_size``,
    ``_get_kv_cache_groups_uniform_page_size``)."""
    decoder_page = (
        model.decoder_kv_heads * block_size * 2 * model.decoder_head_dim * model.dtype_bytes
    )
    encoder_page = (
        model.encoder_kv_heads
        * block_size
        * model.block_pool_size
        * 2
        * model.encoder_head_dim
        * model.dtype_bytes
    )
    page = max(decoder_page, encoder_page)
    if (
        page % decoder_page or page % encoder_page
    ):  # vLLM pads pages then; this model's pages divide evenly
        raise ValueError(
            "page sizes do not divide: the layout differs from what this model follows"
        )
    fewer, more = sorted((model.decoder_layers, model.encoder_layers))
    slots = more if more < fewer * 1.5 else fewer
    return KvLayout(
        decoder_block_tokens=block_size * page // decoder_page,
        encoder_block_tokens=block_size * page // encoder_page,
        page_bytes=page,
        layer_slots=slots,
        block_bytes=page * slots,
        encoder_window_tokens=_cdiv(model.encoder_sliding_window, model.block_pool_size) + 1,
    )


def request_blocks(
    max_model_len: int, in_flight_tokens: int, model: ModelFacts = VOXTRAL_REALTIME
) -> int:
    """Pool blocks one request holds at most: ``SlidingWindowSpec.max_admission_blocks_per_request``
    of the decoder group plus that of the encoder group."""
    layout = kv_layout(model)

    def group(window: int, block_tokens: int) -> int:
        return _cdiv(min(window - 1 + in_flight_tokens, max_model_len), block_tokens) + 1

    return group(model.decoder_sliding_window, layout.decoder_block_tokens) + group(
        layout.encoder_window_tokens, layout.encoder_block_tokens
    )


# --- The answer ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """Streams one GPU of an instance type serves, and why.

    Bytes are bytes; ``*_gib`` properties are GiB (2**30 bytes).

    Attributes:
        instance_type / gpu: what was asked for.
        max_model_len: tokens per stream (12.5 per second of audio).
        gpu_memory_utilization: vLLM's fraction of ``gpu.memory_bytes``.
        max_num_batched_tokens: vLLM's per-step token budget (its default for the GPU unless given).
        budget_bytes: ``gpu.memory_bytes x gpu_memory_utilization``.
        weight_bytes / overhead_bytes / kv_bytes: the split of the budget (overhead = activations,
            CUDA graphs, memory outside torch); ``kv_bytes`` is 0 when nothing is left.
        num_blocks: blocks of the KV pool (``kv_bytes // block_bytes``).
        block_bytes: bytes of one pool block.
        stream_blocks / stream_kv_bytes: what one live stream holds at most (window +
            :data:`STREAM_TOKENS_IN_FLIGHT`).
        vllm_request_blocks: what vLLM's startup figure charges one request (window + 2 full
            batches).
        vllm_max_concurrency: vLLM's logged "Maximum concurrency for max_model_len tokens per
            request".
        fit: live streams whose KV fits the pool (``num_blocks // stream_blocks``).
        compute_cap: live streams one GPU decodes in real time (None without bandwidth/FLOPs facts
            for the GPU).
        streams: ``min(fit, compute_cap)``: what ``voxtral.max_num_seqs = auto`` resolves to.
        kv_cache_dtype: vLLM's ``--kv-cache-dtype`` the figures are for (``auto`` or ``fp8``).
        streams_range: ``(low, high)`` streams at the pessimistic and optimistic ends of
            :data:`ASSUMPTIONS` (None when not asked for).
    """

    instance_type: str
    gpu: GpuFacts
    max_model_len: int
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    budget_bytes: int
    weight_bytes: int
    overhead_bytes: int
    kv_bytes: int
    num_blocks: int
    block_bytes: int
    stream_blocks: int
    stream_kv_bytes: int
    vllm_request_blocks: int
    vllm_max_concurrency: float
    fit: int
    compute_cap: int | None
    kv_cache_dtype: str = "auto"
    streams_range: tuple[int, int] | None = None

    @property
    def streams(self) -> int:
        return self.fit if self.compute_cap is None else min(self.fit, self.compute_cap)

    @property
    def limited_by(self) -> str:
        """``memory`` or ``compute``: which bound sets :attr:`streams`."""
        return (
            "compute" if self.compute_cap is not None and self.compute_cap < self.fit else "memory"
        )


def gpu_facts(spec: InstanceSpec) -> GpuFacts:
    """The GPU of ``spec``: the pinned facts of :data:`GPUS`, else the catalogue's memory and no
    speed facts."""
    return GPUS.get(spec.gpu_model) or GpuFacts(
        spec.gpu_model, int(spec.gpu_memory_gib * GiB), 0.0, 0.0
    )


def compute_cap(
    gpu: GpuFacts,
    max_model_len: int,
    model: ModelFacts = VOXTRAL_REALTIME,
    estimates: Estimates = Estimates(),
) -> int | None:
    """Live streams one GPU decodes in real time (see the module docstring), or None without speed
    facts."""
    if not gpu.bandwidth_bytes_per_s or not gpu.bf16_flops:
        return None
    bandwidth = gpu.bandwidth_bytes_per_s * estimates.bandwidth_efficiency
    layout = kv_layout(model)
    window_bytes = (
        min(model.decoder_sliding_window, max_model_len) * model.decoder_kv_bytes_per_token
        + min(layout.encoder_window_tokens, max_model_len) * model.encoder_kv_bytes_per_token
    )
    per_stream_s = window_bytes / bandwidth + model.flops_per_token / (
        gpu.bf16_flops * estimates.compute_efficiency
    )
    budget_s = (
        estimates.step_budget_fraction / model.tokens_per_audio_s - model.weight_bytes / bandwidth
    )
    return max(0, math.floor(budget_s / per_stream_s))


def fit(
    instance_type: str | InstanceSpec,
    max_model_len: int,
    gpu_memory_utilization: float = 0.9,
    *,
    max_num_batched_tokens: int | None = None,
    kv_cache_dtype: str = "auto",
    model: ModelFacts = VOXTRAL_REALTIME,
    estimates: Estimates = Estimates(),
    with_range: bool = True,
) -> Capacity:
    """How many live Voxtral streams of ``max_model_len`` tokens one GPU of ``instance_type``
    serves.

    vLLM serves the model on one GPU (tensor parallel size 1), so only one GPU's memory counts,
    whatever the instance's GPU count.

    Args:
        instance_type: a SageMaker instance type of the catalogue (``ml.g6.4xlarge``) or its spec.
        max_model_len: vLLM ``--max-model-len``, tokens (positive).
        gpu_memory_utilization: vLLM ``--gpu-memory-utilization`` (0-1].
        max_num_batched_tokens: vLLM ``--max-num-batched-tokens``; None = vLLM's default for the
            GPU.
        kv_cache_dtype: vLLM ``--kv-cache-dtype``: ``auto`` (BF16) or ``fp8`` (whether the GPU can
            is :func:`fp8_kv_cache_problem`'s question, not this one's).
        model: the checkpoint's facts.
        estimates: the estimates to use (:data:`ASSUMPTIONS`).
        with_range: also work out :attr:`Capacity.streams_range` (at :data:`PESSIMISTIC` and
            :data:`OPTIMISTIC`).

    Returns:
        The :class:`Capacity`; ``fit`` is 0 when the weights and overhead leave no room for one
        stream.

    Raises:
        ValueError: an instance type outside the catalogue or without a GPU, or a value out of
            range.
    """
    spec = lookup(instance_type) if isinstance(instance_type, str) else instance_type
    if spec is None or not spec.gpus:
        raise ValueError(
            f"{instance_type!r}: not a GPU instance type of constructs_lib/facts/instance_types.py"
        )
    if max_model_len < 1 or not 0 < gpu_memory_utilization <= 1:
        raise ValueError(
            f"max_model_len={max_model_len} must be >= 1 and "
            f"gpu_memory_utilization={gpu_memory_utilization} in (0, 1]"
        )
    model = with_kv_cache_dtype(model, kv_cache_dtype)
    gpu = gpu_facts(spec)
    batched = max_num_batched_tokens or default_max_num_batched_tokens(gpu.memory_bytes, gpu.name)
    budget = int(gpu.memory_bytes * gpu_memory_utilization)
    overhead = int(
        estimates.overhead_scale
        * (NON_TORCH_BYTES + CUDA_GRAPH_BYTES + ACTIVATION_BYTES_PER_BATCHED_TOKEN * batched)
    )
    kv = max(0, budget - model.weight_bytes - overhead)
    layout = kv_layout(model)
    num_blocks = kv // layout.block_bytes
    stream_blocks = request_blocks(max_model_len, estimates.stream_tokens_in_flight, model)
    vllm_blocks = request_blocks(max_model_len, VLLM_MAX_CONCURRENT_BATCHES * batched, model)
    streams_range = None
    if with_range:
        ends = [
            fit(
                spec,
                max_model_len,
                gpu_memory_utilization,
                max_num_batched_tokens=max_num_batched_tokens,
                kv_cache_dtype=kv_cache_dtype,
                estimates=end,
                with_range=False,
            ).streams
            for end in (PESSIMISTIC, OPTIMISTIC)
        ]
        streams_range = (ends[0], ends[1])
    return Capacity(
        instance_type=spec.name,
        gpu=gpu,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_batched_tokens=batched,
        budget_bytes=budget,
        weight_bytes=model.weight_bytes,
        overhead_bytes=overhead,
        kv_bytes=kv,
        num_blocks=num_blocks,
        block_bytes=layout.block_bytes,
        stream_blocks=stream_blocks,
        stream_kv_bytes=stream_blocks * layout.block_bytes,
        vllm_request_blocks=vllm_blocks,
        vllm_max_concurrency=num_blocks / vllm_blocks,
        fit=num_blocks // stream_blocks,
        compute_cap=compute_cap(gpu, max_model_len, model, estimates),
        kv_cache_dtype=kv_cache_dtype,
        streams_range=streams_range,
    )
