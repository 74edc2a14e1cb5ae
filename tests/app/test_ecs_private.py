"""The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no route to the
internet), the interface endpoints ECS needs made there only when a service runs on ECS, an internal load balancer
for the caller CIDRs, and the data key on the task logs and the token. Checked with cdk-nag's three packs and
cfn-lint; bad combinations fail with one clear message."""

from __future__ import annotations

import json

import pytest

from config.settings import SettingsError, load_settings
from tests.app.variants import ECS_VPC as PRIVATE_ECS
from tests.app.variants import ECS_VPC_EXISTING as EXISTING_ECS
from tests.conftest import cdk_json_context, cfn_lint
from tests.app.ecs_kit import nag_violations
from tests.app.test_voxtral_ecs_stack import of_type, one

#: Interface endpoints of the ECS target, by service name suffix (constructs_lib/network/props.py).
ECS_SERVICES = {"ecs", "ecs-agent", "ecs-telemetry", "logs", "monitoring", "secretsmanager", "ec2"}
SAGEMAKER_SERVICES = {"ecr.api", "ecr.dkr", "sagemaker.runtime"}


@pytest.fixture(scope="module")
def private_ecs(app_variant):
    return app_variant("ecs_vpc")


@pytest.fixture(scope="module")
def existing_ecs(app_variant):
    return app_variant("ecs_vpc_existing")


def suffixes(template: dict) -> set[str]:
    """The service of each VPC endpoint, as the part after ``com.amazonaws.<region>.``."""
    names = set()
    for endpoint in of_type(template, "AWS::EC2::VPCEndpoint").values():
        name = json.dumps(endpoint["Properties"]["ServiceName"])
        for candidate in ECS_SERVICES | SAGEMAKER_SERVICES | {"s3"}:
            if f'.{candidate}"' in name:
                names.add(candidate)
    return names


def imports_from_foundation(value) -> bool:
    return "RealtimeVoice-Foundation:" in json.dumps(value)


def test_the_ecs_endpoints_are_made_only_when_a_service_runs_on_ecs(private_ecs):
    from tests.app.test_private import resources

    foundation = private_ecs.template("Foundation")
    assert suffixes(foundation) == ECS_SERVICES | SAGEMAKER_SERVICES | {"s3"}
    assert len(resources(foundation, "AWS::EC2::VPCEndpoint")) == 11
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (ecs_group,) = [k for k in groups if k.startswith("NetworkEcsEndpointsSecurityGroup")]
    for endpoint in resources(foundation, "AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        name = json.dumps(props["ServiceName"])
        if any(f'.{service}"' in name for service in ECS_SERVICES):
            assert props["VpcEndpointType"] == "Interface" and props["PrivateDnsEnabled"] is True
            assert props["SecurityGroupIds"] == [{"Fn::GetAtt": [ecs_group, "GroupId"]}]
            assert len(props["SubnetIds"]) == 2


def test_sagemaker_only_vpc_mode_has_no_ecs_endpoint(private_ecs, synthesized_vpc):
    """The SageMaker target in vpc mode keeps its four endpoints (tests/app/test_private.py has the rest)."""
    sagemaker = synthesized_vpc
    assert suffixes(sagemaker.template("Foundation")) == SAGEMAKER_SERVICES | {"s3"}
    assert not [k for k in sagemaker.template("Foundation")["Resources"] if k.startswith("NetworkEcs")]


def test_the_endpoints_let_in_the_vpc_on_443_only(private_ecs):
    from tests.app.test_private import ingress, resources

    foundation = private_ecs.template("Foundation")
    (model_group,) = [k for k in resources(foundation, "AWS::EC2::SecurityGroup")
                      if k.startswith("NetworkModelSecurityGroup")]
    assert ingress(foundation, "NetworkEcsEndpoints") == [(443, 443, "10.80.0.0/16")]
    # The ECS instances pull the image through the ECR endpoints SageMaker uses.
    assert ingress(foundation, "NetworkRegistryEndpoints") == [(443, 443, "10.80.0.0/16"), (443, 443, model_group)]


def test_the_service_runs_in_the_private_subnets_with_no_route_out(private_ecs):
    t = private_ecs.template("VoxtralEcs")
    for kind in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::InternetGateway", "AWS::EC2::NatGateway",
                 "AWS::EC2::Route", "AWS::EC2::EIP"):
        assert of_type(t, kind) == {}, kind
    group = one(t, "AWS::AutoScaling::AutoScalingGroup")
    service = one(t, "AWS::ECS::Service")
    balancer = one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    subnets = service["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    assert len(subnets) == 2 and all(imports_from_foundation(s) and "PrivateSubnet" in json.dumps(s) for s in subnets)
    assert group["VPCZoneIdentifier"] == subnets and balancer["Subnets"] == subnets
    assert service["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == "DISABLED"
    assert balancer["Scheme"] == "internal"
    (lb_group,) = [g["Properties"] for k, g in of_type(t, "AWS::EC2::SecurityGroup").items()
                   if k.startswith("ServiceLoadBalancerSecurityGroup")]
    assert [(r["FromPort"], r["CidrIp"]) for r in lb_group["SecurityGroupIngress"]] == [(80, "10.80.0.0/16")]
    assert imports_from_foundation(lb_group["VpcId"])


def test_task_logs_and_token_are_under_the_data_key(private_ecs):
    t = private_ecs.template("VoxtralEcs")
    (log_group,) = [g["Properties"] for k, g in of_type(t, "AWS::Logs::LogGroup").items()
                    if k.startswith("ServiceLogs")]
    assert "DataKey" in json.dumps(log_group["KmsKeyId"]) and imports_from_foundation(log_group["KmsKeyId"])
    secret = one(t, "AWS::SecretsManager::Secret")
    assert "DataKey" in json.dumps(secret["KmsKeyId"])
    # ECS reads the secret with the execution role: it needs kms:Decrypt on the data key, via Secrets Manager only.
    (secret_id,) = of_type(t, "AWS::SecretsManager::Secret")
    execution_policies = [p["Properties"]["PolicyDocument"]["Statement"] for k, p in of_type(t, "AWS::IAM::Policy").items()
                          if k.startswith("ServiceTaskExecutionRole")]
    decrypts = [s for statements in execution_policies for s in statements if s["Action"] == "kms:Decrypt"]
    assert len(decrypts) == 1
    assert "DataKey" in json.dumps(decrypts[0]["Resource"]) and imports_from_foundation(decrypts[0]["Resource"])
    assert decrypts[0]["Condition"] == {"StringEquals": {
        "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
        "kms:EncryptionContext:SecretARN": {"Ref": secret_id}}}


@pytest.mark.parametrize("variant", ["private_ecs", "existing_ecs"])
def test_sonic_on_sagemaker_sets_no_volume_key_on_its_local_storage_type(variant, request):
    """CreateEndpointConfig, KmsKeyId: with Voxtral on ECS, the one EndpointConfig left (Sonic's, ml.g6e.2xlarge,
    local NVMe) carries no KmsKeyId and records why."""
    from tests.app.test_private import check_volume_keys, key_ref

    app = request.getfixturevalue(variant)
    assert check_volume_keys(app, key_ref(app)) == ["ml.g6e.2xlarge"]


def test_an_existing_vpc_takes_its_subnets_and_caller_cidrs(existing_ecs):
    assert "RealtimeVoice-Foundation" in existing_ecs.templates
    assert suffixes(existing_ecs.template("Foundation")) == set()  # network.create_endpoints=false: the VPC has them
    t = existing_ecs.template("VoxtralEcs")
    assert one(t, "AWS::AutoScaling::AutoScalingGroup")["VPCZoneIdentifier"] == [
        "subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    (lb_group,) = [g["Properties"] for k, g in of_type(t, "AWS::EC2::SecurityGroup").items()
                   if k.startswith("ServiceLoadBalancerSecurityGroup")]
    assert [(r["FromPort"], r["CidrIp"]) for r in lb_group["SecurityGroupIngress"]] == [
        (80, "10.20.0.0/16"), (80, "192.168.0.0/24")]
    assert lb_group["VpcId"] == "vpc-0123456789abcdef0"


@pytest.mark.parametrize("variant", ["private_ecs", "existing_ecs"])
def test_cdk_nag_packs_and_cfn_lint_are_clean(variant, request):
    app = request.getfixturevalue(variant)
    # No finding of cdk-nag's three packs, and no CDK warning either (route tables given: no noSubnetRouteTableId).
    assert nag_violations(app) == {}
    # app.py runs HIPAA Security and NIST 800-53 rev 5 in vpc mode (tests/app/test_private.py shows they can fail).
    templates = sorted(str(p) for p in app.outdir.glob("*.template.json"))
    assert cfn_lint(*templates) == []


def test_internet_facing_in_vpc_mode_fails_with_a_clear_message():
    cert = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    with pytest.raises(SettingsError) as caught:
        load_settings({**cdk_json_context(), **PRIVATE_ECS, "ecs.load_balancer": "internet_facing",
                       "ecs.certificate_arn": cert})
    assert caught.value.problems == [
        "ecs.load_balancer='internet_facing' with network.mode='vpc': the private network has no internet gateway; "
        "use ecs.load_balancer='internal' (callers reach it from the VPC, peered networks or on premises), or "
        "network.mode='public'"]
