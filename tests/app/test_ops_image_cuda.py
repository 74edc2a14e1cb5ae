"""The image's CUDA at synth: an unknown CUDA is a warning of the Voxtral stack, never a guess (an incompatible one is
a settings error: tests/unit/constructs_lib/facts/test_cuda_compat.py)."""

from __future__ import annotations

from tests.app.ops_kit import PREBUILT_IMAGE


def cuda_warnings(synthesized_app) -> list[str]:
    """The Voxtral stack's warnings that name CUDA, from the cloud assembly."""
    return [text for text in synthesized_app.warnings("Voxtral") if "CUDA" in text]


def test_a_prebuilt_image_whose_tag_names_no_cuda_gets_a_warning(ops_variant):
    (warning,) = cuda_warnings(ops_variant)
    assert warning == (
        f"the CUDA version of voxtral.image_uri {PREBUILT_IMAGE} is unknown (its tag names none, as '-cu130-' in a "
        "SageMaker DLC tag does), so it was not checked against al2023-ami-sagemaker-inference-gpu-4-1 "
        "[ack: realtime-voice:image-cuda]")


def test_the_image_built_from_container_gets_none(synthesized):
    assert cuda_warnings(synthesized) == []
