"""Assertions that read more than one stack of an app, or which stacks an app has: the exports one
stack makes and another imports, the order the stacks deploy in, what holds in every stack
(isolation, encryption, the alarms of both endpoints, the VPC endpoints the Connect consumers call,
whichever stack makes them). A test that reads one stack is in that stack's file
(test_<stack>_stack.py); cfn-lint and cdk-nag over each variant in test_lint.py."""

from __future__ import annotations

import json
import re

import pytest
from aws_cdk.assertions import Template

from constructs_lib.sagemaker_endpoint.props import DEFAULT_POOL_PROVISION_TIMEOUT_S
from tests.app.kit import (  # noqa: F401 (fixtures)
    PREFIX,
    alarms_by_name,
    check_volume_keys,
    every_resource,
    fixture_changed,
    fixture_existing,
    fixture_existing_ecs,
    fixture_own_vpc,
    fixture_private,
    fixture_private_ecs,
    fixture_public_with_key,
    fixture_sonic_ecs,
    fixture_sonic_only,
    ingress,
    key_ref,
    nag_violations,
    one,
    only,
    refers_to_key,
    resources,
    suffixes,
    variant_of,
)
from tests.app.variants import PREBUILT_IMAGE as PREBUILT, PUBLIC_KMS_KEY
from tests.conftest import ROOT, cdk_json_context, cfn_lint

# --- cdk.json's settings -------------------------------------------------------------------------
# Template assertions on the app synthesized with cdk.json's settings: every property the synth
# issue names.


EXPLICIT_EXPORTS = {
    "RealtimeVoice-Artifacts-ModelBucketName",
    "RealtimeVoice-Artifacts-BridgeRepositoryArn",
    "RealtimeVoice-Artifacts-BridgeRepositoryUri",
}


def exports_of(template: dict) -> set[str]:
    return {o["Export"]["Name"] for o in template.get("Outputs", {}).values() if "Export" in o}


def imports_of(template: dict) -> set[str]:
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if set(node) == {"Fn::ImportValue"} and isinstance(node["Fn::ImportValue"], str):
                found.add(node["Fn::ImportValue"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(template)
    return found


def test_artifacts_exports_are_explicit_and_constant(synthesized):
    """Only explicit exports whose values never change cross from the Artifacts stack
    (CloudFormation refuses to change or drop an export that is imported, so a generated or variable
    export would block updates)."""
    assert exports_of(synthesized.template("Artifacts")) == EXPLICIT_EXPORTS
    assert imports_of(synthesized.template("Voxtral")) <= EXPLICIT_EXPORTS | {
        name
        for name in imports_of(synthesized.template("Voxtral"))
        if name.startswith("RealtimeVoice-Operations")
    }


def test_weights_are_staged_before_the_model_reads_them(synthesized):
    """The Model's S3Uri is the staging custom resource's attribute in the same stack: the Model
    cannot be created before the staging finished."""
    resources = synthesized.template("Voxtral")["Resources"]
    ((staging_id, staging),) = [
        (k, v)
        for k, v in resources.items()
        if v["Type"].startswith("Custom::") and "Revision" in v["Properties"]
    ]
    props = staging["Properties"]
    assert props["RepositoryId"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    assert props["Revision"] == "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf"
    assert props["S3Uri"] == {
        "Fn::Join": [
            "",
            ["s3://", {"Fn::ImportValue": "RealtimeVoice-Artifacts-ModelBucketName"}, f"/{PREFIX}"],
        ]
    }
    outputs = synthesized.template("Voxtral")["Outputs"]
    assert outputs["VoxtralModelS3Uri"]["Value"] == {"Fn::GetAtt": [staging_id, "S3Uri"]}
    # For staging by hand: the Artifacts stack names the default prefix, repository and revision
    # (not exported).
    artifacts_outputs = synthesized.template("Artifacts")["Outputs"]
    assert "Export" not in artifacts_outputs["ModelS3Uri"]
    assert artifacts_outputs["ModelRevision"]["Value"] == "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf"
    assert (
        artifacts_outputs["ModelRepositoryId"]["Value"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    )


# --- Other settings -----------------------------------------------------------------------------
# The app under other settings: a prebuilt image, external weights, retained data, a changed
# instance type, and each endpoint switched off. The variants come from the registry
# (tests/app/variants.py).


def test_prebuilt_image_builds_and_copies_nothing(changed):
    artifacts = changed.template("Artifacts")
    assert resources(artifacts, "Custom::CDKECRDeployment") == {}
    assets = json.loads((changed.outdir / "RealtimeVoice-Artifacts.assets.json").read_text())
    assert assets.get("dockerImages", {}) == {}
    (model,) = resources(changed.template("Voxtral"), "AWS::SageMaker::Model").values()
    assert model["Properties"]["PrimaryContainer"]["Image"] == PREBUILT
    (policy,) = resources(changed.template("Voxtral"), "AWS::IAM::Policy").values()
    pull = next(
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Sid"] == "PullImage"
    )
    assert pull["Resource"] == "arn:aws:ecr:us-east-1:123456789012:repository/team/voxtral-bridge"


def test_no_staging_with_external_weights_or_when_switched_off(changed, app_variant):
    for template in changed.templates.values():
        assert not any(
            v["Type"].startswith("AWS::CodeBuild") for v in template["Resources"].values()
        )
    off = app_variant("hopper_fp8_no_staging")
    artifacts = off.template("Artifacts")
    assert resources(artifacts, "AWS::CodeBuild::Project") == {}
    # Weights staged by hand (voicectl stage-model --stack ...) go to the same prefix the Model
    # reads.
    assert artifacts["Outputs"]["ModelS3Uri"]["Value"] == {
        "Fn::Join": [
            "",
            [
                "s3://",
                {
                    "Ref": next(
                        k
                        for k, v in resources(artifacts, "AWS::S3::Bucket").items()
                        if "LoggingConfiguration" in v["Properties"]
                    )
                },
                "/models/mistralai/Voxtral-Mini-4B-Realtime-2602/b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf/",
            ],
        ]
    }


def test_retain_data_keeps_buckets_and_repository_but_not_log_groups(changed):
    artifacts = changed.template("Artifacts")
    for rtype in ("AWS::S3::Bucket", "AWS::ECR::Repository"):
        for resource in resources(artifacts, rtype).values():
            assert resource["DeletionPolicy"] == "Retain", rtype
    assert resources(artifacts, "Custom::S3AutoDeleteObjects") == {}
    (repo,) = resources(artifacts, "AWS::ECR::Repository").values()
    assert "EmptyOnDelete" not in repo["Properties"] or repo["Properties"]["EmptyOnDelete"] is False
    # The endpoint's log group has the fixed name SageMaker writes to: retaining it would make the
    # next deploy collide ("already exists"), so it always goes with the stack.
    log_group = next(
        v
        for v in resources(changed.template("Voxtral"), "AWS::Logs::LogGroup").values()
        if v["Properties"].get("LogGroupName") == "/aws/sagemaker/Endpoints/voxtral-realtime"
    )
    assert log_group["DeletionPolicy"] == "Delete"


def test_each_endpoint_can_be_switched_off(changed, sonic_only):
    assert sorted(changed.templates) == [
        "RealtimeVoice-Artifacts",
        "RealtimeVoice-Operations",
        "RealtimeVoice-Voxtral",
    ]
    assert sorted(sonic_only.templates) == ["RealtimeVoice-Operations", "RealtimeVoice-Sonic"]
    Template.from_json(sonic_only.template("Sonic")).resource_count_is(
        "AWS::SageMaker::Endpoint", 1
    )


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


# --- The ECS target -----------------------------------------------------------------------------
# Template assertions of the ECS target: the VoxtralEcs stack with default settings, and with every
# option set.


def test_ecs_target_replaces_the_sagemaker_stack(ecs_app):
    names = sorted(ecs_app.templates)
    assert names == [
        "RealtimeVoice-Artifacts",
        "RealtimeVoice-Operations",
        "RealtimeVoice-Sonic",
        "RealtimeVoice-VoxtralEcs",
    ]
    # The operations dashboard leaves Voxtral to the ECS stack's own dashboard.
    body = json.dumps(ecs_app.template("Operations"))
    assert "voxtral-realtime" not in body and "sonic-tts" in body


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


# --- Connect ------------------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references
# require, removal policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth
# and fails it on any finding).


#: boto3 client name -> the VPC endpoint service (``com.amazonaws.REGION.<suffix>``) its calls go
#: to.
CLIENT_ENDPOINT = {
    "sqs": "sqs",
    "events": "events",
    "dynamodb": "dynamodb",
    "kinesisvideo": "kinesisvideo",
    "kinesis-video-media": "kinesisvideo",
    "secretsmanager": "secretsmanager",
}


#: What a Fargate task (platform 1.4.0+) calls before the code runs and beside it (Amazon ECR user
#: guide, "Amazon ECR interface VPC endpoints", considerations for Fargate: ecr.api, ecr.dkr, the S3
#: gateway; logs for awslogs), and the SageMaker runtime the consumers stream to
#: (voice_client.sagemaker_stream).
PLATFORM_ENDPOINTS = {"ecr.api", "ecr.dkr", "s3", "logs", "sagemaker.runtime"}


def endpoint_services(synthesized) -> list[tuple[str, str, dict]]:
    """``(service suffix, stack, properties)`` of every VPC endpoint of the app (ServiceName is a
    literal or a join of ``com.amazonaws.``, the region, and the suffix)."""
    found = []
    for stack_name, template in synthesized.templates.items():
        for endpoint in resources(template, "AWS::EC2::VPCEndpoint").values():
            name = endpoint["Properties"]["ServiceName"]
            text = (
                name
                if isinstance(name, str)
                else "".join(
                    part if isinstance(part, str) else "REGION" for part in name["Fn::Join"][1]
                )
            )
            found.append(
                (text.split(".", 3)[3], stack_name.rsplit("-", 1)[1], endpoint["Properties"])
            )
    return found


def consumer_clients() -> set[str]:
    """The boto3 clients the consumer's code makes (services/connect_consumer/*.py): a new one
    without an endpoint fails."""
    source = "".join(
        path.read_text() for path in (ROOT / "services" / "connect_consumer").glob("*.py")
    )
    return set(re.findall(r"\.client\(\s*\"([a-z-]+)\"", source))


def test_in_the_apps_own_vpc_every_service_the_consumers_call_has_one_endpoint(own_vpc):
    clients = consumer_clients()
    assert {"sqs", "events", "dynamodb", "kinesisvideo", "kinesis-video-media"} <= clients
    # Secrets Manager: the ECS target's token only (service.py); this variant streams to SageMaker.
    needed = {
        CLIENT_ENDPOINT[client] for client in clients - {"secretsmanager"}
    } | PLATFORM_ENDPOINTS
    services = [service for service, _stack, _props in endpoint_services(own_vpc)]
    assert needed <= set(services), needed - set(services)
    assert sorted(services) == sorted(set(services)), "one endpoint per service in the VPC"
    by_service = {service: (stack, props) for service, stack, props in endpoint_services(own_vpc)}
    assert (
        by_service["kinesisvideo"][0] == "Connect"
    )  # the Connect construct owns it (connect.kvs_vpc_endpoint)
    for service in ("dynamodb", "s3"):
        assert by_service[service][1]["VpcEndpointType"] == "Gateway"
    for service in needed - {"dynamodb", "s3"}:
        props = by_service[service][1]
        assert (props["VpcEndpointType"], props["PrivateDnsEnabled"]) == ("Interface", True), (
            service
        )


def test_the_dynamodb_gateway_is_on_the_route_tables_of_the_consumers_subnets(own_vpc):
    foundation = own_vpc.template("Foundation")
    (gateway,) = [p for service, _s, p in endpoint_services(own_vpc) if service == "dynamodb"]
    tables = {
        r["Properties"]["RouteTableId"]["Ref"]
        for r in resources(foundation, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    assert {table["Ref"] for table in gateway["RouteTableIds"]} == tables and len(tables) == 2


def test_the_consumers_endpoints_accept_https_from_the_vpc_only(own_vpc):
    foundation = own_vpc.template("Foundation")
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (connect_group,) = [
        name for name in groups if name.startswith("NetworkConnectEndpointsSecurityGroup")
    ]
    props = groups[connect_group]["Properties"]
    assert [
        (r["CidrIp"], r["IpProtocol"], r["FromPort"], r["ToPort"])
        for r in props["SecurityGroupIngress"]
    ] == [("10.80.0.0/16", "tcp", 443, 443)]
    # allow_all_outbound=False: CDK's placeholder rule that matches no traffic.
    assert [r["CidrIp"] for r in props["SecurityGroupEgress"]] == ["255.255.255.255/32"]
    users = {
        service
        for service, _s, p in endpoint_services(own_vpc)
        if {"Fn::GetAtt": [connect_group, "GroupId"]} in p.get("SecurityGroupIds", [])
    }
    assert users == {"sqs", "events", "logs"}
    (registry,) = [
        g["Properties"] for name, g in groups.items() if name.startswith("NetworkRegistryEndpoints")
    ]
    assert ("10.80.0.0/16", 443) in {
        (r.get("CidrIp"), r["FromPort"]) for r in registry.get("SecurityGroupIngress", [])
    }


@pytest.mark.parametrize("variant", ["default", "vpc", "vpc_existing", "ecs_vpc"])
def test_without_connect_the_network_makes_none_of_the_consumers_endpoints(variant, app_variant):
    services = {service for service, _s, _p in endpoint_services(app_variant(variant))}
    assert not {"sqs", "events", "dynamodb", "kinesisvideo"} & services


def test_the_shared_operations_dashboard_has_a_connect_row_with_its_alarms(synthesized_connect):
    operations = synthesized_connect.template("Operations")
    (dashboard,) = resources(operations, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "## Amazon Connect live transcription" in body
    for metric in (
        "ActiveCalls",
        "MillisBehindNow",
        "CallsFailed",
        "CallsWaiting",
        "CallsUntranscribed",
    ):
        # With the deployment's dimension, as the consumers write it (METRIC_DIMENSIONS).
        assert f'\\"VoiceConnect\\",\\"{metric}\\",\\"Deployment\\",\\"RealtimeVoice\\"' in body
    connect = synthesized_connect.template("Connect")
    names = sorted(
        a["Properties"]["AlarmName"] for a in resources(connect, "AWS::CloudWatch::Alarm").values()
    )
    for name in (
        names
    ):  # the status widget shows every Connect alarm, by the name the Connect stack gives it
        assert f":alarm:{name}" in body
    assert "Fn::ImportValue" not in body  # nothing of the Connect stack: Operations deploys first


def _key_policy_sids(app) -> dict[str, dict]:
    (key,) = [
        r for r in app.template("Foundation")["Resources"].values() if r["Type"] == "AWS::KMS::Key"
    ]
    return {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}


def test_the_data_key_lets_eventbridge_encrypt_the_transcripts_bus(
    synthesized_connect, synthesized_vpc
):
    """The bus is encrypted with the data key (KmsKeyIdentifier), and EventBridge needs
    kms:DescribeKey, kms:GenerateDataKey and kms:Decrypt in the key policy for that (EventBridge
    user guide, "Authorizing EventBridge to use a customer managed key"), limited to the account's
    buses; a key without Connect does not name EventBridge."""
    (bus,) = [
        r
        for r in synthesized_connect.template("Connect")["Resources"].values()
        if r["Type"] == "AWS::Events::EventBus"
    ]
    assert "KmsKeyIdentifier" in bus["Properties"]
    statement = _key_policy_sids(synthesized_connect)["EventBridgeEncryptBuses"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    # The guide's example statement: the data actions, conditioned on the account and the bus.
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert "aws:SourceAccount" in statement["Condition"]["StringEquals"]
    assert "aws:SourceArn" in statement["Condition"]["ArnLike"]
    # DescribeKey (CreateEventBus checks the key is symmetric) without the example's conditions.
    describe = _key_policy_sids(synthesized_connect)["EventBridgeDescribeKey"]
    assert (describe["Principal"], describe["Action"], describe.get("Condition")) == (
        {"Service": "events.amazonaws.com"},
        "kms:DescribeKey",
        None,
    )
    assert "EventBridgeEncryptBuses" not in _key_policy_sids(synthesized_vpc)


# --- Alarms -------------------------------------------------------------------------------------
# Every alarm of both endpoints, as synthesized: namespace, metric, dimensions, statistic, period,
# comparison, threshold after unit conversion, periods, missing-data treatment, actions; plus the
# conversions themselves (the rules on their own:
# tests/unit/constructs_lib/monitoring/test_alarms.py).


SM, INSTANCE, BRIDGE = "AWS/SageMaker", "/aws/sagemaker/Endpoints", "RealtimeVoice/Bridge"


GT, GTE, LT = "GreaterThanThreshold", "GreaterThanOrEqualToThreshold", "LessThanThreshold"


# (namespace, metric, statistic, period s, comparison, threshold, evaluation periods, datapoints,
# missing data) Defaults of cdk.json. Voxtral on ml.g6.xlarge: 1 GPU, 4 vCPUs. Sonic on
# ml.g6e.2xlarge: 1 GPU, 8 vCPUs.
VOXTRAL = {
    "Invocation5XXErrors": (SM, "Invocation5XXErrors", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    # The rollback alarm: Average = fraction of requests answered 5xx; 5 % as 0.05, 3 of 5
    # one-minute periods.
    "Invocation5XXErrorRate": (
        SM,
        "Invocation5XXErrors",
        "Average",
        60,
        GT,
        0.05,
        5,
        3,
        "notBreaching",
    ),
    "Invocation4XXErrors": (SM, "Invocation4XXErrors", "Sum", 300, GT, 10, 1, 1, "notBreaching"),
    "ModelLatencyP90": (
        SM,
        "ModelLatency",
        "p90",
        60,
        GT,
        500_000,
        5,
        3,
        "notBreaching",
    ),  # 500 ms in µs
    "OverheadLatencyP90": (
        SM,
        "OverheadLatency",
        "p90",
        60,
        GT,
        100_000,
        5,
        3,
        "notBreaching",
    ),  # 100 ms in µs
    "GPUUtilization": (
        INSTANCE,
        "GPUUtilization",
        "Average",
        300,
        GT,
        90,
        3,
        3,
        "notBreaching",
    ),  # 90 % x 1 GPU
    "GPUMemoryUtilization": (
        INSTANCE,
        "GPUMemoryUtilization",
        "Maximum",
        300,
        GT,
        97,
        2,
        2,
        "notBreaching",
    ),
    "CPUUtilization": (
        INSTANCE,
        "CPUUtilization",
        "Average",
        300,
        GT,
        360,
        3,
        3,
        "notBreaching",
    ),  # 90 % x 4
    "MemoryUtilization": (
        INSTANCE,
        "MemoryUtilization",
        "Maximum",
        300,
        GT,
        90,
        2,
        2,
        "notBreaching",
    ),
    "DiskUtilization": (INSTANCE, "DiskUtilization", "Maximum", 300, GT, 85, 1, 1, "notBreaching"),
    "EndpointHealth": (INSTANCE, "CPUUtilization", "SampleCount", 60, LT, 1, 10, 10, "breaching"),
    "UpstreamErrors": (BRIDGE, "UpstreamErrors", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    "StreamsRejected": (BRIDGE, "StreamsRejected", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    "TimeToFirstDeltaP90": (
        BRIDGE,
        "TimeToFirstDelta",
        "p90",
        60,
        GT,
        2000,
        5,
        3,
        "notBreaching",
    ),  # ms, as is
    "ActiveStreamsNearCap": (
        BRIDGE,
        "ActiveStreams",
        "Average",
        60,
        GTE,
        3.6,
        5,
        5,
        "notBreaching",
    ),  # 0.9 x 4 (auto)
}


SONIC = {
    "Invocation5XXErrors": (SM, "Invocation5XXErrors", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    "Invocation4XXErrors": (SM, "Invocation4XXErrors", "Sum", 300, GT, 10, 1, 1, "notBreaching"),
    "ModelLatencyP90": (
        SM,
        "ModelLatency",
        "p90",
        60,
        GT,
        3_000_000,
        5,
        3,
        "notBreaching",
    ),  # 3000 ms in µs
    "OverheadLatencyP90": (SM, "OverheadLatency", "p90", 60, GT, 100_000, 5, 3, "notBreaching"),
    "GPUUtilization": (INSTANCE, "GPUUtilization", "Average", 300, GT, 90, 3, 3, "notBreaching"),
    "GPUMemoryUtilization": (
        INSTANCE,
        "GPUMemoryUtilization",
        "Maximum",
        300,
        GT,
        95,
        2,
        2,
        "notBreaching",
    ),
    "CPUUtilization": (
        INSTANCE,
        "CPUUtilization",
        "Average",
        300,
        GT,
        720,
        3,
        3,
        "notBreaching",
    ),  # 90 % x 8
    "MemoryUtilization": (
        INSTANCE,
        "MemoryUtilization",
        "Maximum",
        300,
        GT,
        90,
        2,
        2,
        "notBreaching",
    ),
    "DiskUtilization": (INSTANCE, "DiskUtilization", "Maximum", 300, GT, 85, 1, 1, "notBreaching"),
    "EndpointHealth": (INSTANCE, "CPUUtilization", "SampleCount", 60, LT, 1, 10, 10, "breaching"),
}


ENDPOINTS = {"Voxtral": ("voxtral-realtime", VOXTRAL), "Sonic": ("sonic-tts", SONIC)}


def topic_import(template: dict) -> dict:
    """The alarm topic as the endpoint stacks see it: an import from the Operations stack."""
    (action,) = next(iter(alarms_by_name(template).values()))["AlarmActions"]
    assert "RealtimeVoice-Operations:ExportsOutputRefAlarmTopic" in action["Fn::ImportValue"]
    return action


@pytest.mark.parametrize("stack", ["Voxtral", "Sonic"])
def test_every_alarm_reads_the_right_metric_with_the_converted_threshold(synthesized, stack):
    endpoint_name, expected = ENDPOINTS[stack]
    template = synthesized.template(stack)
    alarms = alarms_by_name(template)
    assert sorted(alarms) == sorted(f"{endpoint_name}-{name}" for name in expected)
    topic = topic_import(template)
    for name, (
        namespace,
        metric,
        statistic,
        period,
        comparison,
        threshold,
        periods,
        datapoints,
        missing,
    ) in expected.items():
        alarm = alarms[f"{endpoint_name}-{name}"]
        assert alarm["Namespace"] == namespace, name
        assert alarm["MetricName"] == metric, name
        assert alarm["Dimensions"] == [
            {"Name": "EndpointName", "Value": endpoint_name},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ], name
        stat_key = "ExtendedStatistic" if statistic.startswith("p") else "Statistic"
        assert alarm[stat_key] == statistic, name
        assert alarm["Period"] == period, name
        assert alarm["ComparisonOperator"] == comparison, name
        assert alarm["Threshold"] == pytest.approx(threshold), name
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (periods, datapoints), (
            name
        )
        assert alarm["TreatMissingData"] == missing, name
        # No unit filter: a unit mismatch would leave the alarm in INSUFFICIENT_DATA.
        assert "Unit" not in alarm, name
        assert alarm["AlarmActions"] == [topic] and alarm["OKActions"] == [topic], name


@pytest.mark.parametrize("stack", ["Voxtral", "Sonic"])
def test_each_alarm_states_its_missing_data_choice_and_reason(synthesized, stack):
    for name, alarm in alarms_by_name(synthesized.template(stack)).items():
        description = alarm["AlarmDescription"]
        assert f"Missing data: {alarm['TreatMissingData']}, because " in description, name
        assert len(description) <= 1024, name  # CloudWatch's limit
    health = alarms_by_name(synthesized.template(stack))[f"{ENDPOINTS[stack][0]}-EndpointHealth"]
    assert "no utilisation data means no running instance" in health["AlarmDescription"]


@pytest.mark.parametrize("stack", ["Voxtral", "Sonic"])
def test_the_health_alarm_is_created_after_the_endpoint_is_in_service(synthesized, stack):
    """Missing data is breaching: created before the endpoint, it would page through the whole first
    deployment."""
    template = synthesized.template(stack)
    (endpoint_id,) = resources(template, "AWS::SageMaker::Endpoint")
    by_name = {
        r["Properties"]["AlarmName"]: r
        for r in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    endpoint_name = ENDPOINTS[stack][0]
    assert endpoint_id in by_name[f"{endpoint_name}-EndpointHealth"]["DependsOn"]
    # The rollback alarm must exist before the endpoint that names it.
    for name, alarm in by_name.items():
        if name != f"{endpoint_name}-EndpointHealth":
            assert endpoint_id not in alarm.get("DependsOn", []), name


def test_endpoint_stacks_depend_on_the_operations_stack(synthesized):
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    for stack in ("RealtimeVoice-Voxtral", "RealtimeVoice-Sonic"):
        assert "RealtimeVoice-Operations" in manifest["artifacts"][stack]["dependencies"]
    assert resources(synthesized.template("Operations"), "AWS::SNS::Topic")


# --- Instance pools -----------------------------------------------------------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the
# ProductionVariant's InstancePools, with every rule sized by the instance holding for each pool's
# type (settings, alarms, dashboard, quotas).


def test_pools_replace_the_instance_type_in_priority_order_with_a_provisioning_timeout(
    pools_variant,
):
    voxtral = variant_of(pools_variant.template("Voxtral"))
    assert "InstanceType" not in voxtral
    assert [
        {k: v for k, v in pool.items() if k != "ModelNameOverride"}
        for pool in voxtral["InstancePools"]
    ] == [
        {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
        {"InstanceType": "ml.g6e.2xlarge", "Priority": 2},
        {"InstanceType": "ml.g5.4xlarge", "Priority": 3},
    ]
    assert (
        voxtral["VariantInstanceProvisionTimeoutInSeconds"]
        == DEFAULT_POOL_PROVISION_TIMEOUT_S
        == 1800
    )
    sonic = variant_of(pools_variant.template("Sonic"))
    assert "InstanceType" not in sonic
    assert sonic["InstancePools"] == [
        {"InstanceType": "ml.g6e.12xlarge", "Priority": 1},
        {"InstanceType": "ml.g6e.2xlarge", "Priority": 2},
    ]
    assert sonic["VariantInstanceProvisionTimeoutInSeconds"] == 900


def test_default_settings_synthesize_no_pools(synthesized):
    for stack in ("Voxtral", "Sonic"):
        variant = variant_of(synthesized.template(stack))
        assert (
            "InstancePools" not in variant
            and "VariantInstanceProvisionTimeoutInSeconds" not in variant
        )
        assert variant["InstanceType"] in ("ml.g6.xlarge", "ml.g6e.2xlarge")


def test_alarm_thresholds_scale_by_the_fewest_gpus_and_vcpus_among_the_pools(
    pools_variant, ops_variant
):
    """Sonic may run on ml.g6e.12xlarge (4 GPUs, 48 vCPUs) or ml.g6e.2xlarge (1 GPU, 8 vCPUs): 90 %
    of 1 GPU and of 8 vCPUs, which the small type can reach; without the pool the 4-GPU type alone
    gives 360."""
    pooled = alarms_by_name(pools_variant.template("Sonic"))
    single = alarms_by_name(ops_variant.template("Sonic"))
    assert (
        single["sonic-tts-GPUUtilization"]["Threshold"],
        pooled["sonic-tts-GPUUtilization"]["Threshold"],
    ) == (360, 90)
    assert pooled["sonic-tts-GPUMemoryUtilization"]["Threshold"] == 95
    assert (
        single["sonic-tts-CPUUtilization"]["Threshold"],
        pooled["sonic-tts-CPUUtilization"]["Threshold"],
    ) == (4320, 720)
    assert pooled["sonic-tts-GPUUtilization"]["AlarmDescription"].startswith(
        "GPU above 90 % of 1 GPU(s) (the fewest among the instance pools) for 15 minutes"
    )
    # Voxtral's pools all have one GPU; vCPUs 16, 8, 16: the CPU alarm counts 8.
    voxtral = alarms_by_name(pools_variant.template("Voxtral"))
    assert voxtral["voxtral-realtime-GPUUtilization"]["Threshold"] == 90
    assert voxtral["voxtral-realtime-CPUUtilization"]["Threshold"] == 720


# --- Scaling and updates ------------------------------------------------------------------------
# Autoscaling (scalable target, target-tracking policy, cooldowns, clean removal) and safe updates
# (rolling DeploymentConfig with auto-rollback, RetainAllVariantProperties, the container's drain
# time).


def test_a_fixed_size_endpoint_resets_its_count_on_update(ops_variant):
    """Voxtral at min = max = 2 (the README's way to change the instance type): no
    RetainAllVariantProperties, so the update sets the count to InitialInstanceCount instead of
    keeping what autoscaling chose before, which `make verify` would report as a mismatch for
    ever."""
    _, endpoint = only(ops_variant.template("Voxtral"), "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["RetainAllVariantProperties"] is False
    assert "ExcludeRetainedVariantProperties" not in endpoint["Properties"]
    # Sonic scales 1-3 in the variant: it keeps its count.
    _, sonic = only(ops_variant.template("Sonic"), "AWS::SageMaker::Endpoint")
    assert sonic["Properties"]["RetainAllVariantProperties"] is True
