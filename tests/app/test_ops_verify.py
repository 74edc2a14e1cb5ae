"""`make verify` (voicectl verify) against moto: the synthesized variant's endpoints are created in
moto as a deployment would leave them, then changed the ways a deployment can go wrong, one field at
a time (also with the instance pools of a real synth). Fields the synth does not set yet (VPC, KMS
key, a pool running its own Model) are checked with a hand-written cloud assembly:
tests/unit/voicectl/operations/test_verify.py."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.models import SONIC_MODEL_PACKAGES
from tests.app.variants import EXTERNAL_WEIGHTS, PREBUILT_IMAGE
from tests.conftest import ROOT
from tests.unit.voicectl.operations.verify_testkit import (  # noqa: F401 (fixtures)
    ACCOUNT,
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
from voicectl.operations.verify_assembly import read_cloud_assembly


def synthesized(outdir: Path, endpoint_name: str) -> tuple[dict, dict]:
    """(PrimaryContainer, ProductionVariant without name and model) of an endpoint, as the template
    sets them."""
    (expected,) = [e for e in read_cloud_assembly(outdir) if e.endpoint_name == endpoint_name]
    (variant,) = expected.variants
    container = expected.model_of(variant.properties["ModelName"])["PrimaryContainer"]
    fields = {k: v for k, v in variant.properties.items() if k not in ("VariantName", "ModelName")}
    return copy.deepcopy(container), copy.deepcopy(fields)


def synthesized_isolation(outdir: Path, endpoint_name: str) -> bool:
    """The Model's EnableNetworkIsolation as the template sets it (absent means False)."""
    (expected,) = [e for e in read_cloud_assembly(outdir) if e.endpoint_name == endpoint_name]
    (variant,) = expected.variants
    return bool(
        expected.model_of(variant.properties["ModelName"]).get("EnableNetworkIsolation", False)
    )


def deploy_voxtral(
    session,
    outdir: Path,
    suffix: str = "1",
    *,
    container: dict | None = None,
    variant: dict | None = None,
    **kwargs,
) -> None:
    """The Voxtral endpoint exactly as the variant's template describes it, with
    ``container``/``variant`` fields replaced."""
    synth_container, synth_variant = synthesized(outdir, "voxtral-realtime")
    kwargs.setdefault("isolation", synthesized_isolation(outdir, "voxtral-realtime"))
    (expected,) = [e for e in read_cloud_assembly(outdir) if e.endpoint_name == "voxtral-realtime"]
    for pool in synth_variant.get("InstancePools", []):
        if "ModelNameOverride" in pool:
            # A pool's own Model (its own stream cap), created as CloudFormation would, under a name
            # of its own.
            name = f"voxtral-pool-model-{suffix}-{pool['Priority']}"
            template = expected.model_of(pool["ModelNameOverride"])
            session.client("sagemaker").create_model(
                ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer=template["PrimaryContainer"]
            )
            backend()._models[name].enable_network_isolation = kwargs["isolation"]
            pool["ModelNameOverride"] = name
    fields = {**synth_variant, **(variant or {})}
    instance_type, count = fields.pop("InstanceType", None), fields.pop("InitialInstanceCount")
    deploy(
        session,
        "voxtral-realtime",
        f"voxtral-config-{suffix}",
        f"voxtral-model-{suffix}",
        {**synth_container, **(container or {})},
        instance_type,
        count,
        variant=fields,
        **kwargs,
    )


def deploy_sonic(session, outdir: Path, suffix: str = "1", container: dict | None = None) -> None:
    synth_container, synth_variant = synthesized(outdir, "sonic-tts")
    instance_type, count = (
        synth_variant.pop("InstanceType", None),
        synth_variant.pop("InitialInstanceCount"),
    )
    deploy(
        session,
        "sonic-tts",
        f"sonic-config-{suffix}",
        f"sonic-model-{suffix}",
        {**synth_container, **(container or {})},
        instance_type,
        count,
        isolation=True,
        variant=synth_variant,
    )


def deploy_as_synthesized(session, outdir: Path) -> None:
    """The variant (tests/app/variants.py, ops): Voxtral fixed at 2 instances, Sonic on
    ml.g6e.12xlarge scaling 1-3."""
    deploy_voxtral(session, outdir)
    deploy_sonic(session, outdir)
    session.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId="endpoint/sonic-tts/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=3,
    )


def test_reads_every_endpoint_of_the_cloud_assembly(ops_variant):
    expected = {e.endpoint_name: e for e in read_cloud_assembly(ops_variant.outdir)}
    assert sorted(expected) == ["sonic-tts", "voxtral-realtime"]
    voxtral, sonic = expected["voxtral-realtime"], expected["sonic-tts"]
    (v_variant,), (s_variant,) = voxtral.variants, sonic.variants
    assert (voxtral.region, v_variant.name, v_variant.scaling) == ("us-east-1", "AllTraffic", None)
    assert (v_variant.properties["InstanceType"], v_variant.properties["InitialInstanceCount"]) == (
        "ml.g6.4xlarge",
        2,
    )
    assert v_variant.properties["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    v_container = voxtral.model_of(v_variant.properties["ModelName"])["PrimaryContainer"]
    assert v_container["Image"] == PREBUILT_IMAGE
    assert v_container["ModelDataSource"]["S3DataSource"]["S3Uri"] == EXTERNAL_WEIGHTS
    assert v_container["Environment"]["SM_VLLM_MAX_MODEL_LEN"] == "45000"
    assert (s_variant.properties["InstanceType"], s_variant.scaling) == ("ml.g6e.12xlarge", (1, 3))
    s_model = sonic.model_of(s_variant.properties["ModelName"])
    assert s_model["PrimaryContainer"] == {"ModelPackageName": SONIC_MODEL_PACKAGES["us-east-1"]}
    assert s_model["EnableNetworkIsolation"] is True


def test_a_deployment_as_synthesized_passes(ops_variant, aws, capsys):
    deploy_as_synthesized(aws, ops_variant.outdir)
    checks = verify(ops_variant.outdir, aws)
    assert failures(checks) == {} and not [c for c in checks if c.skipped]
    config, model = "EndpointConfig voxtral-config-1", "Model voxtral-model-1"
    assert {what for what in by_what(checks) if what.startswith("voxtral-realtime")} == {
        f"voxtral-realtime: {what}"
        for what in (
            "status",
            f"{config} KmsKeyId",
            f"{config} variants",
            *(
                f"{config} AllTraffic {name}"
                for name in (
                    "InstanceType",
                    "InitialInstanceCount",
                    "InitialVariantWeight",
                    "ModelDataDownloadTimeoutInSeconds",
                    "ContainerStartupHealthCheckTimeoutInSeconds",
                    "InferenceAmiVersion",
                    "RoutingConfig",
                    "InstancePools",
                    "VariantInstanceProvisionTimeoutInSeconds",
                )
            ),
            *(
                f"{model} PrimaryContainer.{name}"
                for name in ("Environment", "Image", "Mode", "ModelDataSource")
            ),
            f"{model} EnableNetworkIsolation",
            f"{model} VpcConfig",
            "AllTraffic instance count (no autoscaling)",
        )
    }
    sonic = by_what(checks)
    assert (
        sonic["sonic-tts: Model sonic-model-1 PrimaryContainer.ModelPackageName"].actual
        == SONIC_MODEL_PACKAGES[REGION]
    )
    assert sonic["sonic-tts: Model sonic-model-1 EnableNetworkIsolation"].actual == "True"
    assert "sonic-tts: scalable target endpoint/sonic-tts/variant/AllTraffic" in sonic
    assert main(["verify", "--cdk-out", str(ops_variant.outdir)]) == 0
    out = capsys.readouterr().out
    assert "OK       voxtral-realtime: status: InService" in out
    entries = len(synthesized(ops_variant.outdir, "voxtral-realtime")[0]["Environment"])
    # 15 for the bridge and vLLM (KV_BLOCKS_PER_STREAM and MM_PROCESSOR_CACHE_GB among them), 6 keep
    # it offline
    assert entries == 21
    assert (
        "OK       voxtral-realtime: Model voxtral-model-1 PrimaryContainer.Environment: as "
        f"synthesized ({entries} entries)" in out
    )
    # No key on the local-NVMe types, and the line says why (CreateEndpointConfig refuses one
    # there).
    assert (
        f"OK       voxtral-realtime: {config} KmsKeyId: unset: ml.g6.4xlarge has local NVMe "
        "storage, encrypted by the instance; CreateEndpointConfig refuses KmsKeyId there (API "
        "reference, KmsKeyId)" in out
    )
    assert (
        "sonic-tts: EndpointConfig sonic-config-1 KmsKeyId: unset: ml.g6e.12xlarge has local "
        "NVMe storage"
    ) in out
    assert out.rstrip().endswith(f"{len(checks)} of {len(checks)} checks passed")


def test_a_deployment_with_instance_pools_as_synthesized_passes_and_a_lost_pool_is_named(
    pools_variant, aws
):
    """A real synth with instance pools: verify compares what it synthesizes, pool by pool."""
    deploy_as_synthesized(aws, pools_variant.outdir)
    checks = verify(pools_variant.outdir, aws)
    assert failures(checks) == {} and not [c for c in checks if c.skipped]
    found = by_what(checks)
    assert "voxtral-realtime: EndpointConfig voxtral-config-1 AllTraffic InstanceType" not in found
    pools = found["voxtral-realtime: EndpointConfig voxtral-config-1 AllTraffic InstancePools"]
    assert pools.ok and pools.expected == pools.actual
    timeout = found[
        "sonic-tts: EndpointConfig sonic-config-1 AllTraffic "
        "VariantInstanceProvisionTimeoutInSeconds"
    ]
    assert (timeout.ok, timeout.expected, timeout.actual) == (True, "900", "900")
    # An update rolled back to a config with the first two pools only and another provisioning
    # timeout.
    deploy_voxtral(
        aws,
        pools_variant.outdir,
        "0",
        variant={
            "InstancePools": [
                {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
                {"InstanceType": "ml.g6e.2xlarge", "Priority": 2},
            ],
            "VariantInstanceProvisionTimeoutInSeconds": 600,
        },
    )
    assert failures(verify(pools_variant.outdir, aws)) == {
        "voxtral-realtime: EndpointConfig voxtral-config-0 AllTraffic InstancePools": "MISMATCH "
        "voxtral-realtime: EndpointConfig voxtral-config-0 AllTraffic InstancePools: expected "
        '[{"InstanceType": "ml.g6.4xlarge", "Priority": 1}, {"InstanceType": '
        '"ml.g6e.2xlarge", "Priority": 2}, '
        '{"InstanceType": "ml.g5.4xlarge", "Priority": 3}], found [{"InstanceType": '
        '"ml.g6.4xlarge", "Priority": '
        '1}, {"InstanceType": "ml.g6e.2xlarge", "Priority": 2}]',
        "voxtral-realtime: EndpointConfig voxtral-config-0 AllTraffic "
        "VariantInstanceProvisionTimeoutInSeconds": "MISMATCH voxtral-realtime: EndpointConfig "
        "voxtral-config-0 AllTraffic VariantInstanceProvisionTimeoutInSeconds: expected 1800, "
        "found 600",
        # The old config ran the L40S pool on the variant's Model, at the L4's stream cap.
        "voxtral-realtime: EndpointConfig voxtral-config-0 AllTraffic pool ml.g6e.2xlarge "
        "ModelNameOverride": "MISMATCH voxtral-realtime: EndpointConfig voxtral-config-0 "
        "AllTraffic pool ml.g6e.2xlarge ModelNameOverride: expected a Model of its own, found "
        "(unset)",
    }


def test_an_update_rolled_back_to_the_old_environment_is_a_mismatch(ops_variant, aws, capsys):
    """The case: `-c voxtral.max_model_len=7500 -c voxtral.max_num_seqs=12` was synthesized,
    SageMaker rolled the update back, and the endpoint is InService on the previous Model, whose
    only difference is its environment (max_num_seqs 4: what `auto` resolves to on ml.g6.4xlarge at
    45000 tokens)."""
    outdir = ops_variant.outdir
    deploy_as_synthesized(aws, outdir)
    template = json.loads((outdir / "RealtimeVoice-Voxtral.template.json").read_text())
    (model,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    synth_dir = outdir.parent / "verify-new-environment"
    _copy_assembly(outdir, synth_dir)
    new_template = json.loads((synth_dir / "RealtimeVoice-Voxtral.template.json").read_text())
    (new_model,) = [
        r for r in new_template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"
    ]
    new_model["Properties"]["PrimaryContainer"]["Environment"] = {
        **environment,
        "SM_VLLM_MAX_MODEL_LEN": "7500",
        "SM_VLLM_MAX_NUM_SEQS": "12",
    }
    (synth_dir / "RealtimeVoice-Voxtral.template.json").write_text(json.dumps(new_template))

    checks = verify(synth_dir, aws)
    assert failures(checks) == {
        "voxtral-realtime: Model voxtral-model-1 PrimaryContainer.Environment": (
            "MISMATCH voxtral-realtime: Model voxtral-model-1 PrimaryContainer.Environment: "
            "expected SM_VLLM_MAX_MODEL_LEN=7500; SM_VLLM_MAX_NUM_SEQS=12, found "
            "SM_VLLM_MAX_MODEL_LEN=45000; SM_VLLM_MAX_NUM_SEQS=4"
        )
    }
    assert by_what(checks)["voxtral-realtime: status"].ok
    assert main(["verify", "--cdk-out", str(synth_dir)]) == 1
    assert (
        "1 failed: the deployed endpoints are not what this synth describes"
        in capsys.readouterr().out
    )


def _copy_assembly(source: Path, target: Path) -> None:
    """The manifest and templates of a cloud assembly (enough for verify), copied."""
    target.mkdir(exist_ok=True)
    for path in source.iterdir():
        if path.name == "manifest.json" or path.name.endswith(".template.json"):
            (target / path.name).write_text(path.read_text())


OTHER_IMAGE = PREBUILT_IMAGE.replace("2026-11-01", "2026-10-01")
OTHER_WEIGHTS = {
    "S3DataSource": {
        "S3Uri": "s3://team-models/voxtral/2601/",
        "S3DataType": "S3Prefix",
        "CompressionType": "None",
    }
}


@pytest.mark.parametrize(
    ("change", "what", "expected", "found"),
    [
        (
            {"container": {"Image": OTHER_IMAGE}},
            "Model voxtral-model-0 PrimaryContainer.Image",
            PREBUILT_IMAGE,
            OTHER_IMAGE,
        ),
        (
            {"container": {"ModelDataSource": OTHER_WEIGHTS}},
            "Model voxtral-model-0 PrimaryContainer.ModelDataSource",
            f"S3DataSource.S3Uri={EXTERNAL_WEIGHTS}",
            "S3DataSource.S3Uri=s3://team-models/voxtral/2601/",
        ),
        (
            {"container": {"Mode": "MultiModel"}},
            "Model voxtral-model-0 PrimaryContainer.Mode",
            "SingleModel",
            "MultiModel",
        ),
        (
            {"container": {"Environment": {"SM_VLLM_MODEL": "/opt/ml/model"}}},
            "Model voxtral-model-0 PrimaryContainer.Environment",
            "SM_VLLM_SERVED_MODEL_NAME=mistralai/Voxtral-Mini-4B-Realtime-2602",
            "SM_VLLM_SERVED_MODEL_NAME=unset",
        ),  # the first of the 12 variables the old Model lacks
        ({"isolation": False}, "Model voxtral-model-0 EnableNetworkIsolation", "True", "False"),
        (
            {"vpc": {"SecurityGroupIds": ["sg-0123"], "Subnets": ["subnet-0a", "subnet-0b"]}},
            "Model voxtral-model-0 VpcConfig",
            "unset",
            '{"SecurityGroupIds": ["sg-0123"], "Subnets": ["subnet-0a", "subnet-0b"]}',
        ),
        (
            {"variant": {"InstanceType": "ml.g6e.xlarge"}},
            "EndpointConfig voxtral-config-0 AllTraffic InstanceType",
            "ml.g6.4xlarge",
            "ml.g6e.xlarge",
        ),
        (
            {"variant": {"InitialInstanceCount": 1}},
            "EndpointConfig voxtral-config-0 AllTraffic InitialInstanceCount",
            "2",
            "1",
        ),
        (
            {"variant": {"InitialVariantWeight": 0.5}},
            "EndpointConfig voxtral-config-0 AllTraffic InitialVariantWeight",
            "1",
            "0.5",
        ),
        (
            {"variant": {"ModelDataDownloadTimeoutInSeconds": 600}},
            "EndpointConfig voxtral-config-0 AllTraffic ModelDataDownloadTimeoutInSeconds",
            "1200",
            "600",
        ),
        (
            {"variant": {"ContainerStartupHealthCheckTimeoutInSeconds": 900}},
            "EndpointConfig voxtral-config-0 AllTraffic "
            "ContainerStartupHealthCheckTimeoutInSeconds",
            "1200",
            "900",
        ),
        (
            {"variant": {"InferenceAmiVersion": "al2-ami-sagemaker-inference-gpu-3-1"}},
            "EndpointConfig voxtral-config-0 AllTraffic InferenceAmiVersion",
            "al2023-ami-sagemaker-inference-gpu-4-1",
            "al2-ami-sagemaker-inference-gpu-3-1",
        ),
        (
            {"variant": {"RoutingConfig": {"RoutingStrategy": "RANDOM"}}},
            "EndpointConfig voxtral-config-0 AllTraffic RoutingConfig",
            "RoutingStrategy=LEAST_OUTSTANDING_REQUESTS",
            "RoutingStrategy=RANDOM",
        ),
        (
            {"variant": {"InstancePools": [{"InstanceType": "ml.g6.4xlarge", "Priority": 1}]}},
            "EndpointConfig voxtral-config-0 AllTraffic InstancePools",
            "unset",
            '[{"InstanceType": "ml.g6.4xlarge", "Priority": 1}]',
        ),
        # The synth sets no key on ml.g6.4xlarge (local NVMe storage): a config with one is named,
        # with why.
        (
            {"KmsKeyId": OLD_KEY},
            "EndpointConfig voxtral-config-0 KmsKeyId",
            "unset: ml.g6.4xlarge has local NVMe storage, encrypted by the instance; "
            "CreateEndpointConfig refuses KmsKeyId there (API reference, KmsKeyId)",
            OLD_KEY,
        ),
    ],
)
def test_each_field_of_a_rolled_back_deployment_is_named(
    ops_variant, aws, change, what, expected, found
):
    """The endpoint is InService on an older Model and EndpointConfig that differ from the synth in
    one field."""
    deploy_as_synthesized(aws, ops_variant.outdir)
    deploy_voxtral(aws, ops_variant.outdir, "0", **change)
    if what.endswith(
        "Environment"
    ):  # the old Model's whole environment was the one variable: compare the message
        check = by_what(verify(ops_variant.outdir, aws))[f"voxtral-realtime: {what}"]
        assert (
            not check.ok and check.expected.startswith(expected) and check.actual.startswith(found)
        )
        return
    checks = verify(ops_variant.outdir, aws)
    also = {}
    if what.endswith("InitialInstanceCount"):  # the old config also started fewer instances
        also = {
            "voxtral-realtime: AllTraffic instance count (no autoscaling)": "MISMATCH "
            "voxtral-realtime: AllTraffic instance count (no autoscaling): expected 2, found 1"
        }
    assert failures(checks) == {
        f"voxtral-realtime: {what}": f"MISMATCH voxtral-realtime: {what}: expected {expected}, "
        f"found {found}",
        **also,
    }


def test_a_sonic_model_of_another_package_is_named(ops_variant, aws):
    deploy_as_synthesized(aws, ops_variant.outdir)
    other = SONIC_MODEL_PACKAGES[REGION].replace("sonic36", "sonic35")
    deploy_sonic(aws, ops_variant.outdir, "0", container={"ModelPackageName": other})
    assert failures(verify(ops_variant.outdir, aws)) == {
        "sonic-tts: Model sonic-model-0 PrimaryContainer.ModelPackageName": "MISMATCH "
        "sonic-tts: Model sonic-model-0 PrimaryContainer.ModelPackageName: expected "
        f"{SONIC_MODEL_PACKAGES[REGION]}, found {other}"
    }


def test_missing_and_not_in_service_endpoints_fail(ops_variant, aws):
    deploy_sonic(aws, ops_variant.outdir)
    backend().endpoints["sonic-tts"].endpoint_status = "Updating"  # an update under way
    checks = by_what(verify(ops_variant.outdir, aws))
    missing = checks["voxtral-realtime: endpoint"]
    assert (
        not missing.ok
        and "not found in us-east-1 (RealtimeVoice-Voxtral not deployed?)" in missing.actual
    )
    status = checks["sonic-tts: status"]
    assert (
        not status.ok
        and status.line() == "MISMATCH sonic-tts: status: expected InService, found Updating"
    )
    # Sonic has a scalable target in the template, but none is registered.
    target = checks["sonic-tts: scalable target endpoint/sonic-tts/variant/AllTraffic"]
    assert not target.ok and target.actual == "not registered"


def test_instance_count_outside_the_scaling_range_fails(ops_variant, aws):
    deploy_as_synthesized(aws, ops_variant.outdir)
    aws.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName="sonic-tts",
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 5}],
    )
    count = by_what(verify(ops_variant.outdir, aws))[
        "sonic-tts: AllTraffic instance count (autoscaled)"
    ]
    assert not count.ok and (count.expected, count.actual) == ("1-3", "5")


def test_a_model_deleted_under_its_endpoint_config_is_named(ops_variant, aws):
    deploy_as_synthesized(aws, ops_variant.outdir)
    aws.client("sagemaker").delete_model(ModelName="voxtral-model-1")
    line = failures(verify(ops_variant.outdir, aws))["voxtral-realtime: Model voxtral-model-1"]
    assert line.endswith(
        "expected deployed, found not found (deleted after the EndpointConfig was made?)"
    )


def test_default_synth_with_an_undeployed_artifacts_stack_skips_the_image(synthesized, aws):
    """The default image and weights come from the Artifacts stack's exports; without them the check
    is skipped, not failed, and says why."""
    deploy(aws, "voxtral-realtime", "c", "m", {"Image": PREBUILT_IMAGE}, "ml.g6.4xlarge", 1)
    checks = by_what(verify(synthesized.outdir, aws))
    image = checks["voxtral-realtime: Model m PrimaryContainer.Image"]
    assert image.skipped and "export RealtimeVoice-Artifacts-BridgeRepositoryUri" in image.actual
    assert checks["voxtral-realtime: status"].ok


def test_without_credentials_it_stops_with_a_clear_message(ops_variant):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_CONFIG_FILE": "/nonexistent/config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "voicectl", "verify", "--cdk-out", str(ops_variant.outdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout.startswith("make verify: stopped: no AWS credentials found")
    assert "Traceback" not in result.stderr


STAGED_WEIGHTS = (
    "s3://realtimevoice-artifacts-modelbucket/models/mistralai/Voxtral-Mini-4B-Realtime-2602/rev/"
)


def create_voxtral_stack(session, outputs: dict[str, str]) -> None:
    """The Voxtral stack as CloudFormation knows it after a deploy: only its outputs matter here."""
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    session.client("cloudformation").create_stack(
        StackName="RealtimeVoice-Voxtral", TemplateBody=json.dumps(template)
    )


def staged_container(uri: str) -> dict:
    return {
        "Image": PREBUILT_IMAGE,
        "ModelDataSource": {
            "S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
        },
    }


def test_staged_weights_are_checked_against_the_stack_output(synthesized, aws):
    """With staging on (the default), the Model's S3Uri is Fn::GetAtt on the staging custom
    resource; it is read from the deployed stack's output VoxtralModelS3Uri (the same expression in
    the template) and compared."""
    (voxtral,) = [
        e for e in read_cloud_assembly(synthesized.outdir) if e.endpoint_name == "voxtral-realtime"
    ]
    model_data = voxtral.model_of(voxtral.variants[0].properties["ModelName"])["PrimaryContainer"][
        "ModelDataSource"
    ]
    assert "Fn::GetAtt" in model_data["S3DataSource"]["S3Uri"]
    assert voxtral.outputs["VoxtralModelS3Uri"] == model_data["S3DataSource"]["S3Uri"]
    create_voxtral_stack(aws, {"VoxtralModelS3Uri": STAGED_WEIGHTS})
    deploy(
        aws, "voxtral-realtime", "c1", "m1", staged_container(STAGED_WEIGHTS), "ml.g6.4xlarge", 1
    )
    check = by_what(verify(synthesized.outdir, aws))[
        "voxtral-realtime: Model m1 PrimaryContainer.ModelDataSource"
    ]
    assert check.ok and not check.skipped

    # A Model that reads other weights (an update rolled back to the previous revision) is a
    # mismatch.
    deploy(
        aws, "voxtral-realtime", "c0", "m0", staged_container(EXTERNAL_WEIGHTS), "ml.g6.4xlarge", 1
    )
    check = by_what(verify(synthesized.outdir, aws))[
        "voxtral-realtime: Model m0 PrimaryContainer.ModelDataSource"
    ]
    assert not check.ok and not check.skipped
    assert (check.expected, check.actual) == (
        f"S3DataSource.S3Uri={STAGED_WEIGHTS}",
        f"S3DataSource.S3Uri={EXTERNAL_WEIGHTS}",
    )


def test_staged_weights_without_a_deployed_stack_are_skipped_and_say_why(synthesized, aws):
    deploy(
        aws, "voxtral-realtime", "c", "m", staged_container(EXTERNAL_WEIGHTS), "ml.g6.4xlarge", 1
    )
    check = by_what(verify(synthesized.outdir, aws))[
        "voxtral-realtime: Model m PrimaryContainer.ModelDataSource"
    ]
    assert check.skipped
    assert "its stack is not deployed, so output VoxtralModelS3Uri cannot be read" in check.actual
