"""config/capacity_plan.py: the streams each instance type the Voxtral service may run serves,
worked out once when the settings load, and what reads it (vLLM's flags, the bridge's thresholds,
scaling, the pools' Models)."""

from __future__ import annotations

import pytest

from config.capacity_plan import plan_capacity, size
from config.settings import load_settings
from config.voxtral import VoxtralSettings
from tests.conftest import cdk_json_context


def test_max_num_seqs_auto_resolves_per_instance_type_and_reaches_the_bridge_scaling_and_alarms():
    settings = load_settings(cdk_json_context())
    plan = settings.capacity_plan
    assert settings.voxtral.stream_cap == "auto"
    assert (
        plan.streams_per_instance == 4
    )  # one L4 at 45000 tokens: the compute budget, below the fit of 8
    assert plan.streams_target == pytest.approx(0.7 * 4)
    assert settings.voxtral.bridge_thresholds(plan).stream_cap == 4
    l40s = load_settings(
        {**cdk_json_context(), "voxtral.instance_type": "ml.g6e.xlarge"}
    ).capacity_plan
    assert l40s.streams_per_instance == 23
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.max_num_seqs": "3"}
        ).capacity_plan.streams_per_instance
        == 3
    )


def test_fp8_kv_cache_reaches_vllm_and_doubles_the_kv_bound_on_hopper():
    from bridge.entrypoint import vllm_flags
    from config.bridge import container_environment

    context = {**cdk_json_context(), "voxtral.instance_type": "ml.p5.4xlarge"}
    auto = load_settings(context)
    fp8 = load_settings({**context, "voxtral.kv_cache_dtype": "fp8"})
    # KV bound, twice the pool blocks.
    assert (auto.capacity_plan.streams_per_instance, fp8.capacity_plan.streams_per_instance) == (
        46,
        93,
    )
    flags = vllm_flags(container_environment(fp8))
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8"
    assert flags[flags.index("--max-num-seqs") + 1] == "93"
    assert "--kv-cache-dtype" not in vllm_flags(
        container_environment(auto)
    )  # auto: vLLM's default, left out


def test_auto_stream_cap_follows_the_ecs_gpu_not_the_sagemaker_instance_type():
    """voxtral.max_num_seqs=auto is sized by ecs.instance_type's GPU with target=ecs;
    voxtral.instance_type (a SageMaker type) no longer counts, and the scaling target follows."""
    base = {**cdk_json_context(), "voxtral.target": "ecs"}
    l4 = load_settings(base).capacity_plan
    assert (list(l4.stream_caps), l4.streams_per_instance, l4.streams_target) == (
        ["ml.g6.xlarge"],
        4,
        2.8,
    )
    l40s = load_settings({**base, "ecs.instance_type": "g6e.2xlarge"}).capacity_plan
    assert l40s.streams_per_instance == 23  # memory-bound on one L40S at 45000 tokens
    assert l40s.streams_target == pytest.approx(0.7 * 23)
    t4 = load_settings(
        {**base, "ecs.instance_type": "g4dn.xlarge", "voxtral.instance_type": "ml.g6e.2xlarge"}
    ).capacity_plan
    assert t4.streams_per_instance == 3
    # The SageMaker target still sizes by voxtral.instance_type, whatever ecs.instance_type says.
    sagemaker = load_settings(
        {**cdk_json_context(), "ecs.instance_type": "g6e.2xlarge"}
    ).capacity_plan
    assert (list(sagemaker.stream_caps), sagemaker.streams_per_instance) == (["ml.g6.xlarge"], 4)


def test_an_explicit_stream_cap_above_the_compute_cap_is_a_warning_not_an_error():
    plan = load_settings(
        {**cdk_json_context(), "voxtral.target": "ecs", "voxtral.max_num_seqs": 6}
    ).capacity_plan
    assert (
        plan.streams_per_instance == 6
    )  # fits the L4's memory (8), above its compute cap (4): allowed
    assert plan.warning == (
        "voxtral.max_num_seqs=6 is above the compute cap of one NVIDIA L4 "
        "(ecs.instance_type='g6.xlarge'): the "
        "capacity model estimates it decodes at most 4 live stream(s) of max_model_len=45000 in "
        "real time, so "
        "streams may fall behind under full load; set voxtral.max_num_seqs=auto, or measure with "
        "bench/capacity_bench.py (README 'Capacity')"
    )
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.target": "ecs", "voxtral.max_num_seqs": 4}
        ).capacity_plan.warning
        is None
    )
    assert (
        load_settings({**cdk_json_context(), "voxtral.target": "ecs"}).capacity_plan.warning is None
    )


def test_the_warning_on_sagemaker_names_the_instance_type():
    plan = load_settings({**cdk_json_context(), "voxtral.max_num_seqs": 6}).capacity_plan
    assert plan.warning is not None and plan.warning.startswith(
        "voxtral.max_num_seqs=6 is above the compute cap of one NVIDIA L4 (instance type "
        "'ml.g6.xlarge'): "
    )


# --- Instance pools: each pool type at its own cap ------------------------------------------------


def test_an_l4_and_an_l40s_pool_get_a_model_and_a_cap_each():
    from config.bridge import container_environment, pool_environment

    context = {
        **cdk_json_context(),
        "voxtral.instance_type": "ml.g6.xlarge",
        "voxtral.instance_pools": "ml.g6.xlarge,ml.g6e.xlarge",
    }
    settings = load_settings(context)
    assert settings.capacity_plan.stream_caps == {"ml.g6.xlarge": 4, "ml.g6e.xlarge": 23}
    assert container_environment(settings, "ml.g6.xlarge")["SM_VLLM_MAX_NUM_SEQS"] == "4"
    assert pool_environment(settings) == {"ml.g6e.xlarge": {"SM_VLLM_MAX_NUM_SEQS": "23"}}
    # An explicit max_num_seqs is one cap for all: no pool needs a Model of its own.
    context["voxtral.max_num_seqs"] = "4"
    assert pool_environment(load_settings(context)) == {}


def test_auto_sizes_each_pool_type_and_the_smallest_cap_sizes_stream_counts():
    context = {
        **cdk_json_context(),
        "voxtral.instance_type": "ml.g6e.2xlarge",
        "voxtral.instance_pools": "ml.g6e.2xlarge,ml.g6.4xlarge",
    }
    plan = load_settings(context).capacity_plan
    assert plan.stream_caps == {"ml.g6e.2xlarge": 23, "ml.g6.4xlarge": 4}  # the L4's compute budget
    assert plan.streams_per_instance == 4 and plan.caps_differ
    assert plan.stream_cap_used_target == 70.0
    context["voxtral.instance_pools"] = "ml.g6e.2xlarge,ml.g6e.4xlarge"
    plan = load_settings(context).capacity_plan
    assert plan.streams_per_instance == 23 and not plan.caps_differ


# --- The plan on its own --------------------------------------------------------------------------


def test_gpu_memory_estimate_values():
    """The streams whose KV cache fits one GPU (the capacity model's ``fit``) at 45000 tokens."""

    def fit(instance_type: str, gpu_memory_utilization: float) -> int:
        planned = size(
            VoxtralSettings(gpu_memory_utilization=gpu_memory_utilization), instance_type
        )
        assert planned.capacity is not None
        return planned.capacity.fit

    assert fit("ml.g6.4xlarge", 0.9) == 8
    assert fit("ml.g4dn.xlarge", 0.9) == 3  # the catalogue's 16 GiB: no pinned facts for the T4
    assert fit("ml.g4dn.xlarge", 0.6) == 0  # 9.6 GiB: the weights and overhead leave no room
    assert fit("ml.g6e.xlarge", 0.9) == 23


def test_a_type_is_planned_once_in_priority_order_and_looked_up_by_name():
    voxtral = VoxtralSettings(
        instance_type="ml.g6e.2xlarge",
        instance_pools=["ml.g6e.2xlarge", "ml.g6.4xlarge", "ml.g6e.2xlarge"],
    )
    plan = plan_capacity(voxtral, "g6.xlarge")
    assert [t.instance_type for t in plan.types] == ["ml.g6e.2xlarge", "ml.g6.4xlarge"]
    assert plan.first.instance_type == "ml.g6e.2xlarge"
    assert plan.of("ml.g6.4xlarge").stream_cap == 4
    assert plan.smallest is not None and plan.smallest.instance_type == "ml.g6.4xlarge"
    with pytest.raises(KeyError, match=r"'ml.g5.xlarge' is not an instance type of the plan"):
        plan.of("ml.g5.xlarge")


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_model_len": 0},
        {"gpu_memory_utilization": 0.0},
        {"gpu_memory_utilization": 1.5},
        {"kv_cache_dtype": "int8"},
    ],
)
def test_values_the_capacity_model_cannot_take_give_no_answer_and_auto_a_cap_of_one(overrides):
    """The settings' own checks name such values; the plan must not fail before they can (the ECS
    target's check read the model with them and raised ValueError instead of a settings error)."""
    planned = size(VoxtralSettings(**overrides), "ml.g6.xlarge")
    assert (planned.capacity, planned.stream_cap) == (None, 1)


def test_a_type_outside_the_catalogue_or_without_a_gpu_has_no_answer_and_an_explicit_cap_stays():
    assert size(VoxtralSettings(), "ml.m5.xlarge").capacity is None
    assert size(VoxtralSettings(), "ml.zz9.xlarge").capacity is None
    assert (
        size(VoxtralSettings(stream_cap=0), "ml.g6.xlarge").stream_cap == 0
    )  # its own problem names it


def test_a_gpu_that_holds_no_stream_still_gets_a_cap_of_one():
    planned = size(VoxtralSettings(gpu_memory_utilization=0.6), "ml.g4dn.xlarge")
    assert planned.capacity is not None and planned.capacity.fit == 0
    assert planned.stream_cap == 1


def test_loading_works_the_plan_out_once_and_its_readers_do_not_run_the_model_again(monkeypatch):
    """The stacks' environment, scaling and alarms, and ``voicectl cost``, read the one plan the
    settings carry: after loading, the capacity model is not run again."""
    from config.bridge import bridge_environment, pool_environment
    from constructs_lib.facts import capacity
    from stacks.composition import voxtral_tracking
    from voicectl.operations.cost import endpoint_costs
    from voicectl.operations.pricing import HostingPrice

    context = {**cdk_json_context(), "voxtral.instance_pools": "ml.g6.xlarge,ml.g6e.xlarge"}
    calls: list[str] = []
    real_fit = capacity.fit

    def fit(spec, *args, **kwargs):
        if kwargs.get(
            "with_range", True
        ):  # the model's own calls for its range pass with_range=False
            calls.append(spec.name)
        return real_fit(spec, *args, **kwargs)

    monkeypatch.setattr(capacity, "fit", fit)
    settings = load_settings(context)
    assert calls == ["ml.g6.xlarge", "ml.g6e.xlarge"]
    monkeypatch.setattr(
        capacity, "fit", lambda *a, **k: pytest.fail("the capacity model ran again")
    )
    assert bridge_environment(settings, "ml.g6e.xlarge").vllm_max_num_seqs == 23
    assert pool_environment(settings) == {"ml.g6e.xlarge": {"SM_VLLM_MAX_NUM_SEQS": "23"}}
    assert voxtral_tracking(settings).target_value == 70.0
    assert settings.voxtral.bridge_thresholds(settings.capacity_plan).stream_cap == 4
    price = HostingPrice(
        "ml.g6.xlarge", "us-east-1", 1.0, "sku", "usage", "description", "2026-01-01"
    )
    (voxtral, _) = endpoint_costs(settings, lambda instance_type: price)
    assert voxtral.streams_per_instance == 4
