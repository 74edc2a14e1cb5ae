"""GpuEcsService: a model server's container as an ECS service on EC2 GPU instances behind an
Application Load Balancer: Cartesia's licensed Sonic container, for one (a port, a health path,
scaling on requests per task). The bridge image is the add-on built over it,
:class:`~constructs_lib.ecs_service.bridge_service.GpuEcsServiceWithBridge`.

Read top to bottom: ``GpuEcsService.__init__`` runs one step per part: cluster and GPU capacity
(launch template, Auto Scaling group, capacity provider), the task definition, the load balancer,
the service and its scaling, the alarms, then the acknowledgements of cdk-nag's and checkov's
findings, each on the resource it concerns (the last section; the reasons are in
:mod:`constructs_lib.ecs_service.findings`). Props and their checks are in
:mod:`constructs_lib.ecs_service.props`, which also says how the numbers that tie the pieces to
the container (stopTimeout, idle timeout, deregistration delay) are derived; metrics, alarm rules
and dashboard rows in :mod:`constructs_lib.ecs_service.monitoring`.

What an add-on changes: the steps call the methods of the section "Extension points" (host setup,
the container's settings, the listener's routes, task scaling), which a subclass overrides;
whatever else it adds, it adds after ``super().__init__``.

What it is not: it builds no VPC (pass one, e.g. the app's private network) and no image (pass an
``ecs.ContainerImage``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import jsii
from aws_cdk import (
    ArnFormat,
    Aspects,
    CustomResource,
    Duration,
    IAspect,
    RemovalPolicy,
    Stack,
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
)
from constructs import Construct, IConstruct

from constructs_lib.cleanup import cleanup_function
from constructs_lib.ecs_service.findings import (
    acknowledge_access_logs,
    acknowledge_capacity_and_task,
    acknowledge_load_balancer,
    acknowledge_release_role,
    acknowledge_roles,
)
from constructs_lib.ecs_service.monitoring import (
    GpuEcsServiceMetrics,
    service_alarm_rules,
    service_dashboard_rows,
)
from constructs_lib.ecs_service.props import (
    GpuEcsServiceProps,
    alb_idle_timeout_s,
    deregistration_delay_s,
    stop_timeout_s,
)
from constructs_lib.monitoring.alarms import AlarmRule, alarm_from_rule
from constructs_lib.nag import nag_render
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION
from constructs_lib.validation import Problems

#: vLLM loads ~9 GB of weights and compiles CUDA graphs before /ping answers 200: the ALB's health
#: checks are ignored this long after a task starts (measured order of magnitude on SageMaker's g6:
#: 5-10 minutes, so twice that).
HEALTH_CHECK_GRACE = Duration.minutes(20)
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
#: Where the CloudWatch agent's configuration goes on each instance.
CLOUDWATCH_AGENT_CONFIG = "/opt/aws/amazon-cloudwatch-agent/etc/gpu.json"


@dataclass
class ContainerSettings:
    """What the container starts with besides its image, port and logs: its environment, its
    secrets (by variable) and its health check (None: the load balancer's is its only one)."""

    environment: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, ecs.Secret] = field(default_factory=dict)
    health_check: ecs.HealthCheck | None = None


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
    """An ECS service of a model server's container on EC2 GPU capacity, one GPU per task, behind
    an ALB.

    * Capacity: a launch template (ECS-optimized AL2023 GPU AMI from its SSM parameter at deploy
      time, IMDSv2 only, encrypted gp3 root volume, the CloudWatch agent for GPU metrics), an Auto
      Scaling group (On-Demand or Spot; in every private subnet, or in one with a cluster placement
      group) and a capacity provider with managed scaling and managed termination protection: ECS
      grows the group when tasks cannot be placed, and never terminates an instance that runs a
      task (a task's scale-in protection, which the bridge sets, then keeps one with live streams).
    * Destroy: ``Custom::ReleaseInstanceProtection`` lifts the group's and its instances' scale-in
      protection after the capacity provider is gone and before CloudFormation deletes the group,
      which would otherwise wait on protected instances (aws/aws-cdk#18179, #14732;
      aws/containers-roadmap#2862). Deletion order: service (tasks stop: deregistration delay,
      then the container's drain) -> cluster capacity provider association -> capacity provider
      -> the release -> Auto Scaling group (scaled to zero, instances terminate) -> launch
      template -> cluster (it cannot be deleted while container instances are active).
    * Task: one GPU (``resourceRequirements`` GPU), stopTimeout = drain + exit time, its own log
      group; an execution role that may pull from the image's repository only.
    * Load balancer: internal (HTTP 80, or HTTPS 443 with a certificate) or internet-facing (HTTPS
      only); the listener forwards every path to the tasks (the bridge add-on: its two paths).
    * Service: at least ``min_tasks`` tasks; rolling deployments that keep every old task until
      its replacement is healthy (minimum healthy 100 %), with the deployment circuit breaker and
      rollback; target tracking on the load balancer's requests per task.

    Attributes:
        cluster, auto_scaling_group, capacity_provider, instance_role, task_definition, container,
        service, scaling, load_balancer, listener, target_group, log_group, token_secret (or
        None), url (what callers connect to), health_url, alarms (``{name: alarm}``), rules,
        metrics (:class:`~constructs_lib.ecs_service.monitoring.GpuEcsServiceMetrics`).

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    #: The container's construct id: its name in the task definition; in lower case, the prefix of
    #: its log streams.
    CONTAINER_ID = "Model"
    #: What answers behind the load balancer (in descriptions and alarm texts).
    SERVES = "container"

    def __init__(self, scope: Construct, construct_id: str, props: GpuEcsServiceProps) -> None:
        problems = Problems()
        props.problems(problems, Stack.of(scope).region)
        problems.raise_if_any(f"{type(self).__name__} {construct_id}")
        super().__init__(scope, construct_id)
        self._props = props
        removal = RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY
        subnets = self._cluster_and_capacity(props)
        self._task_definition(props, removal)
        self._load_balancer(props, subnets, removal)
        self._service(props, subnets)
        self._alarms(props)
        self._acknowledge_findings(props)

    # --- Construction steps, in the order they run ----------------------------------------------

    def _cluster_and_capacity(self, props: GpuEcsServiceProps) -> list[ec2.ISubnet]:
        """The cluster and its GPU capacity: instance role, launch template, Auto Scaling group,
        capacity provider and the release of its instances' protection on destroy. Returns the
        subnets of the instances and tasks."""
        cap = props.capacity
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=props.vpc, container_insights_v2=ecs.ContainerInsights.ENHANCED
        )
        self.gpu_namespace = props.gpu_metrics_namespace()
        self.instance_role = iam.Role(
            self,
            "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            description=f"ECS container instances of {props.service_name}",
        )
        assert self.gpu_namespace is not None  # props.problems requires it without a bridge
        grant_put_metrics(self.instance_role, self.gpu_namespace)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        # The CloudWatch agent resolves ${aws:AutoScalingGroupName} from the instance's tags
        # (ec2:DescribeTags, as in CloudWatchAgentServerPolicy; CloudWatch agent user guide,
        # "append_dimensions").
        self.instance_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ec2:DescribeTags"], resources=["*"])
        )
        self._log_key = (
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
            role=self.instance_role,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
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
            spot_options=(
                ec2.LaunchTemplateSpotOptions(request_type=ec2.SpotRequestType.ONE_TIME)
                if cap.spot
                else None
            ),
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
        self.release_protection = self._release_instance_protection()
        return subnets

    def _task_definition(self, props: GpuEcsServiceProps, removal: RemovalPolicy) -> None:
        """The log group, the task definition (one GPU), the execution role's pull, and the
        container with its settings (:meth:`_container_settings`)."""
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            removal_policy=removal,
            encryption_key=self._log_key,
            retention=getattr(logs.RetentionDays, LOG_RETENTION[props.log_retention_days]),
        )
        self.task_definition = ecs.Ec2TaskDefinition(
            self, "Task", network_mode=ecs.NetworkMode.AWS_VPC
        )
        if props.image_repository_arn is not None:
            grant_image_pull(
                self.task_definition.obtain_execution_role(), props.image_repository_arn
            )
        self.token_secret: secretsmanager.ISecret | None = None
        settings = self._container_settings()
        self.container = self.task_definition.add_container(
            self.CONTAINER_ID,
            image=props.image,
            gpu_count=1,
            memory_reservation_mib=TASK_MEMORY_RESERVATION_MIB,
            port_mappings=[ecs.PortMapping(container_port=props.container_port)],
            environment=settings.environment,
            secrets=settings.secrets,
            health_check=settings.health_check,
            stop_timeout=Duration.seconds(stop_timeout_s(props.drain_s)),
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix=self.CONTAINER_ID.lower(), log_group=self.log_group
            ),
        )

    def _load_balancer(
        self, props: GpuEcsServiceProps, subnets: list[ec2.ISubnet], removal: RemovalPolicy
    ) -> None:
        """The Application Load Balancer, its access-log bucket, the listener and the target
        group."""
        lb = props.load_balancing
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
        not_found = elbv2.ListenerAction.fixed_response(
            404, content_type="text/plain", message_body="not found"
        )
        if lb.https:
            assert lb.certificate_arn is not None  # validated: HTTPS has a certificate
            self.listener = self.load_balancer.add_listener(
                "Https",
                port=443,
                protocol=elbv2.ApplicationProtocol.HTTPS,
                certificates=[elbv2.ListenerCertificate.from_arn(lb.certificate_arn)],
                ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
                open=lb.internet_facing,
                default_action=not_found,
            )
        else:
            self.listener = self.load_balancer.add_listener(
                "Http",
                port=80,
                protocol=elbv2.ApplicationProtocol.HTTP,
                open=False,
                default_action=not_found,
            )
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
        # "WebSockets").
        action_id, paths = self._routes()
        self.listener.add_action(
            action_id,
            priority=10,
            conditions=[elbv2.ListenerCondition.path_patterns(paths)],
            action=elbv2.ListenerAction.forward([self.target_group]),
        )

    def _service(self, props: GpuEcsServiceProps, subnets: list[ec2.ISubnet]) -> None:
        """The ECS service, its task scaling (:meth:`_scale_tasks`), and the URLs callers use."""
        cap, lb = props.capacity, props.load_balancing
        self.task_security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=props.vpc,
            allow_all_outbound=True,
            description=f"Tasks of {props.service_name}: the {self.SERVES} port from the load "
            "balancer only",
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
            # Rolling: start every replacement before stopping the task it replaces (100-200 %);
            # old tasks drain (deregistration delay, then SIGTERM and the container's drain).
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
        # The association of the capacity provider with the cluster goes after the service that
        # uses it: deleted first, it fails with "The specified capacity provider is in use and
        # cannot be removed". The cluster makes the association in an aspect at synthesis; this
        # one, added after it, runs after it.
        Aspects.of(self.cluster).add(_ServiceAfterAssociation(self.service))
        # Also opens the task security group to the load balancer's on the container port (and
        # nothing else).
        self.service.attach_to_application_target_group(self.target_group)

        self.scaling = self.service.auto_scale_task_count(
            min_capacity=cap.min_tasks, max_capacity=cap.max_tasks
        )
        self._scale_tasks()

        scheme = "https" if lb.https else "http"
        dns = self.load_balancer.load_balancer_dns_name
        self.url = f"{scheme}://{dns}"
        self.health_url = f"{scheme}://{dns}{props.health_path}"

    def _alarms(self, props: GpuEcsServiceProps) -> None:
        """The service's metrics, its alarm rules and an alarm per rule."""
        assert self.gpu_namespace is not None  # props.problems requires it without a bridge
        self.metrics = GpuEcsServiceMetrics(
            gpu_namespace=self.gpu_namespace,
            auto_scaling_group=self.auto_scaling_group,
            cluster=self.cluster,
            service=self.service,
            load_balancer=self.load_balancer,
            target_group=self.target_group,
        )
        self.rules: list[AlarmRule] = []
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self._add_alarms(service_alarm_rules(props, self.metrics, self.SERVES))

    def _add_alarms(self, rules: list[AlarmRule]) -> None:
        """An alarm per rule (to the alarm topic when there is one), kept in ``rules`` and
        ``alarms``."""
        props = self._props
        action = actions.SnsAction(props.alarm_topic) if props.alarm_topic is not None else None
        for rule in rules:
            self.rules.append(rule)
            self.alarms[rule.name] = alarm_from_rule(
                self, f"Alarm{rule.name}", rule, f"{props.service_name}-ecs-{rule.name}", action
            )

    # --- Extension points: what an add-on overrides ---------------------------------------------

    def _host_setup_commands(self) -> list[str]:
        """Instance user data before the CloudWatch agent's (e.g. directories the tasks mount).
        None here."""
        return []

    def _container_settings(self) -> ContainerSettings:
        """The container's environment, secrets and health check. None here: another model
        server's image is not ours, what tools it has for a container health check is unknown, so
        the load balancer's check on ``health_path`` is its only one (ECS replaces a task the load
        balancer finds unhealthy)."""
        return ContainerSettings()

    def _routes(self) -> tuple[str, list[str]]:
        """(id of the listener's action, the paths it forwards to the tasks): another model
        server's API is its own, so every path goes to it."""
        return "Requests", ["/*"]

    def _scale_tasks(self) -> None:
        """Target tracking of ``scaling``: requests per task per minute
        (``AWS/ApplicationELB`` RequestCountPerTarget, the ALBRequestCountPerTarget predefined
        metric of Application Auto Scaling)."""
        requests_per_target = self._props.requests_per_target
        assert requests_per_target is not None  # validated: the generic service scales on it
        self.scaling.scale_on_request_count(
            "Requests",
            requests_per_target=math.ceil(requests_per_target),
            target_group=self.target_group,
            scale_in_cooldown=SCALE_IN_COOLDOWN,
            scale_out_cooldown=SCALE_OUT_COOLDOWN,
        )

    # --- Metrics, alarms and dashboard (monitoring.py) ------------------------------------------

    def metric_gpu_utilization(self) -> cloudwatch.Metric:
        """Busy time of the instances' GPUs, 0-100 per GPU, averaged over GPUs (CloudWatch agent);
        Percent."""
        return self.metrics.metric_gpu_utilization()

    def metric_gpu_memory_used(self) -> cloudwatch.Metric:
        """GPU memory in use on the fullest GPU (CloudWatch agent); MiB (nvidia-smi's unit)."""
        return self.metrics.metric_gpu_memory_used()

    def metric_gpu_memory_used_percent(self) -> cloudwatch.MathExpression:
        """GPU memory in use on the fullest GPU as a share of the reported total; 0-100,
        Percent."""
        return self.metrics.metric_gpu_memory_used_percent()

    def metric_running_tasks(self) -> cloudwatch.Metric:
        """Tasks running in the service (Container Insights RunningTaskCount); Count."""
        return self.metrics.metric_running_tasks()

    def metric_response_time_p90(self) -> cloudwatch.Metric:
        """p90 of the targets' response time (``AWS/ApplicationELB`` TargetResponseTime);
        Seconds."""
        return self.metrics.metric_response_time_p90()

    def alarm_rules(self) -> list[AlarmRule]:
        """The rules of the service's alarms, in the order the alarms were made
        (:func:`~constructs_lib.ecs_service.monitoring.service_alarm_rules`, then an add-on's)."""
        return list(self.rules)

    def dashboard_rows(self, title: str) -> list[list[cloudwatch.IWidget]]:
        """Dashboard rows of the service
        (:func:`~constructs_lib.ecs_service.monitoring.service_dashboard_rows`)."""
        return service_dashboard_rows(title, self._props, self.metrics, self.rules)

    # --- Host setup and the destroy order -------------------------------------------------------

    def _host_commands(self) -> list[str]:
        """Instance user data (the capacity provider adds its ECS_CLUSTER line after it): Spot
        draining, :meth:`_host_setup_commands`, and the CloudWatch agent with its NVIDIA GPU input,
        aggregated per Auto Scaling group."""
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
        path = CLOUDWATCH_AGENT_CONFIG
        return [
            # Spot: the agent sets the instance DRAINING on EC2's two-minute interruption notice,
            # so its tasks get SIGTERM and the container's drain (Amazon ECS developer guide, "Spot
            # Instance draining"). Written here: the capacity provider's spot_instance_draining
            # option applies only to groups with a spot price.
            *(
                ["echo ECS_ENABLE_SPOT_INSTANCE_DRAINING=true >> /etc/ecs/ecs.config"]
                if self._props.capacity.spot
                else []
            ),
            *self._host_setup_commands(),
            "dnf install -y amazon-cloudwatch-agent",
            f"cat > {path} <<'EOF'\n{json.dumps(config, indent=1)}\nEOF",
            "/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl -a fetch-config "
            f"-m ec2 -s -c file:{path}",
        ]

    def _group_arn(self) -> str:
        """The Auto Scaling group's ARN (its id part is generated: a wildcard)."""
        name = self.auto_scaling_group.auto_scaling_group_name
        return Stack.of(self).format_arn(
            service="autoscaling",
            resource="autoScalingGroup",
            resource_name=f"*:autoScalingGroupName/{name}",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

    def _release_instance_protection(self) -> CustomResource:
        """``Custom::ReleaseInstanceProtection`` of the Auto Scaling group
        (``services/handlers/cleanup/instance_protection.py``).

        Managed termination protection needs the group's ``NewInstancesProtectedFromScaleIn`` and
        ECS sets ``ProtectedFromScaleIn`` on each instance that runs a task (ECS API reference,
        AutoScalingGroupProvider, managedTerminationProtection); nothing lifts them when the
        capacity provider is deleted (aws/containers-roadmap#2862), and CloudFormation's delete of
        the group then waits for instances that may not be scaled in, until it times out
        (aws/aws-cdk#18179, #14732). Kept on, not turned off: without it, a managed scale-in could
        terminate an instance whose task still carries live streams (a task's scale-in protection
        guards it against service scale-in, not against its instance's termination).

        Order: the resource refers to the group (CloudFormation deletes it before the group) and
        the capacity provider depends on it (deleted after the capacity provider, when ECS no
        longer manages the group), so on delete it runs exactly between the two. Its function and
        role are referred to by it, so they outlive it.
        """
        group = self.auto_scaling_group
        handler, self._release_role = cleanup_function(
            self,
            "ReleaseProtection",
            handler="instance_protection.handler",
            timeout=Duration.minutes(2),
            key=self._log_key,
            log_retention_days=self._props.log_retention_days,
            description=f"Custom::ReleaseInstanceProtection: lifts scale-in protection of "
            f"{self._props.service_name}'s Auto Scaling group on delete",
            statements=[
                iam.PolicyStatement(
                    actions=[
                        "autoscaling:UpdateAutoScalingGroup",
                        "autoscaling:SetInstanceProtection",
                    ],
                    resources=[self._group_arn()],
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
        # Its statements must still exist when the Delete runs.
        resource.node.add_dependency(self._release_role)
        for capacity_provider in self.capacity_provider.node.find_all():
            if isinstance(capacity_provider, ecs.CfnCapacityProvider):
                capacity_provider.node.add_dependency(resource)
        return resource

    # --- cdk-nag and checkov: each finding acknowledged on the resource it concerns -------------

    def _acknowledge_findings(self, props: GpuEcsServiceProps) -> None:
        image_pull = props.image_repository_arn is not None
        acknowledge_roles(
            self.instance_role,
            self.task_definition.task_role,
            self.task_definition.obtain_execution_role(),
            image_pull,
        )
        acknowledge_release_role(self._release_role, nag_render(Stack.of(self), self._group_arn()))
        acknowledge_capacity_and_task(
            self.auto_scaling_group, self.task_definition, self.container, image_pull
        )
        acknowledge_access_logs(self, self.access_logs)
        acknowledge_load_balancer(self.load_balancer, self.listener, props.load_balancing)


# --- Grants both the service and its add-ons use ------------------------------------------------


def grant_put_metrics(role: iam.IRole, namespace: str) -> None:
    """cloudwatch:PutMetricData into ``namespace`` only (the action supports no resource: a
    ``cloudwatch:namespace`` condition limits it)."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
        )
    )


def grant_image_pull(role: iam.IRole, repository_arn: str) -> None:
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
