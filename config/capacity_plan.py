"""The capacity plan of the Voxtral service: for each instance type it may run, what the capacity
model (:mod:`constructs_lib.facts.capacity`) says one GPU serves at the settings, and the stream cap
that type runs with.

:func:`load_settings <config.settings.load_settings>` computes it once, as
:attr:`Settings.capacity_plan <config.settings.Settings.capacity_plan>`; the settings' checks, the
stacks (vLLM's ``--max-num-seqs``, the bridge's cap and KV-cache check, scaling, alarms, the
dashboard, the synth warning) and ``voicectl`` (``cost``, ``capacity``) read it, so no two of them
size the service apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from constructs_lib.facts import capacity, instance_types
from constructs_lib.validation import show

if TYPE_CHECKING:
    from config.voxtral import VoxtralSettings


@dataclass(frozen=True)
class TypePlan:
    """One instance type the service may run.

    Attributes:
        instance_type: SageMaker's spelling (``ml.g6.xlarge``); on the ECS target ``ml.`` and the
            EC2 type (the same hardware).
        capacity: the capacity model's answer for one GPU of the type, or None when the model
            cannot answer (not a GPU type of the catalogue, or ``max_model_len``,
            ``gpu_memory_utilization`` or ``kv_cache_dtype`` out of its range: their own problems
            say why).
        stream_cap: the type's live streams per instance: ``voxtral.max_num_seqs``, or what
            ``auto`` resolves to for its GPU (at least 1; a GPU that holds no stream is a problem
            of its own).
    """

    instance_type: str
    capacity: capacity.Capacity | None
    stream_cap: int


def size(voxtral: VoxtralSettings, instance_type: str) -> TypePlan:
    """The plan of one instance type (SageMaker spelling) at ``voxtral``'s settings."""
    spec = instance_types.lookup(instance_type)
    fitted = None
    answerable = (
        voxtral.max_model_len >= 1
        and 0 < voxtral.gpu_memory_utilization <= 1
        and voxtral.kv_cache_dtype in capacity.KV_CACHE_DTYPE_BYTES
    )
    if spec is not None and spec.gpus and answerable:
        fitted = capacity.fit(
            spec,
            voxtral.max_model_len,
            voxtral.gpu_memory_utilization,
            kv_cache_dtype=voxtral.kv_cache_dtype,
        )
    if voxtral.stream_cap != "auto":
        cap = voxtral.stream_cap
    else:
        cap = max(1, fitted.streams) if fitted is not None else 1
    return TypePlan(instance_type, fitted, cap)


@dataclass(frozen=True)
class CapacityPlan:
    """What the Voxtral service serves per instance, by instance type.

    Attributes:
        types: every instance type the service may run, in priority order, once each: with
            ``target=ecs`` the ECS instance type; else ``instance_type``, or each of
            ``instance_pools`` (each pool type whose cap differs runs a Model of its own:
            InstancePool ModelNameOverride).
        target_fraction: ``voxtral.scaling_target_fraction``.
        warning: the synth warning of an explicit ``max_num_seqs`` above the compute cap, or None.
    """

    types: tuple[TypePlan, ...]
    target_fraction: float
    warning: str | None = None

    def of(self, instance_type: str) -> TypePlan:
        """The plan of ``instance_type``, one of :attr:`types`."""
        for planned in self.types:
            if planned.instance_type == instance_type:
                return planned
        raise KeyError(
            f"{instance_type!r} is not an instance type of the plan "
            f"({', '.join(t.instance_type for t in self.types)})"
        )

    @property
    def first(self) -> TypePlan:
        """The plan of the type tried first (the variant's Model runs at its cap)."""
        return self.types[0]

    @property
    def stream_caps(self) -> dict[str, int]:
        """``{instance type: stream cap}`` in priority order."""
        return {t.instance_type: t.stream_cap for t in self.types}

    @property
    def streams_per_instance(self) -> int:
        """The smallest stream cap among the types: the cap of the one type, and with instance pools
        what the autoscaling target and the ActiveStreams alarm are sized by when they count streams
        (each pool's vLLM has its own cap)."""
        return min(self.stream_caps.values(), default=1)

    @property
    def caps_differ(self) -> bool:
        """Whether the types have different stream caps (instance pools of different GPUs)."""
        return len(set(self.stream_caps.values())) > 1

    @property
    def streams_target(self) -> float:
        """Live streams per instance autoscaling keeps: a fraction of the stream cap (with caps that
        differ, of the smallest; the autoscaling then tracks :attr:`stream_cap_used_target`)."""
        return self.target_fraction * self.streams_per_instance

    @property
    def stream_cap_used_target(self) -> float:
        """Percent of each instance's own stream cap autoscaling keeps (the bridge's StreamCapUsed):
        what it tracks when the caps differ, so every GPU is filled to the same share of what it
        serves."""
        return round(self.target_fraction * 100, 6)

    @property
    def smallest(self) -> capacity.Capacity | None:
        """The capacity model's answer for the type that serves the fewest streams, or None when it
        answers for none."""
        fits = [t.capacity for t in self.types if t.capacity is not None]
        return min(fits, key=lambda c: c.streams, default=None)


def sizing_types(voxtral: VoxtralSettings, ecs_instance_type: str) -> list[str]:
    """The instance types (SageMaker spelling) whose GPU sizes the stream cap, once each: with
    ``target=ecs`` the ECS instance type (``ecs.instance_type`` as ``ml.<type>``: the same
    hardware), else ``instance_type`` or each of ``instance_pools``."""
    if voxtral.target == "ecs":
        return [f"ml.{ecs_instance_type}"]
    return list(dict.fromkeys(voxtral.instance_pools or [voxtral.instance_type]))


def plan_capacity(voxtral: VoxtralSettings, ecs_instance_type: str) -> CapacityPlan:
    """The plan of ``voxtral``'s settings (``ecs_instance_type``: ``ecs.instance_type``, which sizes
    the service with ``target=ecs``)."""
    types = tuple(size(voxtral, name) for name in sizing_types(voxtral, ecs_instance_type))
    plan = CapacityPlan(types, voxtral.scaling_target_fraction)
    warning = _stream_cap_warning(voxtral, plan.smallest, ecs_instance_type)
    return dataclasses.replace(plan, warning=warning)


def _stream_cap_warning(
    voxtral: VoxtralSettings, fitted: capacity.Capacity | None, ecs_instance_type: str
) -> str | None:
    """A warning when an explicit ``max_num_seqs`` is above the compute cap of the GPU that sizes it
    (the KV cache holds the streams, but one GPU likely cannot decode that many in real time: every
    stream then falls behind), or None. Not an error: the compute cap is an estimate
    (constructs_lib/facts/capacity.py; measure with bench/capacity_bench.py). The Voxtral stacks
    print it as a CDK warning at synth."""
    asked = voxtral.stream_cap
    if asked == "auto" or fitted is None or fitted.compute_cap is None:
        return None
    if asked <= fitted.compute_cap:
        return None
    where = (
        f"ecs.instance_type={show(ecs_instance_type)}"
        if voxtral.target == "ecs"
        else f"instance type {show(fitted.instance_type)}"
    )
    return (
        f"voxtral.max_num_seqs={asked} is above the compute cap of one {fitted.gpu.name} "
        f"({where}): the capacity model estimates it decodes at most {fitted.compute_cap} live "
        f"stream(s) of max_model_len={voxtral.max_model_len} in real time, so streams may fall "
        "behind under full load; set voxtral.max_num_seqs=auto, or measure with "
        "bench/capacity_bench.py (README 'Capacity')"
    )
