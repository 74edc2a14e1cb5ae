"""``sonic.*``: text to speech, Cartesia Sonic 3.6 from its AWS Marketplace model package (or, with
``target=ecs``, the container a Cartesia licence provides). The keys, and the rules of this app for
them: the package's instance types and Region, and on ECS the licensed image, its port and health
path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from config.context import setting
from config.endpoint import EndpointSettings
from config.models import (
    SONIC_EXTRA_INSTANCE_TYPES,
    SONIC_INSTANCE_FAMILIES,
    SONIC_MODEL_PACKAGES,
    SONIC_SCALING_METRICS,
)
from constructs_lib.ecs_service.props import (
    GpuCapacity,
    LoadBalancing,
    check_container_port,
    check_gpu_instance_type,
    check_health_path,
)
from constructs_lib.facts.names import ECR_IMAGE_RE, check_model_package_arn, check_regional_arn
from constructs_lib.sagemaker_endpoint.scaling_props import check_target_value
from constructs_lib.validation import Problems, show

if TYPE_CHECKING:
    from config.ecs import EcsSettings
    from config.settings import Settings


@dataclass(frozen=True)
class SonicSettings(EndpointSettings):
    """Text to speech: Cartesia Sonic 3.6 from its AWS Marketplace model package. No rollout
    keys: Marketplace containers are excluded from SageMaker's deployment guardrails
    ("Exclusions" in the SageMaker developer guide)."""

    endpoint_name: str = "sonic-tts"
    #: An instance type the Marketplace package supports: ml.g6e.xlarge or larger, ml.g7e.2xlarge or
    #: larger, ml.g7.2xlarge or larger, ml.p5.48xlarge, ml.p5en.48xlarge.
    instance_type: str = "ml.g6e.2xlarge"
    #: The Sonic model package (in the stack's Region); None = the package of the stack's Region
    #: from SONIC_MODEL_PACKAGES (us-east-1 only: required in any other Region).
    model_package_arn: str | None = None
    container_startup_timeout_s: int = 900
    #: What target tracking holds per instance: invocations per minute, or requests in flight (the
    #: high-resolution ConcurrentRequestsPerModel).
    scaling_metric: Literal[tuple(SONIC_SCALING_METRICS)] = "invocations_per_instance"  # pyright: ignore[reportInvalidTypeForm] (the parser reads the choices from it)
    #: Target per instance: invocations per minute, or concurrent requests, depending on
    #: scaling_metric.
    target_value: float = setting(60.0, key="scaling_target")
    model_latency_p90_ms: float = 3000.0
    #: Where Sonic runs: a SageMaker endpoint from the Marketplace model package, or an ECS service
    #: of the container a Cartesia licence provides (sonic.image_uri; docs/ecs.md, "Sonic on ECS").
    target: Literal["sagemaker", "ecs"] = "sagemaker"
    #: With target=ecs (required then): the licensed Sonic container in ECR (it is not public).
    image_uri: str | None = None
    #: With target=ecs: the port the container serves on (1-65535).
    container_port: int = 8080
    #: With target=ecs: the readiness path (200 = can serve): starts with /, no query.
    health_path: str = "/ping"
    #: With target=ecs: EC2 instance type with an NVIDIA GPU (no ``ml.``); one task per GPU. The
    #: task range is min_instances-max_instances; Spot, placement, root volume and certificate are
    #: the ecs.* settings.
    ecs_instance_type: str = "g6e.xlarge"

    def app_problems(self, p: Problems, settings: Settings) -> None:
        region = settings.region
        if self.target == "ecs":
            self._ecs_problems(p, region)
            return
        for key, spec in self.instance_specs(p):
            if spec.family in SONIC_INSTANCE_FAMILIES or spec.name in SONIC_EXTRA_INSTANCE_TYPES:
                continue
            p.add(
                key,
                spec.name,
                "the Sonic 3.6 model package supports ml.g6e.xlarge or larger, ml.g7e.2xlarge or "
                "larger, ml.g7.2xlarge or larger, ml.p5.48xlarge and ml.p5en.48xlarge",
            )
        if self.model_package_arn is None:
            if region not in SONIC_MODEL_PACKAGES:
                known = ", ".join(SONIC_MODEL_PACKAGES)
                p.note(
                    f"{p.ref('model_package_arn', None)} with region={show(region)}: the Sonic "
                    f"model package ARN is known only for {known}; set "
                    "sonic.model_package_arn to the ARN from the Marketplace listing for your "
                    "region, or set sonic.enabled=false"
                )
        else:
            check_model_package_arn(p, "model_package_arn", self.model_package_arn, region)
        check_target_value(
            p,
            "target_value",
            self.target_value,
            "per instance: invocations per minute, or concurrent requests",
        )

    def _ecs_problems(self, p: Problems, region: str) -> None:
        """Sonic on ECS: the licensed image, its port and health path, a GPU instance type,
        requests-based scaling. The Marketplace package and its instance families do not apply."""
        if self.image_uri is None:
            p.add(
                "image_uri",
                None,
                "must be set with sonic.target='ecs': the Sonic container your Cartesia licence "
                "provides, in ECR (it is not public; README 'Sonic on ECS')",
            )
        else:
            check_regional_arn(
                p,
                "image_uri",
                self.image_uri,
                ECR_IMAGE_RE,
                "a private ECR image "
                "'<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>' or "
                "'...@sha256:<digest>' (copy the licensed image into your account's "
                "ECR)",
                region,
                "image",
                "; the tasks pull it through the Region's ECR endpoints",
            )
        check_container_port(p, "container_port", self.container_port)
        check_health_path(p, "health_path", self.health_path)
        check_gpu_instance_type(p, "ecs_instance_type", self.ecs_instance_type)
        if self.scaling_metric != "invocations_per_instance":
            p.add(
                "scaling_metric",
                self.scaling_metric,
                "must be 'invocations_per_instance' with sonic.target='ecs' (the load balancer's "
                "requests per task per minute; it has no count of requests in flight)",
            )
        check_target_value(p, "target_value", self.target_value, "requests per task per minute")

    def ecs_capacity(self, ecs: EcsSettings) -> GpuCapacity:
        """The GPU capacity of Sonic's ECS service: its own instance type and task range, the
        shared ecs.* rest."""
        return ecs.props(
            GpuCapacity,
            instance_type=self.ecs_instance_type,
            min_tasks=self.min_capacity,
            max_tasks=self.max_capacity,
        )

    def ecs_load_balancing(self, ecs: EcsSettings) -> LoadBalancing:
        """Always internal, with ecs.certificate_arn for HTTPS: the bearer token is checked by
        our bridge, which Sonic's container does not have, so its load balancer takes callers
        from the caller CIDRs only."""
        return LoadBalancing(
            internet_facing=False, certificate_arn=ecs.certificate_arn, require_token=False
        )
