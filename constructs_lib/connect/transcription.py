"""Live call transcription for Amazon Connect: the start function, the calls queue, the consumer
service on ECS Fargate, the transcript bus and table, and (when asked) the instance's media-streams
storage, the function's association with the instance and an example contact flow.

Why Fargate for the consumers: a call lasts minutes to hours (Lambda stops at 15 minutes), the work
is CPU (Matroska parsing, resampling, protocol) with no GPU, and one asyncio task holds many calls;
Fargate runs such a long-lived, scaled-out process with no hosts to manage, and scales on the
queue's calls in flight (one message per live call).

Rules from the CloudFormation and API references this construct keeps (checked in
:meth:`ConnectTranscriptionProps .problems` and by tests):

- ``AWS::Connect::InstanceStorageConfig`` ``KinesisVideoStreamConfig``: ``Prefix`` 1-128 characters,
  ``RetentionPeriodHours`` 0-87600 ("0 ... the stream does not persist data": the consumer needs at
  least 1, to resume and to wait out a full endpoint), ``EncryptionConfig`` required (``KMS`` with a
  key). An instance has one MEDIA_STREAMS config: creating one where the instance already has one
  fails, so it is made only when the settings ask for it (``connect.create_storage_config``).
- ``AWS::Connect::IntegrationAssociation`` ``LAMBDA_FUNCTION`` with the function's ARN (replacement
  on any change); Connect invokes the function as ``connect.amazonaws.com``, so the function's
  resource policy allows that principal for this account and instance only (``SourceAccount``,
  ``SourceArn``).
- ``AWS::Connect::ContactFlow``: ``Content`` is the flow language JSON (at most 256000 characters),
  ``Type`` ``CONTACT_FLOW``, ``State`` ``ACTIVE``. Its ``TransferContactToQueue`` "places a contact
  that is not already in a queue into the contact's TargetQueue", which an inbound call has not
  until ``UpdateContactTargetQueue`` (the "Set working queue" block) sets it: the example flow sets
  ``connect.queue_arn`` first (flow language reference).
- Private networks (``network.mode=vpc``, an existing VPC): Kinesis Video Streams has one interface
  VPC endpoint, ``com.amazonaws.REGION.kinesisvideo`` (Kinesis Video Streams developer guide,
  "Access Amazon Kinesis Video Streams using AWS PrivateLink"; not yet in the CDK's
  ``InterfaceVpcEndpointAwsService`` catalogue), which serves the control plane (GetDataEndpoint)
  and the media data plane (GetMedia) through the private DNS name
  ``*.kinesisvideo.REGION.amazonaws.com`` (the per-stream data endpoints GetDataEndpoint returns are
  under it). Its rules: private DNS must be on (the endpoint's own DNS names are "not served"); the
  private DNS zone covers the whole VPC, so every Kinesis Video Streams client in the VPC uses it,
  and WebRTC (signaling, STUN, TURN) fails there; a VPC can hold one endpoint with private DNS per
  service; 500 requests per second per account and endpoint (GetMedia is one long request per call);
  only in the Regions the guide lists (:data:`KVS_ENDPOINT_REGIONS`). With it
  (``connect.kvs_vpc_endpoint``, default true) call audio stays in the VPC; without it (a VPC that
  has one already, or WebRTC workloads) it goes through the subnets' egress to the public endpoint.
  The consumers' other calls (SQS, EventBridge, DynamoDB, CloudWatch Logs, ECR, Secrets Manager, the
  SageMaker runtime) use the VPC's routes: the endpoints the app's PrivateNetwork makes for them
  (``connect_endpoints``, ``constructs_lib.network.props.CONNECT_INTERFACE_ENDPOINTS``), or an
  existing VPC's own endpoints or NAT. This construct makes only the Kinesis Video Streams one (one
  owner per service).
"""

from __future__ import annotations

import json
import re

from aws_cdk import (
    Acknowledgment,
    Annotations,
    CfnOutput,
    Duration,
    Fn,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
    aws_cloudwatch as cloudwatch,
    aws_cloudwatch_actions as actions,
    aws_connect as connect,
    aws_dynamodb as dynamodb,
    aws_ec2 as ec2,
    aws_ecr_assets as ecr_assets,
    aws_ecs as ecs,
    aws_events as events,
    aws_iam as iam,
    aws_kms as kms,
    aws_lambda as lambda_,
    aws_logs as logs,
    aws_sqs as sqs,
)
from constructs import Construct

from constructs_lib.connect.grants import grant_consumers, kms_via
from constructs_lib.connect.monitoring import (  # noqa: F401 (re-exported: the names stay importable from here)
    alarm_name,
    bus_dead_letters_rule,
    connect_alarm_rules,
    dashboard_rows,
    metric_dimensions,
)
from constructs_lib.connect.props import (  # noqa: F401 (re-exported: the names stay importable from here)
    ALARM_RULE_NAMES,
    BUS_DEAD_LETTERS_RULE,
    CALLS_WAITING_ALARM_MINUTES,
    FARGATE_MEMORY_MIB,
    FUNCTION_TIMEOUT_S,
    INSTANCE_ARN_PATTERN,
    KVS_ENDPOINT_PORT,
    KVS_ENDPOINT_REGIONS,
    MAX_FLOW_CHARACTERS,
    MAX_RECEIVES,
    MAX_RETENTION_HOURS,
    METRIC_DIMENSION,
    METRIC_NAMESPACE,
    QUEUE_ARN_PATTERN,
    QUEUE_VISIBILITY_S,
    SCALING_TARGET_FRACTION,
    STREAM_PREFIX_PATTERN,
    ConnectTranscriptionProps,
)
from constructs_lib.monitoring.alarms import AlarmRule, alarm_from_rule
from constructs_lib.nag import acknowledge_compliance, skip_checkov
from constructs_lib.sagemaker_endpoint.props import LOG_RETENTION
from constructs_lib.service_code import handler_dir
from constructs_lib.validation import Problems

#: The start function's code (``services/handlers/connect_start/``: ``index.py``, standard library
#: only) and the example flow beside it (Connect's flow language), not part of the function's asset.
FUNCTION_DIR = handler_dir("connect_start")
EXAMPLE_FLOW = FUNCTION_DIR / "example_flow.json"
#: checkov's Lambda checks the start function does not follow, each with its source. Its environment
#: is under the data key whenever there is one (so CKV_AWS_173 passes in network.mode=vpc).
START_FUNCTION_CHECKOV_SKIPS = {
    "CKV_AWS_115": (
        "No reserved concurrency: it reserves and caps at once, so a cap refuses hand-offs in a"
        " burst of call starts (Connect takes the block's error branch), and 'You can reserve "
        "up to the Unreserved account concurrency value ... minus 100', which fails the "
        "deployment in accounts with a low concurrency quota (Lambda developer guide, "
        "'Configuring reserved concurrency for a function'). An invocation is one SQS send per "
        "call start, well under a second."
    ),
    "CKV_AWS_116": (
        "Connect invokes it synchronously (the example flow's InvocationType SYNCHRONOUS; "
        "Amazon Connect admin guide, 'Flow block: AWS Lambda function'); DeadLetterConfig is "
        "'the dead-letter queue for failed asynchronous invocations' (Lambda API reference). A "
        "failure takes the flow's error branch, and the function logs every refusal."
    ),
    "CKV_AWS_117": (
        "Not in the VPC: it reads no call data and reaches nothing in the VPC; it sends one SQS"
        " message (the call's contact and stream identifiers) per call, over TLS (the queue "
        "denies other transport), to a queue under the data key. In a VPC it would need an sqs "
        "endpoint and network-interface permissions (Lambda developer guide, 'Giving Lambda "
        "functions access to resources in an Amazon VPC'), and it would still send the "
        "same message to the same queue. See docs/private-deployment.md."
    ),
}


class ConnectTranscription(Construct):
    """Live call transcription for an Amazon Connect instance (see the module docstring). Each step
    builds into this construct itself, never into a helper construct: the resources' construct
    paths, and so their logical ids, do not depend on how the steps are split.

    Attributes:
        table, bus, bus_dead_letters (None without a customer managed key), dead_letters, queue,
        function, service, kvs_endpoint (in a VPC with ``kvs_vpc_endpoint``), alarms, dashboard.
    """

    def __init__(
        self, scope: Construct, construct_id: str, props: ConnectTranscriptionProps
    ) -> None:
        super().__init__(scope, construct_id)
        p = Problems(name=lambda prop: f"connect.{prop}")
        props.problems(p)
        if list(p):
            raise ValueError("; ".join(p))
        removal = RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY
        key = (
            kms.Key.from_key_arn(self, "DataKey", props.kms_key_arn) if props.kms_key_arn else None
        )
        self._transcripts(props, key, removal)
        self._calls_queues(props, key, removal)
        self._start_function(props, key, removal)
        self._instance_resources(props)
        cluster = self._cluster(props, key, removal)
        task = self._consumer_task(props, key, removal)
        self._consumer_service(props, cluster, task)
        self._scaling(props)
        rules = self._alarms(props)
        self._dashboard(rules)
        self._outputs()

    # --- Construction steps, in the order they run ----------------------------------------------

    def _transcripts(
        self, props: ConnectTranscriptionProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> None:
        """The transcripts' table and bus, and the bus's dead-letter queue under a customer managed
        key."""
        self.table = dynamodb.Table(
            self,
            "Transcripts",
            partition_key=dynamodb.Attribute(name="ContactId", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="Item", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="ExpiresAt",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=(
                dynamodb.TableEncryption.CUSTOMER_MANAGED
                if key is not None
                else dynamodb.TableEncryption.AWS_MANAGED
            ),
            encryption_key=key,
            removal_policy=removal,
            deletion_protection=props.retain_data,
        )
        acknowledge_compliance(
            self.table,
            {
                "DynamoDBInBackupPlan": "Transcripts live connect.transcript_ttl_days (TTL) by "
                "design; point-in-time recovery covers mistakes, and a Backup plan would keep "
                "copies past the TTL."
            },
        )
        # Under a customer managed key, events that fail to encrypt or decrypt (the key disabled,
        # deleted or its policy changed) go to the bus's dead-letter queue: "We strongly recommend
        # specifying a DLQ for event buses" (EventBridge user guide, "Encrypting EventBridge event
        # buses with AWS KMS keys"). It is a standard queue (EventBridge DLQs are standard SQS
        # queues, "Using dead-letter queues to process undelivered events"). Not under the bus's
        # key: the errors it is for ("the specified customer managed key being disabled or missing",
        # "Using dead-letter queues to capture encrypted event errors") would refuse its
        # SendMessage's KMS calls too; SQS-managed encryption (SSE-SQS) needs no KMS permission of
        # the sender.
        self.bus_dead_letters = (
            sqs.Queue(
                self,
                "BusDeadLetters",
                retention_period=Duration.days(14),
                enforce_ssl=True,
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                removal_policy=removal,
            )
            if key is not None
            else None
        )
        self.bus = events.EventBus(
            self, "Bus", kms_key=key, dead_letter_queue=self.bus_dead_letters
        )
        self.bus.apply_removal_policy(
            RemovalPolicy.DESTROY
        )  # holds no data: events are delivered, not kept
        if self.bus_dead_letters is not None:
            # EventBridge sends to a DLQ as events.amazonaws.com: the queue policy allows that
            # principal for this bus only (EventBridge user guide, "Using dead-letter queues to
            # process undelivered events", granting permissions: aws:SourceArn of the sender; a bus
            # DLQ's sender being the bus: unconfirmed).
            self.bus_dead_letters.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EventBridgeDeadLetters",
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                    actions=["sqs:SendMessage"],
                    resources=[self.bus_dead_letters.queue_arn],
                    conditions={"ArnEquals": {"aws:SourceArn": self.bus.event_bus_arn}},
                )
            )
            Validations.of(self.bus_dead_letters).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-SQS3",
                    reason="It is the transcript bus's dead-letter queue (the EventBus's "
                    "DeadLetterConfig, which cdk-nag does not read); a DLQ has no DLQ.",
                )
            )
            skip_checkov(
                self.bus_dead_letters,
                "AWS::SQS::Queue",
                {
                    "CKV_AWS_27": "Encrypted at rest by SQS (SqsManagedSseEnabled), not with the "
                    "data key: it takes the bus's events on 'the specified customer managed key "
                    "being disabled or missing' (EventBridge user guide, 'Using dead-letter "
                    "queues to capture encrypted event errors'), which would refuse a queue "
                    "under that key too."
                },
            )

    def _calls_queues(
        self, props: ConnectTranscriptionProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> None:
        """The calls queue (one message per live call) and its dead-letter queue."""
        self.dead_letters = sqs.Queue(
            self,
            "CallsDeadLetters",
            retention_period=Duration.days(14),
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.KMS
            if key is not None
            else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            removal_policy=removal,
        )
        self.queue = sqs.Queue(
            self,
            "Calls",
            visibility_timeout=Duration.seconds(QUEUE_VISIBILITY_S),
            retention_period=Duration.hours(min(props.retention_hours, 24 * 14)),
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.KMS
            if key is not None
            else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            removal_policy=removal,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=MAX_RECEIVES
            ),
        )

    def _start_function(
        self, props: ConnectTranscriptionProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> None:
        """The function a contact flow invokes to hand a call to the consumers: its logs, its grants
        and Connect's permission to invoke it."""
        stack = Stack.of(self)
        function_logs = logs.LogGroup(
            self,
            "StartFunctionLogs",
            retention=_retention(props.log_retention_days),
            encryption_key=key,
            removal_policy=removal,
        )
        self.function = lambda_.Function(
            self,
            "StartFunction",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.handler",
            code=lambda_.Code.from_asset(
                str(FUNCTION_DIR), exclude=["example_flow.json", "__pycache__"]
            ),
            timeout=Duration.seconds(FUNCTION_TIMEOUT_S),
            memory_size=256,
            log_group=function_logs,
            environment={
                "CALLS_QUEUE_URL": self.queue.queue_url,
                "STREAM_NAME_PREFIX": props.stream_prefix,
                "INSTANCE_ARN": props.instance_arn,
            },
            # Under the data key when there is one (always in network.mode=vpc), as the queue it
            # names: "only users in your account with access to the KMS key can view or manage
            # environment variables on the function" (Lambda developer guide, "Securing Lambda
            # environment variables"). The values name resources, no secret.
            environment_encryption=key,
            description="Amazon Connect: hands a streaming call to the transcription consumers",
        )
        # SendMessage to this queue; with a customer managed key, SQS needs the sender to have
        # kms:GenerateDataKey and kms:Decrypt on it (SQS developer guide, "Key management"): those
        # two, not CDK's wildcard grant.
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                sid="SendCalls", actions=["sqs:SendMessage"], resources=[self.queue.queue_arn]
            )
        )
        if key is not None:
            # Through SQS only: the data key may also be the stream key (connect.stream_kms_key_arn
            # unset), and an unconditioned kms:Decrypt on it would make the stream key's
            # kms:ViaService condition moot.
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    sid="EncryptCalls",
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=[key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": kms_via(stack, "sqs")}},
                )
            )
        # Connect invokes the function as connect.amazonaws.com on behalf of the instance:
        # aws:SourceAccount is the instance's account (Lambda developer guide, "Working with
        # resource-based IAM policies in Lambda"), which must be this stack's (the association below
        # is made in this account; a cross-account instance is refused).
        instance_match = INSTANCE_ARN_PATTERN.match(props.instance_arn)
        assert instance_match is not None, props.instance_arn  # the props' check refuses any other
        instance_account = instance_match.group(2)
        if not Token.is_unresolved(stack.account) and stack.account != instance_account:
            raise ValueError(
                f"connect.instance_arn={props.instance_arn!r}: the instance is in account "
                f"{instance_account}, this deployment in {stack.account}; deploy the app in the "
                "instance's account (its function association, storage config and flow are made "
                "there)"
            )
        self.function.add_permission(
            "ConnectInvoke",
            principal=iam.ServicePrincipal("connect.amazonaws.com"),  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            source_account=instance_account,
            source_arn=props.instance_arn,
        )
        Validations.of(self.function).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                reason="the managed basic execution policy: logs only (to its own log group)",
            )
        )
        acknowledge_compliance(
            self.function,
            {
                "LambdaConcurrency": "Connect invokes the function once per call that starts "
                "streaming; a reserved cap would refuse calls' hand-off in a burst, and the "
                "account's concurrency bounds it already.",
                "LambdaDLQ": "Connect invokes it synchronously (a dead-letter queue applies to "
                "asynchronous invocations only); a failure is the flow's error branch, and the "
                "function logs every refusal.",
                "LambdaInsideVPC": "It only sends one SQS message per call and answers Connect "
                "within the block's time limit; it reads no call data. The consumers, which do, "
                "run in the VPC.",
            },
        )
        skip_checkov(self.function, "AWS::Lambda::Function", START_FUNCTION_CHECKOV_SKIPS)

    def _instance_resources(self, props: ConnectTranscriptionProps) -> None:
        """What the settings ask of the instance: the function's association, the media streams
        storage and the example contact flow."""
        association = (
            connect.CfnIntegrationAssociation(
                self,
                "FunctionAssociation",
                instance_id=props.instance_arn,
                integration_type="LAMBDA_FUNCTION",
                integration_arn=self.function.function_arn,
            )
            if props.associate_function
            else None
        )
        if props.create_storage_config:
            stream_key = props.stream_kms_key_arn or props.kms_key_arn
            assert (
                stream_key is not None
            )  # the props' check requires one with create_storage_config
            connect.CfnInstanceStorageConfig(
                self,
                "MediaStreams",
                instance_arn=props.instance_arn,
                resource_type="MEDIA_STREAMS",
                storage_type="KINESIS_VIDEO_STREAM",
                kinesis_video_stream_config=connect.CfnInstanceStorageConfig.KinesisVideoStreamConfigProperty(
                    prefix=props.stream_prefix,
                    retention_period_hours=props.retention_hours,
                    encryption_config=connect.CfnInstanceStorageConfig.EncryptionConfigProperty(
                        encryption_type="KMS", key_id=stream_key
                    ),
                ),
            )
        if props.create_example_flow:
            content = EXAMPLE_FLOW.read_text()
            assert len(content) <= MAX_FLOW_CHARACTERS, (
                "ContactFlow Content is at most 256000 characters"
            )
            flow = connect.CfnContactFlow(
                self,
                "ExampleFlow",
                instance_arn=props.instance_arn,
                type="CONTACT_FLOW",
                state="ACTIVE",
                name=f"{props.name_prefix} live transcription (example)",
                description="Starts media streaming, hands the call to the transcription "
                "consumers, then queues it",
                content=Fn.sub(
                    content,
                    {
                        "StartFunctionArn": self.function.function_arn,
                        "QueueArn": props.queue_arn or "",
                    },
                ),
            )
            if association is not None:
                # "Before you can use an AWS Lambda function in a flow, you must add it to your
                # Amazon Connect instance" (Connect admin guide, "Grant Amazon Connect access to
                # your AWS Lambda functions").
                flow.add_resource_dependency(association)

    def _cluster(
        self, props: ConnectTranscriptionProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> ecs.Cluster:
        """The consumers' cluster, in ``props.vpc`` or a public VPC of its own (with flow logs)."""
        vpc = props.vpc or ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                )
            ],
        )
        if props.vpc is None:
            flow_logs = logs.LogGroup(
                self,
                "FlowLogsGroup",
                retention=_retention(props.log_retention_days),
                encryption_key=key,
                removal_policy=removal,
            )
            vpc.add_flow_log(
                "FlowLogs", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
            )
        cluster = ecs.Cluster(
            self, "Cluster", vpc=vpc, container_insights_v2=ecs.ContainerInsights.ENHANCED
        )
        return cluster

    def _consumer_task(
        self, props: ConnectTranscriptionProps, key: kms.IKey | None, removal: RemovalPolicy
    ) -> ecs.FargateTaskDefinition:
        """The consumers' task definition: its logs, environment and image (built, or a prebuilt
        one its execution role may pull)."""
        stack = Stack.of(self)
        task = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=props.cpu,
            memory_limit_mib=props.memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        consumer_logs = logs.LogGroup(
            self,
            "ConsumerLogs",
            retention=_retention(props.log_retention_days),
            encryption_key=key,
            removal_policy=removal,
        )
        environment = {
            "CALLS_QUEUE_URL": self.queue.queue_url,
            "BUS_NAME": self.bus.event_bus_name,
            "TABLE_NAME": self.table.table_name,
            "MAX_CALLS": str(props.calls_per_task),
            "METRIC_DIMENSIONS": json.dumps(metric_dimensions(props.name_prefix)),
        }
        if props.endpoint_name:
            environment["ENDPOINT_NAME"] = props.endpoint_name
        else:
            environment["ENDPOINT_URL"] = props.endpoint_url or ""
            environment["TOKEN_SECRET_ARN"] = props.token_secret_arn or ""
        image = (
            ecs.ContainerImage.from_registry(props.image_uri)
            if props.image_uri
            else ecs.ContainerImage.from_asset(
                props.image_directory,
                file="services/connect_consumer/Dockerfile",
                platform=ecr_assets.Platform.LINUX_AMD64,
                exclude=[
                    # services/ holds the other services' images too: only the consumer's folder.
                    "*",
                    "!services/connect_consumer",
                    "!services/connect_consumer/**",
                    "!voice_client",
                    "!voice_client/**",
                    "!requirements-connect.lock",
                    "!contracts",
                    "!contracts/**",
                    "**/__pycache__",
                ],
            )
        )
        container = task.add_container(
            "Consumer",
            image=image,
            logging=ecs.LogDriver.aws_logs(stream_prefix="consumer", log_group=consumer_logs),
            environment=environment,
            stop_timeout=Duration.seconds(30),
            readonly_root_filesystem=True,
        )
        if props.image_uri:
            # A prebuilt image: the execution role may pull from its repository only
            # (<account>.dkr.ecr.<region> .amazonaws.com/<repository>[:tag|@digest]; settings check
            # the form).
            registry, _, path = props.image_uri.partition("/")
            account, region = registry.split(".")[0], registry.split(".")[3]
            repository = re.split(r"[:@]", path, maxsplit=1)[0]
            execution = task.obtain_execution_role()
            execution.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="PullConsumerImage",
                    actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                    resources=[
                        f"arn:{stack.partition}:ecr:{region}:{account}:repository/{repository}"
                    ],
                )
            )
            execution.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="RegistryLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]
                )
            )
            Annotations.of(container).acknowledge_warning(
                "@aws-cdk/aws-ecs:ecrImageRequiresPolicy",
                "The execution role may pull from the image's repository (PullConsumerImage).",
            )
        return task

    def _consumer_service(
        self,
        props: ConnectTranscriptionProps,
        cluster: ecs.Cluster,
        task: ecs.FargateTaskDefinition,
    ) -> None:
        """The consumers' Fargate service, its task role's grants, the Kinesis Video Streams
        endpoint in a VPC, and the acknowledgements of its findings."""
        stack = Stack.of(self)
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=cluster,
            task_definition=task,
            min_healthy_percent=100,
            assign_public_ip=props.vpc is None,
            vpc_subnets=props.subnets,
            security_groups=props.security_groups or None,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
        )
        grant_consumers(self, task.task_role, props, self.bus, self.table, self.queue)
        if props.vpc is not None and props.kvs_vpc_endpoint:
            # GetDataEndpoint and GetMedia inside the VPC (module docstring): private DNS on, as the
            # service requires.
            self.kvs_endpoint = ec2.InterfaceVpcEndpoint(
                self,
                "KinesisVideoEndpoint",
                vpc=props.vpc,
                subnets=props.subnets,
                private_dns_enabled=True,
                open=False,
                service=ec2.InterfaceVpcEndpointService(
                    f"com.amazonaws.{stack.region}.kinesisvideo", KVS_ENDPOINT_PORT
                ),
            )
            self.kvs_endpoint.connections.allow_default_port_from(
                self.service, "the transcription consumers: GetDataEndpoint and GetMedia"
            )
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "Each role's statements are scoped to this construct's own "
                "resources (the call streams' prefix, the queue, bus, table, key and endpoint); "
                "managed policies could not name them."
            },
        )
        Validations.of(task).acknowledge(
            Acknowledgment(
                id="AwsSolutions-ECS2",
                reason="the environment holds names and URLs only (queue, bus, table, endpoint); "
                "the ECS target's bearer token is read from Secrets Manager at run time, never "
                "passed in the environment.",
            )
        )
        Validations.of(task.obtain_execution_role()).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ecr:GetAuthorizationToken (added by the CDK for the image asset) "
                "supports no resource-level permission; image pulls stay limited to the asset "
                "repository.",
            )
        )

    def _scaling(self, props: ConnectTranscriptionProps) -> None:
        """Scaling on live calls: each message in flight is a call a consumer holds."""
        scaling = self.service.auto_scale_task_count(
            min_capacity=props.min_tasks, max_capacity=props.max_tasks
        )
        # Target tracking needs a metric that falls as tasks are added: the calls each task holds
        # (its ActiveCalls, averaged over the tasks). A full task takes no more calls (they wait in
        # the queue), so it reports the maximum and the service scales out.
        scaling.scale_to_track_custom_metric(
            "LiveCalls",
            metric=cloudwatch.Metric(
                namespace=METRIC_NAMESPACE,
                metric_name="ActiveCalls",
                dimensions_map=metric_dimensions(props.name_prefix),
                statistic="Average",
                period=Duration.minutes(1),
            ),
            target_value=round(props.calls_per_task * SCALING_TARGET_FRACTION, 1),
            scale_in_cooldown=Duration.minutes(10),
            scale_out_cooldown=Duration.minutes(1),
        )

    def _alarms(self, props: ConnectTranscriptionProps) -> list[AlarmRule]:
        """The alarms on the shared topic, from :mod:`constructs_lib.connect.monitoring`'s rules;
        returns the rules."""
        action = actions.SnsAction(props.alarm_topic) if props.alarm_topic is not None else None
        rules = connect_alarm_rules(
            self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            props.name_prefix,
            props.alarm_millis_behind,
        )
        self.alarms = [
            alarm_from_rule(
                self, f"Alarm{i}", rule, alarm_name(props.name_prefix, rule.name), action
            )
            for i, rule in enumerate(rules)
        ]
        if self.bus_dead_letters is not None:
            undelivered = self.bus_dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            )
            self.alarms.append(
                alarm_from_rule(
                    self,
                    "AlarmBusDeadLetters",
                    bus_dead_letters_rule(undelivered),
                    alarm_name(props.name_prefix, BUS_DEAD_LETTERS_RULE),
                    action,
                )
            )
        return rules

    def _dashboard(self, rules: list[AlarmRule]) -> None:
        """The Connect stack's own dashboard: the calls queue's live and waiting calls, and the
        alarms' metrics."""
        in_flight = self.queue.metric_approximate_number_of_messages_not_visible(
            period=Duration.minutes(1), statistic="Maximum"
        )
        waiting = self.queue.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(1), statistic="Maximum"
        )
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            widgets=[
                [
                    cloudwatch.GraphWidget(title="Live calls", left=[in_flight, waiting], width=8),
                    cloudwatch.GraphWidget(
                        title="Behind real time (ms)", left=[rules[2].metric], width=8
                    ),
                    cloudwatch.GraphWidget(
                        title="Calls failed / dropped / waiting / untranscribed",
                        width=8,
                        left=[rules[1].metric, rules[0].metric, rules[3].metric, rules[4].metric],
                    ),
                ]
            ],
        )

    def _outputs(self) -> None:
        """On the stack, as the endpoint construct does: the outputs keep the names docs/connect.md
        gives them (TranscriptsTable, TranscriptsBus, StartFunctionArn), not a construct path and
        a hash."""
        stack = Stack.of(self)
        CfnOutput(
            stack,
            "TranscriptsTable",
            value=self.table.table_name,
            description="DynamoDB table of transcripts",
        )
        CfnOutput(
            stack,
            "TranscriptsBus",
            value=self.bus.event_bus_name,
            description="EventBridge bus of segments",
        )
        CfnOutput(
            stack,
            "StartFunctionArn",
            value=self.function.function_arn,
            description="the function a contact flow invokes after Start media streaming",
        )


def _retention(days: int) -> logs.RetentionDays:
    return getattr(logs.RetentionDays, LOG_RETENTION[days])
