"""VoiceAgentService: the voice agent (a Pipecat bot: Voxtral speech to text -> an LLM on Bedrock or
an OpenAI-compatible server -> Sonic speech) as an ECS Fargate service behind an Application Load
Balancer, with scaling on live sessions, task scale-in protection, alarms and a dashboard row.

Read top to bottom: the load balancer and its access logs, the task (its environment is the
:class:`contracts.agent_env.AgentEnv` of the props), the grants, the service and its scaling, the
alarms. Its metrics, alarm rules and dashboard row are in :mod:`constructs_lib.agent.monitoring`.
What it is not: it builds no VPC (pass one: the app's private network in network.mode=vpc) and no
endpoint (it takes their names or URL).

Rules it keeps, each with its source:

* An ALB forwards a WebSocket upgrade and keeps the connection open; its idle timeout counts
  seconds without a byte either way (Elastic Load Balancing user guide, "WebSockets", "Connection
  idle timeout"): the bot's idle timeout plus a margin, so the bot ends a silent session itself.
* Task scale-in protection (ECS developer guide, "Amazon ECS task scale-in protection endpoint"):
  the bot PUTs ``$ECS_AGENT_URI/task-protection/v1/state``; the agent acts with the task role,
  which needs ``ecs:UpdateTaskProtection`` (and GetTaskProtection) on the task.
* Fargate stopTimeout is at most 120 s (ECS API reference, ContainerDefinition stopTimeout).
* Target deregistration delay is 0-3600 s (ELB API reference, ``deregistration_delay``): while a
  task deregisters, its open WebSockets stay until the delay ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

from aws_cdk import (
    Acknowledgment,
    CfnResource,
    Duration,
    RemovalPolicy,
    Stack,
    Validations,
    aws_cloudwatch as cloudwatch,
    aws_cloudwatch_actions as actions,
    aws_ec2 as ec2,
    aws_ecr_assets as ecr_assets,
    aws_ecs as ecs,
    aws_elasticloadbalancingv2 as elbv2,
    aws_iam as iam,
    aws_kms as kms,
    aws_logs as logs,
    aws_s3 as s3,
    aws_sns as sns,
)
from constructs import Construct

from constructs_lib.agent.monitoring import (  # noqa: F401 (re-exported: the names stay importable from here)
    ALARM_RULE_NAMES,
    LATENCY_BREACHING,
    LATENCY_MINUTES,
    STAGE_SERVICES,
    agent_alarm_rules,
    agent_metric,
    alarm_name,
    dashboard_rows,
    metric_dimensions,
)
from constructs_lib.agent.props import (
    ACTIVE_SESSIONS,
    AGENT_PORT,
    BEDROCK_STREAM,
    FARGATE_MAX_STOP_TIMEOUT_S,
    HEALTH_PATH,
    INVOKE_BIDIRECTIONAL,
    INVOKE_WITH_RESPONSE_STREAM,
    AgentSizing,
    alb_idle_timeout_s,
    split_profile,
    task_protection_minutes,
)
from constructs_lib.monitoring.alarms import AlarmRule, alarm_from_rule
from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    nag_render,
    skip_checkov,
    stack_singletons,
)
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION
from constructs_lib.validation import Problems
from contracts.agent_env import AgentEnv

#: Longest deregistration delay (ELB API reference, TargetGroupAttribute deregistration_delay).
MAX_DEREGISTRATION_DELAY_S = 3600
#: A new Fargate task pulls the image and starts the bot: the load balancer's checks are ignored
#: this long after it starts (ECS service healthCheckGracePeriodSeconds).
HEALTH_CHECK_GRACE = Duration.seconds(120)
#: Scale out fast (a Fargate task starts in about a minute), in slowly (sessions last minutes).
SCALE_OUT_COOLDOWN = Duration.minutes(1)
SCALE_IN_COOLDOWN = Duration.minutes(10)
#: The SageMaker runtime's bidirectional streaming port (constructs_lib.network.props.RUNTIME_PORTS:
#: reported by third parties, not AWS documentation: unconfirmed).
BIDI_PORT = 8443
HTTPS = 443
#: The image's build context (the repository root): only what services/agent/Dockerfile copies,
#: i.e. the lock and the modules the bot imports (tests/agent/test_agent_image.py checks both).
IMAGE_FILES = (
    "services/agent/Dockerfile",
    "requirements-agent.lock",
    *(
        f"services/agent/{name}.py"
        for name in ("__init__", "__main__", "llm", "metrics", "protocol", "server", "session")
    ),
    "contracts/__init__.py",
    "contracts/agent_env.py",
    "contracts/agent_metrics.py",
    "contracts/model.py",
    "contracts/realtime.py",
    "contracts/sonic.py",
    *(
        f"voice_client/{name}.py"
        for name in (
            "__init__",
            "aws",
            "errors",
            "audio",
            "bounded_json",
            "sagemaker_client",
            "sagemaker_errors",
            "sagemaker_stream",
            "sonic",
        )
    ),
    *(
        f"voice_client/frameworks/{name}.py"
        for name in (
            "__init__",
            "extras",
            "pipecat_sonic",
            "pipecat_voxtral",
            "sonic_stream",
            "targets",
            "voxtral_stream",
        )
    ),
    *(
        f"voice_client/realtime/{name}.py"
        for name in (
            "__init__",
            "actions",
            "auth",
            "driver",
            "machine",
            "policy",
            "protocol",
            "result",
            "transcript",
            "transport",
            "websocket",
        )
    ),
    "services/bridge/__init__.py",
    "services/bridge/task_protection.py",
)
IMAGE_CONTEXT = ["*", *(f"!{path}" for path in IMAGE_FILES), "**/__pycache__"]


@dataclass(frozen=True)
class VoiceAgentServiceProps:
    """Props of :class:`VoiceAgentService`.

    Attributes:
        env: the bot's environment (endpoint names or URL, LLM, prompt, voice, limits, metric
            dimensions); its limits must equal ``sizing``'s.
        sizing: task size, task range and session limits.
        image_directory: the Docker build context (the repository root); the image is built from
            ``services/agent/Dockerfile`` with only what it copies in the context
            (:data:`IMAGE_CONTEXT`).
        vpc: where the tasks and the load balancer go. subnets: the tasks' subnets (and an internal
            load balancer's); empty = the VPC's private subnets with egress.
        private: the subnets have no route to the internet (network.mode=vpc): the tasks' egress is
            limited to the VPC's CIDR block and HTTPS (S3's gateway endpoint).
        vpc_cidr: the VPC's CIDR block as a literal (the tasks' egress in private mode).
        caller_cidrs: who may reach an internal load balancer (empty: the VPC's CIDR block).
        internet_facing / certificate_arn: the load balancer's scheme and TLS certificate.
        voxtral_url_port: with ``env.voxtral_url``, the port of the Voxtral service's load balancer.
        token_secret_kms_key_arn: the key of the Voxtral token secret, or None.
        deployment: the value of the metrics' Deployment dimension and the alarms' name prefix.
        alarm_voice_to_voice_p95_ms: the voice-to-voice p95 alarm threshold.
        log_kms_key_arn / log_retention_days / retain_data: the logs' key, retention and removal.
        alarm_topic: where alarms send ALARM and OK.
    """

    env: AgentEnv
    sizing: AgentSizing
    image_directory: str
    vpc: ec2.IVpc
    deployment: str
    subnets: Sequence[ec2.ISubnet] = ()
    private: bool = False
    vpc_cidr: str | None = None
    caller_cidrs: Sequence[str] = ()
    internet_facing: bool = False
    certificate_arn: str | None = None
    voxtral_url_port: int | None = None
    token_secret_kms_key_arn: str | None = None
    alarm_voice_to_voice_p95_ms: float = 1500.0
    log_kms_key_arn: str | None = None
    log_retention_days: int = 30
    retain_data: bool = False
    alarm_topic: sns.ITopic | None = None
    extra_environment: dict[str, str] = field(default_factory=dict)

    def problems(self, p: Problems) -> None:
        self.sizing.problems(p)
        env, sizing = self.env, self.sizing
        limits = {
            "max_sessions": sizing.max_sessions_per_task,
            "max_session_s": sizing.max_session_s,
            "idle_s": sizing.idle_s,
        }
        for name, value in limits.items():
            if getattr(env, name) != value:
                p.add(f"env.{name}", getattr(env, name), f"must equal the sizing's ({value})")
        if self.internet_facing and self.certificate_arn is None:
            p.add("certificate_arn", None, "must be set with internet_facing (HTTPS only)")
        if self.internet_facing and self.private:
            p.add("internet_facing", True, "a private network has no internet gateway")
        if self.private and not self.vpc_cidr:
            p.add("vpc_cidr", self.vpc_cidr, "must be the VPC's CIDR block with private")
        if env.voxtral_url is not None and self.voxtral_url_port is None:
            p.add("voxtral_url_port", None, "must be the Voxtral load balancer's port with a URL")


class VoiceAgentService(Construct):
    """The voice agent on Fargate behind an ALB (see the module docstring).

    Attributes:
        load_balancer, listener, target_group, access_logs, cluster, task_definition, container,
        service, log_group, task_security_group, url (ws:// or wss://), health_url, alarms
        (``{rule name: alarm}``), rules.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(self, scope: Construct, construct_id: str, props: VoiceAgentServiceProps) -> None:
        problems = Problems()
        props.problems(problems)
        problems.raise_if_any(f"VoiceAgentService {construct_id}")
        super().__init__(scope, construct_id)
        self._props = props
        removal = RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY
        key = (
            kms.Key.from_key_arn(self, "LogKey", props.log_kms_key_arn)
            if props.log_kms_key_arn
            else None
        )
        subnets = (
            list(props.subnets)
            if props.subnets
            else props.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        )
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "The task and execution roles' statements name this "
                "service's own endpoints, model, secret and cluster; an inline policy belongs to "
                "its one role and goes with it.",
            },
        )
        self._load_balancer(props, subnets, removal)
        self._task(props, key, removal)
        self._service(props, subnets)
        self._alarms(props)

    # --- Construction steps, in the order they run ------------------------------------------------

    def _load_balancer(
        self, props: VoiceAgentServiceProps, subnets: list[ec2.ISubnet], removal: RemovalPolicy
    ) -> None:
        """The ALB (WebSocket idle timeout), its access-log bucket, the listener, the target
        group."""
        https = props.certificate_arn is not None
        self.load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=props.vpc,
            internet_facing=props.internet_facing,
            vpc_subnets=(
                ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC)
                if props.internet_facing
                else ec2.SubnetSelection(subnets=subnets)
            ),
            idle_timeout=Duration.seconds(alb_idle_timeout_s(props.sizing.idle_s)),
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
        self._acknowledge_access_logs()
        self.load_balancer.log_access_logs(self.access_logs, prefix="alb")
        if not props.retain_data:
            # Emptied only once the load balancer is gone (it writes a file per node every 5
            # minutes).
            self.access_logs.node.find_child("AutoDeleteObjectsCustomResource").node.add_dependency(
                self.load_balancer
            )
        port = HTTPS if https else 80
        if not props.internet_facing:
            for cidr in props.caller_cidrs or [props.vpc_cidr or props.vpc.vpc_cidr_block]:
                self.load_balancer.connections.allow_from(
                    ec2.Peer.ipv4(cidr), ec2.Port.tcp(port), f"Voice agent callers from {cidr}"
                )
        self._acknowledge_load_balancer(props, https)
        not_found = elbv2.ListenerAction.fixed_response(
            404, content_type="text/plain", message_body="not found"
        )
        if https:
            assert props.certificate_arn is not None  # what https means
            self.listener = self.load_balancer.add_listener(
                "Https",
                port=HTTPS,
                protocol=elbv2.ApplicationProtocol.HTTPS,
                certificates=[elbv2.ListenerCertificate.from_arn(props.certificate_arn)],
                ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
                open=props.internet_facing,
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
            skip_checkov(
                self.listener,
                "AWS::ElasticLoadBalancingV2::Listener",
                {
                    "CKV_AWS_2": "Internal load balancer without a certificate: HTTP inside the "
                    "VPC from the caller CIDRs only; set agent.certificate_arn for HTTPS.",
                    "CKV_AWS_103": "No TLS listener without a certificate (internal, HTTP inside "
                    "the VPC).",
                },
            )
        self.target_group = elbv2.ApplicationTargetGroup(
            self,
            "Targets",
            vpc=props.vpc,
            port=AGENT_PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            target_type=elbv2.TargetType.IP,
            deregistration_delay=Duration.seconds(
                min(props.sizing.max_session_s, MAX_DEREGISTRATION_DELAY_S)
            ),
            health_check=elbv2.HealthCheck(
                path=HEALTH_PATH,
                healthy_http_codes="200",
                interval=Duration.seconds(10),
                timeout=Duration.seconds(5),
                healthy_threshold_count=2,
                unhealthy_threshold_count=3,
            ),
        )
        # Every path goes to the bot: its WebSocket path is the bot's own; /health is its check.
        self.listener.add_action(
            "Sessions",
            priority=10,
            conditions=[elbv2.ListenerCondition.path_patterns(["/*"])],
            action=elbv2.ListenerAction.forward([self.target_group]),
        )
        dns = self.load_balancer.load_balancer_dns_name
        self.url = f"{'wss' if https else 'ws'}://{dns}"
        self.health_url = f"{'https' if https else 'http'}://{dns}{HEALTH_PATH}"

    def _task(
        self, props: VoiceAgentServiceProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> None:
        """The log group, the Fargate task definition, its container and the task role's grants."""
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            removal_policy=removal,
            encryption_key=key,
            retention=getattr(logs.RetentionDays, LOG_RETENTION[props.log_retention_days]),
        )
        sizing = props.sizing
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=sizing.cpu,
            memory_limit_mib=sizing.memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        image = ecs.ContainerImage.from_asset(
            props.image_directory,
            file="services/agent/Dockerfile",
            platform=ecr_assets.Platform.LINUX_AMD64,
            exclude=IMAGE_CONTEXT,
        )
        environment = {
            **props.env.to_env(),
            # ExpiresInMinutes of the bot's task protection requests: one whole session.
            "TASK_PROTECTION_MINUTES": str(task_protection_minutes(sizing.max_session_s)),
            **props.extra_environment,
        }
        self.container = self.task_definition.add_container(
            "Agent",
            image=image,
            port_mappings=[ecs.PortMapping(container_port=AGENT_PORT)],
            environment=environment,
            logging=ecs.LogDrivers.aws_logs(stream_prefix="agent", log_group=self.log_group),
            stop_timeout=Duration.seconds(FARGATE_MAX_STOP_TIMEOUT_S),
            readonly_root_filesystem=True,
        )
        Validations.of(self.task_definition).acknowledge(
            Acknowledgment(
                id="AwsSolutions-ECS2",
                reason="The environment holds configuration only (endpoint names, model id, "
                "prompt, voice, limits); the Voxtral service's bearer token is read from Secrets "
                "Manager at run time by its ARN, never passed in the environment.",
            )
        )
        Validations.of(self.task_definition.obtain_execution_role()).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ecr:GetAuthorizationToken (added by the CDK for the image asset) "
                "supports no resource-level permission; image pulls stay limited to the asset "
                "repository.",
            )
        )
        self._grant(props, self.task_definition.task_role)

    def _grant(self, props: VoiceAgentServiceProps, role: iam.IRole) -> None:
        """Least privilege: the two endpoints' streaming actions, the one model, the token secret
        and task protection on this cluster's tasks."""
        stack = Stack.of(self)
        env = props.env
        statements: list[iam.PolicyStatement] = []
        if env.voxtral_endpoint is not None:
            statements.append(
                iam.PolicyStatement(
                    sid="ListenWithVoxtral",
                    actions=[INVOKE_BIDIRECTIONAL],
                    resources=[self._endpoint_arn(env.voxtral_endpoint)],
                )
            )
        statements.append(
            iam.PolicyStatement(
                sid="SpeakWithSonic",
                actions=[INVOKE_WITH_RESPONSE_STREAM],
                resources=[self._endpoint_arn(env.sonic_endpoint)],
            )
        )
        policy = iam.Policy(self, "InvokeEndpoints", statements=statements)
        policy.attach_to_role(role)  # type: ignore[arg-type]
        if env.voxtral_endpoint is not None:
            # cfn-lint's IAM action list predates bidirectional streaming (W3037); the action is
            # documented in the InvokeEndpointWithBidirectionalStream API reference.
            cast(CfnResource, policy.node.default_child).add_metadata(
                "cfn-lint", {"config": {"ignore_checks": ["W3037"]}}
            )
        if env.llm_model_id is not None:
            for statement in bedrock_statements(stack, env.llm_model_id):
                role.add_to_principal_policy(statement)
            geography, model = split_profile(env.llm_model_id)
            if geography is not None:
                Validations.of(role).acknowledge(
                    Acknowledgment(
                        id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::"
                        f"foundation-model/{model}]",
                        reason="An inference profile routes to the model in Regions Bedrock "
                        "chooses (they depend on the source Region and grow; a global profile "
                        "reaches every commercial Region): the grant names the one model, in any "
                        "Region (Bedrock user guide, 'Prerequisites for inference profiles').",
                    )
                )
        if env.voxtral_token_secret_arn is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="ReadVoxtralToken",
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[env.voxtral_token_secret_arn],
                )
            )
            if props.token_secret_kms_key_arn is not None:
                # GetSecretValue of a secret under a customer managed key needs kms:Decrypt on it
                # (Secrets Manager user guide, "Secret encryption and decryption").
                role.add_to_principal_policy(
                    iam.PolicyStatement(
                        sid="DecryptVoxtralToken",
                        actions=["kms:Decrypt"],
                        resources=[props.token_secret_kms_key_arn],
                        conditions={
                            "StringEquals": {
                                "kms:ViaService": f"secretsmanager.{stack.region}.amazonaws.com",
                                "kms:EncryptionContext:SecretARN": env.voxtral_token_secret_arn,
                            }
                        },
                    )
                )

    def _service(self, props: VoiceAgentServiceProps, subnets: list[ec2.ISubnet]) -> None:
        """The cluster, the tasks' security group, the Fargate service, its scaling and the grant
        of task protection on this cluster's tasks."""
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=props.vpc, container_insights_v2=ecs.ContainerInsights.ENHANCED
        )
        self.task_security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=props.vpc,
            allow_all_outbound=False,
            description="Voice agent tasks - the agent port from the load balancer - HTTPS and the "
            "SageMaker runtime streaming port out",
        )
        self._egress(props)
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            security_groups=[self.task_security_group],
            vpc_subnets=ec2.SubnetSelection(subnets=subnets),
            assign_public_ip=False,
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            health_check_grace_period=HEALTH_CHECK_GRACE,
            enable_ecs_managed_tags=True,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
        )
        # Also opens the task group to the load balancer's on the agent port (and nothing else).
        self.service.attach_to_application_target_group(self.target_group)
        stack = Stack.of(self)
        tasks = stack.format_arn(
            service="ecs", resource="task", resource_name=f"{self.cluster.cluster_name}/*"
        )
        self.task_definition.task_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ProtectLiveSessions",
                actions=["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"],
                resources=[tasks],
            )
        )
        Validations.of(self.task_definition.task_role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, tasks)}]",
                reason="Task ids are random; the wildcard is limited to the tasks of this "
                "cluster, and a task protects only itself through the agent.",
            )
        )
        sizing = props.sizing
        scaling = self.service.auto_scale_task_count(
            min_capacity=sizing.min_tasks, max_capacity=sizing.max_tasks
        )
        scaling.scale_to_track_custom_metric(
            "LiveSessions",
            metric=self.metric(ACTIVE_SESSIONS, "Average"),
            target_value=sizing.scaling_target,
            scale_in_cooldown=SCALE_IN_COOLDOWN,
            scale_out_cooldown=SCALE_OUT_COOLDOWN,
        )

    def _egress(self, props: VoiceAgentServiceProps) -> None:
        """The tasks' outbound rules: HTTPS (AWS APIs; in a private network only the VPC endpoints
        and S3's gateway are routable), the runtime's streaming port, the Voxtral service's port,
        an LLM server's port."""
        group = self.task_security_group
        if props.private:
            assert props.vpc_cidr is not None  # the props' check requires it with private
            inside = ec2.Peer.ipv4(props.vpc_cidr)
        else:
            inside = ec2.Peer.any_ipv4()
        group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(HTTPS),
            "HTTPS to AWS APIs (Bedrock, SageMaker runtime, Logs, ECR, S3)",
        )
        if props.env.voxtral_endpoint is not None:
            group.add_egress_rule(
                inside,
                ec2.Port.tcp(BIDI_PORT),
                "SageMaker runtime bidirectional streaming (Voxtral)",
            )
        if props.voxtral_url_port is not None and props.voxtral_url_port != HTTPS:
            group.add_egress_rule(
                ec2.Peer.ipv4(props.vpc_cidr or props.vpc.vpc_cidr_block),
                ec2.Port.tcp(props.voxtral_url_port),
                "The Voxtral service internal load balancer",
            )
        if props.env.llm_url is not None:
            parts = urlsplit(props.env.llm_url)
            port = parts.port or (HTTPS if parts.scheme == "https" else 80)
            if port != HTTPS:
                group.add_egress_rule(
                    inside, ec2.Port.tcp(port), "The OpenAI-compatible LLM server"
                )
        skip_checkov(
            group,
            "AWS::EC2::SecurityGroup",
            {
                "CKV_AWS_382": "Egress is HTTPS and named ports only; in network.mode=vpc the "
                "subnets route nothing but the VPC and S3's gateway endpoint."
            },
        )
        Validations.of(group).acknowledge(
            Acknowledgment(
                id="AwsSolutions-EC23",
                reason="Only the load balancer's group may reach the tasks (on the agent port).",
            )
        )

    def _alarms(self, props: VoiceAgentServiceProps) -> None:
        self.rules = self.alarm_rules()
        action = actions.SnsAction(props.alarm_topic) if props.alarm_topic is not None else None
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for rule in self.rules:
            self.alarms[rule.name] = alarm_from_rule(
                self, f"Alarm{rule.name}", rule, alarm_name(props.deployment, rule.name), action
            )

    # --- Metrics and alarms ---------------------------------------------------------------------

    def metric(self, name: str, statistic: str) -> cloudwatch.Metric:
        """One of the bot's metrics (the bot's namespace, this deployment), per minute
        (:func:`~constructs_lib.agent.monitoring.agent_metric`)."""
        return agent_metric(self._props.deployment, name, statistic)

    def alarm_rules(self) -> list[AlarmRule]:
        return agent_alarm_rules(self._props.deployment, self._props.alarm_voice_to_voice_p95_ms)

    # --- nag acknowledgements -------------------------------------------------------------------

    def _acknowledge_access_logs(self) -> None:
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
                "S3BucketLoggingEnabled": "This bucket receives the load balancer's access logs.",
                "S3DefaultEncryptionKMS": "Application Load Balancer access logs can be written "
                "to SSE-S3 buckets only (Elastic Load Balancing user guide, 'Access logs').",
                "S3BucketVersioningEnabled": "Access logs are written once and removed by the "
                "lifecycle rule.",
                "S3BucketReplicationEnabled": "Access logs stay in the deployment's Region.",
            },
        )
        skip_checkov(
            self.access_logs,
            "AWS::S3::Bucket",
            {
                "CKV_AWS_18": "This bucket receives the load balancer's access logs.",
                "CKV_AWS_21": "Access logs are written once and removed only by the lifecycle "
                "rule.",
            },
        )
        for provider in stack_singletons(self, "Custom::S3AutoDeleteObjects"):
            skip_checkov(provider, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)

    def _acknowledge_load_balancer(self, props: VoiceAgentServiceProps, https: bool) -> None:
        Validations.of(self.load_balancer).acknowledge(
            Acknowledgment(
                id="AwsSolutions-EC23",
                reason=(
                    "An internet-facing load balancer takes callers from anywhere on 443 (HTTPS "
                    "only)."
                    if props.internet_facing
                    else "An internal load balancer takes callers from the caller CIDRs (or the "
                    "VPC's) only."
                ),
            )
        )
        acknowledge_compliance(
            self.load_balancer,
            {
                "ELBDeletionProtectionEnabled": "cdk destroy must remove the load balancer (it "
                "holds no data).",
                "ALBWAFEnabled": "Callers send WebSocket frames of audio after one upgrade "
                "request, which a web ACL does not inspect.",
            },
        )
        if not https:
            acknowledge_compliance(
                self.load_balancer,
                {
                    "ALBHttpToHttpsRedirection": "Internal load balancer without a certificate: "
                    "HTTP on 80 inside the VPC; set agent.certificate_arn for HTTPS.",
                    "ELBv2ACMCertificateRequired": "Internal load balancer without a certificate "
                    "(HTTP inside the VPC); internet-facing needs one.",
                },
            )

    def _endpoint_arn(self, name: str) -> str:
        # SageMaker endpoint ARNs hold the name in lower case.
        return Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=name.lower()
        )


def bedrock_statements(stack: Stack, model_id: str) -> list[iam.PolicyStatement]:
    """ConverseStream on one model: the foundation model in the stack's Region, or an inference
    profile and its model in every Region the profile may route to (Bedrock user guide,
    "Prerequisites for inference profiles": the role needs the model "in each Region associated
    with" the profile)."""
    geography, model = split_profile(model_id)
    if geography is None:
        return [
            iam.PolicyStatement(
                sid="Converse",
                actions=[BEDROCK_STREAM],
                resources=[
                    stack.format_arn(
                        service="bedrock",
                        resource="foundation-model",
                        resource_name=model,
                        account="",
                    )
                ],
            )
        ]
    profile = stack.format_arn(
        service="bedrock", resource="inference-profile", resource_name=model_id
    )
    return [
        iam.PolicyStatement(
            sid="ConverseThroughProfile", actions=[BEDROCK_STREAM], resources=[profile]
        ),
        iam.PolicyStatement(
            sid="ConverseProfileModel",
            actions=[BEDROCK_STREAM],
            resources=[
                stack.format_arn(
                    service="bedrock",
                    resource="foundation-model",
                    resource_name=model,
                    region="*",
                    account="",
                )
            ],
        ),
    ]
