"""The required grants of SageMaker (tools/cfn_rules/grants_sagemaker.py): each rule holds on a
template that grants what AWS documents and fails, naming what is missing, on the same template with
the grant taken out (test_required_grants.py holds them as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.grants_kit import (
    KEY_REF,
    ROLE_ARN,
    ROOT,
    allow,
    found,
    key_with,
    res,
    role_with,
    template,
    without,
)
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import _grants
import grants_sagemaker


def vpc_model(**model) -> dict:
    return template(
        **role_with(
            allow(*grants_sagemaker.SAGEMAKER_VPC_ACTIONS),
            allow("cloudwatch:PutMetricData", *_grants.LOG_WRITE_ACTIONS),
            allow(*_grants.ECR_PULL_ACTIONS),
        ),
        Model=res(
            "AWS::SageMaker::Model",
            ExecutionRoleArn=ROLE_ARN,
            VpcConfig={"Subnets": ["subnet-1"]},
            PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1"},
            **model,
        ),
    )


@pytest.mark.parametrize(
    "action",
    [
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
        "ec2:DescribeVpcEndpoints",
    ],
)
def test_a_model_in_a_vpc_needs_every_network_interface_action(action):
    assert found(grants_sagemaker.SageMakerModelInVpcRole, vpc_model()) == []
    assert found(
        grants_sagemaker.SageMakerModelInVpcRole, without(vpc_model(), "Policy", action)
    ) == [f"Model has VpcConfig but its role Role does not allow {action}"]


def test_a_model_outside_a_vpc_needs_no_network_interface_action():
    tpl = without(vpc_model(), "Policy", "ec2:CreateNetworkInterface")
    del tpl["Resources"]["Model"]["Properties"]["VpcConfig"]
    assert found(grants_sagemaker.SageMakerModelInVpcRole, tpl) == []


def test_a_wildcard_grant_counts_and_a_deny_does_not():
    tpl = template(
        **role_with(allow("ec2:*")),
        Model=res("AWS::SageMaker::Model", ExecutionRoleArn=ROLE_ARN, VpcConfig={"Subnets": ["s"]}),
    )
    assert found(grants_sagemaker.SageMakerModelInVpcRole, tpl) == []
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"][0]["Effect"] = "Deny"
    assert len(found(grants_sagemaker.SageMakerModelInVpcRole, tpl)) == 1


@pytest.mark.parametrize(
    "action", ["ecr:BatchGetImage", "logs:PutLogEvents", "cloudwatch:PutMetricData"]
)
def test_a_model_role_pulls_its_image_writes_logs_and_metrics(action):
    assert found(grants_sagemaker.SageMakerModelRoleBasics, vpc_model()) == []
    assert found(
        grants_sagemaker.SageMakerModelRoleBasics, without(vpc_model(), "Policy", action)
    ) == [f"the role Role of Model does not allow {action}"]


def test_rollback_alarms_need_describe_alarms_on_the_models_role():
    tpl = vpc_model()
    tpl["Resources"]["Config"] = {
        "Type": "AWS::SageMaker::EndpointConfig",
        "Properties": {
            "ProductionVariants": [{"ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}]
        },
    }
    tpl["Resources"]["Endpoint"] = {
        "Type": "AWS::SageMaker::Endpoint",
        "Properties": {
            "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            "DeploymentConfig": {"AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "a"}]}},
        },
    }
    assert found(grants_sagemaker.SageMakerRollbackAlarmsRole, tpl) == [
        "Endpoint rolls back on alarms but Role (role of Model) may not describe them"
    ]
    tpl["Resources"]["Policy"]["Properties"]["PolicyDocument"]["Statement"].append(
        allow("cloudwatch:DescribeAlarms", resource="arn:aws:cloudwatch:us-east-1:1:alarm:a")
    )
    assert found(grants_sagemaker.SageMakerRollbackAlarmsRole, tpl) == []


def test_a_volume_key_delegates_to_the_account():
    tpl = template(
        **key_with(allow("kms:*", Principal=ROOT)),
        Config=res("AWS::SageMaker::EndpointConfig", KmsKeyId=KEY_REF, ProductionVariants=[]),
    )
    assert found(grants_sagemaker.SageMakerVolumeKeyPolicy, tpl) == []
    assert found(grants_sagemaker.SageMakerVolumeKeyPolicy, without(tpl, "Key", "kms:*")) == [
        "the policy of key Key does not let the account's IAM roles use it"
    ]
