"""VoxtralStack: speech to text, Voxtral on vLLM behind the bridge, with bidirectional streaming."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Annotations, Fn, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.models import BRIDGE_DRAIN_S
from config.settings import Settings, VoxtralSettings
from constructs_lib.facts.cuda_compat import Verdict
from constructs_lib.sagemaker_endpoint.props import INVOKE, INVOKE_BIDIRECTIONAL, VARIANT_NAME, ImageContainer, normalise_s3_prefix
from constructs_lib.sagemaker_endpoint.execution_role import SAGEMAKER_INSTANCE_METRICS_NAMESPACE
from constructs_lib.artifacts.model_staging import ModelStaging, ModelStagingProps
from constructs_lib.facts import S3Prefix
from constructs_lib.monitoring.metrics import BridgeMetrics
from constructs_lib.facts.names import repository_arn_from_image_uri
from constructs_lib.sagemaker_endpoint.scaling_props import TargetTracking
from stacks.artifacts_stack import ArtifactRefs
from stacks.endpoint_stack import EndpointStack
from stacks.foundation_stack import Foundation

#: vLLM's compilation config for Voxtral Realtime (model card's serving command): piecewise CUDA graphs.
COMPILATION_CONFIG = {"cudagraph_mode": "PIECEWISE"}
#: vLLM --mm-processor-cache-gb, GiB. vLLM 0.31.0's default is 4, held once by the API server process and once by the
#: engine core (vllm/config/multimodal.py: "duplicated for each API process and engine core process"): up to 8 GiB
#: of host memory on the default ml.g6.xlarge, which has 16 GiB. A live stream's audio is new at every append, so the
#: cache saves little here; 1 GiB each bounds it. Unconfirmed on a GPU until bench/capacity_bench.py runs there.
MM_PROCESSOR_CACHE_GB = 1
#: Environment that keeps the libraries in the image from reaching the internet (see container_environment).
OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "DO_NOT_TRACK": "1",
}
def stream_cap_warning(stack: Stack, voxtral: VoxtralSettings) -> None:
    """Print (cdk synth) a warning when an explicit max_num_seqs is above the GPU's estimated compute cap
    (:meth:`~config.settings.VoxtralSettings.stream_cap_warning`): allowed, since the cap is an estimate, but said."""
    warning = voxtral.stream_cap_warning()
    if warning is not None:
        Annotations.of(stack).add_warning_v2("realtime-voice:stream-cap-above-compute", warning)


#: Bidirectional streaming runtime: HTTP/2 on port 8443 (SageMaker bidirectional streaming documentation).
BIDIRECTIONAL_PORT = 8443


class VoxtralStack(EndpointStack):
    """The Voxtral endpoint: a Model from the bridge image with uncompressed weights from S3 (staged here first unless
    they come from elsewhere), rolling updates that roll back on the 5XX error rate, the bridge's alarms, and scaling
    on live streams per instance."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, foundation: Foundation,
                 artifacts: ArtifactRefs, alarm_topic: sns.ITopic, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, settings=settings, section=settings.voxtral, foundation=foundation,
                         alarm_topic=alarm_topic, role_path=foundation.model_data_role_path, **kwargs)
        voxtral = settings.voxtral
        # An image CUDA the AMI's driver cannot run is a settings error; an unknown one, or one that relies on CUDA
        # compatibility modes, is said here (cdk synth prints it) rather than guessed.
        compatibility = voxtral.image_compatibility()
        if compatibility.verdict is not Verdict.COMPATIBLE:
            Annotations.of(self).add_warning_v2("realtime-voice:image-cuda", compatibility.reason)
        stream_cap_warning(self, voxtral)
        image_uri, repository_arn = self._image(artifacts)
        weights, model_data_s3_uri = self._weights(voxtral, artifacts)
        self.role.grant_model_data_read(weights.bucket, weights.prefix)
        if foundation.key_arn and not voxtral.model_s3_uri:
            self.role.grant_key_read(foundation.key_arn)
        self.role.grant_image_pull(repository_arn)
        self.role.grant_metrics(SAGEMAKER_INSTANCE_METRICS_NAMESPACE, voxtral.metrics_namespace)
        self.add_endpoint(
            "Voxtral",
            container=ImageContainer(
                image_uri=image_uri,
                model_data_s3_uri=model_data_s3_uri,
                environment=container_environment(voxtral, voxtral.variant().instance_types[0]),
                depends_on=[artifacts.image_copy] if artifacts.image_copy else [],
            ),
            description="Voxtral speech-to-text",
            invoke_actions=[INVOKE, INVOKE_BIDIRECTIONAL],
            rolling_update=voxtral.rolling_update(),
            bridge=voxtral.bridge_thresholds(),
            tracking=voxtral_tracking(voxtral),
            pool_environment=pool_environment(voxtral),
            outputs={
                "BidirectionalInvokeUrl": (
                    f"https://runtime.sagemaker.{self.region}.{self.url_suffix}:{BIDIRECTIONAL_PORT}"
                    f"/endpoints/{voxtral.endpoint_name}/invocations-bidirectional-stream",
                    "HTTP/2 bidirectional streaming URL of the endpoint",
                ),
                "ModelS3Uri": (model_data_s3_uri, "S3 prefix SageMaker copies to /opt/ml/model"),
            },
        )

    def _image(self, artifacts: ArtifactRefs) -> tuple[str, str]:
        """(image URI, repository ARN): a prebuilt URI, or the copied asset under its hash tag in the bridge
        repository of the Artifacts stack."""
        if artifacts.prebuilt_image_uri:
            return artifacts.prebuilt_image_uri, repository_arn_from_image_uri(artifacts.prebuilt_image_uri)
        return (f"{Fn.import_value(artifacts.repository_uri)}:{artifacts.image_tag}",
                Fn.import_value(artifacts.repository_arn))

    def _weights(self, voxtral: VoxtralSettings, artifacts: ArtifactRefs) -> tuple[S3Prefix, str]:
        weights, model_data_s3_uri, _ = model_weights(self, voxtral, artifacts, self._foundation)
        return weights, model_data_s3_uri


def model_weights(scope: Construct, voxtral: VoxtralSettings, artifacts: ArtifactRefs,
                  foundation: Foundation) -> tuple[S3Prefix, str, ModelStaging | None]:
    """(where the weights are, the S3 URI to read them from, the staging or None): the given prefix, or the stack's
    model bucket, staged in ``scope`` first when ``voxtral.stage_model``; then the URI is the staging custom
    resource's attribute, so whatever reads it cannot be created before the weights are in place. The staging writes
    under the Foundation stack's data key (when there is one) with a role on its model-data role path (what the
    bucket policy lets in, network.mode=vpc). Shared by the SageMaker and ECS targets."""
    model_bucket = s3.Bucket.from_bucket_name(scope, "ModelBucket", Fn.import_value(artifacts.model_bucket_name))
    if voxtral.model_s3_uri:
        weights = S3Prefix.parse(normalise_s3_prefix(voxtral.model_s3_uri))
    else:
        weights = S3Prefix(model_bucket.bucket_name, voxtral.model_prefix_key())
    if not voxtral.stages_model:
        return weights, weights.uri(), None
    staging = ModelStaging(
        scope,
        "ModelStaging",
        ModelStagingProps(
            bucket=model_bucket,
            prefix=weights.prefix,
            repository_id=voxtral.model_id,
            revision=voxtral.model_revision,
            hf_token_secret=(
                secretsmanager.Secret.from_secret_complete_arn(scope, "HubToken", voxtral.hf_token_secret_arn)
                if voxtral.hf_token_secret_arn
                else None
            ),
            hf_token_secret_kms_key_arn=voxtral.hf_token_secret_kms_key_arn,
            encryption_key=kms.Key.from_key_arn(scope, "DataKey", foundation.key_arn) if foundation.key_arn else None,
            # The build runs in CodeBuild's own network, not in the VPC: it downloads from the model hub on the
            # internet, which the VPC cannot reach (no internet or NAT gateway). It writes to S3 with its role.
            role_path=foundation.model_data_role_path,
        ),
    )
    return weights, staging.model_s3_uri, staging


def voxtral_tracking(voxtral: VoxtralSettings) -> TargetTracking:
    """Target tracking on live streams per instance at ``scaling_target_fraction`` of the stream cap. With instance
    pools whose caps differ (each pool type's Model has its own), a count of streams means something else on each
    GPU, so it tracks the bridge's StreamCapUsed (percent of each instance's own cap) instead: every instance is
    filled to the same share of what it serves, and no larger GPU idles at a smaller GPU's cap."""
    metrics = BridgeMetrics(voxtral.metrics_namespace, voxtral.endpoint_name)
    if voxtral.caps_differ:
        return voxtral.props(TargetTracking, metric=metrics.metric_stream_cap_used_per_instance(),
                             target_value=voxtral.stream_cap_used_target)
    return voxtral.props(TargetTracking, metric=metrics.metric_active_streams_per_instance(),
                         target_value=voxtral.streams_target)


def pool_environment(voxtral: VoxtralSettings) -> dict[str, dict[str, str]]:
    """``{instance type: the variables that differ}`` for each instance pool after the first whose container
    environment differs from the first pool's (its stream cap, :meth:`VoxtralSettings.stream_cap_of`): those pools
    run a Model of their own (InstancePool ModelNameOverride), so every GPU runs at its own cap."""
    pools = list(dict.fromkeys(voxtral.instance_pools))
    if not pools:
        return {}
    first = container_environment(voxtral, pools[0])
    result = {}
    for instance_type in pools[1:]:
        env = container_environment(voxtral, instance_type)
        changed = {key: value for key, value in env.items() if first.get(key) != value}
        if changed:
            result[instance_type] = changed
    return result


def container_environment(voxtral: VoxtralSettings, instance_type: str | None = None) -> dict[str, str]:
    """Environment of the bridge container on ``instance_type`` (default: the first type the service may run).

    ``SM_VLLM_<NAME>`` becomes the vLLM flag ``--<name-with-dashes>`` (the container's entrypoint); the rest
    configures the bridge (container/README.md). Values are strings; no secrets. The stream cap (vLLM
    ``--max-num-seqs``, the bridge's MAX_STREAMS by default) is that instance type's own.
    """
    instance_type = instance_type or voxtral.sizing_instance_types[0]
    env = {
        "SM_VLLM_MODEL": "/opt/ml/model",
        "SM_VLLM_SERVED_MODEL_NAME": voxtral.model_id,
        "SM_VLLM_MAX_MODEL_LEN": str(voxtral.max_model_len),
        "SM_VLLM_MAX_NUM_SEQS": str(voxtral.stream_cap_of(instance_type)),
        "SM_VLLM_GPU_MEMORY_UTILIZATION": str(voxtral.gpu_memory_utilization),
        "SM_VLLM_COMPILATION_CONFIG": json.dumps(COMPILATION_CONFIG),
        "SM_VLLM_MM_PROCESSOR_CACHE_GB": str(MM_PROCESSOR_CACHE_GB),
        # The checkpoint is in Mistral's format (params.json, tekken.json, consolidated.safetensors).
        "SM_VLLM_TOKENIZER_MODE": "mistral",
        "SM_VLLM_CONFIG_FORMAT": "mistral",
        "SM_VLLM_LOAD_FORMAT": "mistral",
        "METRICS_NAMESPACE": voxtral.metrics_namespace,
        "ENDPOINT_NAME": voxtral.endpoint_name,
        "VARIANT_NAME": VARIANT_NAME,
        # Grace period for open streams after SIGTERM (scale-in, rolling update); the scale-in cooldown is longer.
        "DRAIN_S": str(BRIDGE_DRAIN_S),
        # The Model runs with network isolation: nothing in the image may try the internet. The weights are local
        # (/opt/ml/model), so the Hugging Face libraries stay offline (huggingface_hub and transformers
        # environment variables), and vLLM's usage statistics are off (vLLM "Usage Stats Collection":
        # VLLM_NO_USAGE_STATS, DO_NOT_TRACK). The bridge's metrics need no network: EMF lines on stdout, which
        # SageMaker ships to the endpoint's log group.
        **OFFLINE_ENVIRONMENT,
    }
    if voxtral.kv_cache_dtype != "auto":
        # vLLM --kv-cache-dtype; left out at "auto" (vLLM's default), so the default Model is unchanged.
        env["SM_VLLM_KV_CACHE_DTYPE"] = voxtral.kv_cache_dtype
    fitted = voxtral.capacity_of(instance_type)
    if fitted is not None:
        # KV-cache blocks one live stream holds (constructs_lib/facts/capacity.py): the bridge divides vLLM's reported
        # num_gpu_blocks by it and lowers its stream cap when vLLM holds fewer streams than MAX_STREAMS.
        env["KV_BLOCKS_PER_STREAM"] = str(fitted.stream_blocks)
    return env
