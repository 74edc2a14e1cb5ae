"""ArtifactsStack: where the Voxtral endpoint's image and weights live (ECR repository, model bucket)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from config.settings import Settings
from constructs_lib.bridge_image import BridgeImage, BridgeImageProps
from constructs_lib.model_bucket import ModelBucket, ModelBucketProps


class ArtifactsStack(Stack):
    """Bridge image repository (plus the image, unless ``voxtral.image_uri`` is set) and the model bucket."""

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
        #: Export read by the Voxtral stack (Fn::ImportValue) for the bucket name.
        self.model_bucket_export_name = f"{self.stack_name}-ModelBucketName"
        CfnOutput(self, "ModelBucketName", value=self.models.bucket.bucket_name, description="Bucket of model weights",
                  export_name=self.model_bucket_export_name)
