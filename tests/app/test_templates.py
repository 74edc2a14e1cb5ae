"""Template assertions on the app synthesized with cdk.json's settings: every property the synth issue names."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from config.models import SONIC_MODEL_PACKAGES

SONIC_US_EAST_1 = SONIC_MODEL_PACKAGES["us-east-1"]


@pytest.fixture(scope="module")
def artifacts(synthesized):
    return Template.from_json(synthesized.template("Artifacts"))


@pytest.fixture(scope="module")
def voxtral(synthesized):
    return Template.from_json(synthesized.template("Voxtral"))


@pytest.fixture(scope="module")
def sonic(synthesized):
    return Template.from_json(synthesized.template("Sonic"))


def only(template: Template, resource_type: str) -> dict:
    """The one resource of ``resource_type`` in ``template`` (fails when there are zero or several)."""
    resources = template.find_resources(resource_type)
    assert len(resources) == 1, f"expected one {resource_type}, found {sorted(resources)}"
    return next(iter(resources.values()))


def named(template: Template, resource_type: str, logical_id_prefix: str) -> tuple[str, dict]:
    """The one resource of ``resource_type`` whose logical id starts with ``logical_id_prefix``: (id, resource)."""
    matches = [(k, v) for k, v in template.find_resources(resource_type).items() if k.startswith(logical_id_prefix)]
    assert len(matches) == 1, f"expected one {resource_type} {logical_id_prefix}*, found {[k for k, _ in matches]}"
    return matches[0]


def statements_of(template: Template) -> list[dict]:
    """Every IAM statement of every AWS::IAM::Policy and ManagedPolicy in ``template``."""
    out = []
    for rtype in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for resource in template.find_resources(rtype).values():
            out.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return out


# --- Artifacts --------------------------------------------------------------------------------------------------------


def test_repository_scans_on_push_is_immutable_and_keeps_newest_images(artifacts):
    repo = only(artifacts, "AWS::ECR::Repository")
    props = repo["Properties"]
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["ImageTagMutability"] == "IMMUTABLE"
    policy = json.loads(props["LifecyclePolicy"]["LifecyclePolicyText"])
    (rule,) = policy["rules"]
    assert rule["selection"] == {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 10}
    assert rule["action"] == {"type": "expire"}
    assert repo["DeletionPolicy"] == "Delete"
    assert "RepositoryName" not in props
    # empty_on_delete: the repository's images are removed with it.
    assert props["EmptyOnDelete"] is True


def test_image_is_copied_under_the_asset_hash_and_copy_depends_on_repository(synthesized, artifacts):
    copies = artifacts.find_resources("Custom::CDKECRDeployment")
    ((logical_id, copy),) = copies.items()
    repo_id = next(iter(artifacts.find_resources("AWS::ECR::Repository")))
    assert repo_id in copy["DependsOn"]
    assert copy["Properties"]["ImageArch"] == "amd64"
    dest = json.dumps(copy["Properties"]["DestImage"])
    assets = json.loads((synthesized.outdir / "RealtimeVoice-Artifacts.assets.json").read_text())
    (image_hash,) = assets["dockerImages"]
    assert f":{image_hash}" in dest, "destination tag must be the asset hash"
    assert "latest" not in dest
    image = assets["dockerImages"][image_hash]
    assert image["source"]["platform"] == "linux/amd64"


def test_copy_role_can_push_only_to_the_bridge_repository(artifacts):
    (policy,) = [
        p for p in artifacts.find_resources("AWS::IAM::Policy").values()
        if any(s.get("Sid") == "PushBridgeImage" for s in p["Properties"]["PolicyDocument"]["Statement"])
    ]
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    repo_id = next(iter(artifacts.find_resources("AWS::ECR::Repository")))
    assert by_sid["PushBridgeImage"]["Resource"] == {"Fn::GetAtt": [repo_id, "Arn"]}
    assert "ecr:PutImage" in by_sid["PushBridgeImage"]["Action"]
    assert by_sid["RegistryLogin"] == {
        "Sid": "RegistryLogin", "Action": "ecr:GetAuthorizationToken", "Effect": "Allow", "Resource": "*",
    }
    # The only "*" of the copy role is the registry login; no statement anywhere pushes images with "*".
    assert [s["Sid"] for s in by_sid.values() if s["Resource"] == "*"] == ["RegistryLogin"]
    for statement in statements_of(artifacts):
        if statement["Resource"] == "*":
            assert "ecr:PutImage" not in json.dumps(statement["Action"]), statement


def test_model_bucket_is_private_tls_only_encrypted_logged_and_destroyed(artifacts):
    buckets = artifacts.find_resources("AWS::S3::Bucket")
    model_id = next(k for k, v in buckets.items() if "LoggingConfiguration" in v["Properties"])
    log_id = next(k for k in buckets if k != model_id)
    model = buckets[model_id]["Properties"]
    assert model["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
    }
    assert model["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "AES256"
    }
    assert model["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_id}
    assert "BucketName" not in model
    for bucket_id in (model_id, log_id):
        assert buckets[bucket_id]["DeletionPolicy"] == "Delete"
        # TLS only: a Deny on aws:SecureTransport=false in the bucket policy.
        artifacts.has_resource_properties(
            "AWS::S3::BucketPolicy",
            {
                "Bucket": {"Ref": bucket_id},
                "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
                    "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                })])},
            },
        )
    # Objects go with the buckets on destroy (retain_data=false); the log bucket is emptied after the model bucket is
    # deleted (the model bucket's own emptying writes access logs into it).
    empties = artifacts.find_resources("Custom::S3AutoDeleteObjects")
    assert len(empties) == 2
    buckets = artifacts.find_resources("AWS::S3::Bucket")
    (model_id,) = [k for k, v in buckets.items() if "LoggingConfiguration" in v["Properties"]]
    (log_empty,) = [v for v in empties.values() if v["Properties"]["BucketName"]["Ref"] != model_id]
    assert model_id in log_empty.get("DependsOn", [])


EXPLICIT_EXPORTS = {
    "RealtimeVoice-Artifacts-ModelBucketName", "RealtimeVoice-Artifacts-BridgeRepositoryArn",
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
    """Only explicit exports whose values never change cross from the Artifacts stack (CloudFormation refuses to
    change or drop an export that is imported, so a generated or variable export would block updates)."""
    assert exports_of(synthesized.template("Artifacts")) == EXPLICIT_EXPORTS
    assert imports_of(synthesized.template("Voxtral")) <= EXPLICIT_EXPORTS | {
        name for name in imports_of(synthesized.template("Voxtral")) if name.startswith("RealtimeVoice-Operations")}


# --- Voxtral ------------------------------------------------------------------------------------------------------------


PREFIX = "models/mistralai/Voxtral-Mini-4B-Realtime-2602/b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf/"


def test_voxtral_model_reads_uncompressed_weights_from_an_s3_prefix(voxtral):
    model = only(voxtral, "AWS::SageMaker::Model")["Properties"]
    container = model["PrimaryContainer"]
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix"
    assert source["CompressionType"] == "None"
    staging_id = next(iter(voxtral.find_resources("AWS::CloudFormation::CustomResource")), None) or next(
        k for k, v in voxtral.to_json()["Resources"].items() if v["Type"].startswith("Custom::") and "Revision" in v["Properties"])
    assert source["S3Uri"] == {"Fn::GetAtt": [staging_id, "S3Uri"]}
    assert "ModelName" not in model
    assert "ModelDataUrl" not in container


def test_weights_are_staged_before_the_model_reads_them(synthesized):
    """The Model's S3Uri is the staging custom resource's attribute in the same stack: the Model cannot be created
    before the staging finished."""
    resources = synthesized.template("Voxtral")["Resources"]
    ((staging_id, staging),) = [
        (k, v) for k, v in resources.items() if v["Type"].startswith("Custom::") and "Revision" in v["Properties"]
    ]
    props = staging["Properties"]
    assert props["RepositoryId"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    assert props["Revision"] == "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf"
    assert props["S3Uri"] == {"Fn::Join": ["", [
        "s3://", {"Fn::ImportValue": "RealtimeVoice-Artifacts-ModelBucketName"}, f"/{PREFIX}"]]}
    outputs = synthesized.template("Voxtral")["Outputs"]
    assert outputs["VoxtralModelS3Uri"]["Value"] == {"Fn::GetAtt": [staging_id, "S3Uri"]}
    # For staging by hand: the Artifacts stack names the default prefix, repository and revision (not exported).
    artifacts_outputs = synthesized.template("Artifacts")["Outputs"]
    assert "Export" not in artifacts_outputs["ModelS3Uri"]
    assert artifacts_outputs["ModelRevision"]["Value"] == "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf"
    assert artifacts_outputs["ModelRepositoryId"]["Value"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"


def test_voxtral_container_environment(voxtral):
    env = only(voxtral, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == "/opt/ml/model"
    assert env["SM_VLLM_SERVED_MODEL_NAME"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    assert env["SM_VLLM_MAX_MODEL_LEN"] == "45000"
    assert env["SM_VLLM_MAX_NUM_SEQS"] == "4"  # max_num_seqs=auto on one L4 at 45000 tokens
    assert env["KV_BLOCKS_PER_STREAM"] == "83"  # constructs_lib/facts/capacity.py: one live stream at 45000 tokens
    assert env["SM_VLLM_GPU_MEMORY_UTILIZATION"] == "0.9"
    assert json.loads(env["SM_VLLM_COMPILATION_CONFIG"]) == {"cudagraph_mode": "PIECEWISE"}
    assert env["SM_VLLM_MM_PROCESSOR_CACHE_GB"] == "1"  # 2 x 1 GiB of vLLM's processor caches, not 2 x 4 GiB
    assert env["METRICS_NAMESPACE"] == "RealtimeVoice/Bridge"
    assert env["ENDPOINT_NAME"] == "voxtral-realtime"
    assert env["VARIANT_NAME"] == "AllTraffic"
    for key, value in env.items():
        assert not any(word in key.upper() for word in ("HF_TOKEN", "SECRET", "PASSWORD", "ACCESS_KEY")), key
        assert isinstance(value, str)


def test_voxtral_model_runs_the_copied_bridge_image_after_the_copy(synthesized, voxtral):
    image = only(voxtral, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Image"]
    assets = json.loads((synthesized.outdir / "RealtimeVoice-Artifacts.assets.json").read_text())
    (image_hash,) = assets["dockerImages"]
    assert image_hash in json.dumps(image)
    # The Voxtral stack deploys after the Artifacts stack (which holds the copy).
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    assert "RealtimeVoice-Artifacts" in manifest["artifacts"]["RealtimeVoice-Voxtral"]["dependencies"]


def test_voxtral_endpoint_config(voxtral):
    config = only(voxtral, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert "EndpointConfigName" not in config
    (variant,) = config["ProductionVariants"]
    assert variant["VariantName"] == "AllTraffic"
    assert variant["InstanceType"] == "ml.g6.xlarge"
    assert variant["InitialInstanceCount"] == 1
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 1200
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 1200
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "KmsKeyId" not in config


def test_voxtral_endpoint_has_stable_name_and_log_group(voxtral):
    endpoint = only(voxtral, "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["EndpointName"] == "voxtral-realtime"
    config_id = next(iter(voxtral.find_resources("AWS::SageMaker::EndpointConfig")))
    assert endpoint["Properties"]["EndpointConfigName"] == {"Fn::GetAtt": [config_id, "EndpointConfigName"]}
    log_group_id, log_group = named(voxtral, "AWS::Logs::LogGroup", "VoxtralLogGroup")
    assert log_group["Properties"]["LogGroupName"] == "/aws/sagemaker/Endpoints/voxtral-realtime"
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert log_group["DeletionPolicy"] == "Delete"
    assert log_group_id in endpoint["DependsOn"]


def test_voxtral_execution_role_is_least_privilege(voxtral):
    role = named(voxtral, "AWS::IAM::Role", "ExecutionRole")[1]["Properties"]
    assert "ManagedPolicyArns" not in role
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    policy = named(voxtral, "AWS::IAM::Policy", "ExecutionRoleDefaultPolicy")[1]
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert set(by_sid) == {
        "ReadModelPrefix", "ListModelPrefix", "PullImage", "EcrAuthorizationToken", "PutMetrics",
        "WriteEndpointLogs", "DescribeRollbackAlarms",
    }
    prefix = PREFIX
    assert by_sid["ReadModelPrefix"]["Action"] == "s3:GetObject"
    assert json.dumps(by_sid["ReadModelPrefix"]["Resource"]).endswith(f'"/{prefix}*"]]}}')
    assert by_sid["ListModelPrefix"]["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}
    assert by_sid["PutMetrics"]["Resource"] == "*"
    assert by_sid["PutMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "RealtimeVoice/Bridge"]}}
    assert by_sid["EcrAuthorizationToken"]["Action"] == "ecr:GetAuthorizationToken"
    assert by_sid["PullImage"]["Resource"] == {"Fn::ImportValue": "RealtimeVoice-Artifacts-BridgeRepositoryArn"}
    log_group_id = named(voxtral, "AWS::Logs::LogGroup", "VoxtralLogGroup")[0]
    assert by_sid["WriteEndpointLogs"]["Resource"][0] == {"Fn::GetAtt": [log_group_id, "Arn"]}
    for statement in by_sid.values():
        if statement["Resource"] == "*":
            assert statement["Sid"] in {"EcrAuthorizationToken", "PutMetrics"}
        assert "sagemaker:*" not in json.dumps(statement)


def test_voxtral_invoke_policy_covers_bidirectional_streaming_on_this_endpoint_only(voxtral):
    policy = only(voxtral, "AWS::IAM::ManagedPolicy")["Properties"]
    assert "ManagedPolicyName" not in policy
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithBidirectionalStream"]
    endpoint_id = next(iter(voxtral.find_resources("AWS::SageMaker::Endpoint")))
    assert statement["Resource"] == {"Ref": endpoint_id}


def test_voxtral_outputs(synthesized):
    outputs = synthesized.template("Voxtral")["Outputs"]
    # https://runtime.sagemaker.us-east-1.amazonaws.com:8443/... in the aws partition (amazonaws.com.cn in China).
    assert outputs["VoxtralBidirectionalInvokeUrl"]["Value"] == {"Fn::Join": ["", [
        "https://runtime.sagemaker.us-east-1.", {"Ref": "AWS::URLSuffix"},
        ":8443/endpoints/voxtral-realtime/invocations-bidirectional-stream",
    ]]}
    assert outputs["VoxtralRegion"]["Value"] == "us-east-1"
    assert "EndpointName" in json.dumps(outputs["VoxtralEndpointName"]["Value"])
    assert "S3Uri" in json.dumps(outputs["VoxtralModelS3Uri"]["Value"])
    assert "InvokePolicyArn" in "".join(outputs)


# --- Sonic --------------------------------------------------------------------------------------------------------------


def test_sonic_model_is_the_marketplace_package_with_network_isolation(sonic):
    model = only(sonic, "AWS::SageMaker::Model")["Properties"]
    assert model["PrimaryContainer"] == {"ModelPackageName": SONIC_US_EAST_1}
    assert model["EnableNetworkIsolation"] is True
    assert "ModelName" not in model


def test_sonic_endpoint_config_and_endpoint(sonic):
    config = only(sonic, "AWS::SageMaker::EndpointConfig")["Properties"]
    (variant,) = config["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6e.2xlarge"
    assert variant["VariantName"] == "AllTraffic"
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "InferenceAmiVersion" not in variant
    assert only(sonic, "AWS::SageMaker::Endpoint")["Properties"]["EndpointName"] == "sonic-tts"
    log_group = only(sonic, "AWS::Logs::LogGroup")["Properties"]
    assert log_group["LogGroupName"] == "/aws/sagemaker/Endpoints/sonic-tts"


def test_sonic_roles_and_invoke_policy(sonic):
    role = only(sonic, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    by_sid = {s["Sid"]: s for s in only(sonic, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]}
    assert set(by_sid) == {"WriteEndpointLogs", "PutMetrics"}
    assert by_sid["PutMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints"]}}
    (invoke,) = only(sonic, "AWS::IAM::ManagedPolicy")["Properties"]["PolicyDocument"]["Statement"]
    assert invoke["Action"] == ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
    endpoint_id = next(iter(sonic.find_resources("AWS::SageMaker::Endpoint")))
    assert invoke["Resource"] == {"Ref": endpoint_id}


@pytest.fixture(scope="module")
def fp8_on_hopper(app_variant):
    """Voxtral on one H100 (ml.p5.4xlarge) with voxtral.kv_cache_dtype=fp8 (Sonic off): the registry's variant
    hopper_fp8_no_staging."""
    return app_variant("hopper_fp8_no_staging")


def test_fp8_kv_cache_reaches_vllms_arguments_in_the_template_with_twice_the_kv_bound(fp8_on_hopper):
    """The Model's environment is what the entrypoint turns into vLLM flags: --kv-cache-dtype fp8 and the stream cap
    of an H100 with half-size KV (93 one-hour streams, 46 in BF16; constructs_lib/facts/capacity.py)."""
    from bridge.entrypoint import vllm_flags

    template = fp8_on_hopper.template("Voxtral")
    (model,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    assert (environment["SM_VLLM_KV_CACHE_DTYPE"], environment["SM_VLLM_MAX_NUM_SEQS"]) == ("fp8", "93")
    flags = vllm_flags(environment)
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8"
    assert environment["KV_BLOCKS_PER_STREAM"] == "83"  # the same tokens per block: the bridge's check still holds


def test_the_default_model_sets_no_kv_cache_dtype(voxtral):
    (model,) = voxtral.find_resources("AWS::SageMaker::Model").values()
    assert "SM_VLLM_KV_CACHE_DTYPE" not in model["Properties"]["PrimaryContainer"]["Environment"]
