"""``ecs.*``: the self-managed GPU target (``voxtral.target=ecs``; Sonic on ECS shares part of it).
Its fields are those of the props :class:`GpuCapacity` and :class:`LoadBalancing`; where users write
a choice for a boolean of the props (``ecs.capacity``: ``on_demand`` or ``spot`` for ``spot``), the
field lists the spellings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.context import setting
from config.section import Section
from constructs_lib.ecs_service.props import (
    GpuCapacity,
    LoadBalancing,
    check_certificate_arn,
    check_root_volume_gib,
    gpu_spec as ecs_gpu_spec,
)
from constructs_lib.facts import capacity
from constructs_lib.validation import show

if TYPE_CHECKING:
    from config.settings import Settings


@dataclass(frozen=True)
class EcsSettings(Section):
    """The self-managed GPU target (``voxtral.target=ecs``): an ECS service on EC2 GPU instances
    behind an Application Load Balancer. Used only by a section whose target is ``ecs``."""

    #: EC2 instance type with an NVIDIA GPU (no ``ml.``): g6.xlarge ... g6e.*; one task per GPU.
    instance_type: str = "g6.xlarge"
    #: On-Demand or Spot instances.
    spot: bool = setting(
        key="capacity", choices={"on_demand": False, "spot": True}, default_from=GpuCapacity
    )
    #: Service task range; at least two by default, so one task serves while another is replaced.
    min_tasks: int = setting(default_from=GpuCapacity)
    #: Service task maximum (at least min_tasks).
    max_tasks: int = setting(default_from=GpuCapacity)
    #: ``multi_az`` spreads instances over the VPC's zones; ``single_az`` puts them in one zone in a
    #: cluster placement group (shortest network path, no zone redundancy).
    single_az: bool = setting(
        key="placement", choices={"multi_az": False, "single_az": True}, default_from=GpuCapacity
    )
    #: Encrypted gp3 root volume of each instance, GiB (the image and the weights' host copy).
    root_volume_gib: int = setting(default_from=GpuCapacity)
    #: ``internet_facing`` needs certificate_arn and require_token=true, and public network mode.
    internet_facing: bool = setting(
        key="load_balancer",
        choices={"internal": False, "internet_facing": True},
        default_from=LoadBalancing,
    )
    #: ACM certificate for an HTTPS listener; required for an internet-facing load balancer.
    certificate_arn: str | None = setting(default_from=LoadBalancing)
    #: Callers send a bearer token (a Secrets Manager secret the stack creates); required when
    #: internet-facing.
    require_token: bool = setting(default_from=LoadBalancing)

    def capacity_props(self) -> GpuCapacity:
        return self.props(GpuCapacity)

    def load_balancing(self) -> LoadBalancing:
        return self.props(LoadBalancing)

    def problems(self, settings: Settings) -> list[str]:
        """Every problem of the ECS settings with Voxtral on ECS, named ``ecs.<key>``; choices
        are shown as the settings spell them."""
        voxtral = settings.voxtral
        p = self.problems_named("ecs.")
        self.capacity_props().problems(p)
        self.load_balancing().problems(p, settings.region)
        spec = ecs_gpu_spec(self.instance_type)
        shown = f"ecs.instance_type={show(self.instance_type)}"
        if spec is not None and voxtral.kv_cache_dtype == "fp8":
            reason = capacity.fp8_kv_cache_problem(spec.gpu_model)
            if reason is not None:
                p.note(
                    f"voxtral.kv_cache_dtype='fp8' with {shown}: {reason}; set "
                    "voxtral.kv_cache_dtype=auto, or choose a Hopper GPU (p5.*)"
                )
        # The capacity model's answer for the ECS type (the plan's only type with target=ecs), when
        # the values it depends on are valid (else their own problems say why).
        plan = settings.capacity_plan
        fitted, streams = plan.first.capacity, plan.streams_per_instance
        if spec is not None and len(p) == 0 and fitted is not None and fitted.fit < streams:
            p.note(
                f"{shown} with voxtral.max_model_len={voxtral.max_model_len} and "
                f"voxtral.max_num_seqs={streams}: one {spec.gpu_model} ({spec.gpu_memory_gib:g} "
                f"GiB) holds the weights and KV cache for at most {fitted.fit} sequence(s) of "
                "that length; lower max_num_seqs or max_model_len, or choose a GPU with more "
                "memory"
            )
        return list(p)

    def shared_problems(self, settings: Settings) -> list[str]:
        """The ecs.* settings Sonic on ECS shares (root volume, certificate), when Voxtral does
        not run on ECS (else :meth:`problems` checks them)."""
        p = self.problems_named("ecs.")
        check_root_volume_gib(p, "root_volume_gib", self.root_volume_gib)
        if self.certificate_arn is not None:
            check_certificate_arn(p, "certificate_arn", self.certificate_arn, settings.region)
        return list(p)
