"""ArtifactsStack: where the Voxtral endpoint's image and weights live (ECR repository, model
bucket); what the Voxtral stacks take from it: :class:`stacks.composition.ArtifactRefs`."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack, aws_kms as kms
from constructs import Construct

from config.settings import Settings
from constructs_lib.artifacts.bridge_image import BridgeImage, BridgeImageProps
from constructs_lib.artifacts.model_bucket import ModelBucket, ModelBucketProps
from stacks.composition import ArtifactRefs, Foundation


class ArtifactsStack(Stack):
    """Bridge image repository (plus the image, unless ``voxtral.image_uri`` is set) and the model
    bucket."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        foundation: Foundation,
        container_dir: Path,
        context_dir: Path | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        voxtral = settings.voxtral
        key = (
            kms.Key.from_key_arn(self, "DataKey", foundation.key_arn)
            if foundation.key_arn
            else None
        )
        self.image = BridgeImage(
            self,
            "BridgeImage",
            BridgeImageProps(
                container_dir=container_dir,
                context_dir=context_dir,
                prebuilt_image_uri=voxtral.image_uri,
                retain_data=settings.retain_data,
                encryption_key=key if foundation.encrypts_repository else None,
            ),
        )
        data_roles = []
        if foundation.model_data_role_path:
            data_roles = [
                f"arn:{self.partition}:iam::{self.account}:role{foundation.model_data_role_path}*"
            ]
        self.models = ModelBucket(
            self,
            "ModelBucket",
            ModelBucketProps(
                retain_data=settings.retain_data, encryption_key=key, data_principal_arns=data_roles
            ),
        )

        name = self.stack_name
        exports = {
            "ModelBucketName": (self.models.bucket.bucket_name, "Bucket of model weights"),
            "BridgeRepositoryArn": (
                self.image.repository.repository_arn,
                "ECR repository of the bridge image",
            ),
            "BridgeRepositoryUri": (
                self.image.repository.repository_uri,
                "ECR repository of the bridge image",
            ),
        }
        for output_id, (value, description) in exports.items():
            CfnOutput(
                self,
                output_id,
                value=value,
                description=description,
                export_name=f"{name}-{output_id}",
            )
        self.refs = ArtifactRefs(
            model_bucket_name=f"{name}-ModelBucketName",
            repository_arn=f"{name}-BridgeRepositoryArn",
            repository_uri=f"{name}-BridgeRepositoryUri",
            image_tag=self.image.tag,
            prebuilt_image_uri=voxtral.image_uri,
            image_copy=self.image.copy,
        )

        # Not exported (free to change): what `voicectl stage-model --stack <this stack>` reads to
        # stage by hand.
        CfnOutput(
            self,
            "ModelS3Uri",
            value=f"s3://{self.models.bucket.bucket_name}/{voxtral.model_prefix_key()}",
            description="S3 prefix the Voxtral Model reads, unless voxtral.model_s3_uri is set",
        )
        CfnOutput(
            self,
            "ModelRepositoryId",
            value=voxtral.model_id,
            description="Model hub repository of the weights",
        )
        CfnOutput(
            self,
            "ModelRevision",
            value=voxtral.model_revision,
            description="Pinned model hub commit",
        )
        CfnOutput(
            self,
            "BridgeImageUri",
            value=self.image.image_uri,
            description="Image the Voxtral Model runs",
        )
