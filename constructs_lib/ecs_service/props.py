"""Props of the self-managed GPU service on Amazon ECS (:mod:`constructs_lib.ecs_service.service`),
with their checks, and the timing rules that tie the load balancer and ECS to the bridge's own
timeouts.

Plain values; CDK-free (no ``aws_cdk`` import), so the app's settings layer runs the same checks
before any construct is built, naming each problem after its settings key.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from constructs_lib.facts import instance_types
from constructs_lib.facts.names import check_regional_arn
from constructs_lib.validation import Problems

#: An EC2 instance type name, ``<family>.<size>`` (no ``ml.`` prefix: that is SageMaker's spelling).
EC2_INSTANCE_TYPE_RE = re.compile(
    r"[a-z][a-z0-9-]*\.(\d*x?large|medium|small|micro|nano|metal(-\d+xl)?)"
)
#: An ACM certificate ARN (ACM user guide, "Certificate ARN"): what an HTTPS listener takes.
CERTIFICATE_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)

#: Ports a container may listen on behind the load balancer: any TCP port. With ``awsvpc``
#: networking each task has its own network interface, so the ports ECS reserves on the host (22,
#: 2375-2376, 51678-51680: ECS API reference, ContainerDefinition ``portMappings``) do not apply
#: (Amazon ECS developer guide, "Amazon ECS task networking").
CONTAINER_PORT_RANGE = (1, 65535)
#: A health check path of the load balancer: an absolute URL path of RFC 3986 path characters, at
#: most 1024 of them (Elastic Load Balancing API reference, CreateTargetGroup ``HealthCheckPath``:
#: 1-1024 characters).
HEALTH_PATH_RE = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,1023}")

#: Longest stopTimeout we set. ECS API reference, ContainerDefinition ``stopTimeout``: "For tasks
#: that use the Fargate launch type, the max stop timeout value is 120 seconds"; on the EC2 launch
#: type the value is passed to the agent (default ECS_CONTAINER_STOP_TIMEOUT, 30 s). We keep within
#: 120 s on EC2 too, so the task definition would run on either and a stuck task never holds a GPU
#: for long.
ECS_MAX_STOP_TIMEOUT_S = 120
#: Seconds the bridge may take past DRAIN_S to close its streams and stop vLLM
#: (container/bridge/entrypoint.py: BRIDGE_EXIT_GRACE_S 3 s + VLLM_STOP_TIMEOUT_S 5 s, rounded up).
BRIDGE_EXIT_AFTER_DRAIN_S = 10
#: ALB idle timeout range (Elastic Load Balancing, "Connection idle timeout": 1-4000 s).
ALB_IDLE_TIMEOUT_RANGE_S = (1, 4000)
#: Margin of the load balancer's idle timeout over the bridge's: the bridge must be the one that
#: ends an idle session (with its in-band ``idle_timeout`` error and a close frame); if the load
#: balancer cut first, the caller would see a bare TCP reset.
IDLE_TIMEOUT_MARGIN_S = 10


def stop_timeout_s(drain_s: float) -> int:
    """The container's stopTimeout: the bridge's drain plus the time it takes to exit afterwards,
    capped by ECS.

    Raises:
        ValueError: the drain does not fit below ECS's cap (:data:`ECS_MAX_STOP_TIMEOUT_S`).
    """
    needed = math.ceil(drain_s) + BRIDGE_EXIT_AFTER_DRAIN_S
    if needed > ECS_MAX_STOP_TIMEOUT_S:
        raise ValueError(
            f"a drain of {drain_s:g} s needs a stopTimeout of {needed} s; ECS allows at most "
            f"{ECS_MAX_STOP_TIMEOUT_S} s"
        )
    return needed


def alb_idle_timeout_s(bridge_idle_timeout_s: float) -> int:
    """The load balancer's idle timeout: the bridge's idle timeout plus
    :data:`IDLE_TIMEOUT_MARGIN_S`, so that the bridge, not the load balancer, ends a silent session
    (a WebSocket stays one connection to the ALB; its idle clock counts seconds without a byte
    either way; the bridge's counts seconds without a client frame).

    This is the reverse of the ALB guide's advice against 502s ("configure the idle timeout of your
    application to be larger than the idle timeout configured for the load balancer", "Connection
    idle timeout"), on purpose: that 502 is a race on a kept-alive connection the target closes
    while the load balancer sends it the next request. The bridge keeps no connection for reuse: it
    answers every plain request with ``Connection: close`` and closes, and an upgraded WebSocket
    carries one session only (tests/unit/constructs_lib/ecs_service/test_props.py shows it over real
    sockets), so no request can meet that race."""
    return math.ceil(bridge_idle_timeout_s) + IDLE_TIMEOUT_MARGIN_S


def deregistration_delay_s(drain_s: float) -> int:
    """The target group's deregistration delay: as long as the bridge's drain, rounded up. ECS
    deregisters a task before it stops it; during the delay the ALB keeps the task's open WebSockets
    and sends it no new ones, and ECS sends SIGTERM only after the delay (Amazon ECS developer
    guide, "Load balancer ... deregistration delay"). A longer delay only postpones the drain; the
    bridge's own drain then ends the streams left."""
    return math.ceil(drain_s)


@functools.cache
def ec2_instance_types() -> frozenset[str]:
    """Every EC2 instance type: the ``InstanceType`` enum of the EC2 API model shipped with
    botocore."""
    import botocore.session

    return frozenset(
        botocore.session.get_session().get_service_model("ec2").shape_for("InstanceType").enum
    )


def gpu_spec(instance_type: str) -> instance_types.InstanceSpec | None:
    """The GPU facts of an EC2 type from the catalogue of :mod:`constructs_lib.facts.instance_types`
    (the same hardware as SageMaker's ``ml.<type>``), or None when it has none."""
    spec = instance_types.lookup(f"ml.{instance_type}")
    return spec if spec is not None and spec.gpus else None


def check_gpu_instance_type(
    p: Problems, prop: str, value: str
) -> instance_types.InstanceSpec | None:
    """An EC2 instance type with an NVIDIA GPU the catalogue knows (g4dn, g5, g6, g6e, g7, g7e, p4d,
    p5...); returns its spec, or None after recording the problem."""
    families = instance_types.gpu_families().replace("ml.", "")
    if value.startswith("ml."):
        p.add(prop, value, f"must be an EC2 instance type without 'ml.' (e.g. {value[3:]!r})")
        return None
    try:
        known = ec2_instance_types()
    except ImportError:  # botocore is optional for the constructs: the form alone is checked then
        known = None
    if not EC2_INSTANCE_TYPE_RE.fullmatch(value) or (known is not None and value not in known):
        p.add(
            prop,
            value,
            f"not an EC2 instance type (expected '<family>.<size>', e.g. 'g6.xlarge'; GPU types: "
            f"{families})",
        )
        return None
    spec = gpu_spec(value)
    if spec is None:
        family = value.split(".", 1)[0]
        if family in ("g5g", "g6f"):  # NVIDIA, but an Arm host (T4G) or a fraction of an L4
            p.add(
                prop,
                value,
                "has an NVIDIA GPU this target cannot use: the ECS GPU AMI is x86_64 and each "
                "task takes one whole GPU (Arm hosts and fractional GPUs are not supported; GPU "
                f"types: {families})",
            )
        else:
            p.add(
                prop,
                value,
                "has no NVIDIA GPU (the ECS GPU AMI and the model servers need one; NVIDIA GPU "
                f"types: {families})",
            )
    return spec


def check_container_port(p: Problems, prop: str, value: int) -> None:
    """A TCP port the container listens on (:data:`CONTAINER_PORT_RANGE`)."""
    low, high = CONTAINER_PORT_RANGE
    if not low <= value <= high:
        p.add(
            prop,
            value,
            f"must be a TCP port {low}-{high} (the port the container listens on; with awsvpc "
            "networking every port of the task's own interface is free)",
        )


def check_health_path(p: Problems, prop: str, value: str) -> None:
    """A load balancer health check path (:data:`HEALTH_PATH_RE`): starts with '/', no query, no
    spaces."""
    if not HEALTH_PATH_RE.fullmatch(value):
        p.add(
            prop,
            value,
            "must be a URL path starting with '/' (e.g. '/ping'), at most 1024 characters, without "
            "spaces or a query string ('?')",
        )


def check_root_volume_gib(p: Problems, prop: str, value: int) -> None:
    """The instances' gp3 root volume: 30-16384 GiB (gp3's maximum; the image and the weights' copy
    need ~30)."""
    if not 30 <= value <= 16384:
        p.add(prop, value, "must be 30-16384 GiB (gp3; the image and weights need ~30)")


def check_certificate_arn(p: Problems, prop: str, value: str, region: str | None) -> None:
    """An ACM certificate ARN in ``region`` (a load balancer's listener takes a certificate of its
    own Region)."""
    check_regional_arn(
        p,
        prop,
        value,
        CERTIFICATE_ARN_RE,
        "an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)",
        region,
        "certificate",
        "; a load balancer uses a certificate of its own region",
    )


@dataclass(frozen=True)
class GpuCapacity:
    """The EC2 GPU capacity of an ECS cluster and the task count of its service.

    Attributes:
        instance_type: EC2 type with an NVIDIA GPU, e.g. ``g6.xlarge`` (required). One task per GPU.
        spot: Spot instances instead of On-Demand. Default False.
        min_tasks / max_tasks: service task range (one GPU each). Defaults 2 and 4: two tasks, so a
            task can be replaced while the other serves.
        single_az: all instances in one Availability Zone, in a cluster placement group (lowest
            latency between them; no zone redundancy). Default False: spread over the VPC's zones.
        root_volume_gib: encrypted gp3 root volume of each instance (the image, ~20 GB, and the
            weights' host copy, ~9 GB). Default 200.
    """

    instance_type: str
    spot: bool = False
    min_tasks: int = 2
    max_tasks: int = 4
    single_az: bool = False
    root_volume_gib: int = 200

    @property
    def gpus_per_instance(self) -> int:
        spec = gpu_spec(self.instance_type)
        return spec.gpus if spec is not None else 1

    @property
    def max_instances(self) -> int:
        """Instances the Auto Scaling group may hold: enough for ``max_tasks`` at one GPU each, plus
        one so a rolling deployment can place a new task before an old one stops."""
        return math.ceil(self.max_tasks / self.gpus_per_instance) + 1

    def problems(self, p: Problems) -> None:
        check_gpu_instance_type(p, "instance_type", self.instance_type)
        if self.min_tasks < 1:
            p.add(
                "min_tasks",
                self.min_tasks,
                "must be at least 1 (2 or more keeps serving while a task is replaced)",
            )
        elif self.max_tasks < self.min_tasks:
            p.add(
                "max_tasks",
                self.max_tasks,
                f"must be at least {p.ref('min_tasks', self.min_tasks)}",
            )
        check_root_volume_gib(p, "root_volume_gib", self.root_volume_gib)


@dataclass(frozen=True)
class LoadBalancing:
    """How callers reach the service: an Application Load Balancer in front of the bridge.

    Attributes:
        internet_facing: an internet-facing load balancer in public subnets. Default False:
            internal, reachable from the VPC (and what is peered or connected to it) only.
        certificate_arn: ACM certificate for an HTTPS listener on 443. Required when
            internet-facing; optional when internal (then HTTP on 80 inside the VPC). Default None.
        require_token: callers send ``Authorization: Bearer <token>``; the token is a Secrets
            Manager secret the construct creates and ECS injects into the task. Required when
            internet-facing. Default True.
    """

    internet_facing: bool = False
    certificate_arn: str | None = None
    require_token: bool = True

    @property
    def https(self) -> bool:
        return self.certificate_arn is not None

    def problems(self, p: Problems, region: str | None = None) -> None:
        if self.certificate_arn is not None:
            check_certificate_arn(p, "certificate_arn", self.certificate_arn, region)
        if self.internet_facing and self.certificate_arn is None:
            p.add(
                "certificate_arn",
                None,
                f"must be set when {p.ref('internet_facing', True)}: an internet-facing "
                "load balancer listens on HTTPS only (the token must not cross the "
                "internet in clear text)",
            )
        if self.internet_facing and not self.require_token:
            p.add(
                "require_token",
                False,
                f"must be true when {p.ref('internet_facing', True)}: without SigV4 the "
                "bearer token is what keeps strangers off the GPUs",
            )
