"""Catalogue of SageMaker real-time inference instance types: vCPUs, GPUs, GPU memory and local
instance storage.

Used to check instance types, to estimate whether a model fits in GPU memory (the app's settings),
and (by the monitoring constructs) to scale utilisation thresholds: SageMaker reports
``GPUUtilization`` and ``CPUUtilization`` from 0 to 100 x the number of GPUs or vCPUs of the
instance.

Sources: Amazon SageMaker pricing page, instance table for real-time inference, and the EC2
accelerated-computing instance specifications
(https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html). G7 (NVIDIA RTX PRO 4500 Blackwell,
32 GiB) sizes follow the AWS launch announcement of June 2026; the catalogue records the sizes
SageMaker lists for hosting. Extend it when AWS adds a family; an unknown type fails synth with a
message naming this file.

Local instance storage (NVMe instance store) decides whether an EndpointConfig may carry
``KmsKeyId``: the CreateEndpointConfig API reference, ``KmsKeyId``, says "You can't request a
KmsKeyId when using an instance type with local storage" and that the call fails if one is given
(:data:`LOCAL_STORAGE` records each family with its source).

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
        local_storage: whether the type has local NVMe instance storage (encrypted by the instance's
            hardware module; SageMaker then refuses ``KmsKeyId``), per :data:`LOCAL_STORAGE`.
        local_storage_source: where that fact comes from (a document, or "unconfirmed" and why).
    """

    name: str
    vcpus: int
    gpus: int
    gpu_memory_gib: float
    gpu_model: str
    local_storage: bool
    local_storage_source: str

    @property
    def family(self) -> str:
        """The family part of the name: ``g6`` for ``ml.g6.4xlarge``."""
        return self.name.split(".")[1]

    @property
    def total_gpu_memory_gib(self) -> float:
        """GPU memory of the whole instance in GiB."""
        return self.gpus * self.gpu_memory_gib


# Sources of the local-storage facts below.
_SRC_SAGEMAKER_NVME = (
    "SageMaker API reference, ResourceConfig.VolumeSizeInGB: 'ML instance families with the "
    "NVMe-type instance storage include ml.p4d, ml.g4dn, and ml.g5'"
)
_SRC_SAGEMAKER_EBS = (
    "SageMaker API reference, ResourceConfig.VolumeSizeInGB: 'ML instance families that use EBS "
    "volumes include ml.c5 and ml.p2'"
)
_SRC_EC2_G5 = (
    "EC2 User Guide, accelerated computing instances, G5: 'up to 7.6 TB of local NVMe SSD storage'"
)
# kubernetes-sigs/aws-ebs-csi-driver, pkg/cloud/volume_limits.go at 88d79fb (2025-09-10): its
# instance-store table was generated with `aws ec2 describe-instance-types --filters
# Name=instance-storage-supported,Values=true` over every region
# (hack/generate-instance-store-table.sh), so a type in it has instance storage and a current type
# absent from it has none. A public, machine-derived copy of the EC2 instance-store table.
_SRC_EBS_CSI_TABLE = (
    "EC2 DescribeInstanceTypes (instance-storage-supported=true), as generated into "
    "aws-ebs-csi-driver's instance-store table (pkg/cloud/volume_limits.go, 2025-09-10)"
)
_SRC_EC2_NAMING = (
    "EC2 instance type naming: the 'd' option marks instance store volumes (m5d, c5d, ...); "
    "absent from the instance-store table generated from DescribeInstanceTypes "
    "(aws-ebs-csi-driver, 2025-09-10)"
)
_UNCONFIRMED_NEWER = (
    "unconfirmed: newer than the instance-store data this project could read; assumed to have "
    "local NVMe storage like the other {family} sizes (the EC2 instance-store table, "
    "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html#ac_instance-store, is the "
    "authority). Assuming local storage is the safe side: KmsKeyId is then left off and the ML "
    "volume is still encrypted (by the instance's hardware module, or SageMaker's AWS managed "
    "key), while a wrong 'EBS-only' would make CreateEndpointConfig fail"
)

# Per family: (has local NVMe instance storage, source). Every family of CATALOGUE has an entry (a
# test checks).
LOCAL_STORAGE: dict[str, tuple[bool, str]] = {
    "g4dn": (True, f"{_SRC_SAGEMAKER_NVME}; {_SRC_EBS_CSI_TABLE}"),
    "g5": (True, f"{_SRC_SAGEMAKER_NVME}; {_SRC_EC2_G5}; {_SRC_EBS_CSI_TABLE}"),
    "g6": (True, _SRC_EBS_CSI_TABLE),
    "g6e": (True, _SRC_EBS_CSI_TABLE),
    "g7e": (True, _UNCONFIRMED_NEWER.format(family="G6e")),
    "g7": (True, _UNCONFIRMED_NEWER.format(family="G6")),
    "p4d": (True, f"{_SRC_SAGEMAKER_NVME}; {_SRC_EBS_CSI_TABLE}"),
    "p4de": (True, _SRC_EBS_CSI_TABLE),
    "p5": (
        True,
        f"{_SRC_EBS_CSI_TABLE} (p5.48xlarge); p5.4xlarge: "
        + _UNCONFIRMED_NEWER.format(family="P5"),
    ),
    "p5e": (True, _SRC_EBS_CSI_TABLE),
    "p5en": (True, _SRC_EBS_CSI_TABLE),
    "m5": (False, _SRC_EC2_NAMING),
    "c5": (False, f"{_SRC_SAGEMAKER_EBS}; {_SRC_EC2_NAMING}"),
    "m7i": (False, _SRC_EC2_NAMING),
    "c7i": (False, _SRC_EC2_NAMING),
}


def _family(
    family: str, gpu_model: str, gpu_memory_gib: float, sizes: dict[str, tuple[int, int]]
) -> dict[str, InstanceSpec]:
    """Build the specs of one family from ``{size: (vcpus, gpus)}`` and its :data:`LOCAL_STORAGE`
    entry."""
    local, source = LOCAL_STORAGE[family]
    return {
        f"ml.{family}.{size}": InstanceSpec(
            f"ml.{family}.{size}", vcpus, gpus, gpu_memory_gib, gpu_model, local, source
        )
        for size, (vcpus, gpus) in sizes.items()
    }


# G4dn, G5, G6 and G6e share one size layout: 1 GPU up to 16xlarge except 12xlarge (4), 24xlarge
# (4), 48xlarge (8).
_G_LAYOUT = {
    "xlarge": (4, 1),
    "2xlarge": (8, 1),
    "4xlarge": (16, 1),
    "8xlarge": (32, 1),
    "16xlarge": (64, 1),
    "12xlarge": (48, 4),
    "24xlarge": (96, 4),
    "48xlarge": (192, 8),
}
# G7e and G7 start at 2xlarge: 1 GPU up to 8xlarge, then 12xlarge (2), 24xlarge (4), 48xlarge (8).
_G7_LAYOUT = {
    "2xlarge": (8, 1),
    "4xlarge": (16, 1),
    "8xlarge": (32, 1),
    "12xlarge": (48, 2),
    "24xlarge": (96, 4),
    "48xlarge": (192, 8),
}
_G4DN_LAYOUT = {
    size: spec for size, spec in _G_LAYOUT.items() if size not in ("24xlarge", "48xlarge")
}
_CPU_LAYOUT = {
    "large": (2, 0),
    "xlarge": (4, 0),
    "2xlarge": (8, 0),
    "4xlarge": (16, 0),
    "12xlarge": (48, 0),
    "24xlarge": (96, 0),
}

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
    **_family(
        "c5",
        "none",
        0,
        {size: _CPU_LAYOUT[size] for size in ("large", "xlarge", "2xlarge", "4xlarge")}
        | {"9xlarge": (36, 0), "18xlarge": (72, 0)},
    ),
    **_family("m7i", "none", 0, _CPU_LAYOUT),
    **_family("c7i", "none", 0, _CPU_LAYOUT),
}


@functools.cache
def sagemaker_instance_types() -> frozenset[str]:
    """Every ProductionVariant instance type SageMaker accepts: the
    ``ProductionVariantInstanceType`` enum of the SageMaker API model shipped with botocore (the
    authority for "is this a SageMaker instance type")."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)


def lookup(instance_type: str) -> InstanceSpec | None:
    """Return the spec of ``instance_type`` (e.g. ``ml.g6.4xlarge``), or ``None`` when the catalogue
    lacks it."""
    return CATALOGUE.get(instance_type)


def has_local_storage(instance_type: str) -> bool | None:
    """Whether ``instance_type`` (e.g. ``ml.g6.4xlarge``) has local NVMe instance storage, or
    ``None`` when the catalogue does not know the type (the caller must then say so, never guess).

    Why it matters: CreateEndpointConfig, ``KmsKeyId``: "Certain Nitro-based instances include local
    storage ... Local storage volumes are encrypted using a hardware module on the instance. You
    can't request a KmsKeyId when using an instance type with local storage ... If you specify a
    value for KmsKeyId when using any nitro-based instances with local storage, the call to
    CreateEndpointConfig fails."
    """
    spec = lookup(instance_type)
    return None if spec is None else spec.local_storage


#: The rule behind :func:`volume_key_refusal`, with its source.
KMS_KEY_ID_RULE = (
    "CreateEndpointConfig API reference, KmsKeyId (https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
    "API_CreateEndpointConfig.html#sagemaker-CreateEndpointConfig-request-KmsKeyId): local "
    "storage volumes are "
    "encrypted by a hardware module on the instance; \"You can't request a KmsKeyId when "
    "using an instance type with "
    'local storage", and CreateEndpointConfig fails if one is given'
)


def local_storage_types(instance_types: Sequence[str]) -> list[str]:
    """The types of ``instance_types`` that have local NVMe instance storage
    (:func:`has_local_storage`), in order, each once."""
    return [name for name in dict.fromkeys(instance_types) if has_local_storage(name)]


def unknown_storage_types(instance_types: Sequence[str]) -> list[str]:
    """The types of ``instance_types`` whose storage the catalogue does not know, in order, each
    once."""
    return [name for name in dict.fromkeys(instance_types) if has_local_storage(name) is None]


def volume_key_refusal(instance_types: Sequence[str]) -> str | None:
    """Why an EndpointConfig whose variant may run ``instance_types`` (its instance type, or each of
    its instance pools) must not set ``KmsKeyId``: a sentence naming the types with local storage,
    the rule (:data:`KMS_KEY_ID_RULE`) and where each type's fact comes from; ``None`` when none of
    them has local storage (every type EBS-backed, or unknown to the catalogue: see
    :func:`unknown_storage_types`)."""
    local = local_storage_types(instance_types)
    if not local:
        return None
    facts = "; ".join(f"{name}: {CATALOGUE[name].local_storage_source}" for name in local)
    return (
        f"KmsKeyId is left off: {', '.join(local)} {'has' if len(local) == 1 else 'have'} local "
        "NVMe instance storage, which the instance encrypts with its own hardware key "
        f"(XTS-AES-256, EC2 User Guide, 'SSD instance store volumes'). {KMS_KEY_ID_RULE}. "
        f"Instance storage facts: {facts}."
    )


def alarm_capacity(instance_types: Sequence[str]) -> tuple[int, int]:
    """``(GPUs, vCPUs)`` that utilisation alarm thresholds scale by, for a variant that may run any
    of ``instance_types`` (its instance pools): the fewest GPUs and the fewest vCPUs among them.

    Why the fewest: SageMaker reports ``GPUUtilization`` of an instance from 0 to 100 x its GPUs
    (``CPUUtilization`` likewise per vCPU), so instances of pools with different counts report on
    different scales. A threshold of percent x the fewest is exactly the percent asked for on the
    smallest type and fires earlier (at a lower share of capacity) on a larger one: an early page at
    worst. Percent x the most would be a level an instance of the smallest type can never reach: an
    alarm that stays silent while it saturates. Pools of equal counts change nothing.

    Raises:
        ValueError: ``instance_types`` is empty, or one of them is not in the catalogue.
    """
    specs = [lookup(name) for name in instance_types]
    missing = [name for name, spec in zip(instance_types, specs, strict=True) if spec is None]
    if not specs or missing:
        raise ValueError(
            f"instance types {list(missing or instance_types)!r}: not in "
            "constructs_lib/facts/instance_types.py"
        )
    known = [spec for spec in specs if spec is not None]  # every one, past the check above
    return min(spec.gpus for spec in known), min(spec.vcpus for spec in known)


def gpu_families() -> str:
    """The GPU families of the catalogue, for messages: ``ml.g4dn.*, ml.g5.*, ...``."""
    return ", ".join(sorted({f"ml.{spec.family}.*" for spec in CATALOGUE.values() if spec.gpus}))


def is_instance_type(value: str) -> bool:
    """Whether ``value`` is a SageMaker real-time instance type: of the form ``ml.<family>.<size>``
    and, where botocore is installed, one of the ProductionVariant types of its SageMaker API model
    (:func:`sagemaker_instance_types`)."""
    try:
        known = sagemaker_instance_types()
    except ImportError:  # botocore is optional for the constructs: the form alone is checked then
        known = None
    return bool(INSTANCE_TYPE_PATTERN.match(value)) and (known is None or value in known)


def check_instance_type(p: Problems, prop: str, value: str) -> None:
    """A SageMaker real-time instance type (:func:`is_instance_type`)."""
    if not is_instance_type(value):
        p.add(
            prop,
            value,
            "not a SageMaker real-time instance type (expected one of SageMaker's "
            "ProductionVariant types of the form 'ml.<family>.<size>', e.g. 'ml.g6.4xlarge')",
        )


def check_catalogued(p: Problems, prop: str, value: str) -> InstanceSpec | None:
    """The spec of ``value``, or None after recording that the catalogue lacks it (the alarms need
    its GPUs and vCPUs). Meant for a value that passed :func:`check_instance_type`."""
    spec = lookup(value)
    if spec is None:
        p.add(
            prop,
            value,
            "a SageMaker instance type without vCPU and GPU facts in "
            "constructs_lib/facts/instance_types.py; add it there or choose one of the GPU "
            f"types {gpu_families()}",
        )
    return spec
