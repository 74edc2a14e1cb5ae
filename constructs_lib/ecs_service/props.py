"""Props of the self-managed GPU service on Amazon ECS, with their checks: the generic service's
(:class:`GpuEcsServiceProps`, :mod:`~constructs_lib.ecs_service.service`), the bridge add-on's
(:class:`GpuEcsServiceWithBridgeProps`, :mod:`~constructs_lib.ecs_service.bridge_service`), their
capacity and load balancing, and the timing rules that tie the load balancer and ECS to the
container's own timeouts.

CDK-free (no ``aws_cdk`` import; CDK types appear in annotations only), so the app's settings
layer runs the same checks before any construct is built, naming each problem after its settings
key.

Read in this order: the constants, the timing rules, the checks, :class:`GpuCapacity`,
:class:`LoadBalancing`, :class:`GpuEcsServiceProps`, :class:`GpuEcsServiceWithBridgeProps`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from constructs_lib.facts import instance_types
from constructs_lib.facts.names import check_regional_arn
from constructs_lib.network.props import check_cidr
from constructs_lib.sagemaker_endpoint.props import check_log_retention_days
from constructs_lib.validation import Problems
from contracts import realtime
from contracts.bridge_env import (
    DEFAULT_DRAIN_S,
    DEFAULT_IDLE_TIMEOUT_S,
    BridgeEnvError,
    BridgeEnvironment,
)

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2, aws_ecs as ecs, aws_s3 as s3, aws_sns as sns

    from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds

#: An EC2 instance type name, ``<family>.<size>`` (no ``ml.`` prefix: that is SageMaker's spelling).
EC2_INSTANCE_TYPE_RE = re.compile(
    r"[a-z][a-z0-9-]*\.(\d*x?large|medium|small|micro|nano|metal(-\d+xl)?)"
)
#: An ACM certificate ARN (ACM user guide, "Certificate ARN"): what an HTTPS listener takes.
CERTIFICATE_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
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

#: The bridge's port and health path (the SageMaker container contract the bridge implements:
#: contracts.realtime): the defaults of ``container_port`` and ``health_path``.
BRIDGE_PORT = realtime.CONTAINER_PORT
HEALTH_PATH = realtime.PING_PATH
#: The bridge's variables the add-on sets itself, from its props (and refuses in ``environment``):
#: where the weights are and their host copy, the service's name and variant (metric dimensions),
#: and the drain and idle timeout, which its stop timeout, load balancer and deregistration delay
#: are derived from.
OWN_BRIDGE_FIELDS = (
    "model_s3_uri",
    "model_cache_dir",
    "endpoint_name",
    "variant_name",
    "drain_s",
    "idle_timeout_s",
)
#: The GPU metrics' namespace with the bridge: the bridge's namespace and this suffix.
GPU_METRICS_NAMESPACE_SUFFIX = "/Gpu"

#: Longest stopTimeout we set. ECS API reference, ContainerDefinition ``stopTimeout``: "For tasks
#: that use the Fargate launch type, the max stop timeout value is 120 seconds"; on the EC2 launch
#: type the value is passed to the agent (default ECS_CONTAINER_STOP_TIMEOUT, 30 s). We keep within
#: 120 s on EC2 too, so the task definition would run on either and a stuck task never holds a GPU
#: for long.
ECS_MAX_STOP_TIMEOUT_S = 120
#: Seconds the bridge may take past DRAIN_S to close its streams and stop vLLM
#: (services/bridge/entrypoint.py: BRIDGE_EXIT_GRACE_S 3 s + VLLM_STOP_TIMEOUT_S 5 s, rounded up).
BRIDGE_EXIT_AFTER_DRAIN_S = 10
#: ALB idle timeout range (Elastic Load Balancing, "Connection idle timeout": 1-4000 s).
ALB_IDLE_TIMEOUT_RANGE_S = (1, 4000)
#: Margin of the load balancer's idle timeout over the bridge's: the bridge must be the one that
#: ends an idle session (with its in-band ``idle_timeout`` error and a close frame); if the load
#: balancer cut first, the caller would see a bare TCP reset.
IDLE_TIMEOUT_MARGIN_S = 10


# --- Timing rules --------------------------------------------------------------------------------


def stop_timeout_s(drain_s: float) -> int:
    """The container's stopTimeout: the bridge's drain plus the time it takes to exit afterwards,
    capped by ECS.

    Raises:
        ValueError: the drain does not fit below ECS's cap (:data:`ECS_MAX_STOP_TIMEOUT_S`).
    """
    needed = math.ceil(drain_s) + BRIDGE_EXIT_AFTER_DRAIN_S
    if needed > ECS_MAX_STOP_TIMEOUT_S:
        raise ValueError(
            f"a drain of {drain_s:g} s needs a stopTimeout of {needed} s; ECS allows "
            f"at most {ECS_MAX_STOP_TIMEOUT_S} s"
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
    carries one session only (tests/unit/constructs_lib/ecs_service/test_props.py shows it over
    real sockets), so no request can meet that race."""
    return math.ceil(bridge_idle_timeout_s) + IDLE_TIMEOUT_MARGIN_S


def deregistration_delay_s(drain_s: float) -> int:
    """The target group's deregistration delay: as long as the bridge's drain, rounded up. ECS
    deregisters a task before it stops it; during the delay the ALB keeps the task's open WebSockets
    and sends it no new ones, and ECS sends SIGTERM only after the delay (Amazon ECS developer
    guide, "Load balancer ... deregistration delay"). A longer delay only postpones the drain; the
    bridge's own drain then ends the streams left."""
    return math.ceil(drain_s)


# --- Checks --------------------------------------------------------------------------------------


@functools.cache
def ec2_instance_types() -> frozenset[str]:
    """Every EC2 instance type: the ``InstanceType`` enum of the EC2 API model shipped with
    botocore."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("ec2")
    return frozenset(model.shape_for("InstanceType").enum)


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
            f"not an EC2 instance type (expected '<family>.<size>', e.g. "
            f"'g6.xlarge'; GPU types: {families})",
        )
        return None
    spec = gpu_spec(value)
    if spec is None:
        family = value.split(".", 1)[0]
        if family in ("g5g", "g6f"):  # NVIDIA, but an Arm host (T4G) or a fraction of an L4
            p.add(
                prop,
                value,
                "has an NVIDIA GPU this target cannot use: the ECS GPU AMI is "
                "x86_64 and each task takes one whole GPU (Arm hosts and fractional "
                f"GPUs are not supported; GPU types: {families})",
            )
        else:
            p.add(
                prop,
                value,
                "has no NVIDIA GPU (the ECS GPU AMI and the model servers need one; "
                f"NVIDIA GPU types: {families})",
            )
    return spec


def check_container_port(p: Problems, prop: str, value: int) -> None:
    """A TCP port the container listens on (:data:`CONTAINER_PORT_RANGE`)."""
    low, high = CONTAINER_PORT_RANGE
    if not low <= value <= high:
        p.add(
            prop,
            value,
            f"must be a TCP port {low}-{high} (the port the container listens on; "
            "with awsvpc networking every port of the task's own interface is free)",
        )


def check_health_path(p: Problems, prop: str, value: str) -> None:
    """A load balancer health check path (:data:`HEALTH_PATH_RE`): starts with '/', no query, no
    spaces."""
    if not HEALTH_PATH_RE.fullmatch(value):
        p.add(
            prop,
            value,
            "must be a URL path starting with '/' (e.g. '/ping'), at most 1024 "
            "characters, without spaces or a query string ('?')",
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


# --- Capacity and load balancing -----------------------------------------------------------------


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
    """How callers reach the service: an Application Load Balancer in front of the container.

    Attributes:
        internet_facing: an internet-facing load balancer in public subnets. Default False:
            internal, reachable from the VPC (and what is peered or connected to it) only.
        certificate_arn: ACM certificate for an HTTPS listener on 443. Required when
            internet-facing; optional when internal (then HTTP on 80 inside the VPC). Default None.
        require_token: callers send ``Authorization: Bearer <token>``; the token is a Secrets
            Manager secret the construct creates and ECS injects into the task. The bridge checks
            it, so only :class:`GpuEcsServiceWithBridgeProps` takes it. Required when
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
                f"must be set when {p.ref('internet_facing', True)}: an internet-facing load "
                "balancer listens on HTTPS only (the token must not cross the internet in clear "
                "text)",
            )
        if self.internet_facing and not self.require_token:
            p.add(
                "require_token",
                False,
                f"must be true when {p.ref('internet_facing', True)}: without SigV4 the bearer "
                "token is what keeps strangers off the GPUs",
            )


# --- The service ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuEcsServiceProps:
    """Props of :class:`~constructs_lib.ecs_service.service.GpuEcsService`: a model server's
    container (Cartesia's Sonic, for one) on ECS GPU capacity behind a load balancer.
    :class:`GpuEcsServiceWithBridgeProps` adds the bridge's.

    Attributes:
        service_name: names the service's metrics (EndpointName dimension of the bridge's metrics),
            alarms and dashboard header (required).
        vpc: where the instances, tasks and load balancer go; tasks in its private subnets (with a
            route or VPC endpoints to ECR, S3, CloudWatch Logs and monitoring, Secrets Manager, EC2
            and ECS: ``constructs_lib.network.props.ECS_INTERFACE_ENDPOINTS``), an internet-facing
            load balancer in its public subnets (required).
        image: the container image (required).
        capacity: instance type, Spot, task range, placement (required).
        requests_per_target: requests per task per minute target tracking holds (the load
            balancer's RequestCountPerTarget). Required here; the bridge add-on scales on live
            streams instead and refuses it.
        response_time_p90_ms: alarm when the targets' p90 response time is above it. Default None:
            no such alarm (the bridge add-on refuses it: it has the bridge's latency alarms).
        container_port: the port the container serves on. Default 8080 (the bridge's).
        health_path: the load balancer's health check path (200 = can serve). Default ``/ping``
            (the bridge's).
        gpu_namespace: namespace of the CloudWatch agent's GPU metrics. Required here; the bridge
            add-on defaults it to the bridge's namespace + ``/Gpu``.
        image_repository_arn: the private ECR repository of ``image``; the task's execution role
            may pull from it only. None for a public image. Default None.
        load_balancing: scheme, certificate and token. Default: internal, HTTP, token required
            (which only the bridge add-on takes: pass ``require_token=False`` here).
        drain_s: the container's drain after SIGTERM (the bridge's DRAIN_S); the stop timeout and
            the deregistration delay follow from it. Default 25.
        bridge_idle_timeout_s: the container's idle timeout (the bridge's IDLE_TIMEOUT_S); the
            load balancer's is longer. Default 60.
        log_retention_days: the task log group's retention. Default 30.
        retain_data: keep the log groups and the access-log bucket on destroy. Default False.
        alarm_topic: where alarms send ALARM and OK. Default: no action.
        subnets: the private subnets of instances, tasks and an internal load balancer (e.g. the
            isolated subnets of a network without internet access, or subnets of a VPC described by
            attributes). Default: the VPC's private subnets with egress.
        caller_cidrs: who may reach an internal load balancer. Default: the VPC's CIDR block.
        log_kms_key_arn: KMS key of the task log group and the token secret. Default: the
            services' own keys.
    """

    service_name: str
    vpc: ec2.IVpc
    image: ecs.ContainerImage
    capacity: GpuCapacity
    requests_per_target: float | None = None
    response_time_p90_ms: float | None = None
    container_port: int = BRIDGE_PORT
    health_path: str = HEALTH_PATH
    gpu_namespace: str | None = None
    image_repository_arn: str | None = None
    load_balancing: LoadBalancing = field(default_factory=LoadBalancing)
    drain_s: float = DEFAULT_DRAIN_S
    bridge_idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    log_retention_days: int = 30
    retain_data: bool = False
    alarm_topic: sns.ITopic | None = None
    subnets: Sequence[ec2.ISubnet] = ()
    caller_cidrs: Sequence[str] = ()
    log_kms_key_arn: str | None = None

    def gpu_metrics_namespace(self) -> str | None:
        """Where the CloudWatch agent writes the instances' GPU metrics."""
        return self.gpu_namespace

    def problems(self, p: Problems, region: str | None = None) -> None:
        """Every problem of the props: what any container needs (capacity, load balancer, logs,
        port, health path, callers), then what this container needs
        (:meth:`_container_problems`), then the drain."""
        self.capacity.problems(p)
        self.load_balancing.problems(p, region)
        check_log_retention_days(p, "log_retention_days", self.log_retention_days)
        check_container_port(p, "container_port", self.container_port)
        check_health_path(p, "health_path", self.health_path)
        for cidr in self.caller_cidrs:
            check_cidr(p, "caller_cidrs", cidr, vpc=False)
        self._container_problems(p)
        try:
            stop_timeout_s(self.drain_s)
        except ValueError as error:
            p.add("drain_s", self.drain_s, str(error))

    def _container_problems(self, p: Problems) -> None:
        """Another model server's: its scaling, its GPU metrics' namespace, its latency alarm, and
        no token (it would not check one)."""
        if self.requests_per_target is None or not self.requests_per_target > 0:
            p.add(
                "requests_per_target",
                self.requests_per_target,
                "must be a positive number of requests per task per minute without bridge",
            )
        if not self.gpu_namespace:
            p.add(
                "gpu_namespace",
                self.gpu_namespace,
                "must name the GPU metrics' namespace without bridge",
            )
        if self.response_time_p90_ms is not None and not self.response_time_p90_ms > 0:
            p.add(
                "response_time_p90_ms",
                self.response_time_p90_ms,
                "must be a positive number of ms, or None",
            )
        if self.load_balancing.require_token:
            p.add(
                "load_balancing",
                "require_token=True",
                "needs bridge: only the bridge checks the bearer token",
            )


@dataclass(frozen=True, kw_only=True)
class GpuEcsServiceWithBridgeProps(GpuEcsServiceProps):
    """Props of :class:`~constructs_lib.ecs_service.bridge_service.GpuEcsServiceWithBridge`: those
    of :class:`GpuEcsServiceProps` (``image`` is the bridge image), less ``requests_per_target``
    and ``response_time_p90_ms``, plus the bridge's (keyword only).

    Attributes:
        bridge: namespace and stream cap of the bridge, with its alarm thresholds (required).
        model_bucket / model_prefix: where the staged weights and their manifest are (``prefix``
            ends with ``/``) (required). The task reads only that prefix.
        streams_target: live streams per task that target tracking holds (required).
        environment: the bridge container's environment
            (:class:`contracts.bridge_env.BridgeEnvironment`: vLLM flags and bridge settings); the
            construct sets the fields of :data:`OWN_BRIDGE_FIELDS` from its props (MODEL_S3_URI,
            MODEL_CACHE_DIR, ENDPOINT_NAME, VARIANT_NAME, DRAIN_S, IDLE_TIMEOUT_S), which
            ``environment`` must leave unset. Default: none of the rest set.
    """

    bridge: BridgeAlarmThresholds
    model_bucket: s3.IBucket
    model_prefix: str
    streams_target: float
    environment: BridgeEnvironment | None = None

    def gpu_metrics_namespace(self) -> str:
        """``gpu_namespace``, else the bridge's namespace + :data:`GPU_METRICS_NAMESPACE_SUFFIX`."""
        return self.gpu_namespace or self.bridge.namespace + GPU_METRICS_NAMESPACE_SUFFIX

    def _container_problems(self, p: Problems) -> None:
        """The bridge's: its thresholds, the weights, the stream target, and an environment the
        bridge takes that leaves :data:`OWN_BRIDGE_FIELDS` to the construct."""
        self.bridge.problems(p)
        if self.model_bucket is None:
            p.add("model_bucket", None, "must be set with bridge (the weights the tasks copy)")
        prefix = self.model_prefix
        if prefix is None or not prefix.endswith("/") or prefix.startswith("/"):
            p.add(
                "model_prefix",
                prefix,
                "must be a key prefix ending with '/' and not starting with '/'",
            )
        if self.streams_target is None or not self.streams_target > 0:
            p.add(
                "streams_target",
                self.streams_target,
                "must be a positive number of live streams per task",
            )
        for name, what in (
            ("requests_per_target", "scales on streams_target"),
            ("response_time_p90_ms", "alarms on the bridge's own latency"),
        ):
            if getattr(self, name) is not None:
                p.add(
                    name, getattr(self, name), f"must be left unset with bridge: the service {what}"
                )
        environment = self.environment or BridgeEnvironment()
        for name in OWN_BRIDGE_FIELDS:
            if getattr(environment, name) is not None:
                variable = BridgeEnvironment.variable(name)
                p.add(
                    f"environment.{name}",
                    getattr(environment, name),
                    f"must be left unset: the construct sets {variable} from its props",
                )
        try:  # what the tasks would start with, refused here rather than by every task's bridge
            dataclasses.replace(
                environment, drain_s=self.drain_s, idle_timeout_s=self.bridge_idle_timeout_s
            ).to_env()
        except BridgeEnvError as error:
            p.add("environment", "BridgeEnvironment(...)", f"the bridge would refuse it: {error}")
