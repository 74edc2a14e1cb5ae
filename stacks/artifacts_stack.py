"""ArtifactsStack: where the Voxtral endpoint's image and weights live (ECR repository, model bucket)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from config.settings import Settings
from constructs_lib.bridge_image import BridgeImage, BridgeImageProps
from constructs_lib.model_bucket import ModelBucket, ModelBucketProps
from constructs_lib.model_staging import ModelStaging, ModelStagingProps


class ArtifactsStack(Stack):
    """Bridge image repository (plus the image, unless ``voxtral.image_uri`` is set), the model bucket and, with
    ``voxtral.stage_model``, the staging of the weights into it (finished before the Voxtral stack deploys)."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, container_dir: Path, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.image = BridgeImage(
            self,
            "BridgeImage",
            BridgeImageProps(
                container_dir=container_dir,
                prebuilt_image_uri=settings.voxtral.image_uri,
                retain_data=settings.retain_data,
            ),
        )
        self.models = ModelBucket(self, "ModelBucket", ModelBucketProps(retain_data=settings.retain_data))

        CfnOutput(self, "BridgeRepositoryUri", value=self.image.repository.repository_uri,
                  description="ECR repository of the bridge image")
        CfnOutput(self, "BridgeImageUri", value=self.image.image_uri, description="Image the Voxtral Model runs")
        voxtral = settings.voxtral
        prefix = voxtral.model_prefix_key()
        model_s3_uri = f"s3://{self.models.bucket.bucket_name}/{prefix}"
        self.staging: ModelStaging | None = None
        if voxtral.stages_model:
            token = (
                secretsmanager.Secret.from_secret_complete_arn(self, "HubToken", voxtral.hf_token_secret_arn)
                if voxtral.hf_token_secret_arn
                else None
            )
            self.staging = ModelStaging(
                self,
                "ModelStaging",
                ModelStagingProps(
                    bucket=self.models.bucket,
                    prefix=prefix,
                    repository_id=voxtral.model_id,
                    revision=voxtral.model_revision,
                    hf_token_secret=token,
                ),
            )
            # The custom resource's attribute: whatever reads it is created after the staging finished.
            model_s3_uri = self.staging.model_s3_uri

        # Explicit exports (not CDK's generated ones) give the Voxtral stack stable names to import.
        self.model_bucket_export_name = f"{self.stack_name}-ModelBucketName"
        self.model_s3_uri_export_name = f"{self.stack_name}-ModelS3Uri"
        CfnOutput(self, "ModelBucketName", value=self.models.bucket.bucket_name, description="Bucket of model weights",
                  export_name=self.model_bucket_export_name)
        # ModelS3Uri, ModelRepositoryId and ModelRevision are what `voicectl stage-model --stack` reads.
        CfnOutput(self, "ModelS3Uri", value=model_s3_uri, export_name=self.model_s3_uri_export_name,
                  description="S3 prefix of the Voxtral weights (staged by the deploy when voxtral.stage_model)")
        CfnOutput(self, "ModelRepositoryId", value=voxtral.model_id, description="Model hub repository of the weights")
        CfnOutput(self, "ModelRevision", value=voxtral.model_revision, description="Pinned model hub commit")
