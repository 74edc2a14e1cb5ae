"""GpuEcsServiceWithBridge: the bridge image (Voxtral behind vLLM's /v1/realtime) as a
:class:`~constructs_lib.ecs_service.service.GpuEcsService`, with what the bridge needs on top, as
cdk-monitoring-constructs' ``SqsQueueMonitoringWithDlq`` extends ``SqsQueueMonitoring``.

What the add-on changes through the service's extension points: the host directory of the
weights' copy (user data), the bridge's environment, bearer token and container health check, and
the listener's two paths. What it adds after the service is built: the weights' volume and mount,
the task role's grants (the model prefix, the bridge's metrics, task scale-in protection), target
tracking on live streams per task, the WebSocket URL, the bridge's alarms, and the
acknowledgements of cdk-nag's findings on what it made (the last section). Its props are
:class:`~constructs_lib.ecs_service.props.GpuEcsServiceWithBridgeProps`.
"""

from __future__ import annotations

import functools

from aws_cdk import (
    Acknowledgment,
    Duration,
    RemovalPolicy,
    Stack,
    Validations,
    aws_cloudwatch as cloudwatch,
    aws_ecs as ecs,
    aws_iam as iam,
    aws_secretsmanager as secretsmanager,
)
from constructs import Construct

from constructs_lib.ecs_service.monitoring import bridge_alarm_rules_on_ecs, bridge_dashboard_rows
from constructs_lib.ecs_service.props import GpuEcsServiceWithBridgeProps
from constructs_lib.ecs_service.service import (
    SCALE_IN_COOLDOWN,
    SCALE_OUT_COOLDOWN,
    ContainerSettings,
    GpuEcsService,
    grant_put_metrics,
)
from constructs_lib.monitoring.metrics import BridgeMetrics
from constructs_lib.nag import acknowledge_compliance, nag_render
from constructs_lib.network.encryption import secret_decrypt_statement
from contracts import realtime
from contracts.bridge_env import DEFAULT_MODEL_CACHE_DIR, BridgeEnvironment

#: The path of the bridge's stream (contracts.realtime).
WEBSOCKET_PATH = realtime.STREAM_PATH
#: Where each instance keeps its copy of the weights; the container sees it at
#: :data:`CONTAINER_CACHE_DIR` (the bridge's default MODEL_CACHE_DIR). A host directory (a bind
#: mount), so a second task on the same instance reuses the copy (services/bridge/weights.py).
HOST_CACHE_DIR = "/var/lib/realtime-voice/weights"
CONTAINER_CACHE_DIR = DEFAULT_MODEL_CACHE_DIR
#: The task definition's volume of the weights' host copy.
WEIGHTS_VOLUME = "weights"
#: Dimension VariantName of the bridge's metrics on ECS (on SageMaker it is the variant,
#: AllTraffic).
ECS_VARIANT_NAME = "ecs"
#: Container health check (docker HEALTHCHECK): ECS allows startPeriod up to 300 s; the ALB grace
#: covers the rest.
CONTAINER_HEALTH_START_PERIOD = Duration.seconds(300)


class GpuEcsServiceWithBridge(GpuEcsService):
    """A :class:`~constructs_lib.ecs_service.service.GpuEcsService` of the bridge image.

    * Task: a host directory for the weights' copy (mounted at :data:`CONTAINER_CACHE_DIR`), the
      bridge's environment (the given one, then what the construct sets: the weights' S3 URI and
      host copy, the service's name and variant, the drain and idle timeout), a container health
      check on ``health_path``, and a task role that reads the model prefix, writes the bridge's
      metrics namespace and sets the task's own scale-in protection. With ``require_token``, a
      Secrets Manager secret the construct creates, injected as ``BRIDGE_TOKEN`` (rotate it as you
      choose; tasks read it when they start).
    * Load balancer: the listener forwards the stream's path and ``health_path`` to the tasks and
      answers 404 otherwise.
    * Service: target tracking on the bridge's ActiveStreams per task; the bridge's alarms (the
      same rules as on SageMaker) and its task protection errors.

    Attributes:
        those of :class:`~constructs_lib.ecs_service.service.GpuEcsService`, and bridge_metrics
        (:class:`~constructs_lib.monitoring.metrics.BridgeMetrics`); ``url`` is the stream's
        WebSocket URL.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    CONTAINER_ID = "Bridge"
    SERVES = "bridge"
    _props: GpuEcsServiceWithBridgeProps

    def __init__(
        self, scope: Construct, construct_id: str, props: GpuEcsServiceWithBridgeProps
    ) -> None:
        super().__init__(scope, construct_id, props)
        self.task_definition.add_volume(
            name=WEIGHTS_VOLUME, host=ecs.Host(source_path=HOST_CACHE_DIR)
        )
        self.container.add_mount_points(
            ecs.MountPoint(
                container_path=CONTAINER_CACHE_DIR, source_volume=WEIGHTS_VOLUME, read_only=False
            )
        )
        task_role = self.task_definition.task_role
        self._grant_model_read(task_role)
        grant_put_metrics(task_role, props.bridge.namespace)
        self._grant_task_protection(task_role)
        dns = self.load_balancer.load_balancer_dns_name
        self.url = f"{'wss' if props.load_balancing.https else 'ws'}://{dns}{WEBSOCKET_PATH}"
        self._add_alarms(bridge_alarm_rules_on_ecs(self.bridge_metrics, props.bridge))
        self._acknowledge_bridge_findings()

    @functools.cached_property
    def bridge_metrics(self) -> BridgeMetrics:
        """The bridge's metrics of this service (EndpointName ``service_name``, VariantName
        :data:`ECS_VARIANT_NAME`)."""
        return BridgeMetrics(
            self._props.bridge.namespace, self._props.service_name, ECS_VARIANT_NAME
        )

    def dashboard_rows(self, title: str) -> list[list[cloudwatch.IWidget]]:
        """Dashboard rows of the service with the bridge
        (:func:`~constructs_lib.ecs_service.monitoring.bridge_dashboard_rows`)."""
        return bridge_dashboard_rows(
            title, self._props, self.metrics, self.bridge_metrics, self.rules
        )

    # --- The service's extension points ---------------------------------------------------------

    def _host_setup_commands(self) -> list[str]:
        """The weights' host directory."""
        return [f"mkdir -p {HOST_CACHE_DIR}"]

    def _container_settings(self) -> ContainerSettings:
        """The bridge's environment (the given one's variables, then the construct's own: disjoint,
        the props' checks hold to it), its bearer token (:meth:`_bearer_token`) and a container
        health check on ``health_path``."""
        props = self._props
        own = BridgeEnvironment(
            model_s3_uri=f"s3://{props.model_bucket.bucket_name}/{props.model_prefix}",
            model_cache_dir=CONTAINER_CACHE_DIR,
            endpoint_name=props.service_name,
            variant_name=ECS_VARIANT_NAME,
            drain_s=props.drain_s,
            idle_timeout_s=props.bridge_idle_timeout_s,
        )
        environment = {**(props.environment or BridgeEnvironment()).to_env(), **own.to_env()}
        secrets = {}
        if props.load_balancing.require_token:
            secrets[BridgeEnvironment.variable("bridge_token")] = self._bearer_token()
        ping = f"http://127.0.0.1:{props.container_port}{props.health_path}"
        health_check = ecs.HealthCheck(
            # The image has Python (vLLM's); curl is not guaranteed.
            command=[
                "CMD-SHELL",
                f'python3 -c "import urllib.request; urllib.request.urlopen('
                f"'{ping}', timeout=2)\" || exit 1",
            ],
            interval=Duration.seconds(15),
            timeout=Duration.seconds(5),
            retries=3,
            start_period=CONTAINER_HEALTH_START_PERIOD,
        )
        return ContainerSettings(
            environment=environment, secrets=secrets, health_check=health_check
        )

    def _routes(self) -> tuple[str, list[str]]:
        """The bridge serves two paths: the stream and its health check."""
        return "Streams", [WEBSOCKET_PATH, self._props.health_path]

    def _scale_tasks(self) -> None:
        """Target tracking on live streams per task (the bridge's ActiveStreams)."""
        self.scaling.scale_to_track_custom_metric(
            "ActiveStreams",
            metric=self.bridge_metrics.metric_active_streams_per_instance(),
            # 0.7 x 3 is 2.0999999999999996 in floats
            target_value=round(self._props.streams_target, 6),
            scale_in_cooldown=SCALE_IN_COOLDOWN,
            scale_out_cooldown=SCALE_OUT_COOLDOWN,
        )

    # --- Grants and the token -------------------------------------------------------------------

    def _bearer_token(self) -> ecs.Secret:
        """``token_secret``: the bearer token callers send, generated by Secrets Manager, which ECS
        reads with the execution role when a task starts."""
        props = self._props
        secret = secretsmanager.Secret(
            self,
            "Token",
            description=f"Bearer token callers of {props.service_name} send (Authorization: "
            "Bearer <token>)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True, include_space=False
            ),
            removal_policy=RemovalPolicy.DESTROY,
            encryption_key=self._log_key,
        )
        self.token_secret = secret  # pyright: ignore[reportAttributeAccessIssue] (jsii binding: Secret is an ISecret)
        token = ecs.Secret.from_secrets_manager(secret)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        if self._log_key is not None:
            self.task_definition.obtain_execution_role().add_to_principal_policy(
                secret_decrypt_statement(secret, self._log_key.key_arn)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            )
        return token

    def _model_objects_arn(self) -> str:
        return self._props.model_bucket.arn_for_objects(f"{self._props.model_prefix}*")

    def _grant_model_read(self, role: iam.IRole) -> None:
        """Read the objects under the model prefix and list only that prefix (the weights and
        manifest)."""
        props = self._props
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self._model_objects_arn()])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[props.model_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{props.model_prefix}*"]}},
            )
        )

    def _tasks_arn(self) -> str:
        return Stack.of(self).format_arn(
            service="ecs", resource="task", resource_name=f"{self.cluster.cluster_name}/*"
        )

    def _grant_task_protection(self, role: iam.IRole) -> None:
        """ECS task scale-in protection through the agent's endpoint acts with the task role
        (Amazon ECS developer guide, "Protect your Amazon ECS tasks from being terminated by
        scale-in events"): only tasks of this cluster."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"],
                resources=[self._tasks_arn()],
            )
        )

    # --- cdk-nag: each finding acknowledged on the resource it concerns -------------------------

    def _acknowledge_bridge_findings(self) -> None:
        stack = Stack.of(self)
        Validations.of(self.task_definition.task_role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, self._model_objects_arn())}]",
                reason="The wildcard covers the files of the model prefix only (weights, "
                "tokenizer, manifest); their names vary by model revision.",
            ),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData supports no resource-level permission; a "
                "cloudwatch:namespace condition limits it to the bridge's metrics.",
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, self._tasks_arn())}]",
                reason="Task ids are random; the wildcard is limited to the tasks of this "
                "cluster, and a task protects only itself through the agent.",
            ),
        )
        if self.token_secret is not None:
            acknowledge_compliance(
                self.token_secret,
                {
                    "SecretsManagerRotationEnabled": "Rotation is the user's choice (README, "
                    "'Calling the ECS endpoint'): a rotated token takes effect as tasks restart.",
                },
            )
            Validations.of(self.token_secret).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-SMG4",
                    reason="Rotation is the user's choice (README, 'Calling the ECS endpoint'): a "
                    "rotated token takes effect as tasks restart, so rotation needs a rolling "
                    "deployment the user schedules.",
                )
            )
