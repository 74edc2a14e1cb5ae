"""network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its endpoints and
security groups, both Models isolated in it, every data-holding resource under the key), its checks (cdk-nag's
AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint), an existing VPC, and a key given by ARN in
public mode. The variants come from the registry (tests/app/variants.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.app.variants import PUBLIC_KMS_KEY, VPC_EXISTING
from tests.conftest import ROOT, cdk_json_context, cfn_lint

#: cdk.json's instance types (Voxtral, Sonic): both carry local NVMe instance storage (ml.g6.*, ml.g6e.*).
VOXTRAL_TYPE, SONIC_TYPE = (cdk_json_context()[f"{section}.instance_type"] for section in ("voxtral", "sonic"))

KEY = PUBLIC_KMS_KEY
EXISTING = VPC_EXISTING


@pytest.fixture(scope="module")
def private(synthesized_vpc):
    """network.mode=vpc with everything else as in cdk.json: a new VPC and a key the app makes."""
    return synthesized_vpc


@pytest.fixture(scope="module")
def existing(app_variant):
    """network.mode=vpc in an existing VPC, described by settings, with the caller policy bound to the endpoint."""
    return app_variant("vpc_existing")


@pytest.fixture(scope="module")
def public_with_key(app_variant):
    return app_variant("public_key")


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def every_resource(synthesized, resource_type: str) -> dict[str, dict]:
    """``{stack/logical id: resource}`` of one type across all stacks."""
    return {f"{stack}/{k}": v for stack, template in synthesized.templates.items()
            for k, v in resources(template, resource_type).items()}


def key_ref(synthesized) -> dict:
    """How the other stacks refer to the data key of the Foundation stack: an import of its ARN."""
    (logical_id,) = resources(synthesized.template("Foundation"), "AWS::KMS::Key")
    return logical_id


def refers_to_key(value, logical_id: str) -> bool:
    return logical_id in json.dumps(value)


# --- The network ----------------------------------------------------------------------------------------------------

def test_every_subnet_is_private_and_nothing_routes_to_the_internet(private):
    foundation = private.template("Foundation")
    subnets = resources(foundation, "AWS::EC2::Subnet")
    assert len(subnets) == 2
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())
    zones = [json.dumps(s["Properties"]["AvailabilityZone"]) for s in subnets.values()]
    assert len(set(zones)) == 2
    for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::VPCGatewayAttachment",
                 "AWS::EC2::EgressOnlyInternetGateway", "AWS::EC2::Route"):
        assert every_resource(private, kind) == {}, kind


def test_flow_logs_record_all_traffic_to_an_encrypted_log_group(private):
    foundation = private.template("Foundation")
    (flow_log,) = resources(foundation, "AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["TrafficType"] == "ALL"
    assert flow_log["Properties"]["ResourceType"] == "VPC"
    group = flow_log["Properties"]["LogGroupName"]["Ref"]
    assert refers_to_key(foundation["Resources"][group]["Properties"]["KmsKeyId"], key_ref(private))


def test_each_vpc_endpoint_is_present_with_its_security_group(private):
    foundation = private.template("Foundation")
    endpoints = resources(foundation, "AWS::EC2::VPCEndpoint")
    by_service = {json.dumps(e["Properties"]["ServiceName"]): e["Properties"] for e in endpoints.values()}
    services = sorted(by_service)
    assert len(services) == 4
    s3 = next(p for name, p in by_service.items() if ".s3" in name)
    assert s3["VpcEndpointType"] == "Gateway" and len(s3["RouteTableIds"]) == 2
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    for suffix in ("ecr.api", "ecr.dkr", "sagemaker.runtime"):
        (props,) = [p for name, p in by_service.items() if suffix in name]
        assert props["VpcEndpointType"] == "Interface" and props["PrivateDnsEnabled"] is True
        (group,) = props["SecurityGroupIds"]
        assert group["Fn::GetAtt"][0] in groups
        assert len(props["SubnetIds"]) == 2


def ingress(template: dict, group_prefix: str) -> list[tuple]:
    """(port, source) of every inbound rule of the security groups whose logical id starts with ``group_prefix``."""
    rules = []
    for logical_id, group in resources(template, "AWS::EC2::SecurityGroup").items():
        if logical_id.startswith(group_prefix):
            rules += [(r["FromPort"], r["ToPort"], r.get("CidrIp") or r["SourceSecurityGroupId"]["Fn::GetAtt"][0])
                      for r in group["Properties"].get("SecurityGroupIngress", [])]
    for rule in resources(template, "AWS::EC2::SecurityGroupIngress").values():
        if rule["Properties"]["GroupId"]["Fn::GetAtt"][0].startswith(group_prefix):
            source = rule["Properties"].get("CidrIp") or rule["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0]
            rules.append((rule["Properties"]["FromPort"], rule["Properties"]["ToPort"], source))
    return sorted(rules, key=str)


def test_security_groups_allow_only_what_is_used(private):
    foundation = private.template("Foundation")
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (model_id,) = [k for k in groups if k.startswith("NetworkModelSecurityGroup")]
    model = groups[model_id]["Properties"]
    assert "SecurityGroupIngress" not in model
    assert not any(r["Properties"]["GroupId"]["Fn::GetAtt"][0] == model_id
                   for r in resources(foundation, "AWS::EC2::SecurityGroupIngress").values())
    assert [(r["IpProtocol"], r["FromPort"], r["ToPort"], r["CidrIp"]) for r in model["SecurityGroupEgress"]] == \
        [("tcp", 443, 443, "0.0.0.0/0")]
    assert ingress(foundation, "NetworkRegistryEndpoints") == [(443, 443, model_id)]
    # 8443: bidirectional streaming callers (reported by third parties; unconfirmed by AWS documentation).
    assert ingress(foundation, "NetworkRuntimeEndpoint") == [(443, 443, "10.80.0.0/16"), (8443, 8443, "10.80.0.0/16")]
    for group in groups.values():
        egress = group["Properties"].get("SecurityGroupEgress", [])
        assert all(rule.get("IpProtocol") != "-1" for rule in egress)


def test_both_models_are_isolated_and_in_the_vpc(private):
    for stack in ("Voxtral", "Sonic"):
        (model,) = resources(private.template(stack), "AWS::SageMaker::Model").values()
        props = model["Properties"]
        assert props["EnableNetworkIsolation"] is True
        config = json.dumps(props["VpcConfig"])
        assert len(props["VpcConfig"]["Subnets"]) == 2 and len(props["VpcConfig"]["SecurityGroupIds"]) == 1
        assert "Fn::ImportValue" in config and "RealtimeVoice-Foundation" in config


def test_voxtral_model_environment_keeps_the_image_offline(private, synthesized):
    for app in (private, synthesized):
        (model,) = resources(app.template("Voxtral"), "AWS::SageMaker::Model").values()
        environment = model["Properties"]["PrimaryContainer"]["Environment"]
        assert {k: environment[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS",
                                            "DO_NOT_TRACK", "VLLM_DO_NOT_TRACK", "HF_HUB_DISABLE_TELEMETRY")} == \
            dict.fromkeys(("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK",
                           "VLLM_DO_NOT_TRACK", "HF_HUB_DISABLE_TELEMETRY"), "1")
        assert model["Properties"]["EnableNetworkIsolation"] is True


# --- Encryption -------------------------------------------------------------------------------------------------------

def test_the_data_key_rotates_names_cloudwatch_logs_and_is_deleted_with_the_app(private):
    foundation = private.template("Foundation")
    (key,) = resources(foundation, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Delete"  # retain_data=false
    statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    logs = statements["CloudWatchLogsEncryptLogGroups"]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    prefixes = json.dumps(logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert "log-group:/aws/sagemaker/Endpoints/*" in prefixes and "log-group:RealtimeVoice-*" in prefixes


def test_every_resource_that_holds_data_is_encrypted_with_the_key(private):
    key = key_ref(private)
    groups = every_resource(private, "AWS::Logs::LogGroup")
    assert len(groups) >= 8
    assert {name: refers_to_key(g["Properties"].get("KmsKeyId"), key) for name, g in groups.items()} == \
        dict.fromkeys(groups, True)
    (bucket,) = [b for name, b in every_resource(private, "AWS::S3::Bucket").items() if "ModelBucketEBB1ADF4" in name]
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert refers_to_key(rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"], key)
    (repository,) = every_resource(private, "AWS::ECR::Repository").values()
    assert repository["Properties"]["EncryptionConfiguration"]["EncryptionType"] == "KMS"
    assert refers_to_key(repository["Properties"]["EncryptionConfiguration"]["KmsKey"], key)
    # The EndpointConfigs: under the key only on EBS-backed types (test_no_endpoint_config_sets_a_key_on_local_storage)
    assert len(every_resource(private, "AWS::SageMaker::EndpointConfig")) == 2
    (project,) = every_resource(private, "AWS::CodeBuild::Project").values()
    assert refers_to_key(project["Properties"]["EncryptionKey"], key)
    # The topic keeps a key of its own (CloudWatch must use it), customer managed and rotated.
    (topic,) = every_resource(private, "AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0].startswith("AlarmTopicKey")


def endpoint_config_instance_types(config: dict) -> list[str]:
    """Every instance type an EndpointConfig's variants may run: each InstanceType and each instance pool's."""
    return [t for v in config["Properties"]["ProductionVariants"]
            for t in [v.get("InstanceType"), *(p["InstanceType"] for p in v.get("InstancePools", []))] if t]


def check_volume_keys(synthesized, key: str) -> list[str]:
    """CreateEndpointConfig, KmsKeyId: no EndpointConfig sets KmsKeyId on a local-storage instance type (it would
    fail), each of those records why for checkov, and every EBS-backed one is under ``key``. Returns the local-storage
    types seen."""
    from constructs_lib.facts.instance_types import has_local_storage

    seen = []
    for name, config in every_resource(synthesized, "AWS::SageMaker::EndpointConfig").items():
        types = endpoint_config_instance_types(config)
        assert None not in [has_local_storage(t) for t in types], (name, types)  # the app knows every type it runs
        local = [t for t in types if has_local_storage(t)]
        if local:
            assert "KmsKeyId" not in config["Properties"], name
            skips = {s["id"]: s["comment"] for s in config["Metadata"]["checkov"]["skip"]}
            assert skips["CKV_AWS_98"].startswith(f"KmsKeyId is left off: {', '.join(local)}"), name
            assert "CreateEndpointConfig API reference, KmsKeyId" in skips["CKV_AWS_98"]
        else:
            assert refers_to_key(config["Properties"]["KmsKeyId"], key), name
        seen += local
    return seen


def test_no_endpoint_config_sets_a_key_on_local_storage(private):
    assert sorted(check_volume_keys(private, key_ref(private))) == sorted([VOXTRAL_TYPE, SONIC_TYPE])


def test_the_synth_output_says_why_the_endpoint_configs_have_no_key(private):
    """The info annotation on each EndpointConfig names its type and the rule (CDK prints it at synth, and the
    validation report lists it as an info, not a finding)."""
    reports = json.loads((private.outdir / "validation-report.json").read_text())["pluginReports"]
    assert [v for r in reports if r["pluginName"] == "Construct Annotations" for v in r["violations"]] == []
    messages = {path: entry["data"] for metadata in private.outdir.glob("*.metadata.json")
                for path, entries in json.loads(metadata.read_text()).items() for entry in entries
                if entry["type"] == "aws:cdk:info"}
    by_stack = {path.split("/")[1]: data for path, data in messages.items() if path.endswith("/EndpointConfig")}
    assert set(by_stack) == {"RealtimeVoice-Voxtral", "RealtimeVoice-Sonic"}
    for stack, instance_type in (("RealtimeVoice-Voxtral", VOXTRAL_TYPE), ("RealtimeVoice-Sonic", SONIC_TYPE)):
        assert by_stack[stack].startswith(f"volume_kms_key_arn is not applied. KmsKeyId is left off: {instance_type} "
                                          "has local NVMe instance storage")
        assert "You can't request a KmsKeyId when using an instance type with local storage" in by_stack[stack]


def test_the_model_bucket_lets_only_the_model_data_roles_use_its_objects(private):
    artifacts = private.template("Artifacts")
    (policy,) = [p for p in resources(artifacts, "AWS::S3::BucketPolicy").values()
                 if p["Properties"]["Bucket"]["Ref"].startswith("ModelBucketEBB1ADF4")]
    (deny,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "OnlyModelRolesUseObjects"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    allowed = json.dumps(deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"])
    assert ":role/RealtimeVoice/model-data/*" in allowed and "AutoDeleteObjects" in allowed
    roles = {k: r["Properties"].get("Path") for k, r in resources(private.template("Voxtral"), "AWS::IAM::Role").items()}
    on_path = sorted(k for k, path in roles.items() if path == "/RealtimeVoice/model-data/")
    assert [k[:-8] for k in on_path] == ["ExecutionRole", "ModelStagingBuildRole"]
    # The Voxtral execution role may decrypt the weights with the data key.
    statements = {s["Sid"]: s for p in resources(private.template("Voxtral"), "AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"] if "Sid" in s}
    assert statements["DecryptModelData"]["Action"] == ["kms:Decrypt", "kms:DescribeKey"]


def test_a_key_given_in_public_mode_encrypts_the_data_but_leaves_the_repository(public_with_key, synthesized):
    """Changing a repository's encryption replaces it: in public mode that needs encryption.repository=true."""
    assert not any(name.endswith("-Foundation") for name in public_with_key.templates)
    (repository,) = every_resource(public_with_key, "AWS::ECR::Repository").values()
    (before,) = every_resource(synthesized, "AWS::ECR::Repository").values()
    assert repository == before and "KMS" not in json.dumps(repository)
    (bucket,) = [b for name, b in every_resource(public_with_key, "AWS::S3::Bucket").items() if "ModelBucketEBB1ADF4" in name]
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"KMSMasterKeyID": KEY, "SSEAlgorithm": "aws:kms"}
    # The EndpointConfigs: the key only on EBS-backed types; cdk.json's both carry NVMe storage, so neither has it.
    assert sorted(check_volume_keys(public_with_key, KEY)) == sorted([VOXTRAL_TYPE, SONIC_TYPE])
    (topic,) = every_resource(public_with_key, "AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"] == KEY
    # The logical ids a deployment keeps stay (the topic's own key is gone: the given key replaces it).
    assert set(resources(synthesized.template("Artifacts"), "AWS::S3::Bucket")) == \
        set(resources(public_with_key.template("Artifacts"), "AWS::S3::Bucket"))


# --- An existing VPC --------------------------------------------------------------------------------------------------

def test_an_existing_vpc_is_described_not_looked_up(existing):
    foundation = existing.template("Foundation")
    assert resources(foundation, "AWS::EC2::VPC") == {} and resources(foundation, "AWS::EC2::Subnet") == {}
    endpoints = resources(foundation, "AWS::EC2::VPCEndpoint").values()
    assert {e["Properties"]["VpcId"] for e in endpoints} == {"vpc-0123456789abcdef0"}
    (s3,) = [e["Properties"] for e in endpoints if e["Properties"]["VpcEndpointType"] == "Gateway"]
    assert s3["RouteTableIds"] == ["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"]
    (model,) = resources(existing.template("Voxtral"), "AWS::SageMaker::Model").values()
    assert model["Properties"]["VpcConfig"]["Subnets"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert ingress(foundation, "NetworkRuntimeEndpoint") == [
        (443, 443, "10.20.0.0/16"), (443, 443, "192.168.0.0/24"), (8443, 8443, "10.20.0.0/16"),
        (8443, 8443, "192.168.0.0/24")]
    assert not (existing.outdir / "manifest.json").read_text().count("missing")


def test_the_caller_policy_can_require_the_runtime_vpc_endpoint(existing, private):
    (policy,) = resources(existing.template("Voxtral"), "AWS::IAM::ManagedPolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    (vpce,) = statement["Condition"]["StringEquals"]["aws:SourceVpce"]
    assert "Fn::ImportValue" in vpce and "SageMakerRuntime" in json.dumps(vpce)
    (policy,) = resources(private.template("Voxtral"), "AWS::IAM::ManagedPolicy").values()
    assert "Condition" not in policy["Properties"]["PolicyDocument"]["Statement"][0]


# --- Checks -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["private", "existing"])
def test_cdk_nag_packs_find_nothing_unacknowledged_in_vpc_mode(variant, request):
    app = request.getfixturevalue(variant)
    reports = json.loads((app.outdir / "validation-report.json").read_text())["pluginReports"]
    # A pack whose every finding is acknowledged may leave no report; test_vpc_mode_runs_the_compliance_packs shows
    # that the packs run.
    assert "AwsSolutions" in {r["pluginName"] for r in reports}
    for report in reports:
        assert report["violations"] == [], json.dumps(report["violations"], indent=1)[:2000]
    suppressed = [v for r in reports for v in r["suppressedViolations"]]
    for violation in suppressed:
        reason = violation["reason"]
        assert len(reason) > 40 and reason.rstrip().endswith((".", ")")), f"{violation['ruleName']}: {reason!r}"
    # The EndpointConfigs on local-storage types: the packs' KMS-key rule acknowledged there with AWS's reason (a
    # pack whose findings are all acknowledged may leave no report: the construct metadata holds the acknowledgment).
    acknowledged = {path: rules for metadata in app.outdir.glob("*.metadata.json")
                    for path, entries in json.loads(metadata.read_text()).items() if path.endswith("/EndpointConfig")
                    for rules in [{k: v for e in entries if e["type"] == "aws:cdk:acknowledged-rules"
                                   for k, v in e["data"].items()}]}
    assert len(acknowledged) == 2
    for rules in acknowledged.values():
        for pack in ("HIPAA.Security", "NIST.800.53.R5"):
            reason = rules[f"Annotation::{pack}-SageMakerEndpointConfigurationKMSKeyConfigured"]
            assert reason.startswith("KmsKeyId is left off: ") and "CreateEndpointConfig API reference" in reason


def test_vpc_mode_runs_the_compliance_packs(tmp_path):
    """app.py registers HIPAA Security and NIST 800-53 rev 5 in vpc mode: an unencrypted, unlogged bucket added to
    the app fails the synth with findings of both packs (the gate can fail)."""
    from aws_cdk import Stack
    from aws_cdk import aws_s3 as s3

    from app import create_app
    from tests.conftest import cdk_json_context

    app, _, _ = create_app({**cdk_json_context(), "network.mode": "vpc"}, outdir=str(tmp_path))
    s3.Bucket(Stack(app, "Probe"), "Plain")
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    reports = json.loads((tmp_path / "validation-report.json").read_text())["pluginReports"]
    rules = {v["ruleName"] for r in reports for v in r["violations"]}
    assert {"HIPAA.Security-S3BucketLoggingEnabled", "NIST.800.53.R5-S3BucketLoggingEnabled"} <= rules, rules


@pytest.mark.parametrize("variant", ["private", "existing", "public_with_key"])
def test_cfn_lint_finds_nothing_in_the_private_templates(variant, request):
    app = request.getfixturevalue(variant)
    templates = sorted(str(p) for p in app.outdir.glob("*.template.json"))
    assert cfn_lint(*templates) == []


# --- Bad settings: one clear message each ----------------------------------------------------------------------------

EXISTING_TWO_ZONES = {"network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0",
                      "network.subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
                      "network.availability_zones": "us-east-1a,us-east-1b", "network.vpc_cidr": "10.0.0.0/16",
                      "network.create_endpoints": "false"}


@pytest.mark.parametrize("overrides, message", [
    ({**EXISTING_TWO_ZONES, "network.availability_zones": "us-east-1a,us-east-1a"},
     'network.subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]: must be in at least 2 '
     "Availability Zones (SageMaker hosting in a VPC); all are in us-east-1a"),
    ({"network.mode": "vpc", "network.max_azs": "1"},
     "network.max_azs=1: must be at least 2 (SageMaker hosting in a VPC needs subnets in two Availability Zones)"),
    ({**EXISTING_TWO_ZONES, "network.vpc_id": "vpc-xyz"},
     "network.vpc_id='vpc-xyz': must be a VPC id such as 'vpc-0123456789abcdef0'"),
    ({**EXISTING_TWO_ZONES, "network.subnet_ids": "sg-0123456789abcdef0,subnet-0123456789abcdef1"},
     'network.subnet_ids=["sg-0123456789abcdef0", "subnet-0123456789abcdef1"]: must be subnet ids such as '
     "'subnet-0123456789abcdef0'; not: 'sg-0123456789abcdef0'"),
    ({**EXISTING_TWO_ZONES, "network.security_group_ids": "subnet-0123456789abcdef0"},
     'network.security_group_ids=["subnet-0123456789abcdef0"]: must be security group ids such as '
     "'sg-0123456789abcdef0'; not: 'subnet-0123456789abcdef0'"),
    ({"encryption.kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"},
     "encryption.kms_key_arn='arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100': the key "
     "is in eu-west-1 but the stack deploys to us-east-1"),
    ({"encryption.kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/data"},
     "encryption.kms_key_arn='arn:aws:kms:us-east-1:123456789012:alias/data': must be a KMS key ARN "
     "(arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need the key)"),
    ({"encryption.kms_key_arn": "arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-0706-050403020100"},
     "encryption.kms_key_arn='arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-0706-050403020100': must be a KMS "
     "key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need the key)"),
    ({"network.subnet_ids": "subnet-0123456789abcdef0"},
     'network.subnet_ids=["subnet-0123456789abcdef0"]: set only with network.mode=vpc (public mode uses '
     "SageMaker-managed networking)"),
    ({"network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0"},
     "network.vpc_cidr=null: must be the CIDR block of the VPC network.vpc_id (what its endpoints let in)"),
    ({**EXISTING_TWO_ZONES, "network.create_endpoints": "true"},
     "network.route_table_ids=[]: must name the route table of each of the 2 subnet(s) (the S3 gateway endpoint is "
     "added to them), or set network.create_endpoints=false if the VPC has its endpoints"),
])
def test_bad_private_settings_fail_with_one_clear_message(overrides, message):
    from config.settings import SettingsError, load_settings
    from tests.conftest import cdk_json_context

    with pytest.raises(SettingsError) as error:
        load_settings({**cdk_json_context(), **overrides})
    assert error.value.problems == [message]


def test_app_exits_with_the_message_before_building_anything():
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**__import__("os").environ, "CDK_CONTEXT_JSON": json.dumps({"network.max_azs": 3})})
    assert result.returncode == 1
    assert "network.max_azs=3: set only with network.mode=vpc" in result.stderr
