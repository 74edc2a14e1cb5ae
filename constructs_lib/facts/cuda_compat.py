"""Which CUDA a GPU image needs, which NVIDIA driver a SageMaker inference AMI has, and whether the
two fit.

One table in one place: the settings check ``voxtral.inference_ami_version`` against the bridge
image's CUDA at synth (``config/settings.py``), ``voicectl preflight deploy`` checks it again before
a deploy, and :data:`constructs_lib.sagemaker_endpoint.props.INFERENCE_AMI_VERSIONS` (the values a
ProductionVariant accepts) is its keys. A facts module of the construct library, like
:mod:`constructs_lib.facts.instance_types`: standard library only (no ``aws_cdk``), so ``config``
and ``voicectl`` import it, and it imports nothing of this project.

Sources:

- SageMaker vLLM deep-learning containers (DLC): aws/deep-learning-containers
  ``docs/src/data/vllm/<version>-gpu- sagemaker.yml`` (the ``cuda`` and ``os`` of each release; the
  tag spells the CUDA as ``-cuNNN-``) and ``.github/config/image/vllm/sagemaker-ubuntu.yml`` (the
  exact CUDA of the build, e.g. 13.0.2 for 0.27.1).
- InferenceAmiVersion -> NVIDIA driver and CUDA: the SageMaker API reference,
  ``ProductionVariant.InferenceAmiVersion`` (the same text ships in botocore's SageMaker service
  model), and the SageMaker developer guide page "Best practices to minimize interruptions during
  GPU driver upgrades" (``inference-gpu-drivers``), whose table also gives the driver of an endpoint
  that sets no AMI version, per instance family.
- Compatibility rules: NVIDIA "CUDA Compatibility" (docs.nvidia.com/deploy/cuda-compatibility): a
  driver runs applications built with its own CUDA version or older; within one CUDA major version,
  *minor version compatibility* also runs newer minor versions (except features that need the newer
  driver, such as JIT of newer PTX); a newer *major* version needs the forward-compatibility package
  (``cuda-compat``) mounted into the container, which the AMIs whose description says "NVIDIA
  Container Toolkit with disabled CUDA-compat mounting" do not do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "DEFAULT_DRIVER_BY_FAMILY",
    "DLC_IMAGES",
    "INFERENCE_AMIS",
    "Compatibility",
    "CudaVersion",
    "DlcImage",
    "InferenceAmi",
    "Verdict",
    "check_compatibility",
    "check_image",
    "dockerfile_base_image",
    "image_cuda",
]


@dataclass(frozen=True, order=True)
class CudaVersion:
    """A CUDA ``major.minor`` version (the patch level does not change compatibility)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        """``"13.0"``, ``"13.0.2"``, ``"cu130"`` or ``"cu129"`` -> the version.

        Raises:
            ValueError: ``text`` is none of those forms.
        """
        match = re.fullmatch(r"cu(\d{2,3})", text) or re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text)
        if match is None:
            raise ValueError(f"{text!r} is not a CUDA version (forms: 13.0, 13.0.2, cu130)")
        if len(match.groups()) == 1:
            digits = match.group(
                1
            )  # the last digit is the minor version: cu129 = 12.9, cu130 = 13.0
            return cls(int(digits[:-1]), int(digits[-1]))
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class DlcImage:
    """One SageMaker vLLM DLC release.

    Attributes:
        tag: the full tag, pinned to the DLC build (``-sagemaker-v1.0``).
        vllm_version: the vLLM release inside.
        cuda: the CUDA toolkit the image is built with.
        os: the image's operating system.
        source: where the facts come from.
    """

    tag: str
    vllm_version: str
    cuda: CudaVersion
    os: str
    source: str


_DLC_SOURCE = "aws/deep-learning-containers docs/src/data/vllm/{version}-gpu-sagemaker.yml"

#: SageMaker vLLM DLCs this project has used or considered, by tag
#: (``public.ecr.aws/deep-learning-containers/vllm`` and
#: ``763104351884.dkr.ecr.<region>.amazonaws.com/vllm``). Other DLC tags are read from their
#: ``-cuNNN-`` part.
DLC_IMAGES: dict[str, DlcImage] = {
    image.tag: image
    for image in (
        DlcImage(
            "0.17.1-gpu-py312-cu129-ubuntu22.04-sagemaker-v1.0",
            "0.17.1",
            CudaVersion(12, 9),
            "ubuntu22.04",
            _DLC_SOURCE.format(version="0.17.1"),
        ),
        DlcImage(
            "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker-v1.0",
            "0.27.1",
            CudaVersion(13, 0),
            "ubuntu22.04",
            _DLC_SOURCE.format(version="0.27.1")
            + "; CUDA 13.0.2 in .github/config/image/vllm/sagemaker-ubuntu.yml",
        ),
        DlcImage(
            "0.31.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0",
            "0.31.0",
            CudaVersion(13, 0),
            "ubuntu24.04",
            _DLC_SOURCE.format(version="0.31.0"),
        ),
    )
}


@dataclass(frozen=True)
class InferenceAmi:
    """One ``ProductionVariant.InferenceAmiVersion`` value.

    Attributes:
        name: the InferenceAmiVersion value.
        driver_branch: NVIDIA driver branch (535, 550, 580).
        cuda: the newest CUDA version the driver runs natively.
        cuda_compat_mounting: whether the NVIDIA Container Toolkit mounts a container's
            forward-compatibility libraries (False for the AMIs documented with "disabled
            CUDA-compat mounting").
    """

    name: str
    driver_branch: int
    cuda: CudaVersion
    cuda_compat_mounting: bool


#: Source: SageMaker API reference, ProductionVariant.InferenceAmiVersion (botocore's SageMaker
#: model carries it).
INFERENCE_AMIS: dict[str, InferenceAmi] = {
    ami.name: ami
    for ami in (
        InferenceAmi(
            "al2-ami-sagemaker-inference-gpu-2", 535, CudaVersion(12, 2), cuda_compat_mounting=True
        ),
        InferenceAmi(
            "al2-ami-sagemaker-inference-gpu-2-1",
            535,
            CudaVersion(12, 2),
            cuda_compat_mounting=False,
        ),
        InferenceAmi(
            "al2-ami-sagemaker-inference-gpu-3-1",
            550,
            CudaVersion(12, 4),
            cuda_compat_mounting=False,
        ),
        InferenceAmi(
            "al2023-ami-sagemaker-inference-gpu-4-1",
            580,
            CudaVersion(13, 0),
            cuda_compat_mounting=False,
        ),
    )
}

#: Driver of a real-time endpoint that sets no InferenceAmiVersion, by instance family: (driver
#: branch, CUDA). Source: SageMaker developer guide, inference-gpu-drivers, "Current versions and
#: supported instance families", Real-time rows. Families it does not list (g6e, g7, g7e, ...) are
#: unknown: set an InferenceAmiVersion for them.
DEFAULT_DRIVER_BY_FAMILY: dict[str, tuple[int, CudaVersion]] = {
    **{family: (470, CudaVersion(11, 4)) for family in ("p2", "p3", "p4d", "p4de", "g4dn", "g5")},
    **{family: (535, CudaVersion(12, 2)) for family in ("p5", "g6")},
    **{family: (550, CudaVersion(12, 4)) for family in ("p5e", "p5en")},
}


class Verdict(Enum):
    """How an image's CUDA fits a driver."""

    COMPATIBLE = "compatible"
    #: Same major version, newer minor: runs through CUDA minor version compatibility (NVIDIA), with
    #: its limits.
    MINOR_VERSION_COMPATIBILITY = "minor version compatibility"
    #: Newer major version and the forward-compatibility libraries are mounted: runs only if the
    #: image ships them and the GPU is a data-centre GPU (NVIDIA forward compatibility).
    FORWARD_COMPATIBILITY = "forward compatibility"
    INCOMPATIBLE = "incompatible"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Compatibility:
    """The outcome of :func:`check_compatibility`: the verdict and one sentence saying why."""

    verdict: Verdict
    reason: str

    @property
    def ok(self) -> bool:
        """True unless the image cannot start (INCOMPATIBLE); the middle verdicts deserve a
        warning."""
        return self.verdict is not Verdict.INCOMPATIBLE


def check_compatibility(
    image_cuda: CudaVersion, inference_ami_version: str | None, instance_type: str
) -> Compatibility:
    """Whether a container built with CUDA ``image_cuda`` starts on ``instance_type`` with that
    InferenceAmiVersion.

    Args:
        image_cuda: the image's CUDA version.
        inference_ami_version: the variant's InferenceAmiVersion, or None for SageMaker's default
            driver.
        instance_type: e.g. ``ml.g6.4xlarge`` (only its family matters, and only without an AMI
            version).

    Raises:
        ValueError: ``inference_ami_version`` is not in :data:`INFERENCE_AMIS` (a Neuron AMI, or a
            newer one this table does not know yet).
    """
    if inference_ami_version is None:
        family = instance_type.split(".")[1] if instance_type.count(".") == 2 else instance_type
        if family not in DEFAULT_DRIVER_BY_FAMILY:
            return Compatibility(
                Verdict.UNKNOWN,
                f"SageMaker's default driver for {instance_type} is not documented; "
                "set an InferenceAmiVersion so the driver is known",
            )
        branch, driver_cuda = DEFAULT_DRIVER_BY_FAMILY[family]
        where, compat_mounting = f"the default driver of ml.{family}.* endpoints", False
    else:
        if inference_ami_version not in INFERENCE_AMIS:
            raise ValueError(
                f"InferenceAmiVersion {inference_ami_version!r} is not a known GPU AMI; known: "
                f"{', '.join(INFERENCE_AMIS)}"
            )
        ami = INFERENCE_AMIS[inference_ami_version]
        branch, driver_cuda, compat_mounting = ami.driver_branch, ami.cuda, ami.cuda_compat_mounting
        where = inference_ami_version
    driver = f"{where} (NVIDIA driver {branch}, CUDA {driver_cuda})"
    if image_cuda <= driver_cuda:
        return Compatibility(Verdict.COMPATIBLE, f"CUDA {image_cuda} runs on {driver}")
    if image_cuda.major == driver_cuda.major:
        return Compatibility(
            Verdict.MINOR_VERSION_COMPATIBILITY,
            f"CUDA {image_cuda} is newer than {driver}; it runs through CUDA minor version "
            "compatibility, without the features that need a newer driver",
        )
    if compat_mounting:
        return Compatibility(
            Verdict.FORWARD_COMPATIBILITY,
            f"CUDA {image_cuda} needs a newer major version than {driver}; it starts only if the "
            "image ships NVIDIA's forward-compatibility libraries (cuda-compat)",
        )
    return Compatibility(
        Verdict.INCOMPATIBLE,
        f"CUDA {image_cuda} needs a newer driver than {driver}, and this AMI does not mount "
        "forward-compatibility libraries: the container would fail to start "
        "(CannotStartContainerError)",
    )


def check_image(
    image: str | None, source: str, inference_ami_version: str | None, instance_type: str
) -> Compatibility:
    """Whether the image ``image`` (named ``source`` in messages, e.g. ``voxtral.image_uri``) starts
    with that InferenceAmiVersion: :func:`check_compatibility` on the CUDA its tag names
    (:func:`image_cuda`).

    UNKNOWN, saying so, when ``image`` is None or its tag does not name a CUDA version (nothing is
    guessed); an INCOMPATIBLE reason ends with the AMI versions whose driver runs it.

    Raises:
        ValueError: ``inference_ami_version`` is not in :data:`INFERENCE_AMIS`.
    """
    cuda = image_cuda(image) if image is not None else None
    if cuda is None:
        shown = f" {image}" if image is not None else ""
        return Compatibility(
            Verdict.UNKNOWN,
            f"the CUDA version of {source}{shown} is unknown (its tag names none, "
            "as '-cu130-' in a SageMaker DLC tag does), so it was not checked against "
            f"{inference_ami_version or 'the default driver'}",
        )
    result = check_compatibility(cuda, inference_ami_version, instance_type)
    reason = f"{source} {image}: {result.reason}"
    if result.verdict is Verdict.INCOMPATIBLE:
        fitting = [name for name, ami in INFERENCE_AMIS.items() if ami.cuda >= cuda]
        reason += (
            f"; use an InferenceAmiVersion whose driver runs CUDA {cuda} ({', '.join(fitting)})"
            if fitting
            else f"; no known InferenceAmiVersion runs CUDA {cuda}: use an image built with an "
            "older CUDA"
        )
    return Compatibility(result.verdict, reason)


_IMAGE_CUDA_TAG = re.compile(r"-(cu\d{3})-")


def image_cuda(image_uri: str) -> CudaVersion | None:
    """The CUDA version of an image, from :data:`DLC_IMAGES` or the ``-cuNNN-`` part of a DLC-style
    tag; None when the URI does not say (an image of our own tagged by a build hash, or a
    digest)."""
    tail = image_uri.rsplit("/", 1)[-1]
    if "@" in tail or ":" not in tail:
        return None
    tag = tail.split(":", 1)[1]
    if tag in DLC_IMAGES:
        return DLC_IMAGES[tag].cuda
    match = _IMAGE_CUDA_TAG.search(f"-{tag}-")
    return CudaVersion.parse(match.group(1)) if match else None


_BASE_IMAGE_ARG = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


def dockerfile_base_image(dockerfile_text: str) -> str:
    """The default of ``ARG BASE_IMAGE=...`` in a Dockerfile (services/bridge/Dockerfile builds
    ``FROM ${BASE_IMAGE}``).

    Raises:
        ValueError: the Dockerfile has no such line.
    """
    match = _BASE_IMAGE_ARG.search(dockerfile_text)
    if match is None:
        raise ValueError("the Dockerfile has no 'ARG BASE_IMAGE=<image>' line")
    return match.group(1)
