"""Assertions that read more than one stack of the private deployment (network.mode=vpc and
encryption.*): no route to the internet, both Models isolated in the VPC, every data-holding
resource under the key, an existing VPC, a key given in public mode, and the ECS target in the
private network (the rest of the cross-stack assertions: test_cross_stack.py)."""

from __future__ import annotations

import json

import pytest

from tests.app.kit import (  # noqa: F401 (fixtures)
    check_volume_keys,
    every_resource,
    fixture_existing,
    fixture_existing_ecs,
    fixture_private,
    fixture_private_ecs,
    fixture_public_with_key,
    fixture_sonic_ecs,
    ingress,
    key_ref,
    nag_violations,
    one,
    refers_to_key,
    resources,
    suffixes,
)
from tests.app.variants import PUBLIC_KMS_KEY
from tests.conftest import cdk_json_context, cfn_lint

# --- Private mode -------------------------------------------------------------------------------
# network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its
# endpoints and security groups, both Models isolated in it, every data-holding resource under the
# key), its checks (cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint),
# an existing VPC, and a key given by ARN in public mode. The variants come from the registry
# (tests/app/variants.py).


#: cdk.json's instance types (Voxtral, Sonic): both carry local NVMe instance storage (ml.g6.*,
#: ml.g6e.*).
VOXTRAL_TYPE, SONIC_TYPE = (
    cdk_json_context()[f"{section}.instance_type"] for section in ("voxtral", "sonic")
)


KEY = PUBLIC_KMS_KEY


def test_every_subnet_is_private_and_nothing_routes_to_the_internet(private):
    foundation = private.template("Foundation")
    subnets = resources(foundation, "AWS::EC2::Subnet")
    assert len(subnets) == 2
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())
    zones = [json.dumps(s["Properties"]["AvailabilityZone"]) for s in subnets.values()]
    assert len(set(zones)) == 2
    for kind in (
        "AWS::EC2::InternetGateway",
        "AWS::EC2::NatGateway",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::EgressOnlyInternetGateway",
        "AWS::EC2::Route",
    ):
        assert every_resource(private, kind) == {}, kind


def test_both_models_are_isolated_and_in_the_vpc(private):
    for stack in ("Voxtral", "Sonic"):
        (model,) = resources(private.template(stack), "AWS::SageMaker::Model").values()
        props = model["Properties"]
        assert props["EnableNetworkIsolation"] is True
        config = json.dumps(props["VpcConfig"])
        assert (
            len(props["VpcConfig"]["Subnets"]) == 2
            and len(props["VpcConfig"]["SecurityGroupIds"]) == 1
        )
        assert "Fn::ImportValue" in config and "RealtimeVoice-Foundation" in config


def test_every_resource_that_holds_data_is_encrypted_with_the_key(private):
    key = key_ref(private)
    groups = every_resource(private, "AWS::Logs::LogGroup")
    assert len(groups) >= 8
    assert {
        name: refers_to_key(g["Properties"].get("KmsKeyId"), key) for name, g in groups.items()
    } == dict.fromkeys(groups, True)
    (bucket,) = [
        b
        for name, b in every_resource(private, "AWS::S3::Bucket").items()
        if "ModelBucketEBB1ADF4" in name
    ]
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert refers_to_key(rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"], key)
    (repository,) = every_resource(private, "AWS::ECR::Repository").values()
    assert repository["Properties"]["EncryptionConfiguration"]["EncryptionType"] == "KMS"
    assert refers_to_key(repository["Properties"]["EncryptionConfiguration"]["KmsKey"], key)
    # The EndpointConfigs: under the key only on EBS-backed types
    # (test_no_endpoint_config_sets_a_key_on_local_storage)
    assert len(every_resource(private, "AWS::SageMaker::EndpointConfig")) == 2
    (project,) = every_resource(private, "AWS::CodeBuild::Project").values()
    assert refers_to_key(project["Properties"]["EncryptionKey"], key)
    # The topic keeps a key of its own (CloudWatch must use it), customer managed and rotated.
    (topic,) = every_resource(private, "AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0].startswith("AlarmTopicKey")


def test_no_endpoint_config_sets_a_key_on_local_storage(private):
    assert sorted(check_volume_keys(private, key_ref(private))) == sorted(
        [VOXTRAL_TYPE, SONIC_TYPE]
    )


def test_the_synth_output_says_why_the_endpoint_configs_have_no_key(private):
    """The info annotation on each EndpointConfig names its type and the rule (CDK prints it at
    synth, and the validation report lists it as an info, not a finding)."""
    reports = json.loads((private.outdir / "validation-report.json").read_text())["pluginReports"]
    assert [
        v for r in reports if r["pluginName"] == "Construct Annotations" for v in r["violations"]
    ] == []
    messages = {
        path: entry["data"]
        for metadata in private.outdir.glob("*.metadata.json")
        for path, entries in json.loads(metadata.read_text()).items()
        for entry in entries
        if entry["type"] == "aws:cdk:info"
    }
    by_stack = {
        path.split("/")[1]: data
        for path, data in messages.items()
        if path.endswith("/EndpointConfig")
    }
    assert set(by_stack) == {"RealtimeVoice-Voxtral", "RealtimeVoice-Sonic"}
    for stack, instance_type in (
        ("RealtimeVoice-Voxtral", VOXTRAL_TYPE),
        ("RealtimeVoice-Sonic", SONIC_TYPE),
    ):
        assert by_stack[stack].startswith(
            f"volume_kms_key_arn is not applied. KmsKeyId is left off: {instance_type} "
            "has local NVMe instance storage"
        )
        assert (
            "You can't request a KmsKeyId when using an instance type with local storage"
            in by_stack[stack]
        )


def test_the_model_bucket_lets_only_the_model_data_roles_use_its_objects(private):
    artifacts = private.template("Artifacts")
    (policy,) = [
        p
        for p in resources(artifacts, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"]["Ref"].startswith("ModelBucketEBB1ADF4")
    ]
    (deny,) = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "OnlyModelRolesUseObjects"
    ]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    allowed = json.dumps(deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"])
    assert ":role/RealtimeVoice/model-data/*" in allowed and "AutoDeleteObjects" in allowed
    roles = {
        k: r["Properties"].get("Path")
        for k, r in resources(private.template("Voxtral"), "AWS::IAM::Role").items()
    }
    on_path = sorted(k for k, path in roles.items() if path == "/RealtimeVoice/model-data/")
    assert [k[:-8] for k in on_path] == ["ExecutionRole", "ModelStagingBuildRole"]
    # The Voxtral execution role may decrypt the weights with the data key.
    statements = {
        s["Sid"]: s
        for p in resources(private.template("Voxtral"), "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "Sid" in s
    }
    assert statements["DecryptModelData"]["Action"] == ["kms:Decrypt", "kms:DescribeKey"]


def test_a_key_given_in_public_mode_encrypts_the_data_but_leaves_the_repository(
    public_with_key, synthesized
):
    """Changing a repository's encryption replaces it: in public mode that needs
    encryption.repository=true."""
    assert not any(name.endswith("-Foundation") for name in public_with_key.templates)
    (repository,) = every_resource(public_with_key, "AWS::ECR::Repository").values()
    (before,) = every_resource(synthesized, "AWS::ECR::Repository").values()
    assert repository == before and "KMS" not in json.dumps(repository)
    (bucket,) = [
        b
        for name, b in every_resource(public_with_key, "AWS::S3::Bucket").items()
        if "ModelBucketEBB1ADF4" in name
    ]
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {
        "KMSMasterKeyID": KEY,
        "SSEAlgorithm": "aws:kms",
    }
    # The EndpointConfigs: the key only on EBS-backed types; cdk.json's both carry NVMe storage, so
    # neither has it.
    assert sorted(check_volume_keys(public_with_key, KEY)) == sorted([VOXTRAL_TYPE, SONIC_TYPE])
    (topic,) = every_resource(public_with_key, "AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"] == KEY
    # The logical ids a deployment keeps stay (the topic's own key is gone: the given key replaces
    # it).
    assert set(resources(synthesized.template("Artifacts"), "AWS::S3::Bucket")) == set(
        resources(public_with_key.template("Artifacts"), "AWS::S3::Bucket")
    )


def test_an_existing_vpc_is_described_not_looked_up(existing):
    foundation = existing.template("Foundation")
    assert (
        resources(foundation, "AWS::EC2::VPC") == {}
        and resources(foundation, "AWS::EC2::Subnet") == {}
    )
    endpoints = resources(foundation, "AWS::EC2::VPCEndpoint").values()
    assert {e["Properties"]["VpcId"] for e in endpoints} == {"vpc-0123456789abcdef0"}
    (s3,) = [e["Properties"] for e in endpoints if e["Properties"]["VpcEndpointType"] == "Gateway"]
    assert s3["RouteTableIds"] == ["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"]
    (model,) = resources(existing.template("Voxtral"), "AWS::SageMaker::Model").values()
    assert model["Properties"]["VpcConfig"]["Subnets"] == [
        "subnet-0123456789abcdef0",
        "subnet-0123456789abcdef1",
    ]
    assert ingress(foundation, "NetworkRuntimeEndpoint") == [
        (443, 443, "10.20.0.0/16"),
        (443, 443, "192.168.0.0/24"),
        (8443, 8443, "10.20.0.0/16"),
        (8443, 8443, "192.168.0.0/24"),
    ]
    assert not (existing.outdir / "manifest.json").read_text().count("missing")


# --- ECS in vpc mode ----------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no
# route to the internet), the interface endpoints ECS needs made there only when a service runs on
# ECS, an internal load balancer for the caller CIDRs, and the data key on the task logs and the
# token. Checked with cdk-nag's three packs and cfn-lint; bad combinations fail with one clear
# message.


@pytest.mark.parametrize("variant", ["private_ecs", "existing_ecs"])
def test_sonic_on_sagemaker_sets_no_volume_key_on_its_local_storage_type(variant, request):
    """CreateEndpointConfig, KmsKeyId: with Voxtral on ECS, the one EndpointConfig left (Sonic's,
    ml.g6e.2xlarge, local NVMe) carries no KmsKeyId and records why."""
    from tests.app.kit import check_volume_keys, key_ref

    app = request.getfixturevalue(variant)
    assert check_volume_keys(app, key_ref(app)) == ["ml.g6e.2xlarge"]


def test_an_existing_vpc_takes_its_subnets_and_caller_cidrs(existing_ecs):
    assert "RealtimeVoice-Foundation" in existing_ecs.templates
    assert (
        suffixes(existing_ecs.template("Foundation")) == set()
    )  # network.create_endpoints=false: the VPC has them
    t = existing_ecs.template("VoxtralEcs")
    assert one(t, "AWS::AutoScaling::AutoScalingGroup")["VPCZoneIdentifier"] == [
        "subnet-0123456789abcdef0",
        "subnet-0123456789abcdef1",
    ]
    (lb_group,) = [
        g["Properties"]
        for k, g in resources(t, "AWS::EC2::SecurityGroup").items()
        if k.startswith("ServiceLoadBalancerSecurityGroup")
    ]
    assert [(r["FromPort"], r["CidrIp"]) for r in lb_group["SecurityGroupIngress"]] == [
        (80, "10.20.0.0/16"),
        (80, "192.168.0.0/24"),
    ]
    assert lb_group["VpcId"] == "vpc-0123456789abcdef0"


# --- Sonic on ECS -------------------------------------------------------------------------------
# Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct
# as Voxtral's, without the bridge's parts; its settings and their errors; public mode and vpc mode
# with both services on ECS.


@pytest.fixture(scope="module")
def both_private(app_variant):
    """Both services on ECS in the private network."""
    return app_variant("both_ecs_vpc")


def test_sonic_ecs_replaces_the_sagemaker_stack_and_leaves_the_operations_dashboard(sonic_ecs):
    assert sorted(sonic_ecs.templates) == [
        "RealtimeVoice-Artifacts",
        "RealtimeVoice-Operations",
        "RealtimeVoice-SonicEcs",
        "RealtimeVoice-Voxtral",
    ]
    body = json.dumps(sonic_ecs.template("Operations"))
    assert "sonic-tts" not in body and "voxtral-realtime" in body
    assert not resources(sonic_ecs.template("SonicEcs"), "AWS::SageMaker::Endpoint")


def test_both_services_on_ecs_in_the_private_network(both_private):
    foundation = both_private.template("Foundation")
    assert len(resources(foundation, "AWS::EC2::VPCEndpoint")) == 11
    for stack in ("VoxtralEcs", "SonicEcs"):
        t = both_private.template(stack)
        assert not resources(t, "AWS::EC2::VPC") and not resources(t, "AWS::EC2::NatGateway")
        balancer = one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        assert balancer["Scheme"] == "internal"
        assert all("RealtimeVoice-Foundation:" in json.dumps(s) for s in balancer["Subnets"])
        (log_group,) = [
            g["Properties"]
            for k, g in resources(t, "AWS::Logs::LogGroup").items()
            if k.startswith("ServiceLogs")
        ]
        assert "DataKey" in json.dumps(log_group["KmsKeyId"])
    assert nag_violations(both_private) == {}  # cdk-nag's three packs, and no CDK warning
    templates = sorted(str(p) for p in both_private.outdir.glob("*.template.json"))
    assert cfn_lint(*templates) == []
