"""Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the ProductionVariant's InstancePools,
with every rule sized by the instance holding for each pool's type (settings, alarms, dashboard, quotas)."""

from __future__ import annotations

import json

import pytest

from constructs_lib.facts import instance_types
from constructs_lib.sagemaker_endpoint.props import DEFAULT_POOL_PROVISION_TIMEOUT_S, ProductionVariant, rolling_update_timeout_s
from constructs_lib.validation import Problems
from config.settings import load_settings
from tests.conftest import cdk_json_context
from tests.unit.config.test_settings import problems_for
from tests.app.ops_kit import alarms_by_name, resources
from voicectl.operations.preflight import instance_needs


def variant_of(template: dict) -> dict:
    (config,) = resources(template, "AWS::SageMaker::EndpointConfig").values()
    (variant,) = config["Properties"]["ProductionVariants"]
    return variant


# --- The synthesized variant -------------------------------------------------------------------------------------


def test_pools_replace_the_instance_type_in_priority_order_with_a_provisioning_timeout(pools_variant):
    voxtral = variant_of(pools_variant.template("Voxtral"))
    assert "InstanceType" not in voxtral
    assert [{k: v for k, v in pool.items() if k != "ModelNameOverride"} for pool in voxtral["InstancePools"]] == [
        {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
        {"InstanceType": "ml.g6e.2xlarge", "Priority": 2},
        {"InstanceType": "ml.g5.4xlarge", "Priority": 3},
    ]
    assert voxtral["VariantInstanceProvisionTimeoutInSeconds"] == DEFAULT_POOL_PROVISION_TIMEOUT_S == 1800
    sonic = variant_of(pools_variant.template("Sonic"))
    assert "InstanceType" not in sonic
    assert sonic["InstancePools"] == [{"InstanceType": "ml.g6e.12xlarge", "Priority": 1},
                                      {"InstanceType": "ml.g6e.2xlarge", "Priority": 2}]
    assert sonic["VariantInstanceProvisionTimeoutInSeconds"] == 900


def model_of(template: dict, ref: dict) -> dict:
    """The Model a ``{"Fn::GetAtt": [id, "ModelName"]}`` names."""
    logical_id, attribute = ref["Fn::GetAtt"]
    assert attribute == "ModelName"
    return template["Resources"][logical_id]


def test_each_pool_type_runs_a_model_with_its_own_stream_cap(pools_variant):
    """An L4 (ml.g6.4xlarge) decodes 4 one-hour streams, an L40S (ml.g6e.2xlarge) holds 23, an A10G (ml.g5.4xlarge)
    8 (constructs_lib/facts/capacity.py): each pool after the first names a Model of its own (ModelNameOverride) whose vLLM
    gets that GPU's cap; the first pool runs the variant's Model at the L4's."""
    template = pools_variant.template("Voxtral")
    variant = variant_of(template)
    pools = {pool["InstanceType"]: pool for pool in variant["InstancePools"]}
    assert "ModelNameOverride" not in pools["ml.g6.4xlarge"]
    variant_model = model_of(template, variant["ModelName"])
    caps = {"ml.g6.4xlarge": variant_model["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"]}
    for instance_type in ("ml.g6e.2xlarge", "ml.g5.4xlarge"):
        model = model_of(template, pools[instance_type]["ModelNameOverride"])
        caps[instance_type] = model["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"]
        # The pool's Model is the variant's in everything but the stream cap (role, image, data, isolation, VPC).
        same = json.loads(json.dumps(model))
        same["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"] = caps["ml.g6.4xlarge"]
        assert same == variant_model
    assert caps == {"ml.g6.4xlarge": "4", "ml.g6e.2xlarge": "23", "ml.g5.4xlarge": "8"}
    assert pools_variant.settings.voxtral.stream_caps == {"ml.g6.4xlarge": 4, "ml.g6e.2xlarge": 23, "ml.g5.4xlarge": 8}


def test_an_l4_and_an_l40s_pool_get_a_model_and_a_cap_each():
    from stacks.composition import container_environment, pool_environment

    context = {**cdk_json_context(), "voxtral.instance_type": "ml.g6.xlarge",
               "voxtral.instance_pools": "ml.g6.xlarge,ml.g6e.xlarge"}
    voxtral = load_settings(context).voxtral
    assert voxtral.stream_caps == {"ml.g6.xlarge": 4, "ml.g6e.xlarge": 23}
    assert container_environment(voxtral, "ml.g6.xlarge")["SM_VLLM_MAX_NUM_SEQS"] == "4"
    assert pool_environment(voxtral) == {"ml.g6e.xlarge": {"SM_VLLM_MAX_NUM_SEQS": "23"}}
    # An explicit max_num_seqs is one cap for all: no pool needs a Model of its own.
    context["voxtral.max_num_seqs"] = "4"
    assert pool_environment(load_settings(context).voxtral) == {}


def test_default_settings_synthesize_no_pools(synthesized):
    for stack in ("Voxtral", "Sonic"):
        variant = variant_of(synthesized.template(stack))
        assert "InstancePools" not in variant and "VariantInstanceProvisionTimeoutInSeconds" not in variant
        assert variant["InstanceType"] in ("ml.g6.xlarge", "ml.g6e.2xlarge")


def test_the_rolling_update_allows_for_the_provisioning_timeout(pools_variant):
    (endpoint,) = resources(pools_variant.template("Voxtral"), "AWS::SageMaker::Endpoint").values()
    policy = endpoint["Properties"]["DeploymentConfig"]["RollingUpdatePolicy"]
    # Per batch: provisioning 1800 + model download 1200 + container start-up 1200 + baking 600 s, 4 batches (25 %).
    assert policy["MaximumExecutionTimeoutInSeconds"] == rolling_update_timeout_s(25, 1800 + 1200 + 1200, 600) == 19200


def test_alarm_thresholds_scale_by_the_fewest_gpus_and_vcpus_among_the_pools(pools_variant, ops_variant):
    """Sonic may run on ml.g6e.12xlarge (4 GPUs, 48 vCPUs) or ml.g6e.2xlarge (1 GPU, 8 vCPUs): 90 % of 1 GPU and of
    8 vCPUs, which the small type can reach; without the pool the 4-GPU type alone gives 360."""
    pooled = alarms_by_name(pools_variant.template("Sonic"))
    single = alarms_by_name(ops_variant.template("Sonic"))
    assert (single["sonic-tts-GPUUtilization"]["Threshold"], pooled["sonic-tts-GPUUtilization"]["Threshold"]) == (360, 90)
    assert pooled["sonic-tts-GPUMemoryUtilization"]["Threshold"] == 95
    assert (single["sonic-tts-CPUUtilization"]["Threshold"], pooled["sonic-tts-CPUUtilization"]["Threshold"]) == (4320, 720)
    assert pooled["sonic-tts-GPUUtilization"]["AlarmDescription"].startswith(
        "GPU above 90 % of 1 GPU(s) (the fewest among the instance pools) for 15 minutes")
    # Voxtral's pools all have one GPU; vCPUs 16, 8, 16: the CPU alarm counts 8.
    voxtral = alarms_by_name(pools_variant.template("Voxtral"))
    assert voxtral["voxtral-realtime-GPUUtilization"]["Threshold"] == 90
    assert voxtral["voxtral-realtime-CPUUtilization"]["Threshold"] == 720


def test_the_dashboard_draws_the_thresholds_the_alarms_use(pools_variant):
    (dashboard,) = resources(pools_variant.template("Operations"), "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert ("ml.g6e.12xlarge (4 x NVIDIA L40S, 48 vCPUs), else ml.g6e.2xlarge (1 x NVIDIA L40S, 8 vCPUs)" in body)
    assert "% of 1 GPU" in body and "% of 8 vCPUs" in body


def test_alarm_capacity_is_the_fewest_of_each():
    assert instance_types.alarm_capacity(["ml.g6e.12xlarge", "ml.g6e.2xlarge"]) == (1, 8)
    assert instance_types.alarm_capacity(["ml.g6e.48xlarge", "ml.g6e.12xlarge"]) == (4, 48)
    assert instance_types.alarm_capacity(["ml.g6.4xlarge"]) == (1, 16)
    with pytest.raises(ValueError, match=r"\['ml.g9.xlarge'\]: not in constructs_lib/facts/instance_types.py"):
        instance_types.alarm_capacity(["ml.g6.4xlarge", "ml.g9.xlarge"])


# --- Settings: every pool type is checked like the instance type ----------------------------------------------------


def test_an_unknown_type_in_the_pools_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.g9.xlarge") == [
        "voxtral.instance_pools='ml.g9.xlarge': not a SageMaker real-time instance type (expected one of SageMaker's "
        "ProductionVariant types of the form 'ml.<family>.<size>', e.g. 'ml.g6.4xlarge')"]


def test_a_duplicate_type_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6e.4xlarge,ml.g6e.2xlarge") == [
        'sonic.instance_pools=["ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.2xlarge"]: lists ml.g6e.2xlarge more than '
        "once; each instance type is one pool"]


def test_a_type_that_cannot_hold_max_num_seqs_is_named():
    # At 45000 tokens (constructs_lib/facts/capacity.py), one L40S (ml.g6e.2xlarge) holds 23 live streams; one L4
    # (ml.g6.4xlarge) 8.
    problems = problems_for(voxtral__instance_type="ml.g6e.2xlarge",
                            voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge", voxtral__max_num_seqs="9")
    assert len(problems) == 1
    assert problems[0].startswith(
        "voxtral.instance_pools='ml.g6.4xlarge' with voxtral.max_model_len=45000 and voxtral.max_num_seqs=9: one "
        "NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds the weights (8.3 GiB), activations and CUDA graphs "
        "(1.5 GiB) and KV cache (10.5 GiB) for at most 8 live stream(s) of that length")


def test_auto_sizes_each_pool_type_and_the_smallest_cap_sizes_stream_counts():
    context = {**cdk_json_context(), "voxtral.instance_type": "ml.g6e.2xlarge",
               "voxtral.instance_pools": "ml.g6e.2xlarge,ml.g6.4xlarge"}
    voxtral = load_settings(context).voxtral
    assert voxtral.stream_caps == {"ml.g6e.2xlarge": 23, "ml.g6.4xlarge": 4}  # the L4's compute budget
    assert voxtral.streams_per_instance == 4 and voxtral.caps_differ
    context["voxtral.instance_pools"] = "ml.g6e.2xlarge,ml.g6e.4xlarge"
    voxtral = load_settings(context).voxtral
    assert voxtral.streams_per_instance == 23 and not voxtral.caps_differ


def test_a_type_without_gpu_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.m5.xlarge") == [
        f"voxtral.instance_pools='ml.m5.xlarge': has no GPU; vLLM needs one (GPU types: {instance_types.gpu_families()})"]


def test_a_type_the_sonic_package_does_not_support_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        "sonic.instance_pools='ml.g6.4xlarge': the Sonic 3.6 model package supports ml.g6e.xlarge or larger, "
        "ml.g7e.2xlarge or larger, ml.g7.2xlarge or larger, ml.p5.48xlarge and ml.p5en.48xlarge"]


def test_the_pools_start_with_the_instance_type_and_count_at_most_five():
    assert problems_for(voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        'voxtral.instance_pools=["ml.g6e.2xlarge", "ml.g6.4xlarge"]: must start with voxtral.instance_type='
        "'ml.g6.xlarge', the priority-1 pool (set both: the instance type is the one tried first)"]
    six = "ml.g6.xlarge,ml.g6.8xlarge,ml.g6.16xlarge,ml.g6e.xlarge,ml.g6e.2xlarge,ml.g6e.4xlarge"
    assert problems_for(voxtral__instance_pools=six) == [
        f"voxtral.instance_pools={json.dumps(six.split(','))}: must list at most 5 instance types (InstancePools)"]


def test_the_provisioning_timeout_is_300_to_3600_seconds():
    assert problems_for(voxtral__instance_provision_timeout_s="120") == [
        "voxtral.instance_provision_timeout_s=120: must be between 300 and 3600 seconds "
        "(VariantInstanceProvisionTimeoutInSeconds)"]


def test_the_variant_props_check_the_same_rules_by_prop_name():
    p = Problems()
    ProductionVariant("ml.g6.4xlarge", instance_pools=("ml.g6.4xlarge", "ml.g6.4xlarge"), provision_timeout_s=4000).problems(p)
    assert list(p) == [
        "provision_timeout_s=4000: must be between 300 and 3600 seconds (VariantInstanceProvisionTimeoutInSeconds)",
        'instance_pools=["ml.g6.4xlarge", "ml.g6.4xlarge"]: lists ml.g6.4xlarge more than once; each instance type is '
        "one pool"]
    assert ProductionVariant("ml.g6.4xlarge").instance_types == ("ml.g6.4xlarge",)
    assert ProductionVariant("ml.g6.4xlarge").instance_provision_timeout_s is None


# --- Preflight: each pool type needs the full count ---------------------------------------------------------------


def test_each_pool_type_needs_the_full_maximum_count(pools_variant):
    needs = instance_needs(pools_variant.settings)
    # Voxtral: 2 instances at most, 3 during a rolling update (25 % batch, rounded up); Sonic: 3, 6 blue/green.
    assert {t: (n.steady, n.peak) for t, n in needs.items()} == {
        "ml.g6.4xlarge": (2, 3), "ml.g5.4xlarge": (2, 3),
        "ml.g6e.2xlarge": (2 + 3, 3 + 6),  # Voxtral's second pool and Sonic's second pool
        "ml.g6e.12xlarge": (3, 6),
    }
    assert needs["ml.g6e.2xlarge"].why == [
        "Voxtral up to 2, 3 during a rolling update (instance pool 2 of 3)",
        "Sonic up to 3, 6 during a blue/green update (instance pool 2 of 2)"]


def test_cfn_lint_knows_the_pool_properties(pools_variant):
    """cfn-lint's resource schema has InstancePools and VariantInstanceProvisionTimeoutInSeconds (an unknown property
    would be E3002)."""
    from tests.conftest import cfn_lint

    templates = [str(p) for p in sorted(pools_variant.outdir.glob("*.template.json"))
                 if p.name.endswith(("-Voxtral.template.json", "-Sonic.template.json"))]
    assert len(templates) == 2
    findings = cfn_lint(*templates)
    assert findings == [], json.dumps(findings)[:3000]


def test_with_caps_that_differ_autoscaling_and_the_near_cap_alarm_use_each_instances_own_cap(pools_variant, synthesized):
    """An L4 at 4 streams and an L40S at 23: a count of streams is a different load on each, so the scaling target
    and the near-cap alarm use the bridge's StreamCapUsed (percent of that instance's own cap): 70 % and 90 %."""
    from stacks.composition import voxtral_tracking

    tracking = voxtral_tracking(pools_variant.settings.voxtral)  # this variant is fixed-size: no policy synthesized
    assert (tracking.metric.metric_name, tracking.metric.statistic, tracking.target_value) == (
        "StreamCapUsed", "Average", 70)
    alarm = next(a for name, a in alarms_by_name(pools_variant.template("Voxtral")).items()
                 if name.endswith("ActiveStreamsNearCap"))
    assert (alarm["MetricName"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "StreamCapUsed", 90, "GreaterThanOrEqualToThreshold")
    # One type, one cap: live streams per instance as before (the default template is unchanged).
    (policy,) = resources(synthesized.template("Voxtral"), "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert (tracking["CustomizedMetricSpecification"]["MetricName"], tracking["TargetValue"]) == ("ActiveStreams", 2.8)
