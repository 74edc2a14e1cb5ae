"""Stand-ins the harness hands moto's CloudFormation while lifecycle_moto's server runs: the data
of Lambda-backed custom resources (:data:`CUSTOM_RESOURCE_STAND_INS`), and the resource types moto's
CloudFormation lacks (:data:`CLOUDFORMATION_STAND_INS`), backed by moto's service models."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: Stand-ins for Lambda-backed custom resources: resource type -> ``Data`` the real handler returns,
#: computed from the resource's properties. A type not listed here completes with no data (fine
#: unless the template reads an attribute of it, which then fails the deploy with the resource type
#: in the message).
CUSTOM_RESOURCE_STAND_INS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {}


def _model_staging_data(properties: dict[str, Any]) -> dict[str, str]:
    """What ``on_event``/``is_complete`` of
    ``services/handlers/model_staging_waiter/index.py`` return."""
    from contracts.weights import MANIFEST_NAME

    uri = properties["S3Uri"]
    return {
        "S3Uri": uri,
        "ManifestUri": uri + MANIFEST_NAME,
        "BuildId": f"{properties['ProjectName']}:lifecycle-test",
    }


CUSTOM_RESOURCE_STAND_INS["Custom::ModelStaging"] = _model_staging_data


def camel(value: Any) -> Any:
    """CloudFormation property names to the CodeBuild API's (``TimeoutInMinutes`` ->
    ``timeoutInMinutes``)."""
    if isinstance(value, list):
        return [camel(v) for v in value]
    if isinstance(value, dict):
        return {
            ("buildspec" if k == "BuildSpec" else k[:1].lower() + k[1:]): camel(v)
            for k, v in value.items()
        }
    return value


class _StandIn:
    """What moto's CloudFormation asks of a resource model, for the stand-ins below: ``Ref`` is
    ``name``, ``Fn::GetAtt Arn`` is ``arn``. A plain class, not a ``CloudFormationModel`` subclass,
    so that it is not registered in moto for good: the harness hands the stand-ins to moto only
    while the server runs."""

    def __init__(self, name: str, arn: str):
        self.name, self.arn = name, arn

    @property
    def physical_resource_id(self) -> str:
        return self.name

    def is_created(self) -> bool:
        return True

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        return self.arn

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: _StandIn,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _StandIn:
        cls.delete_from_cloudformation_json(
            original_resource.name, cloudformation_json, account_id, region_name
        )
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )


class CodeBuildProjectStandIn(_StandIn):
    """``AWS::CodeBuild::Project`` for moto's CloudFormation, which has none: creates and deletes
    the project in moto's CodeBuild backend (so BatchGetProjects sees it and destroy can be
    checked)."""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CodeBuild::Project"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "Name"

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> CodeBuildProjectStandIn:
        from moto.codebuild.models import codebuild_backends

        p = cloudformation_json["Properties"]
        backend = codebuild_backends[account_id][region_name]
        project = backend.create_project(
            project_name=resource_name,
            description=p.get("Description"),
            project_source=camel(p["Source"]),
            artifacts=camel(p["Artifacts"]),
            environment=camel(p["Environment"]),
            service_role=p["ServiceRole"],
            tags=None,
            cache=camel(p.get("Cache")),
            timeout=p.get("TimeoutInMinutes"),
            queued_timeout=p.get("QueuedTimeoutInMinutes"),
            source_version=p.get("SourceVersion"),
            logs_config=camel(p.get("LogsConfig")),
            vpc_config=camel(p.get("VpcConfig")),
        )
        return cls(resource_name, project["arn"])

    @classmethod
    def delete_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        from moto.codebuild.models import codebuild_backends

        codebuild_backends[account_id][region_name].delete_project(resource_name)


class AlarmStandIn(_StandIn):
    """``AWS::CloudWatch::Alarm`` for moto's CloudFormation, which creates no alarms and so fails a
    template that reads an alarm's ``Arn`` (the execution role's DescribeAlarms grant does). Creates
    nothing: ``Ref`` is the ``AlarmName`` and ``Arn`` the ARN CloudWatch gives that name
    (``arn:aws:cloudwatch:<region>:<account>:alarm: <name>``). Alarms stay asserted at template
    level."""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> AlarmStandIn:
        name = cloudformation_json.get("Properties", {}).get("AlarmName", resource_name)
        return cls(name, f"arn:aws:cloudwatch:{region_name}:{account_id}:alarm:{name}")

    @classmethod
    def delete_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        return None


class SecretStandIn(_StandIn):
    """``AWS::SecretsManager::Secret`` for moto's CloudFormation, which has none, so a grant on the
    secret (``Ref`` is its ARN) is an empty policy statement that moto's IAM rejects. Creates the
    secret in moto's Secrets Manager with a generated string (as ``GenerateSecretString`` asks), and
    deletes it with the stack (the ECS target's bearer token)."""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SecretsManager::Secret"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "Name"

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> SecretStandIn:
        import secrets

        from moto.secretsmanager.models import secretsmanager_backends

        p = cloudformation_json.get("Properties", {})
        length = p.get("GenerateSecretString", {}).get("PasswordLength", 32)
        created = json.loads(
            secretsmanager_backends[account_id][region_name].create_secret(
                name=resource_name,
                secret_string=secrets.token_urlsafe(length)[:length],
                secret_binary=None,
                description=p.get("Description"),
                tags=None,
                kms_key_id=None,
                client_request_token=None,
                replica_regions=[],
                force_overwrite=False,
            )
        )
        return cls(created["ARN"], created["ARN"])

    @classmethod
    def delete_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        from moto.secretsmanager.models import secretsmanager_backends

        secretsmanager_backends[account_id][region_name].delete_secret(
            resource_name, recovery_window_in_days=None, force_delete_without_recovery=True
        )


#: Resource types moto's CloudFormation lacks and the harness supplies (type -> class with moto's
#: model interface).
CLOUDFORMATION_STAND_INS: dict[str, Any] = {
    stand_in.cloudformation_type(): stand_in
    for stand_in in (CodeBuildProjectStandIn, AlarmStandIn, SecretStandIn)
}
