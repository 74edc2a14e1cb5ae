"""What the lifecycle test checks per CloudFormation resource type: one row of
:data:`RESOURCE_KINDS` per type.

A row says how to see a deployed resource through boto3 (``describe``: a view shaped like the
resource's CloudFormation properties, so template values can be compared key by key) and how to tell
it is gone after ``cdk destroy`` (``exists``). Types moto's CloudFormation does not create, or whose
properties it drops, say so in ``not_in_moto`` / ``moto_drops``: the test then checks them at
template level (the deployed template holds them exactly as synthesized; their properties are
asserted by ``tests/app``).

A resource type that appears in a template but has no row fails the test with a message naming this
file: adding a construct means adding its row here (a describe call and an exists call, usually a
few lines).

Physical resource ids are those moto's CloudFormation reports (ListStackResources): an ARN for
SageMaker resources, managed policies, topics and state machines; a name for the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import boto3
import botocore.exceptions

from tests.e2e.lifecycle.lifecycle_moto import FAKE_CREDENTIALS, REGION


class Aws:
    """boto3 clients for moto's server at ``endpoint_url`` (fake credentials, region us-east-1)."""

    def __init__(self, endpoint_url: str):
        self.endpoint_url = endpoint_url
        self._session = boto3.Session(
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=REGION,
        )
        self._clients: dict[str, Any] = {}

    def __getattr__(self, service: str) -> Any:
        """``aws.sagemaker``, ``aws.s3``, ``aws.lambda_`` (``lambda`` is a keyword), ...: a cached
        client."""
        if service.startswith("_"):
            raise AttributeError(service)
        if service not in self._clients:
            self._clients[service] = self._session.client(
                service.rstrip("_").replace("_", "-"), endpoint_url=self.endpoint_url
            )
        return self._clients[service]


@dataclass(frozen=True)
class Deployed:
    """One resource of a deployed stack: type, logical and physical id, its template properties, and
    the physical ids of its stack's resources by logical id (to follow ``Ref``)."""

    type: str
    logical_id: str
    physical_id: str
    properties: dict[str, Any]
    stack_physical_ids: dict[str, str]


@dataclass(frozen=True)
class ResourceKind:
    """How the test sees one resource type.

    Attributes:
        describe: ``(aws, resource) -> view``: the live resource as a dict shaped like its
            CloudFormation properties (only the keys the service returns); raises when the resource
            does not exist.
        exists: ``(aws, resource) -> bool``.
        not_in_moto: why moto cannot show this type (then ``describe`` and ``exists`` are None).
        moto_drops: properties moto accepts but does not keep; left out of the comparison, checked
            at template level.
    """

    describe: Callable[[Aws, Deployed], dict[str, Any]] | None = None
    exists: Callable[[Aws, Deployed], bool] | None = None
    not_in_moto: str | None = None
    moto_drops: tuple[str, ...] = ()


def name_of(arn_or_name: str) -> str:
    """``arn:...:model/abc`` -> ``abc``; a plain name is returned unchanged."""
    return arn_or_name.rsplit("/", 1)[-1] if arn_or_name.startswith("arn:") else arn_or_name


def _exists(call: Callable[[], Any], *missing_codes: str) -> bool:
    """True when ``call`` succeeds; False when it fails with one of ``missing_codes`` (or a
    validation error)."""
    try:
        call()
    except botocore.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in missing_codes or code in ("ValidationException", "ValidationError", "404"):
            return False
        raise
    return True


def _refs(value: Any, resource: Deployed) -> list[str]:
    """Physical ids of the ``{"Ref": logical id}`` items of a template list."""
    return [
        resource.stack_physical_ids[item["Ref"]]
        for item in value
        if isinstance(item, dict) and "Ref" in item
    ]


def _policy_document(document: Any) -> Any:
    return json.loads(unquote(document)) if isinstance(document, str) else document


# --- SageMaker ----------------------------------------------------------------------------------


def _sagemaker_model(aws: Aws, r: Deployed) -> dict[str, Any]:
    live = aws.sagemaker.describe_model(ModelName=name_of(r.physical_id))
    return {
        k: live[k]
        for k in ("ExecutionRoleArn", "PrimaryContainer", "EnableNetworkIsolation")
        if k in live
    }


def _sagemaker_endpoint_config(aws: Aws, r: Deployed) -> dict[str, Any]:
    live = aws.sagemaker.describe_endpoint_config(EndpointConfigName=name_of(r.physical_id))
    return {k: live[k] for k in ("ProductionVariants", "KmsKeyId") if k in live}


def _sagemaker_endpoint(aws: Aws, r: Deployed) -> dict[str, Any]:
    live = aws.sagemaker.describe_endpoint(EndpointName=name_of(r.physical_id))
    return {
        "EndpointName": live["EndpointName"],
        "EndpointConfigName": live["EndpointConfigName"],
        "EndpointStatus": live["EndpointStatus"],
    }


# --- S3, ECR ------------------------------------------------------------------------------------


def _s3_bucket(aws: Aws, r: Deployed) -> dict[str, Any]:
    s3, name = aws.s3, r.physical_id
    view: dict[str, Any] = {"BucketName": name}
    rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
    # The API says ApplyServerSideEncryptionByDefault where CloudFormation says
    # ServerSideEncryptionByDefault.
    view["BucketEncryption"] = {
        "ServerSideEncryptionConfiguration": [
            {
                (
                    "ServerSideEncryptionByDefault"
                    if k == "ApplyServerSideEncryptionByDefault"
                    else k
                ): v
                for k, v in rule.items()
            }
            for rule in rules
        ]
    }
    view["PublicAccessBlockConfiguration"] = s3.get_public_access_block(Bucket=name)[
        "PublicAccessBlockConfiguration"
    ]
    status = s3.get_bucket_versioning(Bucket=name).get("Status")
    if status:
        view["VersioningConfiguration"] = {"Status": status}
    return view


def _ecr_repository(aws: Aws, r: Deployed) -> dict[str, Any]:
    (live,) = aws.ecr.describe_repositories(repositoryNames=[r.physical_id])["repositories"]
    view = {
        "RepositoryName": live["repositoryName"],
        "ImageTagMutability": live["imageTagMutability"],
        "ImageScanningConfiguration": {
            "ScanOnPush": live["imageScanningConfiguration"]["scanOnPush"]
        },
        "EncryptionConfiguration": {
            "EncryptionType": live["encryptionConfiguration"]["encryptionType"]
        },
    }
    if _exists(
        lambda: aws.ecr.get_lifecycle_policy(repositoryName=r.physical_id),
        "LifecyclePolicyNotFoundException",
    ):
        text = aws.ecr.get_lifecycle_policy(repositoryName=r.physical_id)["lifecyclePolicyText"]
        view["LifecyclePolicy"] = {"LifecyclePolicyText": text}
    return view


# --- IAM, Logs, SNS -----------------------------------------------------------------------------


def _iam_role(aws: Aws, r: Deployed) -> dict[str, Any]:
    live = aws.iam.get_role(RoleName=r.physical_id)["Role"]
    view = {
        "AssumeRolePolicyDocument": _policy_document(live["AssumeRolePolicyDocument"]),
        "Arn": live["Arn"],
    }
    if "Description" in live:
        view["Description"] = live["Description"]
    attached = aws.iam.list_attached_role_policies(RoleName=r.physical_id)["AttachedPolicies"]
    if attached:
        view["ManagedPolicyArns"] = sorted(p["PolicyArn"] for p in attached)
    return view


def _iam_policy(aws: Aws, r: Deployed) -> dict[str, Any]:
    # The physical id of an AWS::IAM::Policy is not its name; the CDK always sets PolicyName.
    roles = _refs(r.properties.get("Roles", []), r)
    name = r.properties["PolicyName"]
    documents = [
        aws.iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"] for role in roles
    ]
    assert documents, f"{r.logical_id}: an inline policy attached to no role"
    assert all(d == documents[0] for d in documents), f"{r.logical_id}: differs between its roles"
    return {"PolicyDocument": _policy_document(documents[0]), "Roles": roles}


def _iam_policy_exists(aws: Aws, r: Deployed) -> bool:
    policy_name = r.properties["PolicyName"]
    for page in aws.iam.get_paginator("list_roles").paginate():
        for role in page["Roles"]:
            if policy_name in aws.iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]:
                return True
    return False


def _iam_managed_policy(aws: Aws, r: Deployed) -> dict[str, Any]:
    policy = aws.iam.get_policy(PolicyArn=r.physical_id)["Policy"]
    version = aws.iam.get_policy_version(
        PolicyArn=r.physical_id, VersionId=policy["DefaultVersionId"]
    )
    view = {"PolicyDocument": _policy_document(version["PolicyVersion"]["Document"])}
    if policy.get("Description"):
        view["Description"] = policy["Description"]
    return view


def _log_group(aws: Aws, r: Deployed) -> dict[str, Any]:
    groups = aws.logs.describe_log_groups(logGroupNamePrefix=r.physical_id)["logGroups"]
    (live,) = [g for g in groups if g["logGroupName"] == r.physical_id]
    view = {"LogGroupName": live["logGroupName"]}
    if "retentionInDays" in live:
        view["RetentionInDays"] = live["retentionInDays"]
    return view


def _log_group_exists(aws: Aws, r: Deployed) -> bool:
    name = r.physical_id
    groups = aws.logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
    return any(g["logGroupName"] == name for g in groups)


def _sns_topic(aws: Aws, r: Deployed) -> dict[str, Any]:
    attributes = aws.sns.get_topic_attributes(TopicArn=r.physical_id)["Attributes"]
    view = {"TopicName": r.physical_id.rsplit(":", 1)[-1]}
    for key in ("DisplayName", "KmsMasterKeyId"):
        if attributes.get(key):
            view[key] = attributes[key]
    return view


def _sns_topic_exists(aws: Aws, r: Deployed) -> bool:
    return any(t["TopicArn"] == r.physical_id for t in aws.sns.list_topics()["Topics"])


# --- Lambda, CodeBuild, Step Functions (the model staging's machinery) --------------------------


def _lambda_function(aws: Aws, r: Deployed) -> dict[str, Any]:
    live = aws.lambda_.get_function_configuration(FunctionName=r.physical_id)
    return {
        k: live[k] for k in ("Handler", "Runtime", "Timeout", "MemorySize", "Role") if k in live
    }


def _pascal(value: Any) -> Any:
    """API property names to CloudFormation's (``computeType`` -> ``ComputeType``)."""
    if isinstance(value, list):
        return [_pascal(v) for v in value]
    if isinstance(value, dict):
        return {k[:1].upper() + k[1:]: _pascal(v) for k, v in value.items()}
    return value


def _codebuild_project(aws: Aws, r: Deployed) -> dict[str, Any]:
    (live,) = aws.codebuild.batch_get_projects(names=[r.physical_id])["projects"]
    view = {
        "Name": live["name"],
        "ServiceRole": live["serviceRole"],
        "Environment": _pascal(live["environment"]),
    }
    for key in ("timeoutInMinutes", "queuedTimeoutInMinutes"):
        if key in live:
            view[key[:1].upper() + key[1:]] = live[key]
    return view


def _state_machine(aws: Aws, r: Deployed) -> dict[str, Any]:
    live = aws.stepfunctions.describe_state_machine(stateMachineArn=r.physical_id)
    return {"RoleArn": live["roleArn"]}


def _kms_key(aws: Aws, r: Deployed) -> dict[str, Any]:
    metadata = aws.kms.describe_key(KeyId=r.physical_id)["KeyMetadata"]
    policy = aws.kms.get_key_policy(KeyId=r.physical_id, PolicyName="default")["Policy"]
    rotation = aws.kms.get_key_rotation_status(KeyId=r.physical_id)["KeyRotationEnabled"]
    return {
        "Description": metadata.get("Description", ""),
        "EnableKeyRotation": rotation,
        "KeyPolicy": _policy_document(policy),
    }


def _kms_key_exists(aws: Aws, r: Deployed) -> bool:
    """True while the key is usable; a key scheduled for deletion (what CloudFormation does) counts
    as gone."""
    try:
        state = aws.kms.describe_key(KeyId=r.physical_id)["KeyMetadata"]["KeyState"]
    except aws.kms.exceptions.NotFoundException:
        return False
    return state != "PendingDeletion"


# --- EC2 (network.mode=vpc) ---------------------------------------------------------------------


def _ec2_missing(call: Callable[[], Any]) -> bool:
    """True while ``call`` (a Describe* filtered to one id) finds it; moto answers
    InvalidXxx.NotFound when it is gone."""
    try:
        return bool(call())
    except botocore.exceptions.ClientError as error:
        if error.response.get("Error", {}).get("Code", "").endswith(".NotFound"):
            return False
        raise


def _vpc(aws: Aws, r: Deployed) -> dict[str, Any]:
    (vpc,) = aws.ec2.describe_vpcs(VpcIds=[r.physical_id])["Vpcs"]
    attribute = lambda name: aws.ec2.describe_vpc_attribute(VpcId=r.physical_id, Attribute=name)  # noqa: E731
    return {
        "CidrBlock": vpc["CidrBlock"],
        "InstanceTenancy": vpc["InstanceTenancy"],
        "EnableDnsSupport": attribute("enableDnsSupport")["EnableDnsSupport"]["Value"],
        "EnableDnsHostnames": attribute("enableDnsHostnames")["EnableDnsHostnames"]["Value"],
    }


def _subnet(aws: Aws, r: Deployed) -> dict[str, Any]:
    (subnet,) = aws.ec2.describe_subnets(SubnetIds=[r.physical_id])["Subnets"]
    return {k: subnet[k] for k in ("CidrBlock", "VpcId", "AvailabilityZone", "MapPublicIpOnLaunch")}


def _route_table(aws: Aws, r: Deployed) -> dict[str, Any]:
    (table,) = aws.ec2.describe_route_tables(RouteTableIds=[r.physical_id])["RouteTables"]
    return {"VpcId": table["VpcId"]}


def _security_group(aws: Aws, r: Deployed) -> dict[str, Any]:
    (group,) = aws.ec2.describe_security_groups(GroupIds=[r.physical_id])["SecurityGroups"]
    return {"GroupDescription": group["Description"], "VpcId": group["VpcId"]}


def _vpc_endpoint(aws: Aws, r: Deployed) -> dict[str, Any]:
    (endpoint,) = aws.ec2.describe_vpc_endpoints(VpcEndpointIds=[r.physical_id])["VpcEndpoints"]
    view = {k: endpoint[k] for k in ("VpcEndpointType", "ServiceName", "VpcId") if k in endpoint}
    if endpoint.get("VpcEndpointType") == "Interface":
        view["PrivateDnsEnabled"] = endpoint["PrivateDnsEnabled"]
    return view


def _flow_log(aws: Aws, r: Deployed) -> dict[str, Any]:
    (flow_log,) = aws.ec2.describe_flow_logs(FlowLogIds=[r.physical_id])["FlowLogs"]
    return {"TrafficType": flow_log["TrafficType"], "ResourceId": flow_log["ResourceId"]}


NOT_IN_MOTO_CFN = (
    "moto's CloudFormation does not create this type (it logs 'No Moto CloudFormation support')"
)
CUSTOM = (
    "moto runs no custom-resource handler: the harness completes the resource with its stand-in "
    "data (lifecycle_moto_stand_ins.CUSTOM_RESOURCE_STAND_INS); the handler has its own tests"
)

#: One row per CloudFormation resource type the stacks may contain. Custom resources (``Custom::*``
#: and ``AWS::CloudFormation::CustomResource``) are covered by :func:`kind_of`.
RESOURCE_KINDS: dict[str, ResourceKind] = {
    "AWS::SageMaker::Model": ResourceKind(
        _sagemaker_model,
        lambda aws, r: _exists(
            lambda: aws.sagemaker.describe_model(ModelName=name_of(r.physical_id))
        ),
        moto_drops=("EnableNetworkIsolation",),
    ),
    "AWS::SageMaker::EndpointConfig": ResourceKind(
        _sagemaker_endpoint_config,
        lambda aws, r: _exists(
            lambda: aws.sagemaker.describe_endpoint_config(
                EndpointConfigName=name_of(r.physical_id)
            )
        ),
    ),
    "AWS::SageMaker::Endpoint": ResourceKind(
        _sagemaker_endpoint,
        lambda aws, r: _exists(
            lambda: aws.sagemaker.describe_endpoint(EndpointName=name_of(r.physical_id))
        ),
    ),
    "AWS::S3::Bucket": ResourceKind(
        _s3_bucket,
        lambda aws, r: _exists(lambda: aws.s3.head_bucket(Bucket=r.physical_id), "NoSuchBucket"),
        moto_drops=("OwnershipControls", "LoggingConfiguration", "LifecycleConfiguration"),
    ),
    "AWS::ECR::Repository": ResourceKind(
        _ecr_repository,
        lambda aws, r: _exists(
            lambda: aws.ecr.describe_repositories(repositoryNames=[r.physical_id]),
            "RepositoryNotFoundException",
        ),
    ),
    "AWS::IAM::Role": ResourceKind(
        _iam_role,
        lambda aws, r: _exists(lambda: aws.iam.get_role(RoleName=r.physical_id), "NoSuchEntity"),
    ),
    "AWS::IAM::Policy": ResourceKind(_iam_policy, _iam_policy_exists),
    "AWS::IAM::ManagedPolicy": ResourceKind(
        _iam_managed_policy,
        lambda aws, r: _exists(lambda: aws.iam.get_policy(PolicyArn=r.physical_id), "NoSuchEntity"),
    ),
    "AWS::Logs::LogGroup": ResourceKind(_log_group, _log_group_exists),
    "AWS::SNS::Topic": ResourceKind(_sns_topic, _sns_topic_exists),
    "AWS::KMS::Key": ResourceKind(_kms_key, _kms_key_exists),
    "AWS::Lambda::Function": ResourceKind(
        _lambda_function,
        lambda aws, r: _exists(
            lambda: aws.lambda_.get_function(FunctionName=r.physical_id),
            "ResourceNotFoundException",
        ),
    ),
    "AWS::CodeBuild::Project": ResourceKind(
        _codebuild_project,
        lambda aws, r: bool(aws.codebuild.batch_get_projects(names=[r.physical_id])["projects"]),
    ),
    "AWS::StepFunctions::StateMachine": ResourceKind(
        _state_machine,
        lambda aws, r: _exists(
            lambda: aws.stepfunctions.describe_state_machine(stateMachineArn=r.physical_id),
            "StateMachineDoesNotExist",
        ),
    ),
    # moto's CloudFormation creates a VPC from CidrBlock, InstanceTenancy and Tags only: the DNS
    # attributes are asserted at template level
    # (tests/unit/constructs_lib/network/test_private_network.py).
    "AWS::EC2::VPC": ResourceKind(
        _vpc,
        lambda aws, r: _ec2_missing(lambda: aws.ec2.describe_vpcs(VpcIds=[r.physical_id])["Vpcs"]),
        moto_drops=("EnableDnsSupport", "EnableDnsHostnames"),
    ),
    "AWS::EC2::Subnet": ResourceKind(
        _subnet,
        lambda aws, r: _ec2_missing(
            lambda: aws.ec2.describe_subnets(SubnetIds=[r.physical_id])["Subnets"]
        ),
    ),
    "AWS::EC2::RouteTable": ResourceKind(
        _route_table,
        lambda aws, r: _ec2_missing(
            lambda: aws.ec2.describe_route_tables(RouteTableIds=[r.physical_id])["RouteTables"]
        ),
    ),
    # An association has no Describe of its own; its route table's existence is checked on that row.
    "AWS::EC2::SubnetRouteTableAssociation": ResourceKind(lambda aws, r: {}, lambda aws, r: False),
    "AWS::EC2::SecurityGroup": ResourceKind(
        _security_group,
        lambda aws, r: _ec2_missing(
            lambda: aws.ec2.describe_security_groups(GroupIds=[r.physical_id])["SecurityGroups"]
        ),
    ),
    # A rule lives in its group: gone with the group (checked on that row).
    "AWS::EC2::SecurityGroupIngress": ResourceKind(lambda aws, r: {}, lambda aws, r: False),
    "AWS::EC2::VPCEndpoint": ResourceKind(
        _vpc_endpoint,
        lambda aws, r: _ec2_missing(
            lambda: [
                e
                for e in aws.ec2.describe_vpc_endpoints(VpcEndpointIds=[r.physical_id])[
                    "VpcEndpoints"
                ]
                if e.get("State") != "deleted"
            ]
        ),
    ),
    "AWS::EC2::FlowLog": ResourceKind(
        _flow_log,
        lambda aws, r: _ec2_missing(
            lambda: aws.ec2.describe_flow_logs(FlowLogIds=[r.physical_id])["FlowLogs"]
        ),
    ),
    "AWS::S3::BucketPolicy": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
    "AWS::SNS::TopicPolicy": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
    "AWS::CloudWatch::Alarm": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
    "AWS::CloudWatch::CompositeAlarm": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
    "AWS::CloudWatch::Dashboard": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
    "AWS::ApplicationAutoScaling::ScalableTarget": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
    "AWS::ApplicationAutoScaling::ScalingPolicy": ResourceKind(not_in_moto=NOT_IN_MOTO_CFN),
}


def kind_of(resource_type: str) -> ResourceKind:
    """The row for ``resource_type``.

    Raises:
        AssertionError: no row; the message says where to add one.
    """
    if (
        resource_type.startswith("Custom::")
        or resource_type == "AWS::CloudFormation::CustomResource"
    ):
        return ResourceKind(not_in_moto=CUSTOM)
    if resource_type not in RESOURCE_KINDS:
        raise AssertionError(
            f"the stacks now contain {resource_type}, which the lifecycle test does not know: "
            "add a row for it to RESOURCE_KINDS in tests/e2e/lifecycle/lifecycle_resources.py "
            "(describe and exists through boto3, or not_in_moto with the reason)"
        )
    return RESOURCE_KINDS[resource_type]


def is_intrinsic(value: Any) -> bool:
    """``{"Ref": ...}``, ``{"Fn::...": ...}``: a value only CloudFormation resolves."""
    return (
        isinstance(value, dict)
        and len(value) == 1
        and next(iter(value)).startswith(("Ref", "Fn::"))
    )


def literal_mismatches(expected: Any, actual: Any, path: str = "") -> tuple[list[str], int]:
    """Compare the literal parts of template value ``expected`` with the live ``actual``.

    Intrinsic functions are skipped (the test checks resolved references explicitly). Dict keys
    present in ``expected`` must be present in ``actual``; lists must have the same length. JSON
    documents given as strings on one side are parsed.

    Returns:
        ``(mismatches, compared)``: one message per difference, and how many scalar values were
        compared.
    """
    if is_intrinsic(expected):
        return [], 0
    if isinstance(actual, str) and isinstance(expected, (dict, list)):
        try:
            actual = json.loads(actual)
        except ValueError:
            return [f"{path}: template {expected!r}, live {actual!r}"], 1
    if isinstance(expected, str) and isinstance(actual, (dict, list)):
        try:
            expected = json.loads(expected)
        except ValueError:
            return [f"{path}: template {expected!r}, live {actual!r}"], 1
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: template {expected!r}, live {actual!r}"], 1
        mismatches: list[str] = []
        compared = 0
        for key, value in expected.items():
            if key not in actual:
                if not is_intrinsic(value):
                    mismatches.append(f"{path}.{key}: in the template, missing live")
                continue
            more, count = literal_mismatches(value, actual[key], f"{path}.{key}")
            mismatches += more
            compared += count
        return mismatches, compared
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: template {expected!r}, live {actual!r}"], 1
        mismatches, compared = [], 0
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            more, count = literal_mismatches(e, a, f"{path}[{i}]")
            mismatches += more
            compared += count
        return mismatches, compared
    # Exact, but for the encodings a JSON template and an API answer legitimately differ in: numbers
    # given as strings ("1200" vs 1200) and booleans as "true"/"false". Case is never ignored (names
    # are case-sensitive).
    same = (
        expected == actual
        or (
            not isinstance(expected, (dict, list))
            and not isinstance(actual, (dict, list))
            and str(expected).lower() in ("true", "false")
            and str(expected).lower() == str(actual).lower()
        )
        or (
            isinstance(expected, (int, float, str))
            and isinstance(actual, (int, float, str))
            and not isinstance(expected, bool)
            and not isinstance(actual, bool)
            and _as_number(expected) is not None
            and _as_number(expected) == _as_number(actual)
        )
    )
    return ([] if same else [f"{path}: template {expected!r}, live {actual!r}"]), 1


def _as_number(value: int | float | str) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass
class StackView:
    """A deployed stack: its resources (``Deployed``) and outputs, as CloudFormation reports
    them."""

    name: str
    resources: list[Deployed] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    def one(self, resource_type: str) -> Deployed:
        """The only resource of ``resource_type`` (AssertionError when there are none or
        several)."""
        found = [r for r in self.resources if r.type == resource_type]
        assert len(found) == 1, (
            f"{self.name}: expected one {resource_type}, found {[r.logical_id for r in found]}"
        )
        return found[0]


def read_stack(aws: Aws, stack_name: str, template: dict[str, Any] | None = None) -> StackView:
    """The stack's resources from ListStackResources, with their properties from the synthesized
    ``template``.

    Resources moto did not create have no entry in moto's list; they are returned with an empty
    physical id. Without ``template`` (the bootstrap stack, whose template is YAML) only what moto
    lists is returned.
    """
    summaries = aws.cloudformation.list_stack_resources(StackName=stack_name)[
        "StackResourceSummaries"
    ]
    listed = [s for s in summaries if s.get("LogicalResourceId")]
    physical = {s["LogicalResourceId"]: s["PhysicalResourceId"] for s in listed}
    view = StackView(stack_name)
    if template is None:
        view.resources = [
            Deployed(
                s["ResourceType"], s["LogicalResourceId"], s["PhysicalResourceId"], {}, physical
            )
            for s in listed
        ]
    else:
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == "AWS::CDK::Metadata":
                continue
            view.resources.append(
                Deployed(
                    resource["Type"],
                    logical_id,
                    physical.get(logical_id, ""),
                    resource.get("Properties", {}),
                    physical,
                )
            )
    (stack,) = aws.cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    view.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    return view
