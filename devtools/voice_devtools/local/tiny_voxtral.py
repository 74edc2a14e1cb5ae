"""A tiny random-weight checkpoint in the format of mistralai/Voxtral-Mini-4B-Realtime-2602, for
vLLM's real server.

vLLM's realtime endpoint (`/v1/realtime`) needs a Voxtral Realtime model. The real one is 4B
parameters and cannot be fetched here; this writes the same three files the model repository ships,
with the architecture flags of the real `params.json` kept (so vLLM takes the same code paths: the
causal Whisper encoder with block pooling, AdaRMSNorm time conditioning, sliding-window attention in
both towers, tied embeddings, the streaming tokenizer) and only the sizes shrunk (dim 128, 2 layers
each side: about 1.7 MB of bf16):

- `params.json`: the model arguments vLLM reads with `--config-format mistral`
  (vllm/transformers_utils/configs/mistral.py).
- `tekken.json`: a byte-level vocabulary of 256 tokens, the special tokens mistral_common knows, and
  the `audio` section of the streaming tokenizer (mistral_common `Tekkenizer.from_file`,
  `AudioConfig`).
- `consolidated.safetensors`: bf16 weights under the Mistral names vLLM maps with `--load-format
  mistral` (vllm/model_executor/models/voxtral.py `load_weights`,
  `VoxtralEncoderModel.mistral_remapping`).

Random weights make greedy decoding pick special tokens only (every delta an empty string). Every
token embedding therefore gets one shared positive direction, largest for the letters: the
embeddings are tied, so the residual stream carries that direction and the letters win the logits,
and `transcription.delta` carries visible text.

Run it with the vLLM environment's Python (it needs torch and safetensors, which that environment
has)::

    .venv-vllm/bin/python -m voice_devtools.local.tiny_voxtral DIR

Python 3.11 compatible: the vLLM environment runs vLLM's CPU build on Python 3.11.
"""

from __future__ import annotations

import argparse
import base64
import json
import string
from pathlib import Path

#: The served model's text tower, as in the real params.json except the sizes.
DIM = 128
N_LAYERS = 2
N_HEADS = 2
N_KV_HEADS = 1
HEAD_DIM = 64
HIDDEN_DIM = 256
#: The audio encoder (causal Whisper), sizes shrunk likewise.
ENCODER_DIM = 128
ENCODER_LAYERS = 2
ENCODER_HEADS = 2
ENCODER_HEAD_DIM = 64
ENCODER_HIDDEN_DIM = 256
#: Real values kept (Voxtral-Mini-4B-Realtime-2602 params.json and tekken.json).
NUM_MEL_BINS = 128
DOWNSAMPLE_FACTOR = 4
ADA_T_COND_DIM = 32
DECODER_SLIDING_WINDOW = 8192
ENCODER_SLIDING_WINDOW = 750
MAX_POSITION_EMBEDDINGS = 131072
SAMPLING_RATE = 16000
FRAME_RATE = 12.5
#: mistral_common reserves the first ids for special tokens; the real tokenizer reserves 1000.
NUM_SPECIAL_TOKENS = 1000
BYTE_VOCAB = 256
VOCAB_SIZE = NUM_SPECIAL_TOKENS + BYTE_VOCAB
#: Tekken's pre-tokenizer pattern (the real tokenizer's).
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: mistral_common's SpecialTokens, in the order of their ranks
#: (mistral_common/tokens/tokenizers/base.py).
SPECIAL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
    "[ARGS]",
    "[CALL_ID]",
    "[AUDIO]",
    "[BEGIN_AUDIO]",
    "[TRANSCRIBE]",
    "[THINK]",
    "[/THINK]",
    "[STREAMING_PAD]",
    "[STREAMING_WORD]",
    "[NEXT_AUDIO_TEXT]",
    "[REPEAT_AUDIO_TEXT]",
    "[MODEL_SETTINGS]",
    "[/MODEL_SETTINGS]",
)
#: Weight of the shared embedding direction: every token, and the letters more (so greedy decoding
#: picks them).
SHARED_DIRECTION = 0.5
LETTER_DIRECTION = 2.0
SEED = 20260223


def params() -> dict:
    """`params.json`: the real model's keys and flags with tiny sizes."""
    return {
        "dim": DIM,
        "n_layers": N_LAYERS,
        "head_dim": HEAD_DIM,
        "hidden_dim": HIDDEN_DIM,
        "n_heads": N_HEADS,
        "n_kv_heads": N_KV_HEADS,
        "use_biases": False,
        "causal": True,
        "rope_theta": 1000000.0,
        "norm_eps": 1e-05,
        "vocab_size": VOCAB_SIZE,
        "model_parallel": 1,
        "tied_embeddings": True,
        "sliding_window": DECODER_SLIDING_WINDOW,
        "model_max_length": MAX_POSITION_EMBEDDINGS,
        # Without it vLLM looks the model up on the hub for ~28 s before falling back (unconfirmed:
        # seen, not documented); the value is the real model_max_length.
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "multimodal": {
            "whisper_model_args": {
                "encoder_args": {
                    "audio_encoding_args": {
                        "sampling_rate": SAMPLING_RATE,
                        "frame_rate": FRAME_RATE,
                        "num_mel_bins": NUM_MEL_BINS,
                        "hop_length": 160,
                        "window_size": 400,
                        "chunk_length_s": None,
                        "global_log_mel_max": 1.5,
                        "transcription_format": "streaming",
                    },
                    "dim": ENCODER_DIM,
                    "n_layers": ENCODER_LAYERS,
                    "head_dim": ENCODER_HEAD_DIM,
                    "hidden_dim": ENCODER_HIDDEN_DIM,
                    "n_heads": ENCODER_HEADS,
                    "vocab_size": VOCAB_SIZE,
                    "n_kv_heads": ENCODER_HEADS,
                    "use_biases": True,
                    "use_cache": False,
                    "rope_theta": 1000000.0,
                    "causal": True,
                    "norm_eps": 1e-05,
                    "pos_embed": "rope",
                    "max_source_positions": None,
                    "ffn_type": "swiglu",
                    "norm_type": "rms_norm",
                    "sliding_window": ENCODER_SLIDING_WINDOW,
                },
                "downsample_args": {"downsample_factor": DOWNSAMPLE_FACTOR},
            }
        },
        "ada_rms_norm_t_cond": True,
        "ada_rms_norm_t_cond_dim": ADA_T_COND_DIM,
    }


def tekken() -> dict:
    """`tekken.json`: byte-level vocabulary, special tokens (fillers up to NUM_SPECIAL_TOKENS),
    streaming audio."""
    specials = [
        {"rank": rank, "token_str": token, "is_control": True}
        for rank, token in enumerate(SPECIAL_TOKENS)
    ]
    specials += [
        {"rank": rank, "token_str": f"<SPECIAL_{rank}>", "is_control": True}
        for rank in range(len(SPECIAL_TOKENS), NUM_SPECIAL_TOKENS)
    ]
    vocab = [
        {
            "rank": rank,
            "token_bytes": base64.b64encode(bytes([rank])).decode(),
            "token_str": bytes([rank]).decode("latin-1"),
        }
        for rank in range(BYTE_VOCAB)
    ]
    return {
        "config": {
            "pattern": TEKKEN_PATTERN,
            "num_vocab_tokens": BYTE_VOCAB,
            "default_vocab_size": VOCAB_SIZE,
            "default_num_special_tokens": NUM_SPECIAL_TOKENS,
            "version": "v13",
        },
        "vocab": vocab,
        "special_tokens": specials,
        "audio": {
            "sampling_rate": SAMPLING_RATE,
            "frame_rate": FRAME_RATE,
            "audio_encoding_config": {
                "num_mel_bins": NUM_MEL_BINS,
                "hop_length": 160,
                "window_size": 400,
            },
            "chunk_length_s": None,
            "transcription_format": "streaming",
            "transcription_delay_ms": 480,
            "streaming_look_ahead_ms": 2.5,
            "streaming_look_back_ms": 52.5,
            "streaming_n_left_pad_tokens": 32,
        },
    }


def weight_shapes() -> dict[str, tuple[int, ...]]:
    """Every tensor of `consolidated.safetensors`: Mistral name -> shape."""
    encoder = "mm_streams_embeddings.embedding_module.whisper_encoder"
    shapes: dict[str, tuple[int, ...]] = {
        f"{encoder}.conv_layers.0.conv.weight": (ENCODER_DIM, NUM_MEL_BINS, 3),
        f"{encoder}.conv_layers.0.conv.bias": (ENCODER_DIM,),
        f"{encoder}.conv_layers.1.conv.weight": (ENCODER_DIM, ENCODER_DIM, 3),
        f"{encoder}.conv_layers.1.conv.bias": (ENCODER_DIM,),
        f"{encoder}.transformer.norm.weight": (ENCODER_DIM,),
    }
    heads = ENCODER_HEADS * ENCODER_HEAD_DIM
    for layer in range(ENCODER_LAYERS):
        prefix = f"{encoder}.transformer.layers.{layer}"
        shapes |= {
            f"{prefix}.attention.wq.weight": (heads, ENCODER_DIM),
            f"{prefix}.attention.wq.bias": (heads,),
            f"{prefix}.attention.wk.weight": (heads, ENCODER_DIM),  # no bias: vLLM adds a zero one
            f"{prefix}.attention.wv.weight": (heads, ENCODER_DIM),
            f"{prefix}.attention.wv.bias": (heads,),
            f"{prefix}.attention.wo.weight": (ENCODER_DIM, heads),
            f"{prefix}.attention.wo.bias": (ENCODER_DIM,),
            f"{prefix}.attention_norm.weight": (ENCODER_DIM,),
            f"{prefix}.ffn_norm.weight": (ENCODER_DIM,),
            f"{prefix}.feed_forward.w1.weight": (ENCODER_HIDDEN_DIM, ENCODER_DIM),
            f"{prefix}.feed_forward.w2.weight": (ENCODER_DIM, ENCODER_HIDDEN_DIM),
            f"{prefix}.feed_forward.w2.bias": (ENCODER_DIM,),
            f"{prefix}.feed_forward.w3.weight": (ENCODER_HIDDEN_DIM, ENCODER_DIM),
        }
    projection = "mm_streams_embeddings.embedding_module.audio_language_projection"
    shapes |= {
        f"{projection}.0.weight": (DIM, ENCODER_DIM * DOWNSAMPLE_FACTOR),
        f"{projection}.2.weight": (DIM, DIM),
        "mm_streams_embeddings.embedding_module.tok_embeddings.weight": (VOCAB_SIZE, DIM),
        "norm.weight": (DIM,),
    }
    for layer in range(N_LAYERS):
        prefix = f"layers.{layer}"
        shapes |= {
            f"{prefix}.attention.wq.weight": (N_HEADS * HEAD_DIM, DIM),
            f"{prefix}.attention.wk.weight": (N_KV_HEADS * HEAD_DIM, DIM),
            f"{prefix}.attention.wv.weight": (N_KV_HEADS * HEAD_DIM, DIM),
            f"{prefix}.attention.wo.weight": (DIM, N_HEADS * HEAD_DIM),
            f"{prefix}.attention_norm.weight": (DIM,),
            f"{prefix}.ffn_norm.weight": (DIM,),
            f"{prefix}.feed_forward.w1.weight": (HIDDEN_DIM, DIM),
            f"{prefix}.feed_forward.w2.weight": (DIM, HIDDEN_DIM),
            f"{prefix}.feed_forward.w3.weight": (HIDDEN_DIM, DIM),
            f"{prefix}.ada_rms_norm_t_cond.0.weight": (ADA_T_COND_DIM, DIM),
            f"{prefix}.ada_rms_norm_t_cond.2.weight": (DIM, ADA_T_COND_DIM),
        }
    return shapes


def write(directory: Path) -> Path:
    """Write params.json, tekken.json and consolidated.safetensors into `directory` (created);
    return it."""
    import torch  # the vLLM environment's
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "params.json").write_text(json.dumps(params(), indent=2) + "\n")
    (directory / "tekken.json").write_text(json.dumps(tekken()) + "\n")
    generator = torch.Generator().manual_seed(SEED)
    tensors = {}
    for name, shape in weight_shapes().items():
        if name.endswith("norm.weight"):
            tensor = torch.ones(shape)
        elif name.endswith(".bias"):
            tensor = torch.zeros(shape)
        else:
            tensor = torch.randn(shape, generator=generator) * 0.02
        tensors[name] = tensor
    embeddings = tensors["mm_streams_embeddings.embedding_module.tok_embeddings.weight"]
    direction = torch.randn(DIM, generator=generator)
    direction /= direction.norm()
    weights = torch.full((VOCAB_SIZE,), SHARED_DIRECTION)
    for letter in string.ascii_letters:
        weights[NUM_SPECIAL_TOKENS + ord(letter)] = LETTER_DIRECTION
    embeddings += weights[:, None] * direction[None, :]
    save_file(
        {name: tensor.to(torch.bfloat16).contiguous() for name, tensor in tensors.items()},
        str(directory / "consolidated.safetensors"),
        metadata={"format": "pt"},
    )
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m voice_devtools.local.tiny_voxtral", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "directory", type=Path, help="where to write the three files (created if missing)"
    )
    args = parser.parse_args(argv)
    print(write(args.directory))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
