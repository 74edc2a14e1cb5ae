"""Assertions that read more than one stack of an app, or which stacks an app has: the exports one
stack makes and another imports, the order the stacks deploy in, what holds in every stack
(isolation, encryption, the alarms of both endpoints, the VPC endpoints the Connect consumers call,
whichever stack makes them). This file has the app under cdk.json's and other settings, the ECS
target, instance pools, scaling and updates; the private deployment is in
test_cross_stack_private.py, the Connect consumers' endpoints in test_cross_stack_connect.py, the
alarms in test_cross_stack_alarms.py. A test that reads one stack is in that stack's file
(test_<stack>_stack.py); cfn-lint and cdk-nag over each variant in test_lint.py."""

from __future__ import annotations

import json

from aws_cdk.assertions import Template

from constructs_lib.sagemaker_endpoint.props import DEFAULT_POOL_PROVISION_TIMEOUT_S
from tests.app.kit import (  # noqa: F401 (fixtures)
    PREFIX,
    alarms_by_name,
    fixture_changed,
    fixture_sonic_only,
    only,
    resources,
    variant_of,
)
from tests.app.variants import PREBUILT_IMAGE as PREBUILT

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
