"""The tiny checkpoint keeps the architecture flags of Voxtral-Mini-4B-Realtime-2602 (the real
params.json's values below) and shrinks only sizes; tests/vllm proves vLLM loads and serves it."""

from __future__ import annotations

from voice_devtools.local import tiny_voxtral


def test_the_architecture_flags_are_the_real_models():
    params = tiny_voxtral.params()
    encoder = params["multimodal"]["whisper_model_args"]["encoder_args"]
    assert {
        key: params[key]
        for key in (
            "use_biases",
            "causal",
            "tied_embeddings",
            "sliding_window",
            "ada_rms_norm_t_cond",
            "ada_rms_norm_t_cond_dim",
            "rope_theta",
        )
    } == {
        "use_biases": False,
        "causal": True,
        "tied_embeddings": True,
        "sliding_window": 8192,
        "ada_rms_norm_t_cond": True,
        "ada_rms_norm_t_cond_dim": 32,
        "rope_theta": 1000000.0,
    }
    assert {
        key: encoder[key]
        for key in ("causal", "use_biases", "pos_embed", "sliding_window", "ffn_type", "norm_type")
    } == {
        "causal": True,
        "use_biases": True,
        "pos_embed": "rope",
        "sliding_window": 750,
        "ffn_type": "swiglu",
        "norm_type": "rms_norm",
    }
    assert encoder["audio_encoding_args"] == {
        "sampling_rate": 16000,
        "frame_rate": 12.5,
        "num_mel_bins": 128,
        "hop_length": 160,
        "window_size": 400,
        "chunk_length_s": None,
        "global_log_mel_max": 1.5,
        "transcription_format": "streaming",
    }
    assert params["multimodal"]["whisper_model_args"]["downsample_args"] == {"downsample_factor": 4}


def test_the_tokenizer_is_byte_level_with_the_streaming_audio_section():
    tekken = tiny_voxtral.tekken()
    assert [entry["rank"] for entry in tekken["special_tokens"]] == list(
        range(tiny_voxtral.NUM_SPECIAL_TOKENS)
    )
    assert tekken["special_tokens"][27]["token_str"] == "[STREAMING_PAD]"
    assert (
        len(tekken["vocab"]) == 256
        and tekken["config"]["default_vocab_size"] == tiny_voxtral.VOCAB_SIZE
    )
    assert (
        tekken["audio"]["transcription_delay_ms"] == 480
        and tekken["audio"]["streaming_n_left_pad_tokens"] == 32
    )


def test_every_weight_is_sized_by_the_params():
    shapes = tiny_voxtral.weight_shapes()
    params = tiny_voxtral.params()
    assert shapes["mm_streams_embeddings.embedding_module.tok_embeddings.weight"] == (
        params["vocab_size"],
        params["dim"],
    )
    assert sum(name.startswith("layers.") for name in shapes) == 11 * params["n_layers"]
    assert "output.weight" not in shapes  # tied embeddings
