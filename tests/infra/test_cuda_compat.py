"""voicectl/cuda_compat.py: the DLC and InferenceAmiVersion tables agree with their sources, and the pinned image
runs on the default AMI."""

from __future__ import annotations

import re

import botocore.session
import pytest

from config.settings import INFERENCE_AMI_VERSIONS, VOXTRAL_DEFAULT_AMI
from tests.conftest import ROOT
from voicectl.cuda_compat import (
    DLC_IMAGES,
    INFERENCE_AMIS,
    CudaVersion,
    Verdict,
    check_compatibility,
    dockerfile_base_image,
    image_cuda,
)


def ami_documentation() -> dict[str, tuple[int, str]]:
    """``{AMI: (driver branch, CUDA)}`` as the SageMaker API reference text in botocore's service model states it."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    text = re.sub(r"<[^>]+>", " ", model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation)
    text = re.sub(r"\s+", " ", text)
    found = re.findall(r"(al2\S*-gpu-\S+) Accelerator: GPU NVIDIA driver version: (\d+) CUDA version: ([\d.]+)", text)
    return {name: (int(driver), cuda) for name, driver, cuda in found}


def test_the_ami_table_matches_the_sagemaker_api_reference():
    documented = ami_documentation()
    assert documented, "botocore's InferenceAmiVersion documentation changed form; re-read it"
    assert {name: (ami.driver_branch, str(ami.cuda)) for name, ami in INFERENCE_AMIS.items()} == documented
    gpu_enum = {value for value in botocore.session.get_session().get_service_model("sagemaker")
                .shape_for("ProductionVariantInferenceAmiVersion").enum if "-gpu-" in value}
    assert set(INFERENCE_AMIS) == gpu_enum
    # Every AMI the settings accept has a row.
    assert set(INFERENCE_AMI_VERSIONS) <= set(INFERENCE_AMIS)


def test_the_pinned_image_is_in_the_table_and_runs_on_the_default_ami():
    base = dockerfile_base_image((ROOT / "container" / "Dockerfile").read_text())
    registry, tag = base.split(":")
    assert registry == "public.ecr.aws/deep-learning-containers/vllm"
    assert DLC_IMAGES[tag].vllm_version == "0.31.0"
    assert image_cuda(base) == CudaVersion(13, 0)
    result = check_compatibility(image_cuda(base), VOXTRAL_DEFAULT_AMI, "ml.g6.4xlarge")
    assert (result.verdict, result.reason) == (Verdict.COMPATIBLE, "CUDA 13.0 runs on al2023-ami-sagemaker-inference-"
                                               "gpu-4-1 (NVIDIA driver 580, CUDA 13.0)")


@pytest.mark.parametrize(("cuda", "ami", "instance_type", "verdict"), [
    ("13.0", "al2023-ami-sagemaker-inference-gpu-4-1", "ml.g6.4xlarge", Verdict.COMPATIBLE),
    ("12.9", "al2023-ami-sagemaker-inference-gpu-4-1", "ml.g6.4xlarge", Verdict.COMPATIBLE),
    ("12.9", "al2-ami-sagemaker-inference-gpu-3-1", "ml.g6.4xlarge", Verdict.MINOR_VERSION_COMPATIBILITY),
    ("13.0", "al2-ami-sagemaker-inference-gpu-3-1", "ml.g6.4xlarge", Verdict.INCOMPATIBLE),
    ("13.0", "al2-ami-sagemaker-inference-gpu-2-1", "ml.g6e.2xlarge", Verdict.INCOMPATIBLE),
    ("13.0", "al2-ami-sagemaker-inference-gpu-2", "ml.g6.4xlarge", Verdict.FORWARD_COMPATIBILITY),
    ("12.2", None, "ml.g6.4xlarge", Verdict.COMPATIBLE),  # SageMaker's default driver for G6: 535 / CUDA 12.2
    ("13.0", None, "ml.g5.2xlarge", Verdict.INCOMPATIBLE),  # default for G5: 470 / CUDA 11.4
    ("13.0", None, "ml.g6e.2xlarge", Verdict.UNKNOWN),  # G6e's default driver is not documented
])
def test_verdicts(cuda, ami, instance_type, verdict):
    assert check_compatibility(CudaVersion.parse(cuda), ami, instance_type).verdict is verdict


def test_an_incompatible_pair_says_why_and_what_happens():
    result = check_compatibility(CudaVersion(13, 0), "al2-ami-sagemaker-inference-gpu-3-1", "ml.g6.4xlarge")
    assert not result.ok
    assert result.reason == (
        "CUDA 13.0 needs a newer driver than al2-ami-sagemaker-inference-gpu-3-1 (NVIDIA driver 550, CUDA 12.4), and "
        "this AMI does not mount forward-compatibility libraries: the container would fail to start "
        "(CannotStartContainerError)")
    with pytest.raises(ValueError, match="'al2-ami-sagemaker-inference-neuron-2' is not a known GPU AMI"):
        check_compatibility(CudaVersion(13, 0), "al2-ami-sagemaker-inference-neuron-2", "ml.inf2.xlarge")


@pytest.mark.parametrize(("uri", "cuda"), [
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.29.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.2", "13.0"),
    ("public.ecr.aws/deep-learning-containers/vllm:0.17.1-gpu-py312-cu129-ubuntu22.04-sagemaker-v1.0", "12.9"),
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01", None),
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com/bridge@sha256:" + "a" * 64, None),
    ("localhost:5000/bridge", None),
])
def test_image_cuda_reads_dlc_tags_only(uri, cuda):
    assert image_cuda(uri) == (CudaVersion.parse(cuda) if cuda else None)


def test_cuda_versions_parse_and_order():
    assert [CudaVersion.parse(text) for text in ("cu129", "cu130", "13.0.2", "12.4")] == [
        CudaVersion(12, 9), CudaVersion(13, 0), CudaVersion(13, 0), CudaVersion(12, 4)]
    assert CudaVersion(12, 9) < CudaVersion(13, 0) and str(CudaVersion(13, 0)) == "13.0"
    with pytest.raises(ValueError, match="'thirteen' is not a CUDA version"):
        CudaVersion.parse("thirteen")
    with pytest.raises(ValueError, match="no 'ARG BASE_IMAGE=<image>' line"):
        dockerfile_base_image("FROM scratch\n")
