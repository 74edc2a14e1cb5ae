"""`make verify` (voicectl verify) against moto: the synthesized variant's endpoints are created in moto as a
deployment would leave them, then changed the ways a deployment can go wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest
from moto import mock_aws
from moto.sagemaker.models import FakeEndpointConfig, sagemaker_backends

from config.models import SONIC_MODEL_PACKAGES
from tests.conftest import ROOT
from tests.ops.conftest import EXTERNAL_WEIGHTS, PREBUILT_IMAGE
from voicectl.cli import main
from voicectl.verify import TemplateResolver, Unresolvable, read_cloud_assembly, verify

REGION = "us-east-1"
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/execution"


@pytest.fixture
def aws(monkeypatch):
    """moto in-process, with fake credentials; moto's instance-type list predates G6 and G6e, so it is not checked."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(FakeEndpointConfig, "validate_instance_type", lambda self, instance_type: None)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def deploy(session, name: str, config: str, model: str, container: dict, instance_type: str, count: int) -> None:
    """What CloudFormation would create for one endpoint: Model, EndpointConfig, Endpoint."""
    sm = session.client("sagemaker")
    sm.create_model(ModelName=model, ExecutionRoleArn=ROLE, PrimaryContainer=container)
    sm.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": model, "InstanceType": instance_type, "InitialInstanceCount": count}])
    if name in sagemaker_backends[ACCOUNT][REGION].endpoints:
        # moto has no UpdateEndpoint; recreating leaves the same state: InService on the other EndpointConfig.
        sm.delete_endpoint(EndpointName=name)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=config)


VOXTRAL_CONTAINER = {"Image": PREBUILT_IMAGE, "ModelDataSource": {"S3DataSource": {
    "S3Uri": EXTERNAL_WEIGHTS, "S3DataType": "S3Prefix", "CompressionType": "None"}}}
SONIC_CONTAINER = {"ModelPackageName": SONIC_MODEL_PACKAGES["us-east-1"]}


def deploy_as_synthesized(session) -> None:
    """The variant (tests/ops/conftest.py): Voxtral fixed at 2 instances, Sonic on ml.g6e.12xlarge scaling 1-3."""
    deploy(session, "voxtral-realtime", "voxtral-config-1", "voxtral-model-1", VOXTRAL_CONTAINER, "ml.g6.4xlarge", 2)
    deploy(session, "sonic-tts", "sonic-config-1", "sonic-model-1", SONIC_CONTAINER, "ml.g6e.12xlarge", 1)
    session.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker", ResourceId="endpoint/sonic-tts/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount", MinCapacity=1, MaxCapacity=3)


def by_what(checks) -> dict[str, object]:
    return {f"{c.endpoint}: {c.what}": c for c in checks}


def test_reads_every_endpoint_of_the_cloud_assembly(ops_variant):
    expected = {e.endpoint_name: e for e in read_cloud_assembly(ops_variant.outdir)}
    assert sorted(expected) == ["sonic-tts", "voxtral-realtime"]
    voxtral, sonic = expected["voxtral-realtime"], expected["sonic-tts"]
    assert (voxtral.region, voxtral.instance_type, voxtral.initial_instance_count, voxtral.scaling) == (
        "us-east-1", "ml.g6.4xlarge", 2, None)
    assert (voxtral.image, voxtral.model_data_s3_uri, voxtral.model_package) == (PREBUILT_IMAGE, EXTERNAL_WEIGHTS, None)
    assert (sonic.instance_type, sonic.scaling, sonic.image) == ("ml.g6e.12xlarge", (1, 3), None)
    assert sonic.model_package == SONIC_MODEL_PACKAGES["us-east-1"]


def test_a_deployment_as_synthesized_passes(ops_variant, aws, capsys):
    deploy_as_synthesized(aws)
    checks = verify(ops_variant.outdir, aws)
    assert all(c.ok and not c.skipped for c in checks), [c.line() for c in checks if not c.ok]
    assert set(by_what(checks)) == {
        "voxtral-realtime: status", "voxtral-realtime: EndpointConfig voxtral-config-1 instance type",
        "voxtral-realtime: EndpointConfig voxtral-config-1 initial instance count",
        "voxtral-realtime: Model voxtral-model-1 image", "voxtral-realtime: Model voxtral-model-1 model data",
        "voxtral-realtime: instance count (no autoscaling)",
        "sonic-tts: status", "sonic-tts: EndpointConfig sonic-config-1 instance type",
        "sonic-tts: EndpointConfig sonic-config-1 initial instance count",
        "sonic-tts: Model sonic-model-1 model package", "sonic-tts: instance count (autoscaled)",
        "sonic-tts: scalable target endpoint/sonic-tts/variant/AllTraffic",
    }
    assert main(["verify", "--cdk-out", str(ops_variant.outdir)]) == 0
    out = capsys.readouterr().out
    assert "OK       voxtral-realtime: status: InService" in out
    assert out.rstrip().endswith("12 of 12 checks passed")


def test_an_update_sagemaker_rolled_back_is_a_mismatch(ops_variant, aws, capsys):
    """The endpoint is InService, but on the old EndpointConfig: old instance type and old image."""
    deploy_as_synthesized(aws)
    old_image = PREBUILT_IMAGE.replace("2026-11-01", "2026-10-01")
    deploy(aws, "voxtral-realtime", "voxtral-config-0", "voxtral-model-0", {**VOXTRAL_CONTAINER, "Image": old_image},
           "ml.g6e.xlarge", 2)
    checks = by_what(verify(ops_variant.outdir, aws))
    assert checks["voxtral-realtime: status"].ok
    instance_type = checks["voxtral-realtime: EndpointConfig voxtral-config-0 instance type"]
    assert not instance_type.ok
    assert instance_type.line() == ("MISMATCH voxtral-realtime: EndpointConfig voxtral-config-0 instance type: "
                                    "expected ml.g6.4xlarge, found ml.g6e.xlarge")
    assert not checks["voxtral-realtime: Model voxtral-model-0 image"].ok
    assert checks["sonic-tts: status"].ok
    assert main(["verify", "--cdk-out", str(ops_variant.outdir)]) == 1
    assert "2 failed: the deployed endpoints are not what this synth describes" in capsys.readouterr().out


def test_missing_and_not_in_service_endpoints_fail(ops_variant, aws):
    deploy(aws, "sonic-tts", "sonic-config-1", "sonic-model-1", SONIC_CONTAINER, "ml.g6e.12xlarge", 1)
    sagemaker_backends[ACCOUNT][REGION].endpoints["sonic-tts"].endpoint_status = "Updating"  # an update under way
    checks = by_what(verify(ops_variant.outdir, aws))
    missing = checks["voxtral-realtime: endpoint"]
    assert not missing.ok and "not found in us-east-1 (RealtimeVoice-Voxtral not deployed?)" in missing.actual
    status = checks["sonic-tts: status"]
    assert not status.ok and status.line() == "MISMATCH sonic-tts: status: expected InService, found Updating"
    # Sonic has a scalable target in the template, but none is registered.
    target = checks["sonic-tts: scalable target endpoint/sonic-tts/variant/AllTraffic"]
    assert not target.ok and target.actual == "not registered"


def test_instance_count_outside_the_scaling_range_fails(ops_variant, aws):
    deploy_as_synthesized(aws)
    aws.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName="sonic-tts", DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 5}])
    count = by_what(verify(ops_variant.outdir, aws))["sonic-tts: instance count (autoscaled)"]
    assert not count.ok and (count.expected, count.actual) == ("1-3", "5")


def test_resolves_the_intrinsics_the_cdk_emits_for_an_asset_image():
    repository_arn = f"arn:aws:ecr:eu-west-1:{ACCOUNT}:repository/bridge"
    exports = {"Artifacts:RepoArn": repository_arn, "Artifacts:RepoName": "bridge"}
    resolver = TemplateResolver(ACCOUNT, "eu-west-1", lambda: exports)
    image = {"Fn::Join": ["", [
        {"Fn::Select": [4, {"Fn::Split": [":", {"Fn::ImportValue": "Artifacts:RepoArn"}]}]}, ".dkr.ecr.",
        {"Fn::Select": [3, {"Fn::Split": [":", {"Fn::ImportValue": "Artifacts:RepoArn"}]}]}, ".",
        {"Ref": "AWS::URLSuffix"}, "/", {"Fn::ImportValue": "Artifacts:RepoName"}, ":abc123"]]}
    assert resolver.resolve(image) == f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/bridge:abc123"
    assert resolver.resolve({"Fn::Sub": "arn:${AWS::Partition}:s3:::b"}) == "arn:aws:s3:::b"
    with pytest.raises(Unresolvable, match="export Missing"):
        resolver.resolve({"Fn::ImportValue": "Missing"})
    with pytest.raises(Unresolvable, match="Ref Model"):
        resolver.resolve({"Ref": "Model"})


def test_default_synth_with_an_undeployed_artifacts_stack_skips_the_image(synthesized, aws):
    """The default image and weights come from the Artifacts stack's exports; without them the check is skipped,
    not failed, and says why."""
    deploy(aws, "voxtral-realtime", "c", "m", VOXTRAL_CONTAINER, "ml.g6.4xlarge", 1)
    checks = by_what(verify(synthesized.outdir, aws))
    image = checks["voxtral-realtime: Model m image"]
    assert image.skipped and "export RealtimeVoice-Artifacts-BridgeRepositoryUri" in image.actual
    assert checks["voxtral-realtime: status"].ok


def test_no_cloud_assembly_is_a_usage_error(tmp_path, capsys):
    assert main(["verify", "--cdk-out", str(tmp_path)]) == 2
    assert "holds no synthesized app (no manifest.json); run `make synth` first" in capsys.readouterr().err


def test_without_credentials_it_stops_with_a_clear_message(ops_variant):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": "/nonexistent/config", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
                "AWS_EC2_METADATA_DISABLED": "true"})
    result = subprocess.run([sys.executable, "-m", "voicectl", "verify", "--cdk-out", str(ops_variant.outdir)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stdout.startswith("make verify: stopped: no AWS credentials found")
    assert "Traceback" not in result.stderr


def test_makefile_verify_synthesizes_first_and_reads_cdk_out():
    makefile = (ROOT / "Makefile").read_text()
    assert "verify: synth ##" in makefile
    assert "$(PY) -m voicectl verify --cdk-out cdk.out" in makefile


STAGED_WEIGHTS = "s3://realtimevoice-artifacts-modelbucket/models/mistralai/Voxtral-Mini-4B-Realtime-2602/rev/"


def create_voxtral_stack(session, outputs: dict[str, str]) -> None:
    """The Voxtral stack as CloudFormation knows it after a deploy: only its outputs matter here."""
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {key: {"Value": value} for key, value in outputs.items()}}
    session.client("cloudformation").create_stack(StackName="RealtimeVoice-Voxtral", TemplateBody=json.dumps(template))


def test_staged_weights_are_checked_against_the_stack_output(synthesized, aws):
    """With staging on (the default), the Model's S3Uri is Fn::GetAtt on the staging custom resource; it is read
    from the deployed stack's output VoxtralModelS3Uri (the same expression in the template) and compared."""
    (voxtral,) = [e for e in read_cloud_assembly(synthesized.outdir) if e.endpoint_name == "voxtral-realtime"]
    assert "Fn::GetAtt" in voxtral.model_data_s3_uri
    assert voxtral.outputs["VoxtralModelS3Uri"] == voxtral.model_data_s3_uri
    create_voxtral_stack(aws, {"VoxtralModelS3Uri": STAGED_WEIGHTS})
    staged = {**VOXTRAL_CONTAINER, "ModelDataSource": {"S3DataSource": {
        "S3Uri": STAGED_WEIGHTS, "S3DataType": "S3Prefix", "CompressionType": "None"}}}
    deploy(aws, "voxtral-realtime", "c1", "m1", staged, "ml.g6.4xlarge", 1)
    check = by_what(verify(synthesized.outdir, aws))["voxtral-realtime: Model m1 model data"]
    assert check.ok and not check.skipped and check.actual == STAGED_WEIGHTS

    # A Model that reads other weights (an update rolled back to the previous revision) is a mismatch.
    deploy(aws, "voxtral-realtime", "c0", "m0", VOXTRAL_CONTAINER, "ml.g6.4xlarge", 1)
    check = by_what(verify(synthesized.outdir, aws))["voxtral-realtime: Model m0 model data"]
    assert not check.ok and not check.skipped
    assert (check.expected, check.actual) == (STAGED_WEIGHTS, EXTERNAL_WEIGHTS)


def test_staged_weights_without_a_deployed_stack_are_skipped_and_say_why(synthesized, aws):
    deploy(aws, "voxtral-realtime", "c", "m", VOXTRAL_CONTAINER, "ml.g6.4xlarge", 1)
    check = by_what(verify(synthesized.outdir, aws))["voxtral-realtime: Model m model data"]
    assert check.skipped
    assert "its stack is not deployed, so output VoxtralModelS3Uri cannot be read" in check.actual
