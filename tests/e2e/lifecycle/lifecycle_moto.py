"""moto's server in this process, on a loopback port, with the harness's fixes for moto's gaps.

Why in-process (``moto.server.ThreadedMotoServer``) and not ``moto_server`` as a child process: the
gaps below are fixed by patching moto's Python classes, which only works in the process that serves
the requests, and there is no process to leave behind. Every patch is undone when the server stops,
so tests that use ``mock_aws`` later in the same pytest run see moto as shipped.

The CDK CLI must be given ``http://localhost:<port>``, not ``http://127.0.0.1:<port>``: moto parses
a ``TemplateURL`` only when its host is ``localhost`` (``moto/cloudformation/utils.py``), and the
CLI builds the template URL from the S3 endpoint. The server listens on 127.0.0.1 only;
``localhost`` resolves to it (Node tries IPv6 and IPv4).

moto's gaps, and what the harness does about each (nothing here changes the product):

- SageMaker instance types: moto's ``CreateEndpointConfig`` validation stops at older families (no
  ml.g6, ml.g6e, ml.g7e). The harness adds every type of ``constructs_lib/facts/instance_types.py``
  to the accepted list.
- ``AWS::SageMaker::Endpoint``: moto ignores ``EndpointName`` and generates a name; CloudFormation
  uses it. The harness makes moto read ``EndpointName`` (``cloudformation_name_type``), so the
  stable name can be checked.
- ``AWS::ECR::Repository`` without ``RepositoryName``: moto generates a mixed-case name that its own
  ECR rejects; CloudFormation generates a lower-case one. The harness lower-cases the generated
  name.
- Updates: moto updates a resource only when its own template JSON changed, so when it replaces an
  EndpointConfig the Endpoint still names the deleted one. The harness also updates the readers of a
  replaced resource, as CloudFormation does (:data:`REPLACED_ON_UPDATE`).
- Generated names: moto does not shorten them to the service's limit (a Step Functions state machine
  name over 80 characters); the harness shortens them like CloudFormation, per
  :data:`GENERATED_NAME_LIMITS`.
- ``AWS::ECR::Repository`` properties: moto passes ``ImageScanningConfiguration`` and
  ``EncryptionConfiguration`` in CloudFormation's spelling to its ECR model, which reads the API's
  (so scan on push is lost), and ignores ``LifecyclePolicy``. The harness converts the spelling and
  puts the lifecycle policy.
- Deleted stacks: DescribeStacks of a deleted stack (the CLI polls it by id during destroy)
  evaluates its outputs, and moto's lazy resource map re-creates every deleted resource they refer
  to. The harness empties a deleted stack's outputs.
- ``AWS::IAM::ManagedPolicy``: moto cannot delete it, so a deleted stack leaves its managed
  policies. The harness gives the type a delete.
- ``AWS::KMS::Key`` with ``Tags`` (the CDK tags everything): moto passes CloudFormation's tag
  spelling to KMS, fails, and the key is then "undefined" for ``Fn::GetAtt``; it keeps ``KeyPolicy``
  as an object where its API expects JSON text; and it cannot delete a key. The harness converts the
  tags and the policy and schedules the key's deletion on stack deletion, as CloudFormation does.
- ``AWS::S3::Bucket`` properties: moto applies only ``BucketEncryption`` (without
  ``BucketKeyEnabled``) and ``Tags``. The harness applies ``PublicAccessBlockConfiguration``,
  ``VersioningConfiguration`` and ``BucketKeyEnabled`` (network.mode=vpc's SSE-KMS model bucket);
  ownership controls, access logging and lifecycle rules stay unapplied and are asserted at template
  level (``lifecycle_resources``: ``moto_drops``).
- Change sets (the CDK CLI deploys only through change sets): moto registers exports, and resolves
  ``Fn::ImportValue``, only for ``CreateStack``, and computes a change-set stack's outputs from its
  empty first template. The harness gives change-set stacks the account's exports and re-reads
  outputs and exports after each executed change set. moto also keeps executed change sets and finds
  change sets by name in any stack (the CDK CLI names every stack's change set
  ``cdk-deploy-change-set``); the harness removes a stack's change sets once one is executed, as
  CloudFormation does, and makes deleting a change set that does not exist a no-op (moto answers
  HTTP 500, which the CLI retries for a minute), and answers DescribeChangeSet of a missing change
  set with ChangeSetNotFoundException (which the CLI waits for) instead of moto's ValidationError.
- ``UsePreviousValue`` of an SSM-typed parameter (the CLI sends it for ``BootstrapVersion`` on every
  update): moto substitutes the resolved value and then fails looking it up as a parameter name. The
  harness keeps a value that names no SSM parameter as it is.
- Lambda-backed custom resources: moto would invoke the function in Docker (there is none) and, for
  change sets, marks the resource complete anyway without data. The harness does not invoke
  anything: it marks the resource complete with the data of a stand-in from
  :data:`CUSTOM_RESOURCE_STAND_INS` (the documented response of the real handler), or no data for
  types that return none. What the handler does is tested with the handler's own tests.
- ``AWS::CodeBuild::Project`` (the model staging build): moto's CloudFormation has no such type, so
  a template reading its ``Arn`` fails. The harness supplies :class:`CodeBuildProjectStandIn`,
  backed by moto's CodeBuild.
- ``AWS::CloudWatch::Alarm``: moto's CloudFormation creates none, so a template reading an alarm's
  ``Arn`` (the execution role's DescribeAlarms grant on the rollback alarms) fails. The harness
  supplies :class:`AlarmStandIn`, which only answers ``Ref`` and ``Arn``; alarms are still checked
  at template level.
- ``AWS::SecretsManager::Secret`` (the ECS target's bearer token): moto's CloudFormation has none,
  so a grant on it is an empty statement moto's IAM rejects. The harness supplies
  :class:`SecretStandIn`, backed by moto's Secrets Manager.
- ``AWS::ElasticLoadBalancingV2::TargetGroup``: moto's model answers no ``Fn::GetAtt`` (the ECS
  target's alarms read ``TargetGroupFullName``), and describing the stack fails; nor can it delete
  one. The harness gives it the attributes CloudFormation documents, and a delete.
- ``AWS::ECS::TaskDefinition`` updates: moto registers the new revision with CloudFormation's key
  spelling (``Image``, not ``image``), so the new revision has no image. The harness registers it as
  on create, and treats a task definition as replaced on update (:data:`REPLACED_ON_UPDATE`), so the
  service follows it.
- VPC parts (the Foundation stack's network in network.mode=vpc, the ECS target's own VPC): moto's
  CloudFormation cannot delete a NAT gateway, an Elastic IP, a VPC endpoint, a flow log, a route
  table or its subnet association, an internet gateway or its attachment, so the VPC "has
  dependencies" on stack deletion. The harness gives each a delete through moto's EC2 API (one
  table, ``network_deletes``), as CloudFormation does; likewise the ECS cluster, service and task
  definition, which it leaves ACTIVE (ECS's deletes leave them INACTIVE).
- Not created at all by moto's CloudFormation (it warns "No Moto CloudFormation support for ..."):
  bucket and topic policies, CloudWatch dashboards, Application Auto Scaling. The harness records
  each warning in :attr:`MotoServer.unsupported_types`; the test checks those resources at template
  level instead.
- ``AWS::EC2::VPC``: moto's CloudFormation ignores ``EnableDnsSupport`` and ``EnableDnsHostnames``
  (network.mode=vpc); asserted at template level (``lifecycle_resources``: ``moto_drops``).
- ``EnableNetworkIsolation`` on ``AWS::SageMaker::Model``: moto drops it (its Model always reports
  False). Asserted at template level by the test.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import requests

log = logging.getLogger("lifecycle")

#: moto's default account (``moto.core.DEFAULT_ACCOUNT_ID``): every fake access key maps to it.
ACCOUNT = "123456789012"
REGION = "us-east-1"
#: Obviously fake credentials; moto accepts any.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEFORMOTOONLY00",
    "AWS_SECRET_ACCESS_KEY": "fake-secret-for-moto-only",
}

#: Longest name of each resource type (the services' API references: CreateStateMachine ``name`` 80,
#: IAM role name 64, Lambda function name 64, SageMaker ModelName and EndpointConfigName 63).
#: CloudFormation shortens the names it generates to fit; moto does not, and then rejects its own
#: names.
GENERATED_NAME_LIMITS = {
    "AWS::StepFunctions::StateMachine": 80,
    "AWS::IAM::Role": 64,
    "AWS::Lambda::Function": 64,
    "AWS::SageMaker::Model": 63,
    "AWS::SageMaker::EndpointConfig": 63,
}

#: Stand-ins for Lambda-backed custom resources: resource type -> ``Data`` the real handler returns,
#: computed from the resource's properties. A type not listed here completes with no data (fine
#: unless the template reads an attribute of it, which then fails the deploy with the resource type
#: in the message).
CUSTOM_RESOURCE_STAND_INS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {}


def _model_staging_data(properties: dict[str, Any]) -> dict[str, str]:
    """What ``on_event``/``is_complete`` of
    ``constructs_lib/artifacts/model_staging_waiter/index.py`` return."""
    from contracts.weights import MANIFEST_NAME

    uri = properties["S3Uri"]
    return {
        "S3Uri": uri,
        "ManifestUri": uri + MANIFEST_NAME,
        "BuildId": f"{properties['ProjectName']}:lifecycle-test",
    }


CUSTOM_RESOURCE_STAND_INS["Custom::ModelStaging"] = _model_staging_data


def _camel(value: Any) -> Any:
    """CloudFormation property names to the CodeBuild API's (``TimeoutInMinutes`` ->
    ``timeoutInMinutes``)."""
    if isinstance(value, list):
        return [_camel(v) for v in value]
    if isinstance(value, dict):
        return {
            ("buildspec" if k == "BuildSpec" else k[:1].lower() + k[1:]): _camel(v)
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
            project_source=_camel(p["Source"]),
            artifacts=_camel(p["Artifacts"]),
            environment=_camel(p["Environment"]),
            service_role=p["ServiceRole"],
            tags=None,
            cache=_camel(p.get("Cache")),
            timeout=p.get("TimeoutInMinutes"),
            queued_timeout=p.get("QueuedTimeoutInMinutes"),
            source_version=p.get("SourceVersion"),
            logs_config=_camel(p.get("LogsConfig")),
            vpc_config=_camel(p.get("VpcConfig")),
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


#: Types whose every update is a replacement under a new generated name (CloudFormation reference:
#: all properties of AWS::SageMaker::Model and AWS::SageMaker::EndpointConfig say "Update requires:
#: Replacement").
REPLACED_ON_UPDATE = {
    "AWS::SageMaker::Model",
    "AWS::SageMaker::EndpointConfig",
    "AWS::ECS::TaskDefinition",
}


def _references(value: Any) -> set[str]:
    """Logical ids a template fragment reads through ``Ref`` or ``Fn::GetAtt``."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        get_att = value.get("Fn::GetAtt")
        if isinstance(get_att, list) and get_att:
            found.add(get_att[0])
        elif isinstance(get_att, str):
            found.add(get_att.split(".", 1)[0])
        for item in value.values():
            found |= _references(item)
    elif isinstance(value, list):
        for item in value:
            found |= _references(item)
    return found


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class MotoServer:
    """A running moto server. ``url`` is ``http://localhost:<port>``.

    Attributes:
        unsupported_types: CloudFormation resource types moto skipped (logged "No Moto
            CloudFormation support").
        custom_resources: ``(resource type, logical id)`` of every custom resource the harness
            completed.
        errors: tracebacks of exceptions moto raised while creating or executing a change set (the
            CDK CLI sees only "XML parse error" or a bare message for those).
    """

    url: str
    port: int
    unsupported_types: set[str] = field(default_factory=set)
    custom_resources: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def reset(self) -> None:
        """Drop every resource of every account (moto's ``/moto-api/reset``)."""
        requests.post(f"{self.url}/moto-api/reset", timeout=30).raise_for_status()


class _UnsupportedTypeRecorder(logging.Handler):
    """Collects the resource types of moto's "No Moto CloudFormation support for %s" warnings."""

    def __init__(self, sink: set[str]):
        super().__init__(level=logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "No Moto CloudFormation support for %s" and record.args:
            self.sink.add(str(record.args[0]))


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def _added(owner: type, name: str, value: Any) -> Iterator[None]:
    """Give ``owner`` its own ``name`` (it inherits an abstract one), removed again on exit."""
    assert name not in owner.__dict__, f"{owner.__name__}.{name} exists now: drop this harness fix"
    setattr(owner, name, value)
    try:
        yield
    finally:
        delattr(owner, name)


def _moto_patches(server: MotoServer) -> list[contextlib.AbstractContextManager]:
    """The patches listed in the module docstring, as context managers."""
    from moto.cloudformation import custom_model, models as cfn_models, parsing
    from moto.sagemaker import models as sagemaker_models

    from constructs_lib.facts.instance_types import CATALOGUE

    original_validate = sagemaker_models.FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type not in CATALOGUE:
            original_validate(self, instance_type)

    original_generate = parsing.generate_resource_name

    def generate_resource_name(resource_type: str, stack_name: str, logical_id: str) -> str:
        name = original_generate(resource_type, stack_name, logical_id)
        limit = GENERATED_NAME_LIMITS.get(resource_type)
        if limit and len(name) > limit:
            # Like CloudFormation: shorten the stack-and-logical-id part, keep the random suffix.
            head, _, suffix = name.rpartition("-")
            name = f"{head[: limit - len(suffix) - 1]}-{suffix}"
        return name.lower() if resource_type == "AWS::ECR::Repository" else name

    backend_class = cfn_models.CloudFormationBackend
    original_create_change_set = backend_class.create_change_set
    original_execute_change_set = backend_class.execute_change_set

    def recorded(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except Exception:
                server.errors.append(traceback.format_exc())
                raise

        return wrapper

    def create_change_set(self: Any, stack_name: str, *args: Any, **kwargs: Any) -> Any:
        # A CREATE change set makes its stack here, without the account's exports (CreateStack
        # passes them).
        for stack in self.stacks.values():
            if stack.name == stack_name:
                stack.cross_stack_resources = self.exports
                stack.resource_map.cross_stack_resources = self.exports
        result = original_create_change_set(self, stack_name, *args, **kwargs)
        for stack in self.stacks.values():
            if stack.name == stack_name:
                stack.cross_stack_resources = self.exports
                stack.resource_map.cross_stack_resources = self.exports
        return result

    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        original_execute_change_set(self, change_set_name, stack_name)
        change_set = self.change_sets.get(change_set_name) or next(
            cs for cs in self.change_sets.values() if cs.change_set_name == change_set_name
        )
        stack = self.stacks[change_set.stack_id]
        stack.template_dict = change_set.template_dict
        stack.output_map = stack._create_output_map()
        for name in [n for n, e in self.exports.items() if e.exporting_stack_id == stack.stack_id]:
            del self.exports[name]
        for export in stack.exports:
            self.exports[export.name] = export
        # CloudFormation removes a stack's change sets once one of them is executed; moto keeps
        # them, and looks change sets up by name across all stacks, so the next stack's
        # "cdk-deploy-change-set" would be mixed up.
        for change_set_id in [
            i for i, cs in self.change_sets.items() if cs.stack_id == stack.stack_id
        ]:
            del self.change_sets[change_set_id]

    original_delete_change_set = backend_class.delete_change_set

    def delete_change_set(self: Any, change_set_name: str) -> None:
        # The CDK CLI deletes a leftover "cdk-deploy-change-set" before each update "if it exists"
        # (it handles no error); moto fails with UnboundLocalError (HTTP 500, which the CLI retries
        # for a minute) when none exists.
        if change_set_name in self.change_sets or any(
            cs.change_set_name == change_set_name for cs in self.change_sets.values()
        ):
            original_delete_change_set(self, change_set_name)

    original_delete_stack = backend_class.delete_stack

    def delete_stack(self: Any, name_or_stack_id: str) -> None:
        # DescribeStacks of a deleted stack (the CLI polls by stack id) evaluates its outputs, and
        # moto's lazy resource map re-creates every deleted resource an output refers to. A deleted
        # stack has no outputs.
        original_delete_stack(self, name_or_stack_id)
        for stack in self.deleted_stacks.values():
            stack.output_map = parsing.OutputMap(stack.resource_map, {}, stack.stack_id)

    from moto.cloudformation.exceptions import CloudFormationError

    class ChangeSetNotFound(CloudFormationError):
        # CloudFormation API model: query error ChangeSetNotFound, HTTP 404
        code = "ChangeSetNotFoundException"

    original_describe_change_set = backend_class.describe_change_set

    def describe_change_set(self: Any, change_set_name: str) -> Any:
        # After deleting a change set the CLI polls DescribeChangeSet until
        # ChangeSetNotFoundException; moto answers ValidationError "Stack with id
        # cdk-deploy-change-set does not exist", which fails the deploy.
        if change_set_name in self.change_sets or any(
            cs.change_set_name == change_set_name for cs in self.change_sets.values()
        ):
            return original_describe_change_set(self, change_set_name)
        raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")

    def create_custom_resource(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        resource_type = kwargs["ResourceType"]
        properties = cloudformation_json["Properties"]
        resource = custom_model.CustomModel(
            region_name, "lifecycle-test", kwargs["LogicalId"], resource_name
        )
        stand_in = CUSTOM_RESOURCE_STAND_INS.get(resource_type)
        resource.set_data(stand_in(properties) if stand_in else {})
        server.custom_resources.append((resource_type, kwargs["LogicalId"]))
        return resource

    original_parse_ssm_parameter = parsing.ResourceMap.parse_ssm_parameter

    def parse_ssm_parameter(self: Any, value: str, value_type: str) -> Any:
        # For UsePreviousValue (the CLI sends it for BootstrapVersion on every update) moto
        # substitutes the previous *resolved* value ("33"), then looks it up as a parameter name and
        # fails; CloudFormation keeps the name. A value that names no SSM parameter is therefore
        # taken as that resolved value.
        from moto.ssm.models import ssm_backends

        if ssm_backends[self._account_id][self._region_name].get_parameter(value) is None:
            return value
        return original_parse_ssm_parameter(self, value, value_type)

    from moto.ecr import models as ecr_models

    original_create_repository = ecr_models.Repository.create_from_cloudformation_json.__func__

    def create_repository(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto hands the CloudFormation spelling ({"ScanOnPush": true}) to its API model, which
        # reads the API's ({"scanOnPush": true}), and ignores LifecyclePolicy.
        properties = dict(cloudformation_json["Properties"])
        for key in ("ImageScanningConfiguration", "EncryptionConfiguration"):
            if key in properties:
                properties[key] = _camel(properties[key])
        repository = original_create_repository(
            cls,
            resource_name,
            {**cloudformation_json, "Properties": properties},
            account_id,
            region_name,
            **kwargs,
        )
        policy = properties.get("LifecyclePolicy", {}).get("LifecyclePolicyText")
        if policy:
            ecr_models.ecr_backends[account_id][region_name].put_lifecycle_policy(
                None, resource_name, policy
            )
        return repository

    from moto.s3 import models as s3_models

    original_create_bucket = s3_models.FakeBucket.create_from_cloudformation_json.__func__

    def create_bucket(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto applies only BucketEncryption and Tags of an AWS::S3::Bucket; the public access block
        # and versioning are applied here like CloudFormation would (other properties: see
        # lifecycle_resources).
        bucket = original_create_bucket(
            cls, resource_name, cloudformation_json, account_id, region_name, **kwargs
        )
        properties = cloudformation_json.get("Properties", {})
        backend = s3_models.s3_backends[account_id]["aws"]
        if "PublicAccessBlockConfiguration" in properties:
            backend.put_public_access_block(
                bucket.name, properties["PublicAccessBlockConfiguration"]
            )
        if "VersioningConfiguration" in properties:
            backend.put_bucket_versioning(
                bucket.name, properties["VersioningConfiguration"]["Status"]
            )
        # moto's conversion of BucketEncryption keeps the algorithm and key but drops
        # BucketKeyEnabled.
        rules = properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        if rules and "BucketKeyEnabled" in rules[0] and bucket.encryption:
            bucket.encryption["Rule"]["BucketKeyEnabled"] = (
                "true" if rules[0]["BucketKeyEnabled"] else "false"
            )
        return bucket

    original_build_resource_diff = parsing.ResourceMap.build_resource_diff

    def build_resource_diff(
        self: Any, other_template: dict[str, Any], parameters: Any = None
    ) -> dict[str, Any]:
        # moto updates a resource only when its own template JSON changed. When an update replaces a
        # resource (new physical name), CloudFormation also updates every resource that reads it
        # (the Endpoint reads the EndpointConfig's name); moto leaves them pointing at the deleted
        # one. Add those readers, in template order.
        diff = original_build_resource_diff(self, other_template, parameters)
        resources = other_template["Resources"]
        modified = set(diff["Modify"])
        replaced = {n for n in modified if resources[n]["Type"] in REPLACED_ON_UPDATE}
        while True:
            readers = {
                n
                for n, r in resources.items()
                if n not in modified and n not in diff["Add"] and _references(r) & replaced
            }
            if not readers:
                break
            modified |= readers
            replaced |= {n for n in readers if resources[n]["Type"] in REPLACED_ON_UPDATE}
        diff["Modify"] = [n for n in resources if n in modified]
        return diff

    from moto.iam import models as iam_models

    def delete_managed_policy(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        # moto's AWS::IAM::ManagedPolicy has no delete: deleting the stack would leave the policy
        # behind.
        from moto.utilities.utils import get_partition

        iam_models.iam_backends[account_id][get_partition(region_name)].delete_policy(resource_name)

    from moto.kms import models as kms_models

    original_create_key = kms_models.Key.create_from_cloudformation_json.__func__

    def create_key(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto hands CloudFormation's Tags ([{Key, Value}]) to KMS's tagger, which reads [{TagKey,
        # TagValue}]; the KeyError makes the key silently "undefined" for every Fn::GetAtt that
        # reads it.
        properties = dict(cloudformation_json["Properties"])
        properties["Tags"] = [
            {"TagKey": t["Key"], "TagValue": t["Value"]} for t in properties.get("Tags", [])
        ]
        # It also keeps KeyPolicy as the template's object, where its API (DescribeKey) expects a
        # JSON string.
        if isinstance(properties.get("KeyPolicy"), dict):
            properties["KeyPolicy"] = json.dumps(properties["KeyPolicy"])
        return original_create_key(
            cls,
            resource_name,
            {**cloudformation_json, "Properties": properties},
            account_id,
            region_name,
            **kwargs,
        )

    def delete_key(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        # moto's AWS::KMS::Key has no delete; CloudFormation schedules the key's deletion
        # (PendingWindowInDays).
        days = int(cloudformation_json.get("Properties", {}).get("PendingWindowInDays", 30))
        kms_models.kms_backends[account_id][region_name].schedule_key_deletion(resource_name, days)

    original_class_from_type = parsing.resource_class_from_type
    original_name_property = parsing.resource_name_property_from_type

    def resource_class_from_type(resource_type: str) -> Any:
        return CLOUDFORMATION_STAND_INS.get(resource_type) or original_class_from_type(
            resource_type
        )

    def resource_name_property_from_type(resource_type: str) -> str | None:
        stand_in = CLOUDFORMATION_STAND_INS.get(resource_type)
        return (
            stand_in.cloudformation_name_type()
            if stand_in
            else original_name_property(resource_type)
        )

    from moto.elbv2 import models as elbv2_models

    def target_group_attribute(self: Any, attribute_name: str) -> Any:
        # Elastic Load Balancing's attributes of AWS::ElasticLoadBalancingV2::TargetGroup
        # (CloudFormation reference).
        return {
            "TargetGroupFullName": self.arn.split(":")[-1],
            "TargetGroupName": self.name,
            "TargetGroupArn": self.arn,
            "LoadBalancerArns": list(self.load_balancer_arns),
        }[attribute_name]

    from moto.ecs import models as ecs_models

    def update_task_definition(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        # A new revision, as CloudFormation makes (ContainerDefinitions: "Update requires:
        # Replacement").
        ecs_models.ecs_backends[account_id][region_name].deregister_task_definition(
            original_resource.arn
        )
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    from moto.ec2 import models as ec2_models
    from moto.ec2.models import (
        elastic_ip_addresses,
        flow_logs,
        internet_gateways,
        nat_gateways,
        route_tables,
        subnets,
        vpcs,
        vpn_gateway,
    )

    # moto's CloudFormation cannot delete these VPC parts (the Foundation stack's private network in
    # network.mode=vpc, the ECS target's own VPC), so deleting the stack fails on the VPC ("has
    # dependencies"). CloudFormation deletes them first; each gets a delete through moto's EC2 API.
    def ec2_delete(delete: Callable[[Any, Any], None]) -> Callable[..., None]:
        """A ``delete(account_id, region_name)`` for a moto EC2 model, as moto's CloudFormation
        calls it."""

        def method(self: Any, account_id: str, region_name: str) -> None:
            delete(ec2_models.ec2_backends[account_id][region_name], self)

        return method

    def delete_route_table(backend: Any, table: Any) -> None:
        if table.id not in backend.route_tables:
            return  # moto may call a delete again after another resource's delete failed
        table._associations.clear()  # moto names an association by its route table's id (see below)
        backend.delete_route_table(table.id)

    def delete_nat_gateway(backend: Any, gateway: Any) -> None:
        backend.delete_nat_gateway(
            gateway.id
        )  # moto marks it deleted but keeps its network interface
        backend.enis.pop(gateway._eni.id, None)

    def delete_vpc_endpoint(backend: Any, endpoint: Any) -> None:
        # A gateway endpoint removes its routes; those of a route table deleted before it are gone
        # already.
        if endpoint.id not in backend.vpc_end_points:
            return
        endpoint.route_table_ids = [
            t for t in endpoint.route_table_ids or [] if t in backend.route_tables
        ]
        backend.delete_vpc_endpoints([endpoint.id])

    network_deletes = {
        nat_gateways.NatGateway: delete_nat_gateway,
        vpcs.VPCEndPoint: delete_vpc_endpoint,
        flow_logs.FlowLogs: lambda backend, r: backend.delete_flow_logs([r.id]),
        route_tables.RouteTable: delete_route_table,
        # The route table's delete removes its associations.
        subnets.SubnetRouteTableAssociation: lambda backend, r: None,
        vpn_gateway.VPCGatewayAttachment: lambda backend, r: backend.detach_internet_gateway(
            r.gateway_id, r.vpc_id
        ),
        internet_gateways.InternetGateway: lambda backend, r: backend.delete_internet_gateway(r.id),
        elastic_ip_addresses.ElasticAddress: lambda backend, r: backend.release_address(
            allocation_id=r.allocation_id
        ),
    }

    def ecs_delete(delete: Callable[[Any, Any], None]) -> Callable[..., None]:
        def method(self: Any, account_id: str, region_name: str) -> None:
            delete(ecs_models.ecs_backends[account_id][region_name], self)

        return method

    def delete_service(backend: Any, service: Any) -> None:
        if service.status == "ACTIVE":
            backend.delete_service(service.cluster_name, service.name, force=True)

    ecs_deletes = {
        # DeleteCluster and DeregisterTaskDefinition leave them INACTIVE, as ECS does.
        ecs_models.Cluster: lambda backend, r: backend.delete_cluster(r.arn),
        ecs_models.Service: delete_service,
        ecs_models.TaskDefinition: lambda backend, r: backend.deregister_task_definition(r.arn),
    }

    return [
        *(_added(model, "delete", ec2_delete(delete)) for model, delete in network_deletes.items()),
        *(_added(model, "delete", ecs_delete(delete)) for model, delete in ecs_deletes.items()),
        _patched(
            ecs_models.TaskDefinition,
            "update_from_cloudformation_json",
            classmethod(update_task_definition),
        ),
        _added(elbv2_models.FakeTargetGroup, "get_cfn_attribute", target_group_attribute),
        _added(
            elbv2_models.FakeTargetGroup,
            "delete",
            lambda self, account_id, region_name: elbv2_models.elbv2_backends[account_id][
                region_name
            ].delete_target_group(self.arn),
        ),
        _added(
            elbv2_models.FakeTargetGroup,
            "has_cfn_attr",
            classmethod(
                lambda cls, attr: (
                    attr
                    in {
                        "TargetGroupFullName",
                        "TargetGroupName",
                        "TargetGroupArn",
                        "LoadBalancerArns",
                    }
                )
            ),
        ),
        _patched(kms_models.Key, "create_from_cloudformation_json", classmethod(create_key)),
        _added(kms_models.Key, "delete_from_cloudformation_json", classmethod(delete_key)),
        _added(
            iam_models.ManagedPolicy,
            "delete_from_cloudformation_json",
            classmethod(delete_managed_policy),
        ),
        _patched(parsing.ResourceMap, "build_resource_diff", build_resource_diff),
        _patched(
            s3_models.FakeBucket, "create_from_cloudformation_json", classmethod(create_bucket)
        ),
        _patched(
            ecr_models.Repository, "create_from_cloudformation_json", classmethod(create_repository)
        ),
        _patched(parsing.ResourceMap, "parse_ssm_parameter", parse_ssm_parameter),
        _patched(parsing, "resource_class_from_type", resource_class_from_type),
        _patched(parsing, "resource_name_property_from_type", resource_name_property_from_type),
        _patched(
            sagemaker_models.FakeEndpointConfig, "validate_instance_type", validate_instance_type
        ),
        _patched(
            sagemaker_models.FakeEndpoint,
            "cloudformation_name_type",
            staticmethod(lambda: "EndpointName"),
        ),
        _patched(parsing, "generate_resource_name", generate_resource_name),
        _patched(backend_class, "create_change_set", recorded(create_change_set)),
        _patched(backend_class, "execute_change_set", recorded(execute_change_set)),
        _patched(backend_class, "delete_change_set", delete_change_set),
        _patched(backend_class, "delete_stack", delete_stack),
        _patched(backend_class, "describe_change_set", describe_change_set),
        _patched(
            custom_model.CustomModel,
            "create_from_cloudformation_json",
            classmethod(create_custom_resource),
        ),
    ]


@contextlib.contextmanager
def moto_server() -> Iterator[MotoServer]:
    """Start moto's server on a free loopback port with the harness patches; stop it and undo them
    on exit.

    The backends start empty (reset on entry and on exit: the server shares moto's in-memory state
    with any ``mock_aws`` test in the same process).
    """
    started = time.monotonic()
    from moto.server import ThreadedMotoServer

    port = free_loopback_port()
    server = MotoServer(url=f"http://localhost:{port}", port=port)
    recorder = _UnsupportedTypeRecorder(server.unsupported_types)
    cfn_logger = logging.getLogger("moto")  # moto.cloudformation.parsing logs through it
    werkzeug_logger = logging.getLogger("werkzeug")
    werkzeug_level = werkzeug_logger.level
    stopping = started
    with contextlib.ExitStack() as stack:
        # Figures, not assertions (callbacks run last to first: this one when everything else is
        # undone).
        stack.callback(
            lambda: log.info(
                "moto's server on port %d: stopped in %.1f s", port, time.monotonic() - stopping
            )
        )
        for patch in _moto_patches(server):
            stack.enter_context(patch)
        cfn_logger.addHandler(recorder)
        stack.callback(cfn_logger.removeHandler, recorder)
        # One access-log line per request would drown the CDK CLI's output in the test report.
        werkzeug_logger.setLevel(logging.ERROR)
        stack.callback(werkzeug_logger.setLevel, werkzeug_level)
        threaded = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        threaded.start()
        stack.callback(threaded.stop)
        server.reset()
        stack.callback(server.reset)
        log.info("moto's server on port %d: started in %.1f s", port, time.monotonic() - started)
        try:
            yield server
        finally:
            stopping = time.monotonic()


def port_is_closed(port: int) -> bool:
    """True when nothing accepts TCP connections on 127.0.0.1:``port`` (the server really
    stopped)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) != 0
