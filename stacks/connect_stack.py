"""ConnectStack: live call transcription for Amazon Connect
(constructs_lib/connect/transcription.py), when ``connect.enabled``."""

from __future__ import annotations

from aws_cdk import Stack, aws_ec2 as ec2, aws_sns as sns
from constructs import Construct

from config.settings import Settings
from constructs_lib.connect.transcription import ConnectTranscription
from stacks.composition import Foundation

REPO_DIR = __file__.rsplit("/stacks/", 1)[0]


class ConnectStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        foundation: Foundation,
        alarm_topic: sns.ITopic,
        endpoint_url: str | None = None,
        token_secret_arn: str | None = None,
        token_secret_kms_key_arn: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        private = foundation.vpc is not None
        extra: dict = {
            "alarm_topic": alarm_topic,
            "image_directory": REPO_DIR,
            "kms_key_arn": foundation.key_arn,
        }
        if endpoint_url is not None:
            extra.update(
                endpoint_url=endpoint_url,
                token_secret_arn=token_secret_arn,
                token_secret_kms_key_arn=token_secret_kms_key_arn,
            )
        if private:
            extra.update(
                vpc=foundation.vpc, subnets=ec2.SubnetSelection(subnets=foundation.private_subnets)
            )
        self.transcription = ConnectTranscription(
            self, "Transcription", settings.connect.props(settings, **extra)
        )
