"""voicectl/operations/verify.py against moto with hand-written cloud assemblies: the fields the
synth does not set yet (VPC, KMS key, a pool running its own Model) and its usage errors (a
synthesized variant's deployment, changed one field at a time: tests/app/test_ops_verify.py; value
comparison: test_verify_compare.py; the intrinsics it resolves: test_verify_resolver.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.variants import PREBUILT_IMAGE
from tests.conftest import ROOT
from tests.unit.voicectl.operations.verify_testkit import (  # noqa: F401 (fixtures)
    OLD_KEY,
    REGION,
    ROLE,
    backend,
    by_what,
    deploy,
    failures,
    fixture_aws,
)
from voicectl.cli import main
from voicectl.operations.verify import verify

# ---- fields the synth does not set yet: a hand-written cloud assembly ---------------------------


def write_assembly(
    outdir: Path, resources: dict, outputs: dict | None = None, stack: str = "Voice-Pools"
) -> Path:
    """A cloud assembly of one stack in us-east-1 with ``resources``."""
    outdir.mkdir(parents=True, exist_ok=True)
    template = {
        "Resources": resources,
        "Outputs": {k: {"Value": v} for k, v in (outputs or {}).items()},
    }
    (outdir / f"{stack}.template.json").write_text(json.dumps(template))
    (outdir / "manifest.json").write_text(
        json.dumps(
            {
                "version": "40.0.0",
                "artifacts": {
                    stack: {
                        "type": "aws:cloudformation:stack",
                        "environment": f"aws://unknown-account/{REGION}",
                        "properties": {
                            "templateFile": f"{stack}.template.json",
                            "stackName": stack,
                        },
                    }
                },
            }
        )
    )
    return outdir


def pools_assembly(outdir: Path) -> Path:
    """An endpoint with instance pools (the second pool runs its own Model), a VPC, and a KMS key of
    its stack."""
    container = {"Image": PREBUILT_IMAGE, "Environment": {"SM_VLLM_MAX_NUM_SEQS": "2"}}
    vpc = {
        "SecurityGroupIds": [{"Ref": "EndpointSecurityGroup"}],
        "Subnets": ["subnet-0b", "subnet-0a"],
    }
    return write_assembly(
        outdir,
        {
            "DataKey": {"Type": "AWS::KMS::Key", "Properties": {}},
            "EndpointSecurityGroup": {"Type": "AWS::EC2::SecurityGroup", "Properties": {}},
            "ModelA": {
                "Type": "AWS::SageMaker::Model",
                "Properties": {
                    "ExecutionRoleArn": ROLE,
                    "PrimaryContainer": container,
                    "VpcConfig": vpc,
                    "EnableNetworkIsolation": True,
                },
            },
            "ModelB": {
                "Type": "AWS::SageMaker::Model",
                "Properties": {
                    "ExecutionRoleArn": ROLE,
                    "VpcConfig": vpc,
                    "EnableNetworkIsolation": True,
                    "PrimaryContainer": {**container, "Environment": {"SM_VLLM_MAX_NUM_SEQS": "8"}},
                },
            },
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "KmsKeyId": {"Fn::GetAtt": ["DataKey", "Arn"]},
                    "ProductionVariants": [
                        {
                            "VariantName": "AllTraffic",
                            "ModelName": {"Fn::GetAtt": ["ModelA", "ModelName"]},
                            "InitialInstanceCount": 1,
                            "VariantInstanceProvisionTimeoutInSeconds": 900,
                            "InstancePools": [
                                {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
                                {
                                    "InstanceType": "ml.g6e.2xlarge",
                                    "Priority": 2,
                                    "ModelNameOverride": {"Fn::GetAtt": ["ModelB", "ModelName"]},
                                },
                            ],
                        }
                    ],
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": "pooled",
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                },
            },
        },
    )


def deploy_pools(
    session,
    *,
    override_env: str = "8",
    pools: list | None = None,
    key: str | None = None,
    running: list | None = None,
) -> str:
    """The stack's KMS key and security group through CloudFormation, then the pooled endpoint's
    SageMaker resources as CloudFormation would create them; returns the key's ARN."""
    stack = {
        "Resources": {
            "DataKey": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {}}},
            "EndpointSecurityGroup": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {"GroupDescription": "endpoint"},
            },
        }
    }
    cloudformation = session.client("cloudformation")
    cloudformation.create_stack(StackName="Voice-Pools", TemplateBody=json.dumps(stack))
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cloudformation.list_stack_resources(StackName="Voice-Pools")[
            "StackResourceSummaries"
        ]
    }
    key_arn = session.client("kms").describe_key(KeyId=physical["DataKey"])["KeyMetadata"]["Arn"]
    vpc = {
        "SecurityGroupIds": [physical["EndpointSecurityGroup"]],
        "Subnets": ["subnet-0a", "subnet-0b"],
    }
    sm = session.client("sagemaker")
    sm.create_model(
        ModelName="model-b",
        ExecutionRoleArn=ROLE,
        VpcConfig=vpc,
        PrimaryContainer={
            "Image": PREBUILT_IMAGE,
            "Environment": {"SM_VLLM_MAX_NUM_SEQS": override_env},
        },
    )
    backend()._models["model-b"].enable_network_isolation = True
    deploy(
        session,
        "pooled",
        "pooled-config",
        "model-a",
        {"Image": PREBUILT_IMAGE, "Environment": {"SM_VLLM_MAX_NUM_SEQS": "2"}},
        "ml.g6.4xlarge",
        1,
        isolation=True,
        vpc=vpc,
        KmsKeyId=key or key_arn,
        variant={
            "VariantInstanceProvisionTimeoutInSeconds": 900,
            # Listed out of priority order: the order does not matter, the priorities do.
            "InstancePools": pools
            or [
                {"InstanceType": "ml.g6e.2xlarge", "Priority": 2, "ModelNameOverride": "model-b"},
                {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
            ],
        },
    )
    # moto's DescribeEndpoint has no per-pool instance counts; SageMaker's does
    # (ProductionVariantSummary).
    backend().endpoints["pooled"].production_variants[0]["InstancePools"] = running or [
        {"InstanceType": "ml.g6.4xlarge", "CurrentInstanceCount": 0},
        {"InstanceType": "ml.g6e.2xlarge", "CurrentInstanceCount": 1},
    ]
    return key_arn


def test_instance_pools_vpc_and_kms_as_synthesized_pass(tmp_path, aws):
    outdir = pools_assembly(tmp_path / "cdk.out")
    key_arn = deploy_pools(aws)
    checks = verify(outdir, aws)
    assert failures(checks) == {} and not [c.line() for c in checks if c.skipped]
    shown = by_what(checks)
    assert (
        shown["pooled: EndpointConfig pooled-config KmsKeyId"].actual == key_arn
    )  # Fn::GetAtt DataKey.Arn resolved
    assert shown["pooled: EndpointConfig pooled-config AllTraffic InstancePools"].ok
    assert (
        shown["pooled: Model model-b PrimaryContainer.Environment"].actual
        == '{"SM_VLLM_MAX_NUM_SEQS": "8"}'
    )
    assert shown["pooled: Model model-a VpcConfig"].ok
    assert shown["pooled: AllTraffic running instance types"].line() == (
        "OK       pooled: AllTraffic running instance types: ml.g6.4xlarge x 0, ml.g6e.2xlarge x 1"
    )


@pytest.mark.parametrize(
    ("deployed", "what", "expected", "found"),
    [
        (
            {"pools": [{"InstanceType": "ml.g6.4xlarge", "Priority": 1}]},
            "EndpointConfig pooled-config AllTraffic InstancePools",
            '[{"InstanceType": "ml.g6.4xlarge", "Priority": 1}, {"InstanceType": '
            '"ml.g6e.2xlarge", "Priority": 2}]',
            '[{"InstanceType": "ml.g6.4xlarge", "Priority": 1}]',
        ),
        (
            {
                "pools": [
                    {"InstanceType": "ml.g6e.2xlarge", "Priority": 1},
                    {
                        "InstanceType": "ml.g6.4xlarge",
                        "Priority": 2,
                        "ModelNameOverride": "model-b",
                    },
                ]
            },
            "EndpointConfig pooled-config AllTraffic InstancePools",
            "[0].InstanceType=ml.g6.4xlarge; [1].InstanceType=ml.g6e.2xlarge",
            "[0].InstanceType=ml.g6e.2xlarge; [1].InstanceType=ml.g6.4xlarge",
        ),
        (
            {"override_env": "2"},
            "Model model-b PrimaryContainer.Environment",
            "SM_VLLM_MAX_NUM_SEQS=8",
            "SM_VLLM_MAX_NUM_SEQS=2",
        ),
        # The L40S pool deployed on the variant's Model: it would run at the L4's stream cap.
        (
            {
                "pools": [
                    {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
                    {"InstanceType": "ml.g6e.2xlarge", "Priority": 2},
                ]
            },
            "EndpointConfig pooled-config AllTraffic pool ml.g6e.2xlarge ModelNameOverride",
            "a Model of its own",
            "(unset)",
        ),
        ({"key": OLD_KEY}, "EndpointConfig pooled-config KmsKeyId", "<the stack's key>", OLD_KEY),
        (
            {"running": [{"InstanceType": "ml.g5.2xlarge", "CurrentInstanceCount": 1}]},
            "AllTraffic running instance types",
            "only ml.g6.4xlarge, ml.g6e.2xlarge",
            "ml.g5.2xlarge x 1",
        ),
    ],
)
def test_each_pool_and_network_field_is_named(tmp_path, aws, deployed, what, expected, found):
    outdir = pools_assembly(tmp_path / "cdk.out")
    key_arn = deploy_pools(aws, **deployed)
    expected = expected.replace("<the stack's key>", key_arn)
    assert failures(verify(outdir, aws)) == {
        f"pooled: {what}": f"MISMATCH pooled: {what}: expected {expected}, found {found}"
    }


def test_vpc_subnets_are_a_set_and_an_extra_security_group_is_named(tmp_path, aws):
    outdir = pools_assembly(tmp_path / "cdk.out")
    deploy_pools(aws)
    model = backend()._models["model-a"]
    model.vpc_config = {
        **model.vpc_config,
        "SecurityGroupIds": [*model.vpc_config["SecurityGroupIds"], "sg-extra"],
    }
    line = failures(verify(outdir, aws))["pooled: Model model-a VpcConfig"]
    assert line.startswith(
        'MISMATCH pooled: Model model-a VpcConfig: expected SecurityGroupIds=["sg-'
    )
    assert line.endswith('"sg-extra"]')


def test_an_app_without_sagemaker_endpoints_is_a_usage_error_naming_the_ecs_target(
    tmp_path, capsys
):
    stack = {
        "type": "aws:cloudformation:stack",
        "environment": "aws://123456789012/us-east-1",
        "properties": {"templateFile": "RealtimeVoice-VoxtralEcs.template.json"},
    }
    (tmp_path / "manifest.json").write_text(
        json.dumps({"version": "48.0.0", "artifacts": {"RealtimeVoice-VoxtralEcs": stack}})
    )
    (tmp_path / "RealtimeVoice-VoxtralEcs.template.json").write_text(json.dumps({"Resources": {}}))
    assert main(["verify", "--cdk-out", str(tmp_path)]) == 2
    assert "or on the ECS target? verify checks SageMaker endpoints only" in capsys.readouterr().err


def test_makefile_verify_synthesizes_first_and_reads_cdk_out():
    makefile = (ROOT / "Makefile").read_text()
    assert "verify: synth ##" in makefile
    assert "$(PY) -m voicectl verify --cdk-out cdk.out" in makefile
