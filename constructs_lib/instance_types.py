"""Catalogue of SageMaker real-time inference instance types: vCPUs, GPUs and GPU memory.

Used to check instance types, to estimate whether a model fits in GPU memory (the app's settings), and (by the
monitoring constructs) to scale utilisation thresholds: SageMaker reports ``GPUUtilization`` and ``CPUUtilization``
from 0 to 100 x the number of GPUs or vCPUs of the instance.

Sources: Amazon SageMaker pricing page, instance table for real-time inference, and the EC2 accelerated-computing
instance specifications (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html). G7 (NVIDIA RTX PRO 4500
Blackwell, 32 GiB) sizes follow the AWS launch announcement of June 2026; the catalogue records the sizes SageMaker
lists for hosting. Extend it when AWS adds a family; an unknown type fails synth with a message naming this file.

CDK-free (no ``aws_cdk`` import): the settings layer, which ``voicectl`` imports, uses this module.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from constructs_lib.validation import Problems

INSTANCE_TYPE_PATTERN = re.compile(r"^ml\.([a-z][a-z0-9-]*)\.(\d*x?large|medium|small|metal)$")


@dataclass(frozen=True)
class InstanceSpec:
    """One instance type.

    Attributes:
        name: SageMaker instance type, e.g. ``ml.g6.4xlarge``.
        vcpus: number of vCPUs (``CPUUtilization`` reaches ``100 * vcpus``).
        gpus: number of GPUs, 0 for CPU-only types (``GPUUtilization`` reaches ``100 * gpus``).
        gpu_memory_gib: memory of ONE GPU in GiB (0 for CPU-only types).
        gpu_model: GPU name, for messages and documentation.
    """

    name: str
    vcpus: int
    gpus: int
    gpu_memory_gib: float
    gpu_model: str

    @property
    def family(self) -> str:
        """The family part of the name: ``g6`` for ``ml.g6.4xlarge``."""
        return self.name.split(".")[1]

    @property
    def total_gpu_memory_gib(self) -> float:
        """GPU memory of the whole instance in GiB."""
        return self.gpus * self.gpu_memory_gib


def _family(family: str, gpu_model: str, gpu_memory_gib: float, sizes: dict[str, tuple[int, int]]) -> dict[str, InstanceSpec]:
    """Build the specs of one family from ``{size: (vcpus, gpus)}``."""
    return {
        f"ml.{family}.{size}": InstanceSpec(f"ml.{family}.{size}", vcpus, gpus, gpu_memory_gib, gpu_model)
        for size, (vcpus, gpus) in sizes.items()
    }


# G4dn, G5, G6 and G6e share one size layout: 1 GPU up to 16xlarge except 12xlarge (4), 24xlarge (4), 48xlarge (8).
_G_LAYOUT = {
    "xlarge": (4, 1), "2xlarge": (8, 1), "4xlarge": (16, 1), "8xlarge": (32, 1), "16xlarge": (64, 1),
    "12xlarge": (48, 4), "24xlarge": (96, 4), "48xlarge": (192, 8),
}
# G7e and G7 start at 2xlarge: 1 GPU up to 8xlarge, then 12xlarge (2), 24xlarge (4), 48xlarge (8).
_G7_LAYOUT = {
    "2xlarge": (8, 1), "4xlarge": (16, 1), "8xlarge": (32, 1), "12xlarge": (48, 2), "24xlarge": (96, 4),
    "48xlarge": (192, 8),
}
_G4DN_LAYOUT = {size: spec for size, spec in _G_LAYOUT.items() if size not in ("24xlarge", "48xlarge")}
_CPU_LAYOUT = {"large": (2, 0), "xlarge": (4, 0), "2xlarge": (8, 0), "4xlarge": (16, 0), "12xlarge": (48, 0), "24xlarge": (96, 0)}

CATALOGUE: dict[str, InstanceSpec] = {
    **_family("g4dn", "NVIDIA T4", 16, _G4DN_LAYOUT),
    **_family("g5", "NVIDIA A10G", 24, _G_LAYOUT),
    **_family("g6", "NVIDIA L4", 24, _G_LAYOUT),
    **_family("g6e", "NVIDIA L40S", 48, _G_LAYOUT),
    **_family("g7e", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 96, _G7_LAYOUT),
    **_family("g7", "NVIDIA RTX PRO 4500 Blackwell Server Edition", 32, _G7_LAYOUT),
    **_family("p4d", "NVIDIA A100 40GB", 40, {"24xlarge": (96, 8)}),
    **_family("p4de", "NVIDIA A100 80GB", 80, {"24xlarge": (96, 8)}),
    **_family("p5", "NVIDIA H100", 80, {"4xlarge": (16, 1), "48xlarge": (192, 8)}),
    **_family("p5e", "NVIDIA H200", 141, {"48xlarge": (192, 8)}),
    **_family("p5en", "NVIDIA H200", 141, {"48xlarge": (192, 8)}),
    **_family("m5", "none", 0, _CPU_LAYOUT),
    **_family("c5", "none", 0, {size: _CPU_LAYOUT[size] for size in ("large", "xlarge", "2xlarge", "4xlarge")} | {"9xlarge": (36, 0), "18xlarge": (72, 0)}),
    **_family("m7i", "none", 0, _CPU_LAYOUT),
    **_family("c7i", "none", 0, _CPU_LAYOUT),
}


@functools.cache
def sagemaker_instance_types() -> frozenset[str]:
    """Every ProductionVariant instance type SageMaker accepts: the ``ProductionVariantInstanceType`` enum of the
    SageMaker API model shipped with botocore (the authority for "is this a SageMaker instance type")."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)


def lookup(instance_type: str) -> InstanceSpec | None:
    """Return the spec of ``instance_type`` (e.g. ``ml.g6.4xlarge``), or ``None`` when the catalogue lacks it."""
    return CATALOGUE.get(instance_type)


def alarm_capacity(instance_types: Sequence[str]) -> tuple[int, int]:
    """``(GPUs, vCPUs)`` that utilisation alarm thresholds scale by, for a variant that may run any of
    ``instance_types`` (its instance pools): the fewest GPUs and the fewest vCPUs among them.

    Why the fewest: SageMaker reports ``GPUUtilization`` of an instance from 0 to 100 x its GPUs (``CPUUtilization``
    likewise per vCPU), so instances of pools with different counts report on different scales. A threshold of
    percent x the fewest is exactly the percent asked for on the smallest type and fires earlier (at a lower share
    of capacity) on a larger one: an early page at worst. Percent x the most would be a level an instance of the
    smallest type can never reach: an alarm that stays silent while it saturates. Pools of equal counts change
    nothing.

    Raises:
        ValueError: ``instance_types`` is empty, or one of them is not in the catalogue.
    """
    specs = [lookup(name) for name in instance_types]
    missing = [name for name, spec in zip(instance_types, specs) if spec is None]
    if not specs or missing:
        raise ValueError(f"instance types {list(missing or instance_types)!r}: not in constructs_lib/instance_types.py")
    return min(spec.gpus for spec in specs), min(spec.vcpus for spec in specs)


def gpu_families() -> str:
    """The GPU families of the catalogue, for messages: ``ml.g4dn.*, ml.g5.*, ...``."""
    return ", ".join(sorted({f"ml.{spec.family}.*" for spec in CATALOGUE.values() if spec.gpus}))


def is_instance_type(value: str) -> bool:
    """Whether ``value`` is a SageMaker real-time instance type: of the form ``ml.<family>.<size>`` and, where
    botocore is installed, one of the ProductionVariant types of its SageMaker API model
    (:func:`sagemaker_instance_types`)."""
    try:
        known = sagemaker_instance_types()
    except ImportError:  # botocore is optional for the constructs: the form alone is checked then
        known = None
    return bool(INSTANCE_TYPE_PATTERN.match(value)) and (known is None or value in known)


def check_instance_type(p: Problems, prop: str, value: str) -> None:
    """A SageMaker real-time instance type (:func:`is_instance_type`)."""
    if not is_instance_type(value):
        p.add(prop, value, "not a SageMaker real-time instance type (expected one of SageMaker's ProductionVariant "
                           "types of the form 'ml.<family>.<size>', e.g. 'ml.g6.4xlarge')")


def check_catalogued(p: Problems, prop: str, value: str) -> InstanceSpec | None:
    """The spec of ``value``, or None after recording that the catalogue lacks it (the alarms need its GPUs and
    vCPUs). Meant for a value that passed :func:`check_instance_type`."""
    spec = lookup(value)
    if spec is None:
        p.add(prop, value, "a SageMaker instance type without vCPU and GPU facts in constructs_lib/instance_types.py; "
                           f"add it there or choose one of the GPU types {gpu_families()}")
    return spec
