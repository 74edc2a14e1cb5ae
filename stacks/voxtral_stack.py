"""VoxtralStack: speech to text, Voxtral on vLLM behind the bridge, with bidirectional streaming."""

from __future__ import annotations

import json

from aws_cdk import Fn, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.settings import BRIDGE_DRAIN_S, Settings
from constructs_lib.autoscaling import EndpointAutoscaling, EndpointAutoscalingProps, MetricTarget
from constructs_lib.bridge_image import repository_arn_from_image_uri
from constructs_lib.model_staging import ModelStaging, ModelStagingProps
from constructs_lib.execution_role import SAGEMAKER_INSTANCE_METRICS_NAMESPACE, SageMakerExecutionRole
from constructs_lib.realtime_endpoint import (
    INVOKE,
    INVOKE_BIDIRECTIONAL,
    VARIANT_NAME,
    ImageContainer,
    RealtimeEndpoint,
    RealtimeEndpointProps,
    RollingUpdate,
    normalise_s3_prefix,
    rolling_update_timeout_s,
)
from constructs_lib.monitoring import EndpointAlarms, EndpointAlarmsProps
from constructs_lib.s3_uri import S3Location
from stacks.artifacts_stack import ArtifactRefs
from stacks.endpoint_monitoring import voxtral_monitoring, voxtral_streams_target

#: vLLM's compilation config for Voxtral Realtime (model card's serving command): piecewise CUDA graphs.
COMPILATION_CONFIG = {"cudagraph_mode": "PIECEWISE"}
#: Bidirectional streaming runtime: HTTP/2 on port 8443 (SageMaker bidirectional streaming documentation).
BIDIRECTIONAL_PORT = 8443


class VoxtralStack(Stack):
    """Execution role, Model (bridge image + uncompressed weights from S3), EndpointConfig, Endpoint (rolling
    updates), log group, invoke policy, alarms, autoscaling on live streams and outputs of the Voxtral endpoint."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        artifacts: ArtifactRefs,
        alarm_topic: sns.ITopic,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        voxtral = settings.voxtral

        # The image: a prebuilt URI, or the copied asset under its hash tag in the bridge repository.
        if artifacts.prebuilt_image_uri:
            image_uri = artifacts.prebuilt_image_uri
            repository_arn = repository_arn_from_image_uri(image_uri)
        else:
            image_uri = f"{Fn.import_value(artifacts.repository_uri)}:{artifacts.image_tag}"
            repository_arn = Fn.import_value(artifacts.repository_arn)

        # The weights: the given prefix, or the stack's model bucket, staged here first when voxtral.stage_model.
        model_bucket = s3.Bucket.from_bucket_name(self, "ModelBucket", Fn.import_value(artifacts.model_bucket_name))
        if voxtral.model_s3_uri:
            weights = S3Location.parse(normalise_s3_prefix(voxtral.model_s3_uri))
        else:
            weights = S3Location(model_bucket.bucket_name, voxtral.model_prefix_key())
        model_data_s3_uri = weights.uri
        self.staging: ModelStaging | None = None
        if voxtral.stages_model:
            self.staging = ModelStaging(
                self,
                "ModelStaging",
                ModelStagingProps(
                    bucket=model_bucket,
                    prefix=weights.key,
                    repository_id=voxtral.model_id,
                    revision=voxtral.model_revision,
                    hf_token_secret=(
                        secretsmanager.Secret.from_secret_complete_arn(self, "HubToken", voxtral.hf_token_secret_arn)
                        if voxtral.hf_token_secret_arn
                        else None
                    ),
                    hf_token_secret_kms_key_arn=voxtral.hf_token_secret_kms_key_arn,
                ),
            )
            # The custom resource's attribute: the Model cannot be created before the weights are in place.
            model_data_s3_uri = self.staging.model_s3_uri

        role = SageMakerExecutionRole(self, "ExecutionRole", description=f"SageMaker execution role of {voxtral.endpoint_name}")
        role.grant_model_data_read(weights.bucket, weights.key)
        role.grant_image_pull(repository_arn)
        role.grant_metrics(SAGEMAKER_INSTANCE_METRICS_NAMESPACE, voxtral.metrics_namespace)

        # min = max instances means a fixed size: no scalable target (also the way to change the instance type).
        autoscaled = voxtral.min_instances < voxtral.max_instances

        # Alarms first: the endpoint's rolling updates roll back on some of them, which SageMaker reads as the role.
        monitoring = voxtral_monitoring(settings)
        self.alarms = EndpointAlarms(self, "Alarms", EndpointAlarmsProps(endpoint=monitoring, topic=alarm_topic))
        role.grant_describe_alarms(self.alarms.rollback_alarms)

        self.endpoint = RealtimeEndpoint(
            self,
            "Voxtral",
            RealtimeEndpointProps(
                endpoint_name=voxtral.endpoint_name,
                container=ImageContainer(
                    image_uri=image_uri,
                    model_data_s3_uri=model_data_s3_uri,
                    environment=container_environment(settings),
                    depends_on=[artifacts.image_copy] if artifacts.image_copy else [],
                ),
                execution_role=role,
                instance_type=voxtral.instance_type,
                initial_instance_count=voxtral.initial_instance_count,
                model_data_download_timeout_s=voxtral.model_data_download_timeout_s,
                container_startup_timeout_s=voxtral.container_startup_timeout_s,
                inference_ami_version=voxtral.inference_ami_version,
                enable_network_isolation=False,
                volume_kms_key_arn=voxtral.volume_kms_key_arn,
                log_retention_days=settings.log_retention_days,
                invoke_actions=[INVOKE, INVOKE_BIDIRECTIONAL],
                description="Voxtral speech-to-text",
                rolling_update=RollingUpdate(
                    batch_percent=voxtral.rollout_batch_percent,
                    wait_s=voxtral.rollout_wait_s,
                    timeout_s=rolling_update_timeout_s(
                        voxtral.rollout_batch_percent,
                        voxtral.model_data_download_timeout_s + voxtral.container_startup_timeout_s,
                        voxtral.rollout_wait_s,
                    ),
                    rollback_alarms=self.alarms.rollback_alarms,
                ),
                autoscaled=autoscaled,
            ),
        )

        # The endpoint-health alarm (missing data breaching) starts once the endpoint is InService.
        self.alarms.create_after(self.endpoint.endpoint)
        if autoscaled:
            self.autoscaling = EndpointAutoscaling(
                self,
                "Autoscaling",
                EndpointAutoscalingProps(
                    endpoint_name=voxtral.endpoint_name,
                    variant_name=VARIANT_NAME,
                    endpoint=self.endpoint.endpoint,
                    min_instances=voxtral.min_instances,
                    max_instances=voxtral.max_instances,
                    target=MetricTarget(
                        metric=monitoring.bridge_metrics.active_streams_per_instance(),
                        target_value=voxtral_streams_target(settings),
                    ),
                    scale_in_cooldown_s=voxtral.scale_in_cooldown_s,
                ),
            )
        self.endpoint.add_outputs(
            "Voxtral",
            {
                "BidirectionalInvokeUrl": (
                    f"https://runtime.sagemaker.{self.region}.{self.url_suffix}:{BIDIRECTIONAL_PORT}"
                    f"/endpoints/{voxtral.endpoint_name}/invocations-bidirectional-stream",
                    "HTTP/2 bidirectional streaming URL of the endpoint",
                ),
                "ModelS3Uri": (model_data_s3_uri, "S3 prefix SageMaker copies to /opt/ml/model"),
            },
        )


def container_environment(settings: Settings) -> dict[str, str]:
    """Environment of the bridge container.

    ``SM_VLLM_<NAME>`` becomes the vLLM flag ``--<name-with-dashes>`` (the container's entrypoint); the rest
    configures the bridge (container/README.md). Values are strings; no secrets.
    """
    voxtral = settings.voxtral
    return {
        "SM_VLLM_MODEL": "/opt/ml/model",
        "SM_VLLM_SERVED_MODEL_NAME": voxtral.model_id,
        "SM_VLLM_MAX_MODEL_LEN": str(voxtral.max_model_len),
        "SM_VLLM_MAX_NUM_SEQS": str(voxtral.max_num_seqs),
        "SM_VLLM_GPU_MEMORY_UTILIZATION": str(voxtral.gpu_memory_utilization),
        "SM_VLLM_COMPILATION_CONFIG": json.dumps(COMPILATION_CONFIG),
        # The checkpoint is in Mistral's format (params.json, tekken.json, consolidated.safetensors).
        "SM_VLLM_TOKENIZER_MODE": "mistral",
        "SM_VLLM_CONFIG_FORMAT": "mistral",
        "SM_VLLM_LOAD_FORMAT": "mistral",
        "METRICS_NAMESPACE": voxtral.metrics_namespace,
        "ENDPOINT_NAME": voxtral.endpoint_name,
        "VARIANT_NAME": VARIANT_NAME,
        # Grace period for open streams after SIGTERM (scale-in, rolling update); the scale-in cooldown is longer.
        "DRAIN_S": str(BRIDGE_DRAIN_S),
    }
