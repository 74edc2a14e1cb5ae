"""Deploy, update and destroy the app with the pinned CDK CLI against moto's server (one bootstrap,
two deploys, one destroy), and check every resource through boto3.

What moto cannot show is asserted at template level, here and in ``tests/app``:
- bucket policies (TLS only), topic policies, CloudWatch alarms and dashboards, Application Auto
  Scaling: moto's CloudFormation does not create them; this test checks that CloudFormation received
  them exactly as synthesized, their properties are asserted by ``tests/app``;
- ``EnableNetworkIsolation`` of the Sonic Model: moto drops it; asserted in the synthesized
  template;
- Lambda-backed custom resources (auto-delete of buckets, model staging): moto runs no handler; the
  harness completes them with the data the real handler returns
  (``lifecycle_moto_stand_ins.CUSTOM_RESOURCE_STAND_INS``);
- an endpoint's instances, health checks and the container itself: moto starts nothing.
The harness's fixes for moto's gaps are listed in ``lifecycle_moto.py``; none of them touches the
product.

Run it alone with ``make local-lifecycle`` or ``pytest -m lifecycle``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings, load_settings
from tests.conftest import cdk_json_context
from tests.e2e.lifecycle.lifecycle_cdk import Phases, bootstrap_target, run_cdk, synthesize_assembly
from tests.e2e.lifecycle.lifecycle_moto import (
    ACCOUNT,
    REGION,
    MotoServer,
    moto_server,
    port_is_closed,
)
from tests.e2e.lifecycle.lifecycle_resources import (
    Aws,
    StackView,
    is_intrinsic,
    kind_of,
    literal_mismatches,
    name_of,
    read_stack,
)

pytestmark = [
    pytest.mark.lifecycle,
    # the CDK CLI deploys, updates and destroys: a minute together (tests/e2e/conftest.py)
    pytest.mark.starts_first,
    # moto warns once per resource it cannot parse (bucket policies...); the harness records them
    # itself.
    pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning"),
]

#: The prebuilt bridge image (no Docker engine here to build the asset); moto's CreateModel does not
#: pull it.
IMAGE_URI = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/realtime-voice-bridge:lifecycle-test"
#: The update: another Voxtral instance type, which replaces the EndpointConfig (and nothing else).
UPDATED_INSTANCE_TYPE = "ml.g6e.2xlarge"
BOOTSTRAP_STACK = "CDKToolkit"


def settings_with(overrides: dict[str, Any]) -> Settings:
    """The settings the CDK CLI synthesizes from: cdk.json plus ``-c`` overrides."""
    return load_settings({**cdk_json_context(), **overrides})


def context_args(overrides: dict[str, str]) -> list[str]:
    return [arg for key, value in overrides.items() for arg in ("-c", f"{key}={value}")]


def load_templates(assembly: Path) -> dict[str, dict]:
    """The templates of every stack of a cloud assembly, by stack name (from its manifest.json)."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    stacks = {
        artifact.get("displayName", artifact_id): assembly / artifact["properties"]["templateFile"]
        for artifact_id, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    return {name: json.loads(path.read_text()) for name, path in stacks.items()}


def test_deploy_update_destroy_with_the_cdk_cli(tmp_path):
    """The update goes through the CLI's own synthesis (``cdk deploy -c KEY=VALUE``, the documented
    way to change a setting): the lifecycle tier's one synthesis by the CLI."""
    deploy_update_destroy(tmp_path, {}, update_through_the_cli=True)


def test_deploy_update_destroy_a_private_deployment(tmp_path):
    """network.mode=vpc: the Foundation stack (VPC, endpoints, security groups, data key) deploys
    first, the Models run in its subnets, and destroy removes the network as well."""
    deploy_update_destroy(tmp_path, {"network.mode": "vpc"}, update_through_the_cli=False)


def deploy_update_destroy(
    tmp_path: Path, mode: dict[str, str], update_through_the_cli: bool
) -> None:
    phases = Phases(f"lifecycle {mode or 'public'}")
    cdk_log = tmp_path / "cdk.log"
    # A fixed-size Voxtral endpoint (min = max: no scalable target): SageMaker rejects an
    # instance-type change of an autoscaled variant, which moto would not; this is the README's
    # procedure for changing the instance type. The stream cap is pinned: with `auto` it follows the
    # instance type (4 on an L4, 23 on an L40S), which changes the Model's environment and so
    # replaces the Model too; this update checks the EndpointConfig alone is replaced.
    first = {
        **mode,
        "voxtral.image_uri": IMAGE_URI,
        "voxtral.min_instances": 1,
        "voxtral.max_instances": 1,
        "voxtral.max_num_seqs": 4,
    }
    second = {**first, "voxtral.instance_type": UPDATED_INSTANCE_TYPE}
    settings, updated = settings_with(first), settings_with(second)

    with moto_server() as server:
        aws = Aws(server.url)

        def cdk(step: str, args: list[str]) -> None:
            with phases(step):
                run_cdk(args, server.url, cdk_log)

        # 1-2. Synthesize once (so bootstrap needs no synthesis of its own), bootstrap, deploy.
        assembly_1, assembly_2 = tmp_path / "cdk.out.1", tmp_path / "cdk.out.2"
        with phases("synth"):
            synthesize_assembly(assembly_1, first, server.url)
        cdk("bootstrap", ["bootstrap", bootstrap_target(), "--app", str(assembly_1)])
        bootstrap = read_stack(aws, BOOTSTRAP_STACK)
        cdk("deploy", ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_1)])
        templates_1 = load_templates(assembly_1)
        stack_names = sorted(templates_1)
        prefix = settings.stack_name_prefix
        assert {f"{prefix}-{s}" for s in ("Artifacts", "Voxtral", "Sonic")} <= set(stack_names), (
            stack_names
        )

        # 3. Every resource exists with the values of its template and of the settings.
        with phases("checks"):
            stacks_1 = {name: read_stack(aws, name, templates_1[name]) for name in stack_names}
            for stack in stacks_1.values():
                check_stack_against_template(aws, server, stack, templates_1[stack.name])
            check_settings(aws, settings, stacks_1)

        # 4. Update: another Voxtral instance type -> a new EndpointConfig under a new name, the old
        #    one deleted.
        if update_through_the_cli:
            cdk(
                "deploy (update, CLI synth)",
                [
                    "deploy",
                    "--all",
                    "--require-approval",
                    "never",
                    *context_args(second),
                    "-o",
                    str(assembly_2),
                ],
            )
        else:
            with phases("synth (update)"):
                synthesize_assembly(assembly_2, second, server.url)
            cdk(
                "deploy (update)",
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_2)],
            )
        templates_2 = load_templates(assembly_2)
        assert sorted(templates_2) == stack_names
        with phases("checks"):
            stacks_2 = {name: read_stack(aws, name, templates_2[name]) for name in stack_names}
            for stack in stacks_2.values():
                check_stack_against_template(aws, server, stack, templates_2[stack.name])
            check_settings(aws, updated, stacks_2)
            check_update(aws, settings, stacks_1, stacks_2)

        # 5. Destroy: nothing the stacks made is left.
        cdk("destroy", ["destroy", "--all", "--force", "--app", str(assembly_2)])
        with phases("leftovers"):
            check_destroyed(aws, bootstrap, [*stacks_1.values(), *stacks_2.values()])
        port = server.port

    assert port_is_closed(port), f"moto's server still accepts connections on port {port}"
    # Figures, not assertions: the targets are read from this line (speed depends on the machine).
    phases.report()


def aws_template(aws: Aws, stack_name: str) -> dict:
    """The template CloudFormation holds for ``stack_name`` (GetTemplate)."""
    body = aws.cloudformation.get_template(StackName=stack_name)["TemplateBody"]
    return body if isinstance(body, dict) else json.loads(body)


def check_stack_against_template(
    aws: Aws, server: MotoServer, stack: StackView, template: dict
) -> None:
    """Each resource of ``stack``: the live view equals the template's literal properties (types
    moto creates), or CloudFormation holds it exactly as synthesized (types moto skips, which are
    then asserted by tests/app)."""
    deployed_template = aws_template(aws, stack.name)
    problems: list[str] = []
    for resource in stack.resources:
        kind = kind_of(resource.type)
        if kind.not_in_moto:
            assert (
                deployed_template["Resources"][resource.logical_id]
                == template["Resources"][resource.logical_id]
            )
            if resource.type.startswith("Custom::"):
                assert (resource.type, resource.logical_id) in server.custom_resources
            continue
        assert resource.physical_id, (
            f"{stack.name}: moto did not create {resource.logical_id} ({resource.type})"
        )
        view = kind.describe(aws, resource)
        # The view holds the properties boto3 can show; each of them is compared with the template,
        # in full.
        expected = {
            k: v for k, v in resource.properties.items() if k in view and k not in kind.moto_drops
        }
        mismatches, compared = literal_mismatches(
            expected, view, f"{stack.name}.{resource.logical_id}"
        )
        problems += mismatches
        # A view that shares literal properties with the template must have compared some (the check
        # can fail).
        assert compared or not _literal_keys(expected, view), (
            f"{resource.logical_id}: nothing compared"
        )
    assert not problems, "live resources differ from their templates:\n" + "\n".join(problems)
    skipped = {t for t in server.unsupported_types if t in {r.type for r in stack.resources}}
    undeclared = {t for t in skipped if not kind_of(t).not_in_moto}
    assert not undeclared, (
        f"moto skipped {undeclared}, which lifecycle_resources.RESOURCE_KINDS expects it to create"
    )


def _literal_keys(expected: dict, view: dict) -> list[str]:
    return [k for k in view if k in expected and not is_intrinsic(expected[k])]


def check_settings(aws: Aws, settings: Settings, stacks: dict[str, StackView]) -> None:
    """The values the settings asked for, read back through boto3 (independently of the
    templates)."""
    prefix = settings.stack_name_prefix
    artifacts, voxtral, sonic = (stacks[f"{prefix}-{s}"] for s in ("Artifacts", "Voxtral", "Sonic"))

    # Voxtral: Model (image, uncompressed weights under the staged prefix, served model name),
    # EndpointConfig, Endpoint under its stable name, log group with the retention asked for, role
    # and its policies.
    v = settings.voxtral
    model = aws.sagemaker.describe_model(
        ModelName=name_of(voxtral.one("AWS::SageMaker::Model").physical_id)
    )
    container = model["PrimaryContainer"]
    assert container["Image"] == v.image_uri
    weights = f"s3://{artifacts.outputs['ModelBucketName']}/models/{v.model_id}/{v.model_revision}/"
    assert container["ModelDataSource"] == {
        "S3DataSource": {"S3Uri": weights, "S3DataType": "S3Prefix", "CompressionType": "None"}
    }
    assert artifacts.outputs["ModelS3Uri"] == voxtral.outputs["VoxtralModelS3Uri"] == weights
    assert container["Environment"]["SM_VLLM_SERVED_MODEL_NAME"] == v.model_id
    assert container["Environment"]["SM_VLLM_MAX_MODEL_LEN"] == str(v.max_model_len)
    role = aws.iam.get_role(RoleName=execution_role(voxtral).physical_id)["Role"]
    assert model["ExecutionRoleArn"] == role["Arn"]
    check_endpoint(
        aws,
        voxtral,
        model["ModelName"],
        v.endpoint_name,
        v.instance_type,
        v.initial_instance_count,
        v.model_data_download_timeout_s,
        v.container_startup_timeout_s,
        v.inference_ami_version,
    )
    check_role(
        aws,
        voxtral,
        {
            "s3:GetObject": f"/models/{v.model_id}/{v.model_revision}/",
            "s3:ListBucket": artifacts.outputs["ModelBucketName"],
            "ecr:BatchGetImage": "realtime-voice-bridge",
            "logs:PutLogEvents": f"/aws/sagemaker/Endpoints/{v.endpoint_name}",
            "cloudwatch:PutMetricData": "*",
        },
    )
    check_log_group(aws, v.endpoint_name, settings.log_retention_days)

    # Sonic: Model from the Marketplace package, EndpointConfig, Endpoint, log group, role.
    s = settings.sonic
    model = aws.sagemaker.describe_model(
        ModelName=name_of(sonic.one("AWS::SageMaker::Model").physical_id)
    )
    assert model["PrimaryContainer"]["ModelPackageName"] == settings.sonic_model_package_arn
    role = aws.iam.get_role(RoleName=execution_role(sonic).physical_id)["Role"]
    assert model["ExecutionRoleArn"] == role["Arn"]
    # moto drops EnableNetworkIsolation (its Model always says False): asserted in the template
    # instead.
    (sonic_model,) = [r for r in sonic.resources if r.type == "AWS::SageMaker::Model"]
    assert sonic_model.properties["EnableNetworkIsolation"] is True
    check_endpoint(
        aws,
        sonic,
        model["ModelName"],
        s.endpoint_name,
        s.instance_type,
        s.initial_instance_count,
        s.model_data_download_timeout_s,
        s.container_startup_timeout_s,
        None,
    )
    check_role(
        aws,
        sonic,
        {"logs:PutLogEvents": f"/aws/sagemaker/Endpoints/{s.endpoint_name}"},
        forbidden_prefixes=("s3:", "ecr:"),
    )
    check_log_group(aws, s.endpoint_name, settings.log_retention_days)

    # Artifacts: both buckets encrypted (SSE-S3; the model bucket SSE-KMS under the data key in a
    # private deployment) and fully private; the repository scans on push and keeps tags immutable.
    model_bucket = artifacts.outputs["ModelBucketName"]
    for bucket in [r for r in artifacts.resources if r.type == "AWS::S3::Bucket"]:
        rules = aws.s3.get_bucket_encryption(Bucket=bucket.physical_id)[
            "ServerSideEncryptionConfiguration"
        ]["Rules"]
        expected = (
            "aws:kms" if settings.uses_key and bucket.physical_id == model_bucket else "AES256"
        )
        assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == expected, (
            bucket.logical_id
        )
        block = aws.s3.get_public_access_block(Bucket=bucket.physical_id)[
            "PublicAccessBlockConfiguration"
        ]
        assert block == {
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        }, bucket.logical_id
    assert aws.s3.get_bucket_versioning(Bucket=model_bucket)["Status"] == "Enabled"
    (repository,) = aws.ecr.describe_repositories(
        repositoryNames=[artifacts.one("AWS::ECR::Repository").physical_id]
    )["repositories"]
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repository["imageTagMutability"] == "IMMUTABLE"
    assert artifacts.outputs["BridgeRepositoryUri"] == repository["repositoryUri"]

    if settings.network.private:
        check_private(aws, settings, stacks)

    # Topics (alarm notifications, when the stacks have them): each exists under its ARN.
    for stack in stacks.values():
        for topic in [r for r in stack.resources if r.type == "AWS::SNS::Topic"]:
            assert (
                aws.sns.get_topic_attributes(TopicArn=topic.physical_id)["Attributes"]["TopicArn"]
                == topic.physical_id
            )


def check_private(aws: Aws, settings: Settings, stacks: dict[str, StackView]) -> None:
    """A private deployment, read back: both Models in the Foundation stack's subnets and security
    group, the subnets in two Availability Zones of a VPC with no internet gateway, the four VPC
    endpoints, the data key."""
    foundation = stacks[f"{settings.stack_name_prefix}-Foundation"]
    vpc_id = foundation.outputs["VpcId"]
    subnets = aws.ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    assert len({s["AvailabilityZone"] for s in subnets}) == 2 and not any(
        s["MapPublicIpOnLaunch"] for s in subnets
    )
    assert (
        aws.ec2.describe_internet_gateways(
            Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}]
        )["InternetGateways"]
        == []
    )
    endpoints = aws.ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
        "VpcEndpoints"
    ]
    assert sorted(e["ServiceName"].removeprefix(f"com.amazonaws.{REGION}.") for e in endpoints) == [
        "ecr.api",
        "ecr.dkr",
        "s3",
        "sagemaker.runtime",
    ]
    for name in ("Voxtral", "Sonic"):
        stack = stacks[f"{settings.stack_name_prefix}-{name}"]
        model = aws.sagemaker.describe_model(
            ModelName=name_of(stack.one("AWS::SageMaker::Model").physical_id)
        )
        assert sorted(model["VpcConfig"]["Subnets"]) == sorted(s["SubnetId"] for s in subnets), name
        (group,) = model["VpcConfig"]["SecurityGroupIds"]
        assert (
            aws.ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["VpcId"]
            == vpc_id
        )
    key = foundation.one("AWS::KMS::Key").physical_id
    assert aws.kms.get_key_rotation_status(KeyId=key)["KeyRotationEnabled"] is True


def check_endpoint(
    aws: Aws,
    stack: StackView,
    model_name: str,
    endpoint_name: str,
    instance_type: str,
    count: int,
    download_timeout_s: int,
    startup_timeout_s: int,
    ami_version: str | None,
) -> None:
    endpoint = aws.sagemaker.describe_endpoint(EndpointName=endpoint_name)
    assert endpoint["EndpointArn"] == stack.one("AWS::SageMaker::Endpoint").physical_id
    config = aws.sagemaker.describe_endpoint_config(
        EndpointConfigName=endpoint["EndpointConfigName"]
    )
    assert config["EndpointConfigArn"] == stack.one("AWS::SageMaker::EndpointConfig").physical_id
    (variant,) = config["ProductionVariants"]
    assert variant["VariantName"] == "AllTraffic"
    assert variant["ModelName"] == model_name
    assert variant["InstanceType"] == instance_type
    assert variant["InitialInstanceCount"] == count
    assert variant["ModelDataDownloadTimeoutInSeconds"] == download_timeout_s
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == startup_timeout_s
    assert variant.get("InferenceAmiVersion") == ami_version
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def check_role(
    aws: Aws, stack: StackView, required: dict[str, str], forbidden_prefixes: tuple[str, ...] = ()
) -> None:
    """The execution role trusts SageMaker only, for this account, has no managed policies, and its
    inline policy allows each ``required`` action on a resource containing the given text, and no
    forbidden action."""
    role = aws.iam.get_role(RoleName=execution_role(stack).physical_id)["Role"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    assert aws.iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"] == []
    allowed: dict[str, list[str]] = {}
    for policy_name in aws.iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]:
        document = aws.iam.get_role_policy(RoleName=role["RoleName"], PolicyName=policy_name)[
            "PolicyDocument"
        ]
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = (
                [statement["Action"]]
                if isinstance(statement["Action"], str)
                else statement["Action"]
            )
            resources = (
                [statement["Resource"]]
                if isinstance(statement["Resource"], str)
                else statement["Resource"]
            )
            for action in actions:
                allowed.setdefault(action, []).extend(resources)
    for action, resource_text in required.items():
        assert any(resource_text in r for r in allowed.get(action, [])), (
            f"{action} on *{resource_text}*: {allowed}"
        )
    assert not [a for a in allowed if a.startswith(forbidden_prefixes)], allowed


def execution_role(stack: StackView):
    """The SageMaker execution role of an endpoint stack (construct id ``ExecutionRole``)."""
    (role,) = [
        r
        for r in stack.resources
        if r.type == "AWS::IAM::Role" and r.logical_id.startswith("ExecutionRole")
    ]
    return role


def check_log_group(aws: Aws, endpoint_name: str, retention_days: int) -> None:
    name = f"/aws/sagemaker/Endpoints/{endpoint_name}"
    (group,) = [
        g
        for g in aws.logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        if g["logGroupName"] == name
    ]
    assert group["retentionInDays"] == retention_days


def check_update(
    aws: Aws, settings: Settings, before: dict[str, StackView], after: dict[str, StackView]
) -> None:
    """The Voxtral endpoint kept its name and ARN and now uses a new EndpointConfig; the old config
    is gone; the Model and every other resource kept their physical ids; no two resources of one
    type share a name."""
    voxtral = f"{settings.stack_name_prefix}-Voxtral"
    old_config = before[voxtral].one("AWS::SageMaker::EndpointConfig").physical_id
    new_config = after[voxtral].one("AWS::SageMaker::EndpointConfig").physical_id
    assert new_config != old_config
    endpoint = aws.sagemaker.describe_endpoint(EndpointName=settings.voxtral.endpoint_name)
    assert endpoint["EndpointArn"] == before[voxtral].one("AWS::SageMaker::Endpoint").physical_id
    assert endpoint["EndpointConfigName"] == name_of(new_config)
    old = before[voxtral].one("AWS::SageMaker::EndpointConfig")
    assert not kind_of(old.type).exists(aws, old), f"{old_config} was not deleted"
    listed = {
        c["EndpointConfigName"] for c in aws.sagemaker.list_endpoint_configs()["EndpointConfigs"]
    }
    assert name_of(old_config) not in listed and name_of(new_config) in listed

    replaced = {
        (name, r.logical_id)
        for name in before
        for r in before[name].resources
        if r.physical_id
        != {x.logical_id: x.physical_id for x in after[name].resources}[r.logical_id]
    }
    assert replaced == {(voxtral, before[voxtral].one("AWS::SageMaker::EndpointConfig").logical_id)}

    names: dict[tuple[str, str], str] = {}
    for stack in after.values():
        for r in stack.resources:
            if r.physical_id:
                key = (r.type, name_of(r.physical_id))
                assert key not in names, f"{r.logical_id} and {names[key]} share the name {key[1]}"
                names[key] = r.logical_id


def check_destroyed(aws: Aws, bootstrap: StackView, stacks: list[StackView]) -> None:
    """Every resource either deploy made is gone, and no service holds anything outside the
    bootstrap stack."""
    remaining_stacks = [s["StackName"] for s in aws.cloudformation.describe_stacks()["Stacks"]]
    assert remaining_stacks == [BOOTSTRAP_STACK]

    left: list[str] = []
    for stack in stacks:
        for resource in stack.resources:
            kind = kind_of(resource.type)
            if kind.exists and resource.physical_id and kind.exists(aws, resource):
                left.append(
                    f"{stack.name}/{resource.logical_id} ({resource.type}) {resource.physical_id}"
                )
    assert not left, "cdk destroy left:\n" + "\n".join(left)

    # Sweeps: whatever exists now must belong to the bootstrap stack (catches resources made outside
    # the templates).
    kept = {r.physical_id for r in bootstrap.resources}
    sweeps = {
        "SageMaker models": [m["ModelName"] for m in aws.sagemaker.list_models()["Models"]],
        "endpoint configs": [
            c["EndpointConfigName"]
            for c in aws.sagemaker.list_endpoint_configs()["EndpointConfigs"]
        ],
        "endpoints": [e["EndpointName"] for e in aws.sagemaker.list_endpoints()["Endpoints"]],
        "ECR repositories": [
            r["repositoryName"] for r in aws.ecr.describe_repositories()["repositories"]
        ],
        "S3 buckets": [b["Name"] for b in aws.s3.list_buckets()["Buckets"]],
        "IAM roles": [r["RoleName"] for r in aws.iam.list_roles()["Roles"]],
        "IAM managed policies": [
            p["Arn"] for p in aws.iam.list_policies(Scope="Local")["Policies"]
        ],
        "log groups": [g["logGroupName"] for g in aws.logs.describe_log_groups()["logGroups"]],
        "SNS topics": [t["TopicArn"] for t in aws.sns.list_topics()["Topics"]],
        "Lambda functions": [f["FunctionName"] for f in aws.lambda_.list_functions()["Functions"]],
        "CodeBuild projects": aws.codebuild.list_projects()["projects"],
        "state machines": [
            m["stateMachineArn"] for m in aws.stepfunctions.list_state_machines()["stateMachines"]
        ],
        "KMS keys not pending deletion": [
            k["KeyId"]
            for k in aws.kms.list_keys()["Keys"]
            if aws.kms.describe_key(KeyId=k["KeyId"])["KeyMetadata"]["KeyState"]
            != "PendingDeletion"
        ],
        "CloudWatch alarms": [
            a["AlarmName"] for a in aws.cloudwatch.describe_alarms()["MetricAlarms"]
        ],
        "scalable targets": [
            t["ResourceId"]
            for t in aws.application_autoscaling.describe_scalable_targets(
                ServiceNamespace="sagemaker"
            )["ScalableTargets"]
        ],
        "VPCs (not the default one)": [
            v["VpcId"] for v in aws.ec2.describe_vpcs()["Vpcs"] if not v["IsDefault"]
        ],
        "VPC endpoints": [
            e["VpcEndpointId"]
            for e in aws.ec2.describe_vpc_endpoints()["VpcEndpoints"]
            if e.get("State") != "deleted"
        ],
    }
    leftovers = {
        what: sorted(set(found) - kept) for what, found in sweeps.items() if set(found) - kept
    }
    assert not leftovers, f"left after cdk destroy: {leftovers}"
    # The bootstrap stack is still there (destroy must not touch it).
    assert aws.s3.head_bucket(Bucket=f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}")
