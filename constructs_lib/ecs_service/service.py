"""GpuEcsService: a GPU container as an ECS service on EC2 GPU instances behind an Application Load
Balancer: the bridge image (Voxtral; ``bridge`` props), or another model server such as Cartesia's
licensed Sonic container (a port, a health path, scaling on requests per task).

Read top to bottom: ``GpuEcsService.__init__`` runs one step per part: cluster and GPU capacity
(launch template, Auto Scaling group, capacity provider), the task definition, the load balancer,
the service and its scaling, then the alarms; metrics, alarm rules and dashboard rows are in
:mod:`constructs_lib.ecs_service.monitoring`. The numbers that tie the pieces to the bridge
(stopTimeout, idle timeout, deregistration delay) come from :mod:`constructs_lib.ecs_service.props`,
which says how each is derived.

What it is not: it builds no VPC (pass one, e.g. the app's private network) and no image (pass an
``ecs.ContainerImage``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsii
from aws_cdk import (
    Acknowledgment,
    Annotations,
    ArnFormat,
    Aspects,
    CustomResource,
    Duration,
    IAspect,
    RemovalPolicy,
    Stack,
    Validations,
    aws_autoscaling as autoscaling,
    aws_cloudwatch as cloudwatch,
    aws_cloudwatch_actions as actions,
    aws_ec2 as ec2,
    aws_ecs as ecs,
    aws_elasticloadbalancingv2 as elbv2,
    aws_iam as iam,
    aws_kms as kms,
    aws_logs as logs,
    aws_s3 as s3,
    aws_secretsmanager as secretsmanager,
    aws_sns as sns,
)
from constructs import Construct, IConstruct

from constructs_lib.cleanup import cleanup_function
from constructs_lib.ecs_service.monitoring import (
    GPU_METRICS_NAMESPACE_SUFFIX,
    GpuEcsServiceMetrics,
    service_alarm_rules,
    service_dashboard_rows,
)
from constructs_lib.ecs_service.props import (
    GpuCapacity,
    LoadBalancing,
    alb_idle_timeout_s,
    check_container_port,
    check_health_path,
    deregistration_delay_s,
    stop_timeout_s,
)
from constructs_lib.monitoring.alarms import AlarmRule, alarm_from_rule
from constructs_lib.monitoring.metrics import BridgeMetrics
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    nag_render,
    skip_checkov,
    stack_singletons,
)
from constructs_lib.network.encryption import secret_decrypt_statement
from constructs_lib.network.props import check_cidr
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION, check_log_retention_days
from constructs_lib.validation import Problems
from contracts import realtime
from contracts.bridge_env import (
    DEFAULT_DRAIN_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MODEL_CACHE_DIR,
    BridgeEnvError,
    BridgeEnvironment,
)

#: The bridge's port and paths (the SageMaker container contract the bridge implements:
#: contracts.realtime).
BRIDGE_PORT = realtime.CONTAINER_PORT
WEBSOCKET_PATH = realtime.STREAM_PATH
HEALTH_PATH = realtime.PING_PATH
#: Where each instance keeps its copy of the weights; the container sees it at
#: :data:`CONTAINER_CACHE_DIR` (the bridge's default MODEL_CACHE_DIR). A host directory (a bind
#: mount), so a second task on the same instance reuses the copy (container/bridge/weights.py).
HOST_CACHE_DIR = "/var/lib/realtime-voice/weights"
CONTAINER_CACHE_DIR = DEFAULT_MODEL_CACHE_DIR
#: The bridge's variables the construct sets itself, from its own props (and refuses in
#: ``environment``): where the weights are and their host copy, the service's name and variant
#: (metric dimensions), and the drain and idle timeout, which its stop timeout, load balancer and
#: deregistration delay are derived from.
OWN_BRIDGE_FIELDS = (
    "model_s3_uri",
    "model_cache_dir",
    "endpoint_name",
    "variant_name",
    "drain_s",
    "idle_timeout_s",
)
#: Dimension VariantName of the bridge's metrics on ECS (on SageMaker it is the variant,
#: AllTraffic).
ECS_VARIANT_NAME = "ecs"
#: vLLM loads ~9 GB of weights and compiles CUDA graphs before /ping answers 200: the ALB's health
#: checks are ignored this long after a task starts (measured order of magnitude on SageMaker's g6:
#: 5-10 minutes, so twice that).
HEALTH_CHECK_GRACE = Duration.minutes(20)
#: Container health check (docker HEALTHCHECK): ECS allows startPeriod up to 300 s; the ALB grace
#: covers the rest.
CONTAINER_HEALTH_START_PERIOD = Duration.seconds(300)
#: Host memory the task reserves (soft limit); vLLM's CPU side and the bridge fit in it, and a
#: g6.xlarge has 16 GiB.
TASK_MEMORY_RESERVATION_MIB = 8192
#: The ECS-optimized Amazon Linux 2023 GPU AMI, read at deploy time from this public SSM parameter
#: (Amazon ECS developer guide, "Retrieving Amazon ECS-optimized Linux AMI metadata"). No lookup at
#: synth.
ECS_GPU_AMI_PARAMETER = "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
#: Scale out fast (a new task needs minutes to load the model), scale in slowly (streams last
#: minutes).
SCALE_OUT_COOLDOWN = Duration.minutes(1)
SCALE_IN_COOLDOWN = Duration.minutes(10)


@dataclass(frozen=True)
class GpuEcsServiceProps:
    """Props of :class:`GpuEcsService`.

    Attributes:
        service_name: names the service's metrics (EndpointName dimension of the bridge's metrics),
            alarms and dashboard header (required).
        vpc: where the instances, tasks and load balancer go; tasks in its private subnets (with a
            route or VPC endpoints to ECR, S3, CloudWatch Logs and monitoring, Secrets Manager, EC2
            and ECS: ``constructs_lib.network.props.ECS_INTERFACE_ENDPOINTS``), an internet-facing
            load balancer in its public subnets (required).
        subnets: the private subnets of instances, tasks and an internal load balancer (e.g. the
            isolated subnets of a network without internet access, or subnets of a VPC described by
            attributes). Default: the VPC's private subnets with egress.
        caller_cidrs: who may reach an internal load balancer. Default: the VPC's CIDR block.
        log_kms_key_arn: KMS key of the task log group and the token secret. Default: the services'
            own keys.
        image: the container image (required): the bridge image, or another model server.
        image_repository_arn: the private ECR repository of ``image``; the task's execution role may
            pull from it only. None for a public image. Default None.
        capacity: instance type, Spot, task range, placement (required).
        bridge: namespace and stream cap of the bridge, with its alarm thresholds: the container is
            the bridge image (the weights' host copy, the bridge's environment and container health
            check, task scale-in protection, scaling on live streams, the bridge's alarms). Default
            None: another model server.
        model_bucket / model_prefix: where the staged weights and their manifest are (``prefix``
            ends with ``/``); with ``bridge`` (required then). The task reads only that prefix.
        streams_target: live streams per task that target tracking holds; with ``bridge`` (required
            then).
        requests_per_target: without ``bridge``: requests per task per minute target tracking holds
            (the load balancer's RequestCountPerTarget) (required then).
        response_time_p90_ms: without ``bridge``: alarm when the targets' p90 response time is above
            it. Default
            None: no such alarm.
        container_port: the port the container serves on. Default 8080 (the bridge's).
        health_path: the load balancer's health check path (200 = can serve). Default ``/ping``
            (the bridge's).
        gpu_namespace: namespace of the CloudWatch agent's GPU metrics. Default: the bridge's
            namespace + ``/Gpu``
            (required without ``bridge``).
        environment: the bridge container's environment
            (:class:`contracts.bridge_env.BridgeEnvironment`: vLLM flags and bridge settings), with
            ``bridge`` only; the construct sets the fields of :data:`OWN_BRIDGE_FIELDS` from its
            props (MODEL_S3_URI, MODEL_CACHE_DIR, ENDPOINT_NAME, VARIANT_NAME, DRAIN_S,
            IDLE_TIMEOUT_S), which ``environment`` must leave unset. Default: none of the rest set.
        load_balancing: scheme, certificate and token. Default: internal, HTTP, token required.
        drain_s: the bridge's drain after SIGTERM (its DRAIN_S). Default 25.
        bridge_idle_timeout_s: the bridge's idle timeout (its IDLE_TIMEOUT_S). Default 60.
        log_retention_days: the task log group's retention. Default 30.
        retain_data: keep the log groups and the access-log bucket on destroy. Default False.
        alarm_topic: where alarms send ALARM and OK. Default: no action.
    """

    service_name: str
    vpc: ec2.IVpc
    image: ecs.ContainerImage
    capacity: GpuCapacity
    bridge: BridgeAlarmThresholds | None = None
    model_bucket: s3.IBucket | None = None
    model_prefix: str | None = None
    streams_target: float | None = None
    requests_per_target: float | None = None
    response_time_p90_ms: float | None = None
    container_port: int = BRIDGE_PORT
    health_path: str = HEALTH_PATH
    gpu_namespace: str | None = None
    image_repository_arn: str | None = None
    environment: BridgeEnvironment | None = None
    load_balancing: LoadBalancing = field(default_factory=LoadBalancing)
    drain_s: float = DEFAULT_DRAIN_S
    bridge_idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    log_retention_days: int = 30
    retain_data: bool = False
    alarm_topic: sns.ITopic | None = None
    subnets: Sequence[ec2.ISubnet] = ()
    caller_cidrs: Sequence[str] = ()
    log_kms_key_arn: str | None = None

    def problems(self, p: Problems, region: str | None = None) -> None:
        self.capacity.problems(p)
        self.load_balancing.problems(p, region)
        check_log_retention_days(p, "log_retention_days", self.log_retention_days)
        check_container_port(p, "container_port", self.container_port)
        check_health_path(p, "health_path", self.health_path)
        for cidr in self.caller_cidrs:
            check_cidr(p, "caller_cidrs", cidr, vpc=False)
        if self.bridge is not None:
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
                p.add(
                    "environment", "BridgeEnvironment(...)", f"the bridge would refuse it: {error}"
                )
        else:
            if self.environment is not None:
                p.add(
                    "environment",
                    "BridgeEnvironment(...)",
                    "needs bridge: it is the bridge container's environment",
                )
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
        try:
            stop_timeout_s(self.drain_s)
        except ValueError as error:
            p.add("drain_s", self.drain_s, str(error))


@jsii.implements(IAspect)
class _ServiceAfterAssociation:
    """Make ``service`` depend on the cluster's capacity provider association (see
    :class:`GpuEcsService`)."""

    def __init__(self, service: ecs.Ec2Service) -> None:
        self._service = service

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, ecs.Cluster):
            for child in node.node.children:
                if isinstance(child, ecs.CfnClusterCapacityProviderAssociations):
                    self._service.node.add_dependency(child)


class GpuEcsService(Construct):
    """An ECS service of the bridge image on EC2 GPU capacity, one GPU per task, behind an ALB.

    * Capacity: a launch template (ECS-optimized AL2023 GPU AMI from its SSM parameter at deploy
      time, IMDSv2 only, encrypted gp3 root volume, the CloudWatch agent for GPU metrics), an Auto
      Scaling group (On-Demand or Spot; in every private subnet, or in one with a cluster placement
      group) and a capacity provider with managed scaling and managed termination protection: ECS
      grows the group when tasks cannot be placed, and never terminates an instance that runs a task
      (the task's scale-in protection then keeps one with live streams).
    * Destroy: ``Custom::ReleaseInstanceProtection`` lifts the group's and its instances' scale-in
      protection after the capacity provider is gone and before CloudFormation deletes the group,
      which would otherwise wait on protected instances (aws/aws-cdk#18179, #14732;
      aws/containers-roadmap#2862). Deletion order: service (tasks stop: deregistration delay, then
      the bridge's drain) -> cluster capacity provider association -> capacity provider -> the
      release -> Auto Scaling group (scaled to zero, instances terminate) -> launch template ->
      cluster (it cannot be deleted while container instances are active).
    * Task: one GPU (``resourceRequirements`` GPU), container health check on /ping, stopTimeout =
      drain + exit time, its own log group, a task role that reads the model prefix and writes the
      metrics namespace, and a host directory for the weights' copy. With ``require_token``, a
      Secrets Manager secret the construct creates, injected as ``BRIDGE_TOKEN`` (rotate it as you
      choose; tasks read it when they start).
    * Load balancer: internal (HTTP 80, or HTTPS 443 with a certificate) or internet-facing (HTTPS
      only); the listener forwards ``/invocations-bidirectional-stream`` and ``/ping`` to the tasks
      and answers 404 otherwise.
    * Service: at least ``min_tasks`` tasks; rolling deployments that keep every old task until its
      replacement is healthy (minimum healthy 100 %), with the deployment circuit breaker and
      rollback; target tracking on the bridge's ActiveStreams per task.

    Attributes:
        cluster, auto_scaling_group, capacity_provider, task_definition, service, load_balancer,
        target_group, log_group, token_secret (or None), url (what callers connect to), alarms
        (``{name: alarm}``), rules, metrics
        (:class:`~constructs_lib.ecs_service.monitoring.GpuEcsServiceMetrics`), bridge_metrics (or
        None).

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(self, scope: Construct, construct_id: str, props: GpuEcsServiceProps) -> None:
        problems = Problems()
        props.problems(problems, Stack.of(scope).region)
        problems.raise_if_any(f"GpuEcsService {construct_id}")
        super().__init__(scope, construct_id)
        self._props = props
        removal = RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY
        key, subnets = self._cluster_and_capacity(props)
        self._task_definition(props, key, removal)
        self._load_balancer(props, subnets, removal)
        self._service(props, subnets)
        self._alarms(props)

    # --- Construction steps, in the order they run -----------------------------------------------

    def _cluster_and_capacity(
        self, props: GpuEcsServiceProps
    ) -> tuple[kms.IKey | None, list[ec2.ISubnet]]:
        """The cluster and its GPU capacity: instance role, launch template, Auto Scaling group,
        capacity provider and the release of its instances' protection on destroy. Returns the log
        key (or None) and the subnets of the instances and tasks."""
        cap = props.capacity
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "The instance, task and execution roles' statements are "
                "scoped to this service (its model prefix, metrics namespaces, repository, "
                "secret and cluster); an inline policy belongs to its one role and goes with it.",
            },
        )
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=props.vpc, container_insights_v2=ecs.ContainerInsights.ENHANCED
        )
        if props.gpu_namespace:
            self.gpu_namespace = props.gpu_namespace
        else:
            assert (
                props.bridge is not None
            )  # the props' check requires gpu_namespace without bridge
            self.gpu_namespace = props.bridge.namespace + GPU_METRICS_NAMESPACE_SUFFIX
        instance_role = iam.Role(
            self,
            "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            description=f"ECS container instances of {props.service_name}",
        )
        what = "the CloudWatch agent's GPU metrics"
        self._grant_put_metrics(instance_role, self.gpu_namespace, what)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        # The CloudWatch agent resolves ${aws:AutoScalingGroupName} from the instance's tags
        # (ec2:DescribeTags, as in CloudWatchAgentServerPolicy; CloudWatch agent user guide,
        # "append_dimensions").
        instance_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ec2:DescribeTags"], resources=["*"])
        )
        Validations.of(instance_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData (namespace condition) and ec2:DescribeTags "
                "support no resource-level permission; DescribeTags reads tags only (the "
                "CloudWatch agent's Auto Scaling group dimension).",
            )
        )
        key = (
            kms.Key.from_key_arn(self, "LogKey", props.log_kms_key_arn)
            if props.log_kms_key_arn
            else None
        )
        user_data = ec2.UserData.for_linux()
        user_data.add_commands(*self._host_commands())
        self.instance_security_group = ec2.SecurityGroup(
            self,
            "InstanceSecurityGroup",
            vpc=props.vpc,
            allow_all_outbound=True,
            description=f"ECS container instances of {props.service_name} (tasks have their own "
            "group)",
        )
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            machine_image=ec2.MachineImage.from_ssm_parameter(
                ECS_GPU_AMI_PARAMETER, os=ec2.OperatingSystemType.LINUX
            ),
            instance_type=ec2.InstanceType(cap.instance_type),
            require_imdsv2=True,
            http_put_response_hop_limit=1,  # tasks (awsvpc) cannot reach the instance's credentials
            role=instance_role,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            user_data=user_data,
            security_group=self.instance_security_group,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(
                        cap.root_volume_gib,
                        encrypted=True,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        delete_on_termination=True,
                    ),
                )
            ],
            spot_options=ec2.LaunchTemplateSpotOptions(request_type=ec2.SpotRequestType.ONE_TIME)
            if cap.spot
            else None,
            placement_group=(
                ec2.PlacementGroup(
                    self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
                )
                if cap.single_az
                else None
            ),
        )
        subnets = (
            list(props.subnets)
            if props.subnets
            else props.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        )
        self.auto_scaling_group = autoscaling.AutoScalingGroup(
            self,
            "Instances",
            vpc=props.vpc,
            launch_template=self.launch_template,
            vpc_subnets=ec2.SubnetSelection(subnets=subnets[:1] if cap.single_az else subnets),
            min_capacity=0,
            max_capacity=cap.max_instances,
            # Managed termination protection needs new instances protected from scale-in (ECS lifts
            # it when idle).
            new_instances_protected_from_scale_in=True,
        )
        Validations.of(self.auto_scaling_group).acknowledge(
            Acknowledgment(
                id="AwsSolutions-AS3",
                reason="Scaling events are driven by the ECS capacity provider and visible in "
                "ECS service events; the alarm topic carries the service's alarms.",
            )
        )
        self.capacity_provider = ecs.AsgCapacityProvider(
            self,
            "CapacityProvider",
            auto_scaling_group=self.auto_scaling_group,
            enable_managed_scaling=True,
            enable_managed_termination_protection=True,
            target_capacity_percent=100,
            # The AMI comes from SSM at deploy time; the capacity provider must not add its own AMI
            # user data twice.
            machine_image_type=ecs.MachineImageType.AMAZON_LINUX_2,
        )
        self.cluster.add_asg_capacity_provider(self.capacity_provider)
        self.release_protection = self._release_instance_protection(key)
        skip_checkov(
            instance_role,
            "AWS::IAM::Policy",
            {
                "CKV_AWS_111": "The container agent's statements CDK gives ECS instances (as "
                "AmazonEC2ContainerServiceforEC2Role: logs:PutLogEvents and ecs:Submit* for the "
                "agent), and PutMetricData, which supports no resource and is limited by a "
                "cloudwatch:namespace condition.",
            },
        )
        Validations.of(instance_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Action::ecs:Submit*]",
                reason="The statement the CDK gives ECS container instances (the container "
                "agent's own calls, as in AmazonEC2ContainerServiceforEC2Role); the agent "
                "reports task and container state changes.",
            )
        )
        return key, subnets

    def _task_definition(
        self, props: GpuEcsServiceProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> None:
        """The log group, the task definition (one GPU), its grants, the bearer token secret and the
        container."""
        bridge, lb = props.bridge, props.load_balancing
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            removal_policy=removal,
            encryption_key=key,
            retention=getattr(logs.RetentionDays, LOG_RETENTION[props.log_retention_days]),
        )
        self.task_definition = ecs.Ec2TaskDefinition(
            self, "Task", network_mode=ecs.NetworkMode.AWS_VPC
        )
        if bridge is not None:
            # The props' check requires the model's bucket and prefix with bridge.
            assert props.model_bucket is not None and props.model_prefix is not None
            self.task_definition.add_volume(
                name="weights", host=ecs.Host(source_path=HOST_CACHE_DIR)
            )
            self._grant_model_read(
                self.task_definition.task_role, props.model_bucket, props.model_prefix
            )
            self._grant_put_metrics(
                self.task_definition.task_role, bridge.namespace, "the bridge's metrics"
            )
            self._grant_task_protection(self.task_definition.task_role)
        if props.image_repository_arn is not None:
            self._grant_image_pull(
                self.task_definition.obtain_execution_role(), props.image_repository_arn
            )
        self.token_secret = None
        secrets: dict[str, ecs.Secret] = {}
        if lb.require_token:
            self.token_secret = secretsmanager.Secret(
                self,
                "Token",
                description=f"Bearer token callers of {props.service_name} send (Authorization: "
                "Bearer <token>)",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=48, exclude_punctuation=True, include_space=False
                ),
                removal_policy=RemovalPolicy.DESTROY,
                encryption_key=key,
            )
            acknowledge_compliance(
                self.token_secret,
                {
                    "SecretsManagerRotationEnabled": (
                        "Rotation is the user's choice (README, 'Calling the ECS endpoint'): "
                        "a rotated token takes effect as tasks restart."
                    ),
                },
            )
            Validations.of(self.token_secret).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-SMG4",
                    reason=(
                        "Rotation is the user's choice (README, 'Calling the ECS endpoint'): a "
                        "rotated token takes effect as tasks restart, so rotation needs a rolling "
                        "deployment the user schedules."
                    ),
                )
            )
            # jsii's binding names the interface's parameters differently from Secret's (ignored).
            secret: Any = self.token_secret
            token = ecs.Secret.from_secrets_manager(secret)
            secrets[BridgeEnvironment.variable("bridge_token")] = token
            if key is not None:  # ECS reads the secret with the execution role when a task starts
                self.task_definition.obtain_execution_role().add_to_principal_policy(
                    secret_decrypt_statement(secret, key.key_arn)
                )
        environment: dict[str, str] = {}
        health_check = None
        if bridge is not None:
            assert props.model_bucket is not None  # validated with bridge
            own = BridgeEnvironment(
                model_s3_uri=f"s3://{props.model_bucket.bucket_name}/{props.model_prefix}",
                model_cache_dir=CONTAINER_CACHE_DIR,
                endpoint_name=props.service_name,
                variant_name=ECS_VARIANT_NAME,
                drain_s=props.drain_s,
                idle_timeout_s=props.bridge_idle_timeout_s,
            )
            # The given environment's variables, then the construct's own (disjoint: problems()
            # holds to it).
            environment = {**(props.environment or BridgeEnvironment()).to_env(), **own.to_env()}
            health_check = ecs.HealthCheck(
                # The image has Python (vLLM's); curl is not guaranteed.
                command=[
                    "CMD-SHELL",
                    f'python3 -c "import urllib.request; urllib.request.urlopen('
                    f"'http://127.0.0.1:{props.container_port}{props.health_path}', timeout=2)\" "
                    "|| exit 1",
                ],
                interval=Duration.seconds(15),
                timeout=Duration.seconds(5),
                retries=3,
                start_period=CONTAINER_HEALTH_START_PERIOD,
            )
        # Another model server's image is not ours: what tools it has for a container health check
        # is unknown, so the load balancer's check on health_path is its only one (ECS replaces a
        # task the load balancer finds unhealthy).
        name = "Bridge" if bridge is not None else "Model"
        self.container = self.task_definition.add_container(
            name,
            image=props.image,
            gpu_count=1,
            memory_reservation_mib=TASK_MEMORY_RESERVATION_MIB,
            port_mappings=[ecs.PortMapping(container_port=props.container_port)],
            environment=environment,
            secrets=secrets,
            health_check=health_check,
            stop_timeout=Duration.seconds(stop_timeout_s(props.drain_s)),
            logging=ecs.LogDrivers.aws_logs(stream_prefix=name.lower(), log_group=self.log_group),
        )
        Validations.of(self.task_definition).acknowledge(
            Acknowledgment(
                id="AwsSolutions-ECS2",
                reason="The environment holds configuration only (vLLM flags, metric names, the "
                "S3 prefix); the one secret, the bearer token, comes from Secrets Manager "
                "(secrets, not environment).",
            )
        )
        if props.image_repository_arn is not None:
            # CDK warns that an image from an ECR registry URI needs a pull policy: the execution
            # role has it (_grant_image_pull, the image's repository only).
            Annotations.of(self.container).acknowledge_warning(
                "@aws-cdk/aws-ecs:ecrImageRequiresPolicy",
                "The execution role may pull from the image's repository (image_repository_arn).",
            )
        if bridge is not None:
            self.container.add_mount_points(
                ecs.MountPoint(
                    container_path=CONTAINER_CACHE_DIR, source_volume="weights", read_only=False
                )
            )

    def _load_balancer(
        self, props: GpuEcsServiceProps, subnets: list[ec2.ISubnet], removal: RemovalPolicy
    ) -> None:
        """The Application Load Balancer, its access-log bucket, the listener and the target
        group."""
        bridge, lb = props.bridge, props.load_balancing
        self.load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=props.vpc,
            internet_facing=lb.internet_facing,
            vpc_subnets=(
                ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC)
                if lb.internet_facing
                else ec2.SubnetSelection(subnets=subnets)
            ),
            idle_timeout=Duration.seconds(alb_idle_timeout_s(props.bridge_idle_timeout_s)),
            drop_invalid_header_fields=True,
            deletion_protection=False,
        )
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,  # ALB access logs support SSE-S3 only
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(props.log_retention_days))],
            removal_policy=removal,
            auto_delete_objects=not props.retain_data,
        )
        Validations.of(self.access_logs).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="This bucket receives the load balancer's access logs; logging it to "
                "itself would loop.",
            )
        )
        acknowledge_compliance(
            self.access_logs,
            {
                "S3BucketLoggingEnabled": "This bucket receives the load balancer's access logs; "
                "logging it would need another bucket whose logs go nowhere.",
                "S3DefaultEncryptionKMS": "Application Load Balancer access logs can be written "
                "to SSE-S3 buckets only (Elastic Load Balancing user guide, 'Access logs for "
                "your Application Load Balancer').",
                "S3BucketVersioningEnabled": "Access logs are written once by Elastic Load "
                "Balancing and removed only by the lifecycle rule; there is no object to recover "
                "from an overwrite.",
                "S3BucketReplicationEnabled": "Access logs stay in the deployment's Region; "
                "copying them elsewhere is the user's choice, not a default.",
            },
        )
        skip_checkov(
            self.access_logs,
            "AWS::S3::Bucket",
            {
                "CKV_AWS_18": "This bucket receives the load balancer's access logs; logging it "
                "would need another bucket.",
                "CKV_AWS_21": "Access logs are written once by Elastic Load Balancing and "
                "removed only by the lifecycle rule.",
            },
        )
        for provider in stack_singletons(self, "Custom::S3AutoDeleteObjects"):
            skip_checkov(provider, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)
        self.load_balancer.log_access_logs(self.access_logs, prefix="alb")
        if not props.retain_data:
            # Destroy: the access-log bucket is emptied only after the load balancer is gone
            # (before, it would keep writing: a log file per node every 5 minutes, Elastic Load
            # Balancing user guide, "Access logs").
            self.access_logs.node.find_child("AutoDeleteObjectsCustomResource").node.add_dependency(
                self.load_balancer
            )
        if not lb.internet_facing:
            for cidr in props.caller_cidrs or [props.vpc.vpc_cidr_block]:
                self.load_balancer.connections.allow_from(
                    ec2.Peer.ipv4(cidr),
                    ec2.Port.tcp(443 if lb.https else 80),
                    "Callers inside the VPC" if not props.caller_cidrs else f"Callers from {cidr}",
                )
        Validations.of(self.load_balancer).acknowledge(
            Acknowledgment(
                id="AwsSolutions-EC23",
                reason=(
                    "An internet-facing load balancer takes callers from anywhere on 443 (HTTPS "
                    "only); callers authenticate with the bearer token (required when "
                    "internet-facing)."
                    if lb.internet_facing
                    else "An internal load balancer takes callers from the VPC's CIDR only (a "
                    "deploy-time value cdk-nag cannot read)."
                ),
            )
        )
        acknowledge_compliance(
            self.load_balancer,
            {
                "ELBDeletionProtectionEnabled": "cdk destroy must remove the load balancer (it "
                "holds no data; its access logs are in their own bucket).",
                "ALBWAFEnabled": "Callers send WebSocket frames of audio after one upgrade "
                "request, which a web ACL does not inspect; the listener forwards two paths only "
                "and the bridge checks the bearer token before any work.",
            },
        )
        if not lb.https:
            acknowledge_compliance(
                self.load_balancer,
                {
                    "ALBHttpToHttpsRedirection": "Internal load balancer without a certificate: "
                    "HTTP on 80 inside the VPC, reachable from the caller CIDRs only. Set a "
                    "certificate for HTTPS.",
                    "ELBv2ACMCertificateRequired": "Internal load balancer without a certificate "
                    "(HTTP inside the VPC); internet-facing needs one (the settings refuse "
                    "otherwise).",
                },
            )
        if lb.https:
            assert lb.certificate_arn is not None  # what https means
            listener = self.load_balancer.add_listener(
                "Https",
                port=443,
                protocol=elbv2.ApplicationProtocol.HTTPS,
                certificates=[elbv2.ListenerCertificate.from_arn(lb.certificate_arn)],
                ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
                open=lb.internet_facing,
                default_action=elbv2.ListenerAction.fixed_response(
                    404, content_type="text/plain", message_body="not found"
                ),
            )
        else:
            listener = self.load_balancer.add_listener(
                "Http",
                port=80,
                protocol=elbv2.ApplicationProtocol.HTTP,
                open=False,
                default_action=elbv2.ListenerAction.fixed_response(
                    404, content_type="text/plain", message_body="not found"
                ),
            )
        if not lb.https:
            skip_checkov(
                listener,
                "AWS::ElasticLoadBalancingV2::Listener",
                {
                    "CKV_AWS_2": "Internal load balancer without a certificate: HTTP inside the "
                    "VPC from the caller CIDRs only; set a certificate for HTTPS "
                    "(internet-facing requires one).",
                    "CKV_AWS_103": "No TLS listener without a certificate (internal, HTTP inside "
                    "the VPC); with one the listener uses ELBSecurityPolicy-TLS13-1-2-2021-06.",
                },
            )
        self.listener = listener
        self.target_group = elbv2.ApplicationTargetGroup(
            self,
            "Targets",
            vpc=props.vpc,
            port=props.container_port,
            protocol=elbv2.ApplicationProtocol.HTTP,
            target_type=elbv2.TargetType.IP,
            deregistration_delay=Duration.seconds(deregistration_delay_s(props.drain_s)),
            health_check=elbv2.HealthCheck(
                path=props.health_path,
                healthy_http_codes="200",
                interval=Duration.seconds(10),
                timeout=Duration.seconds(5),
                healthy_threshold_count=2,
                unhealthy_threshold_count=3,
            ),
        )
        # An ALB forwards a WebSocket upgrade like any HTTP/1.1 request and keeps the connection
        # open afterwards (Elastic Load Balancing user guide, Application Load Balancers:
        # "WebSockets"). The bridge serves two paths; another model server's API is its own, so
        # every path goes to it.
        paths = [WEBSOCKET_PATH, props.health_path] if bridge is not None else ["/*"]
        listener.add_action(
            "Streams" if bridge is not None else "Requests",
            priority=10,
            conditions=[elbv2.ListenerCondition.path_patterns(paths)],
            action=elbv2.ListenerAction.forward([self.target_group]),
        )

    def _service(self, props: GpuEcsServiceProps, subnets: list[ec2.ISubnet]) -> None:
        """The ECS service, its task scaling, and the URLs callers use."""
        bridge, cap, lb = props.bridge, props.capacity, props.load_balancing
        self.task_security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=props.vpc,
            allow_all_outbound=True,
            description=f"Tasks of {props.service_name}: the "
            f"{'bridge' if bridge is not None else 'container'} "
            "port from the load balancer only",
        )
        self.service = ecs.Ec2Service(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            # No DesiredCount: CloudFormation would set it again on every update of the service (an
            # image change under load would drop the tasks autoscaling added;
            # aws/containers-roadmap#493). Without it ECS starts one task and keeps the running
            # count across updates; the scalable target's minimum (min_tasks) raises it to at least
            # min_tasks.
            security_groups=[self.task_security_group],
            vpc_subnets=ec2.SubnetSelection(subnets=subnets[:1] if cap.single_az else subnets),
            capacity_provider_strategies=[
                ecs.CapacityProviderStrategy(
                    capacity_provider=self.capacity_provider.capacity_provider_name, weight=1
                )
            ],
            # Rolling: start every replacement before stopping the task it replaces (100-200 %); old
            # tasks drain (deregistration delay, then SIGTERM and the bridge's drain) and scale-in
            # protection keeps a task with live streams until they end.
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            health_check_grace_period=HEALTH_CHECK_GRACE,
            # Zones first (a zone's outage leaves tasks elsewhere), then instances (one instance's
            # loss, one task).
            placement_strategies=[
                *(
                    []
                    if cap.single_az
                    else [
                        ecs.PlacementStrategy.spread_across(ecs.BuiltInAttributes.AVAILABILITY_ZONE)
                    ]
                ),
                ecs.PlacementStrategy.spread_across_instances(),
            ],
            enable_ecs_managed_tags=True,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
        )
        # The association of the capacity provider with the cluster goes after the service that uses
        # it: deleted first, it fails with "The specified capacity provider is in use and cannot be
        # removed". The cluster makes the association in an aspect at synthesis; this one, added
        # after it, runs after it.
        Aspects.of(self.cluster).add(_ServiceAfterAssociation(self.service))
        # Also opens the task security group to the load balancer's on the bridge port (and nothing
        # else).
        self.service.attach_to_application_target_group(self.target_group)

        self.scaling = self.service.auto_scale_task_count(
            min_capacity=cap.min_tasks, max_capacity=cap.max_tasks
        )
        self.bridge_metrics: BridgeMetrics | None = None
        if bridge is not None:
            assert props.streams_target is not None  # the props' check requires it with bridge
            self.bridge_metrics = BridgeMetrics(
                bridge.namespace, props.service_name, ECS_VARIANT_NAME
            )
            self.scaling.scale_to_track_custom_metric(
                "ActiveStreams",
                metric=self.bridge_metrics.metric_active_streams_per_instance(),
                target_value=round(
                    props.streams_target, 6
                ),  # 0.7 x 3 is 2.0999999999999996 in floats
                scale_in_cooldown=SCALE_IN_COOLDOWN,
                scale_out_cooldown=SCALE_OUT_COOLDOWN,
            )
        else:
            # Requests per task per minute (AWS/ApplicationELB RequestCountPerTarget, the
            # ALBRequestCountPerTarget predefined metric of Application Auto Scaling).
            assert (
                props.requests_per_target is not None
            )  # the props' check requires it without bridge
            self.scaling.scale_on_request_count(
                "Requests",
                requests_per_target=math.ceil(props.requests_per_target),
                target_group=self.target_group,
                scale_in_cooldown=SCALE_IN_COOLDOWN,
                scale_out_cooldown=SCALE_OUT_COOLDOWN,
            )

        scheme = "https" if lb.https else "http"
        dns = self.load_balancer.load_balancer_dns_name
        self.url = (
            f"{'wss' if lb.https else 'ws'}://{dns}{WEBSOCKET_PATH}"
            if bridge is not None
            else f"{scheme}://{dns}"
        )
        self.health_url = f"{scheme}://{dns}{props.health_path}"

    def _alarms(self, props: GpuEcsServiceProps) -> None:
        """The service's metrics, its alarm rules and an alarm per rule (to the alarm topic when
        there is one)."""
        self.metrics = GpuEcsServiceMetrics(
            gpu_namespace=self.gpu_namespace,
            auto_scaling_group=self.auto_scaling_group,
            cluster=self.cluster,
            service=self.service,
            load_balancer=self.load_balancer,
            target_group=self.target_group,
        )
        self.rules = self.alarm_rules()
        action = actions.SnsAction(props.alarm_topic) if props.alarm_topic is not None else None
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for rule in self.rules:
            self.alarms[rule.name] = alarm_from_rule(
                self, f"Alarm{rule.name}", rule, f"{props.service_name}-ecs-{rule.name}", action
            )

    # --- Metrics, alarms and dashboard (monitoring.py) -------------------------------------------

    def metric_gpu_utilization(self) -> cloudwatch.Metric:
        """Busy time of the instances' GPUs, 0-100 per GPU, averaged over GPUs (CloudWatch agent);
        Percent."""
        return self.metrics.metric_gpu_utilization()

    def metric_gpu_memory_used(self) -> cloudwatch.Metric:
        """GPU memory in use on the fullest GPU (CloudWatch agent); MiB (nvidia-smi's unit)."""
        return self.metrics.metric_gpu_memory_used()

    def metric_gpu_memory_used_percent(self) -> cloudwatch.MathExpression:
        """GPU memory in use on the fullest GPU as a share of the reported total; 0-100, Percent."""
        return self.metrics.metric_gpu_memory_used_percent()

    def metric_running_tasks(self) -> cloudwatch.Metric:
        """Tasks running in the service (Container Insights RunningTaskCount); Count."""
        return self.metrics.metric_running_tasks()

    def metric_response_time_p90(self) -> cloudwatch.Metric:
        """p90 of the targets' response time (``AWS/ApplicationELB`` TargetResponseTime);
        Seconds."""
        return self.metrics.metric_response_time_p90()

    def alarm_rules(self) -> list[AlarmRule]:
        """The service's alarm rules
        (:func:`~constructs_lib.ecs_service.monitoring.service_alarm_rules`)."""
        return service_alarm_rules(self._props, self.metrics, self.bridge_metrics)

    def dashboard_rows(self, title: str) -> list[list[cloudwatch.IWidget]]:
        """Dashboard rows of the service
        (:func:`~constructs_lib.ecs_service.monitoring.service_dashboard_rows`)."""
        return service_dashboard_rows(
            title, self._props, self.metrics, self.bridge_metrics, self.rules
        )

    # --- Grants and host setup -------------------------------------------------------------------

    @staticmethod
    def _grant_model_read(role: iam.IRole, bucket: s3.IBucket, prefix: str) -> None:
        """Read the objects under ``prefix`` of ``bucket`` and list only that prefix (the weights
        and manifest)."""
        objects = bucket.arn_for_objects(f"{prefix}*")
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(Stack.of(role), objects)}]",
                reason="The wildcard covers the files of the model prefix only (weights, "
                "tokenizer, manifest); their names vary by model revision.",
            )
        )

    @staticmethod
    def _grant_image_pull(role: iam.IRole, repository_arn: str) -> None:
        """Pull images from one ECR repository (the execution role pulls for ECS)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                resources=[repository_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ecr:GetAuthorizationToken supports no resource-level permission; it only "
                "issues a registry login token, image access stays limited to one repository.",
            )
        )

    @staticmethod
    def _grant_put_metrics(role: iam.IRole, namespace: str, what: str) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData supports no resource-level permission; a "
                f"cloudwatch:namespace condition limits it to {what}.",
            )
        )

    def _release_instance_protection(self, key: kms.IKey | None) -> CustomResource:
        """``Custom::ReleaseInstanceProtection`` of the Auto Scaling group
        (``constructs_lib/cleanup_handlers/instance_protection.py``).

        Managed termination protection needs the group's ``NewInstancesProtectedFromScaleIn`` and
        ECS sets ``ProtectedFromScaleIn`` on each instance that runs a task (ECS API reference,
        AutoScalingGroupProvider, managedTerminationProtection); nothing lifts them when the
        capacity provider is deleted (aws/containers-roadmap#2862), and CloudFormation's delete of
        the group then waits for instances that may not be scaled in, until it times out
        (aws/aws-cdk#18179, #14732). Kept on, not turned off: without it, a managed scale-in could
        terminate an instance whose task still carries live streams (a task's scale-in protection
        guards it against service scale-in, not against its instance's termination).

        Order: the resource refers to the group (CloudFormation deletes it before the group) and the
        capacity provider depends on it (deleted after the capacity provider, when ECS no longer
        manages the group), so on delete it runs exactly between the two. Its function and role are
        referred to by it, so they outlive it.
        """
        group = self.auto_scaling_group
        stack = Stack.of(self)
        group_arn = stack.format_arn(
            service="autoscaling",
            resource="autoScalingGroup",
            resource_name=f"*:autoScalingGroupName/{group.auto_scaling_group_name}",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        handler, role = cleanup_function(
            self,
            "ReleaseProtection",
            handler="instance_protection.handler",
            timeout=Duration.minutes(2),
            key=key,
            log_retention_days=self._props.log_retention_days,
            description="Custom::ReleaseInstanceProtection: lifts scale-in protection of "
            f"{self._props.service_name}'s Auto Scaling group on delete",
            statements=[
                iam.PolicyStatement(
                    actions=[
                        "autoscaling:UpdateAutoScalingGroup",
                        "autoscaling:SetInstanceProtection",
                    ],
                    resources=[group_arn],
                ),
                # DescribeAutoScalingGroups supports no resource-level permission (Service
                # Authorization Reference).
                iam.PolicyStatement(
                    actions=["autoscaling:DescribeAutoScalingGroups"], resources=["*"]
                ),
            ],
        )
        resource = CustomResource(
            self,
            "ReleaseProtectionOnDelete",
            service_token=handler.function_arn,
            resource_type="Custom::ReleaseInstanceProtection",
            properties={"AutoScalingGroupName": group.auto_scaling_group_name},
        )
        resource.node.add_dependency(role)  # its statements must still exist when the Delete runs
        for capacity_provider in self.capacity_provider.node.find_all():
            if isinstance(capacity_provider, ecs.CfnCapacityProvider):
                capacity_provider.node.add_dependency(resource)
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="autoscaling:DescribeAutoScalingGroups supports no resource-level "
                "permission; it only reads the group's instances and their protection.",
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, group_arn)}]",
                reason="An Auto Scaling group ARN holds a generated id; the wildcard is that id, "
                "and the group is named exactly.",
            ),
        )
        return resource

    def _grant_task_protection(self, role: iam.IRole) -> None:
        """ECS task scale-in protection through the agent's endpoint acts with the task role (Amazon
        ECS developer guide, "Protect your Amazon ECS tasks from being terminated by scale-in
        events"): only tasks of this cluster."""
        stack = Stack.of(self)
        tasks = stack.format_arn(
            service="ecs", resource="task", resource_name=f"{self.cluster.cluster_name}/*"
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"], resources=[tasks]
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, tasks)}]",
                reason="Task ids are random; the wildcard is limited to the tasks of this "
                "cluster, and a task protects only itself through the agent.",
            )
        )

    def _host_commands(self) -> list[str]:
        """Instance user data (after the capacity provider's ECS_CLUSTER line): the weights
        directory, and the CloudWatch agent with its NVIDIA GPU input, aggregated per Auto Scaling
        group."""
        config = {
            "agent": {"metrics_collection_interval": 60},
            "metrics": {
                "namespace": self.gpu_namespace,
                "append_dimensions": {"AutoScalingGroupName": "${aws:AutoScalingGroupName}"},
                "aggregation_dimensions": [["AutoScalingGroupName"]],
                "metrics_collected": {
                    "nvidia_gpu": {
                        "measurement": ["utilization_gpu", "memory_used", "memory_total"]
                    }
                },
            },
        }
        path = "/opt/aws/amazon-cloudwatch-agent/etc/gpu.json"
        return [
            # Spot: the agent sets the instance DRAINING on EC2's two-minute interruption notice, so
            # its tasks get SIGTERM and the bridge's drain (Amazon ECS developer guide, "Spot
            # Instance draining"). Written here: the capacity provider's spot_instance_draining
            # option applies only to groups with a spot price.
            *(
                ["echo ECS_ENABLE_SPOT_INSTANCE_DRAINING=true >> /etc/ecs/ecs.config"]
                if self._props.capacity.spot
                else []
            ),
            *([f"mkdir -p {HOST_CACHE_DIR}"] if self._props.bridge is not None else []),
            "dnf install -y amazon-cloudwatch-agent",
            f"cat > {path} <<'EOF'\n{json.dumps(config, indent=1)}\nEOF",
            "/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl -a fetch-config "
            f"-m ec2 -s -c file:{path}",
        ]
