"""Facts of what this app deploys, each with its source: the Voxtral model and our bridge container,
and the Cartesia Sonic model package. (Facts about AWS itself, such as instance types, ARN forms and
API limits, live in ``constructs_lib``, which the settings import.)
"""

from __future__ import annotations

from pathlib import Path

from constructs_lib.facts.cuda_compat import dockerfile_base_image
from constructs_lib.sagemaker_endpoint.scaling_props import (
    CONCURRENT_REQUESTS_PER_MODEL,
    INVOCATIONS_PER_INSTANCE,
)
from contracts.bridge_env import (
    AUDIO_TOKEN_MS,
    DEFAULT_DRAIN_S,
    DEFAULT_TRANSCRIPTION_DELAY_MS,
    TRANSCRIPTION_DELAYS_MS,
)

# --- Voxtral (speech to text) on vLLM behind the bridge -------------------------------------------

#: A commit of mistralai/Voxtral-Mini-4B-Realtime-2602 with the Mistral-format files (params.json,
#: tekken.json, consolidated.safetensors); public client code pins its weight downloads to it. Check
#: the repository's history on the model hub before changing it.
VOXTRAL_DEFAULT_REVISION = "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf"

#: The longest context of Voxtral-Mini-4B-Realtime-2602, tokens: its params.json
#: ``max_position_embeddings`` (kept in the tiny test checkpoint, tiny_voxtral.py in the dev tools).
#: vLLM refuses a longer ``--max-model-len`` at start ("is greater than the derived max_model_len",
#: vllm/config/model.py), so the endpoint would never become healthy. 131072 tokens: 2.9 h of audio.
VOXTRAL_MAX_MODEL_LEN = 131072

#: al2023-ami-sagemaker-inference-gpu-4-1 ships NVIDIA driver 580 / CUDA 13.0, the only
#: InferenceAmiVersion whose driver runs the CUDA 13.0 (cu130) vLLM deep-learning container the
#: bridge image is built on; the older ones (driver 535 / 550, CUDA 12.x) would need CUDA forward
#: compatibility, which their container toolkit does not mount (constructs_lib/facts/cuda_compat.py;
#: the settings check it).
VOXTRAL_DEFAULT_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"

#: The repository's root: the bridge image's build context, of which the image takes the bridge's
#: folder and contracts/ (constructs_lib/artifacts/bridge_image.py).
BRIDGE_CONTEXT_DIR = Path(__file__).resolve().parent.parent
#: The bridge's folder (the package ``bridge``, its Dockerfile and requirements): ``cdk synth``
#: builds its image as an asset unless ``voxtral.image_uri`` is set.
BRIDGE_CONTAINER_DIR = BRIDGE_CONTEXT_DIR / "services" / "bridge"


def bridge_base_image(container_dir: Path = BRIDGE_CONTAINER_DIR) -> str | None:
    """The image the bridge is built on: the default of ``ARG BASE_IMAGE=`` in
    ``container_dir/Dockerfile`` (a SageMaker vLLM DLC whose tag names its CUDA), or None when
    the Dockerfile is missing or has no such line."""
    try:
        return dockerfile_base_image((container_dir / "Dockerfile").read_text())
    except (OSError, ValueError):
        return None


def shown_dockerfile(container_dir: Path) -> str:
    """``container_dir/Dockerfile`` as a message names it: relative to the repository when inside
    it (``services/bridge/Dockerfile``), else in full."""
    dockerfile = Path(container_dir).resolve() / "Dockerfile"
    if dockerfile.is_relative_to(BRIDGE_CONTEXT_DIR):
        return dockerfile.relative_to(BRIDGE_CONTEXT_DIR).as_posix()
    return str(dockerfile)


#: Seconds the bridge lets open streams run after SIGTERM: its DRAIN_S default in whole seconds
#: (contracts/bridge_env.py, which says why 25 s: SageMaker sends SIGKILL 30 s after SIGTERM). The
#: Voxtral stack passes it to the container; a scale-in cooldown must be longer so that one drain
#: ends before the next scale-in.
BRIDGE_DRAIN_S = int(DEFAULT_DRAIN_S)


#: Milliseconds of audio in one Voxtral Realtime token, the transcription delays the model card
#: allows and the checkpoint's own: the bridge's contract holds them (contracts/bridge_env.py, with
#: their sources). mistral_common 1.13.1 checks less than the card (a positive multiple of 80 ms),
#: so other multiples would start and run at delays the model was not trained for.
VOXTRAL_TOKEN_MS = AUDIO_TOKEN_MS
VOXTRAL_TRANSCRIPTION_DELAYS_MS = TRANSCRIPTION_DELAYS_MS
VOXTRAL_DEFAULT_TRANSCRIPTION_DELAY_MS = DEFAULT_TRANSCRIPTION_DELAY_MS
#: Audio past the delay before vLLM 0.31.0 answers with its first delta, ms: one token more than the
#: delay, plus the streaming look-ahead of 2.5 ms (tekken.json ``streaming_look_ahead_ms``; vLLM's
#: ``VoxtralRealtimeBuffer`` waits for the prompt's BOS and delay tokens of audio and the
#: look-ahead). Seen on the real server (tests/vllm): the first delta after 4, 8 and 32 tokens of
#: audio at 160, 480 and 2400 ms.
VOXTRAL_FIRST_DELTA_EXTRA_MS = VOXTRAL_TOKEN_MS + 2.5


def first_delta_floor_ms(transcription_delay_ms: int) -> float:
    """The audio a stream must have sent before its first ``transcription.delta`` can come, ms: a
    floor under the bridge's TimeToFirstDelta for a caller that streams at real time."""
    return transcription_delay_ms + VOXTRAL_FIRST_DELTA_EXTRA_MS


# --- Sonic (text to speech) from its AWS Marketplace model package --------------------------------

#: Cartesia Sonic 3.6 model package per region (AWS Marketplace listing). Other regions need
#: ``sonic.model_package_arn``.
SONIC_MODEL_PACKAGES: dict[str, str] = {
    "us-east-1": "arn:aws:sagemaker:us-east-1:865070037744:model-package/"
    "sonic36-sagemaker-v0-c6e9cacffcdf31178d1bd7c98c587480",
}

#: Real-time instance types the Sonic 3.6 model package supports (its Marketplace listing): every
#: size of G6e, G7e and G7 (their smallest sizes, ml.g6e.xlarge, ml.g7e.2xlarge and ml.g7.2xlarge,
#: are the listed minimums), and two P5 sizes.
SONIC_INSTANCE_FAMILIES = ("g6e", "g7e", "g7")
SONIC_EXTRA_INSTANCE_TYPES = ("ml.p5.48xlarge", "ml.p5en.48xlarge")

#: Sonic target-tracking metrics: ``sonic.scaling_metric`` -> Application Auto Scaling predefined
#: metric type (SageMaker developer guide, "Define a scaling policy"). ``invocations_per_instance``
#: is requests per instance per minute; ``concurrent_requests`` is requests in flight per model
#: (high-resolution metric).
SONIC_SCALING_METRICS: dict[str, str] = {
    "invocations_per_instance": INVOCATIONS_PER_INSTANCE,
    "concurrent_requests": CONCURRENT_REQUESTS_PER_MODEL,
}
