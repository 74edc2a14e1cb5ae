"""constructs_lib/facts/cuda_compat.py: the DLC and InferenceAmiVersion tables agree with their
sources, and the pinned image runs on the default AMI."""

from __future__ import annotations

import re

import botocore.session
import pytest

from config.models import VOXTRAL_DEFAULT_AMI, bridge_base_image
from config.settings import SettingsError, load_settings
from constructs_lib.facts.cuda_compat import (
    DLC_IMAGES,
    INFERENCE_AMIS,
    CudaVersion,
    Verdict,
    check_compatibility,
    check_image,
    dockerfile_base_image,
    image_cuda,
)
from constructs_lib.sagemaker_endpoint.props import INFERENCE_AMI_VERSIONS
from tests.conftest import ROOT, cdk_json_context


def ami_documentation() -> dict[str, tuple[int, str]]:
    """``{AMI: (driver branch, CUDA)}`` as the SageMaker API reference text in botocore's service
    model states it."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    text = re.sub(
        r"<[^>]+>",
        " ",
        model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation,
    )
    text = re.sub(r"\s+", " ", text)
    found = re.findall(
        r"(al2\S*-gpu-\S+) Accelerator: GPU NVIDIA driver version: (\d+) CUDA version: ([\d.]+)",
        text,
    )
    return {name: (int(driver), cuda) for name, driver, cuda in found}


def test_the_ami_table_matches_the_sagemaker_api_reference():
    documented = ami_documentation()
    assert documented, "botocore's InferenceAmiVersion documentation changed form; re-read it"
    assert {
        name: (ami.driver_branch, str(ami.cuda)) for name, ami in INFERENCE_AMIS.items()
    } == documented
    gpu_enum = {
        value
        for value in botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("ProductionVariantInferenceAmiVersion")
        .enum
        if "-gpu-" in value
    }
    assert set(INFERENCE_AMIS) == gpu_enum
    # Every AMI the settings accept has a row.
    assert set(INFERENCE_AMI_VERSIONS) <= set(INFERENCE_AMIS)


def test_the_pinned_image_is_in_the_table_and_runs_on_the_default_ami():
    base = dockerfile_base_image((ROOT / "services" / "bridge" / "Dockerfile").read_text())
    registry, tag = base.split(":")
    assert registry == "public.ecr.aws/deep-learning-containers/vllm"
    assert DLC_IMAGES[tag].vllm_version == "0.31.0"
    assert image_cuda(base) == CudaVersion(13, 0)
    result = check_compatibility(image_cuda(base), VOXTRAL_DEFAULT_AMI, "ml.g6.4xlarge")
    assert (result.verdict, result.reason) == (
        Verdict.COMPATIBLE,
        "CUDA 13.0 runs on al2023-ami-sagemaker-inference-gpu-4-1 (NVIDIA driver 580, CUDA 13.0)",
    )


@pytest.mark.parametrize(
    ("cuda", "ami", "instance_type", "verdict"),
    [
        ("13.0", "al2023-ami-sagemaker-inference-gpu-4-1", "ml.g6.4xlarge", Verdict.COMPATIBLE),
        ("12.9", "al2023-ami-sagemaker-inference-gpu-4-1", "ml.g6.4xlarge", Verdict.COMPATIBLE),
        (
            "12.9",
            "al2-ami-sagemaker-inference-gpu-3-1",
            "ml.g6.4xlarge",
            Verdict.MINOR_VERSION_COMPATIBILITY,
        ),
        ("13.0", "al2-ami-sagemaker-inference-gpu-3-1", "ml.g6.4xlarge", Verdict.INCOMPATIBLE),
        ("13.0", "al2-ami-sagemaker-inference-gpu-2-1", "ml.g6e.2xlarge", Verdict.INCOMPATIBLE),
        (
            "13.0",
            "al2-ami-sagemaker-inference-gpu-2",
            "ml.g6.4xlarge",
            Verdict.FORWARD_COMPATIBILITY,
        ),
        (
            "12.2",
            None,
            "ml.g6.4xlarge",
            Verdict.COMPATIBLE,
        ),  # SageMaker's default driver for G6: 535 / CUDA 12.2
        ("13.0", None, "ml.g5.2xlarge", Verdict.INCOMPATIBLE),  # default for G5: 470 / CUDA 11.4
        ("13.0", None, "ml.g6e.2xlarge", Verdict.UNKNOWN),  # G6e's default driver is not documented
    ],
)
def test_verdicts(cuda, ami, instance_type, verdict):
    assert check_compatibility(CudaVersion.parse(cuda), ami, instance_type).verdict is verdict


def test_an_incompatible_pair_says_why_and_what_happens():
    result = check_compatibility(
        CudaVersion(13, 0), "al2-ami-sagemaker-inference-gpu-3-1", "ml.g6.4xlarge"
    )
    assert not result.ok
    assert result.reason == (
        "CUDA 13.0 needs a newer driver than al2-ami-sagemaker-inference-gpu-3-1 (NVIDIA driver "
        "550, CUDA 12.4), and this AMI does not mount forward-compatibility libraries: the "
        "container would fail to start (CannotStartContainerError)"
    )
    with pytest.raises(
        ValueError, match="'al2-ami-sagemaker-inference-neuron-2' is not a known GPU AMI"
    ):
        check_compatibility(
            CudaVersion(13, 0), "al2-ami-sagemaker-inference-neuron-2", "ml.inf2.xlarge"
        )


@pytest.mark.parametrize(
    ("uri", "cuda"),
    [
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.29.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.2",
            "13.0",
        ),
        (
            "public.ecr.aws/deep-learning-containers/vllm:0.17.1-gpu-py312-cu129-ubuntu22.04-sagemaker-v1.0",
            "12.9",
        ),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01", None),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/bridge@sha256:" + "a" * 64, None),
        ("localhost:5000/bridge", None),
    ],
)
def test_image_cuda_reads_dlc_tags_only(uri, cuda):
    assert image_cuda(uri) == (CudaVersion.parse(cuda) if cuda else None)


def test_cuda_versions_parse_and_order():
    assert [CudaVersion.parse(text) for text in ("cu129", "cu130", "13.0.2", "12.4")] == [
        CudaVersion(12, 9),
        CudaVersion(13, 0),
        CudaVersion(13, 0),
        CudaVersion(12, 4),
    ]
    assert CudaVersion(12, 9) < CudaVersion(13, 0) and str(CudaVersion(13, 0)) == "13.0"
    with pytest.raises(ValueError, match="'thirteen' is not a CUDA version"):
        CudaVersion.parse("thirteen")
    with pytest.raises(ValueError, match="no 'ARG BASE_IMAGE=<image>' line"):
        dockerfile_base_image("FROM scratch\n")


# --- The synth-time check of voxtral.inference_ami_version (config/settings.py) -----------------

CU129_IMAGE = (
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/bridge:0.17.1-gpu-py312-cu129-ubuntu22.04-"
    "sagemaker-v1.0"
)
HASH_TAGGED_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01"


def settings_with(**overrides: str):
    return load_settings(
        {**cdk_json_context(), **{k.replace("__", "."): v for k, v in overrides.items()}}
    )


def test_an_ami_whose_driver_cannot_run_the_built_image_is_one_settings_error():
    with pytest.raises(SettingsError) as caught:
        settings_with(voxtral__inference_ami_version="al2-ami-sagemaker-inference-gpu-2-1")
    assert caught.value.problems == [
        "voxtral.inference_ami_version='al2-ami-sagemaker-inference-gpu-2-1': the base image of "
        f"services/bridge/Dockerfile {bridge_base_image()}: CUDA 13.0 needs a newer driver than "
        "al2-ami-sagemaker-inference-gpu-2-1 (NVIDIA driver 535, CUDA 12.2), and this AMI does "
        "not mount forward-compatibility libraries: the container would fail to start "
        "(CannotStartContainerError); use an InferenceAmiVersion whose driver runs CUDA 13.0 "
        "(al2023-ami-sagemaker-inference-gpu-4-1)"
    ]


def test_a_prebuilt_image_is_judged_by_the_cuda_its_tag_names():
    # CUDA 12.9 on driver 550 / CUDA 12.4: minor version compatibility, a warning of the stack, not
    # an error.
    minor = settings_with(
        voxtral__image_uri=CU129_IMAGE,
        voxtral__inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1",
    )
    assert minor.voxtral.image_compatibility().verdict is Verdict.MINOR_VERSION_COMPATIBILITY
    # The prebuilt image, not the Dockerfile, is what is judged: a CUDA 13.0 tag on driver 550 is
    # refused.
    cu130 = CU129_IMAGE.replace(
        "0.17.1-gpu-py312-cu129-ubuntu22.04", "0.31.0-gpu-py312-cu130-ubuntu24.04"
    )
    with pytest.raises(
        SettingsError,
        match=r"^Invalid settings .*\n  - voxtral.inference_ami_version='al2-ami-sagemaker-"
        r"inference-gpu-3-1': voxtral.image_uri 123456789012.dkr.ecr.us-east-1."
        r"amazonaws.com/bridge:0.31.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0: "
        r"CUDA 13.0 needs a newer driver",
    ):
        settings_with(
            voxtral__image_uri=cu130,
            voxtral__inference_ami_version="al2-ami-sagemaker-inference-gpu-3-1",
        )


def test_an_image_whose_cuda_is_unknown_is_said_so_not_guessed(tmp_path):
    unknown = settings_with(
        voxtral__image_uri=HASH_TAGGED_IMAGE,
        voxtral__inference_ami_version="al2-ami-sagemaker-inference-gpu-2-1",
    )
    result = unknown.voxtral.image_compatibility()
    assert (result.verdict, result.reason) == (
        Verdict.UNKNOWN,
        (
            f"the CUDA version of voxtral.image_uri {HASH_TAGGED_IMAGE} is unknown (its tag "
            "names none, as '-cu130-' in a SageMaker DLC tag does), so it was not checked "
            "against al2-ami-sagemaker-inference-gpu-2-1"
        ),
    )
    # A build context whose Dockerfile names no base image: unknown too.
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    default = settings_with()
    assert default.voxtral.image_compatibility(tmp_path).verdict is Verdict.UNKNOWN
    assert check_image(
        None, "the image", "al2023-ami-sagemaker-inference-gpu-4-1", "ml.g6.4xlarge"
    ).reason == (
        "the CUDA version of the image is unknown (its tag names none, as '-cu130-' in a "
        "SageMaker DLC tag does), so it was not checked against "
        "al2023-ami-sagemaker-inference-gpu-4-1"
    )
