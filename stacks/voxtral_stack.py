"""VoxtralStack: speech to text, Voxtral on vLLM behind the bridge, with bidirectional streaming."""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, Fn, Stack, aws_sns as sns
from constructs import Construct

from config.bridge import container_environment, pool_environment
from config.settings import Settings
from constructs_lib.facts.cuda_compat import Verdict
from constructs_lib.facts.names import repository_arn_from_image_uri
from constructs_lib.sagemaker_endpoint.execution_role import SAGEMAKER_INSTANCE_METRICS_NAMESPACE
from constructs_lib.sagemaker_endpoint.props import INVOKE, INVOKE_BIDIRECTIONAL, ImageContainer
from stacks.composition import (
    ArtifactRefs,
    Foundation,
    execution_role,
    model_weights,
    monitored_endpoint,
    stream_cap_warning,
    voxtral_tracking,
)

#: Bidirectional streaming runtime: HTTP/2 on port 8443 (SageMaker bidirectional streaming
#: documentation).
BIDIRECTIONAL_PORT = 8443


class VoxtralStack(Stack):
    """The Voxtral endpoint: a Model from the bridge image with uncompressed weights from S3 (staged
    here first unless they come from elsewhere), rolling updates that roll back on the 5XX error
    rate, the bridge's alarms, and scaling on live streams per instance.

    Attributes:
        role: the endpoint's execution role.
        endpoint: the
            :class:`~constructs_lib.sagemaker_endpoint.monitored_endpoint.MonitoredEndpoint`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        foundation: Foundation,
        artifacts: ArtifactRefs,
        alarm_topic: sns.ITopic,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        voxtral = settings.voxtral
        self.role = execution_role(self, voxtral, role_path=foundation.model_data_role_path)
        # An image CUDA the AMI's driver cannot run is a settings error; an unknown one, or one that
        # relies on CUDA compatibility modes, is said here (cdk synth prints it) rather than
        # guessed.
        compatibility = voxtral.image_compatibility()
        if compatibility.verdict is not Verdict.COMPATIBLE:
            Annotations.of(self).add_warning_v2("realtime-voice:image-cuda", compatibility.reason)
        stream_cap_warning(self, settings.capacity_plan)
        image_uri, repository_arn = self._image(artifacts)
        weights, model_data_s3_uri, _ = model_weights(self, voxtral, artifacts, foundation)
        self.role.grant_model_data_read(weights.bucket, weights.prefix)
        if foundation.key_arn and not voxtral.model_s3_uri:
            self.role.grant_key_read(foundation.key_arn)
        self.role.grant_image_pull(repository_arn)
        self.role.grant_metrics(SAGEMAKER_INSTANCE_METRICS_NAMESPACE, voxtral.namespace)
        self.endpoint = monitored_endpoint(
            self,
            "Voxtral",
            settings=settings,
            section=voxtral,
            foundation=foundation,
            role=self.role,
            alarm_topic=alarm_topic,
            container=ImageContainer(
                image_uri=image_uri,
                model_data_s3_uri=model_data_s3_uri,
                environment=container_environment(settings, voxtral.variant().instance_types[0]),
                depends_on=[artifacts.image_copy] if artifacts.image_copy else [],
            ),
            description="Voxtral speech-to-text",
            invoke_actions=[INVOKE, INVOKE_BIDIRECTIONAL],
            rolling_update=voxtral.rolling_update(),
            bridge=voxtral.bridge_thresholds(settings.capacity_plan),
            tracking=voxtral_tracking(settings),
            pool_environment=pool_environment(settings),
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
        """(image URI, repository ARN): a prebuilt URI, or the copied asset under its hash tag in
        the bridge repository of the Artifacts stack."""
        if artifacts.prebuilt_image_uri:
            return artifacts.prebuilt_image_uri, repository_arn_from_image_uri(
                artifacts.prebuilt_image_uri
            )
        return (
            f"{Fn.import_value(artifacts.repository_uri)}:{artifacts.image_tag}",
            Fn.import_value(artifacts.repository_arn),
        )
