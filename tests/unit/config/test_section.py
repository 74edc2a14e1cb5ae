"""config/section.py (and the field declarations of config/context.py): a section's fields carry the
props' names, their keys and their defaults' source where they are declared; one method builds any
props class from them, and the props' checks report under the keys users write."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from config import context as ctx
from config.context import setting
from config.section import Section
from config.settings import SECTIONS
from constructs_lib.validation import Problems


@dataclass(frozen=True)
class Scaling:
    """Props of a library construct, for these tests."""

    min_capacity: int = 1
    max_capacity: int = 3
    spot: bool = False
    label: str | None = None

    def problems(self, p: Problems) -> None:
        if self.max_capacity < self.min_capacity:
            p.add(
                "max_capacity",
                self.max_capacity,
                f"must be at least {p.ref('min_capacity', self.min_capacity)}",
            )
        if self.spot and self.max_capacity > 2:
            p.add(
                "max_capacity", self.max_capacity, f"must be at most 2 with {p.ref('spot', True)}"
            )
        if self.label == "":
            p.add("label", self.label, "must not be empty")


@dataclass(frozen=True)
class Base(Section):
    #: The section's switch.
    enabled: bool = True
    min_capacity: int = setting(key="min_instances", default_from=Scaling)
    max_capacity: int = setting(4, key="max_instances")
    spot: bool = setting(
        key="capacity", choices={"on_demand": False, "spot": True}, default_from=Scaling
    )


@dataclass(frozen=True)
class Derived(Base):
    max_capacity: int = 6
    #: Not a setting.
    extra: str = setting("x", default_from=None)


def test_a_field_takes_its_default_from_the_props_that_declare_it():
    assert (Base().min_capacity, Base().spot) == (1, False)
    assert Base().max_capacity == 4  # the app's own default


def test_a_field_declared_again_keeps_its_key_and_changes_only_its_default():
    keys = {k.field: k for k in ctx.section_keys(Derived, "d.")}
    assert (keys["max_capacity"].name, Derived().max_capacity) == ("d.max_instances", 6)
    assert keys["spot"].choices == {"on_demand": False, "spot": True}


def test_props_are_built_from_the_fields_of_the_same_names_and_given_values_win():
    section = Base(min_capacity=2, spot=True)
    assert section.props(Scaling) == Scaling(min_capacity=2, max_capacity=4, spot=True)
    assert section.props(Scaling, max_capacity=2, label="x") == Scaling(2, 2, True, "x")


def test_the_props_checks_name_the_keys_and_spell_the_choices():
    p = Base.problems_named("d.")
    Base(min_capacity=5, spot=True).props(Scaling).problems(p)
    assert list(p) == [
        "d.max_instances=4: must be at least d.min_instances=5",
        "d.max_instances=4: must be at most 2 with d.capacity='spot'",
    ]
    p = Base.problems_named("d.")
    Base().props(Scaling, label="").problems(p)
    assert list(p) == ["d.label='': must not be empty"]  # not a field: the prop's own name


def test_a_key_converts_to_the_field_and_spells_it_back():
    (spot,) = [k for k in ctx.section_keys(Base) if k.field == "spot"]
    assert (spot.key, spot.convert("spot"), spot.convert(" on_demand "), spot.spell(True)) == (
        "capacity",
        True,
        False,
        "spot",
    )
    with pytest.raises(ValueError, match="must be one of on_demand, spot"):
        spot.convert(True)
    assert ctx.defaults({"d.": Base}) == {
        "d.enabled": True,
        "d.min_instances": 1,
        "d.max_instances": 4,
        "d.capacity": "on_demand",
    }


def test_a_default_the_props_do_not_declare_is_refused_at_class_creation():
    with pytest.raises(
        TypeError, match=r"Broken.max_capacity: Required declares no default for 'max_capacity'"
    ):

        @dataclass(frozen=True)
        class Required:
            max_capacity: int

        @dataclass(frozen=True)
        class Broken(Section):
            max_capacity: int = setting(default_from=Required)


def test_no_section_renames_through_a_table():
    """Every key that is not its field's name is declared on that field: the sections hold no
    ``PROPS`` or other string table from one name to another."""
    for section in SECTIONS.values():
        tables = {
            name: value
            for name, value in vars(section).items()
            if name.isupper()
            and isinstance(value, (dict, tuple))
            and value
            and all(
                isinstance(v, str) for v in (value.values() if isinstance(value, dict) else value)
            )
        }
        assert tables == {}, section.__name__
    renamed = {
        k.name: k.field
        for prefix, section in SECTIONS.items()
        for k in ctx.section_keys(section, prefix)
        if k.key != k.field
    }
    assert renamed == {
        "voxtral.instance_provision_timeout_s": "provision_timeout_s",
        "voxtral.min_instances": "min_capacity",
        "voxtral.max_instances": "max_capacity",
        "voxtral.alarm_5xx_errors": "errors_5xx",
        "voxtral.alarm_4xx_errors": "errors_4xx",
        "voxtral.alarm_model_latency_p90_ms": "model_latency_p90_ms",
        "voxtral.alarm_overhead_latency_p90_ms": "overhead_latency_p90_ms",
        "voxtral.alarm_gpu_utilization_percent": "gpu_utilization_percent",
        "voxtral.alarm_gpu_memory_percent": "gpu_memory_percent",
        "voxtral.alarm_cpu_utilization_percent": "cpu_utilization_percent",
        "voxtral.alarm_memory_percent": "memory_percent",
        "voxtral.alarm_disk_percent": "disk_percent",
        "voxtral.max_num_seqs": "stream_cap",
        "voxtral.metrics_namespace": "namespace",
        "voxtral.rollout_batch_percent": "batch_percent",
        "voxtral.rollout_wait_s": "wait_s",
        "voxtral.alarm_time_to_first_delta_p90_ms": "time_to_first_delta_p90_ms",
        "voxtral.alarm_active_streams_fraction": "active_streams_fraction",
        **{
            f"sonic.{key}": field
            for key, field in [
                ("instance_provision_timeout_s", "provision_timeout_s"),
                ("min_instances", "min_capacity"),
                ("max_instances", "max_capacity"),
                ("alarm_5xx_errors", "errors_5xx"),
                ("alarm_4xx_errors", "errors_4xx"),
                ("alarm_model_latency_p90_ms", "model_latency_p90_ms"),
                ("alarm_overhead_latency_p90_ms", "overhead_latency_p90_ms"),
                ("alarm_gpu_utilization_percent", "gpu_utilization_percent"),
                ("alarm_gpu_memory_percent", "gpu_memory_percent"),
                ("alarm_cpu_utilization_percent", "cpu_utilization_percent"),
                ("alarm_memory_percent", "memory_percent"),
                ("alarm_disk_percent", "disk_percent"),
                ("scaling_target", "target_value"),
            ]
        },
        "ecs.capacity": "spot",
        "ecs.placement": "single_az",
        "ecs.load_balancer": "internet_facing",
    }


def test_each_default_the_app_shares_with_the_props_it_builds_is_declared_once():
    """Where a section's field and a field of the same name of a props class the section builds have
    the same default (a value, not None: "not given"), the section takes it from the props
    (``default_from``) instead of writing it again."""
    from config.agent import AgentSettings
    from config.connect import ConnectSettings
    from config.ecs import EcsSettings
    from config.network import NetworkSettings
    from config.settings import Settings
    from config.sonic import SonicSettings
    from config.voxtral import VoxtralSettings
    from constructs_lib.agent.props import AgentSizing
    from constructs_lib.connect.props import ConnectTranscriptionProps
    from constructs_lib.ecs_service.props import GpuCapacity, LoadBalancing
    from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
    from constructs_lib.network.props import PrivateNetworkProps
    from constructs_lib.sagemaker_endpoint.props import (
        ProductionVariant,
        RealtimeEndpointProps,
        RollingUpdate,
    )
    from constructs_lib.sagemaker_endpoint.scaling_props import InstanceScaling, TargetTracking

    endpoint = (
        ProductionVariant,
        EndpointAlarmThresholds,
        InstanceScaling,
        TargetTracking,
        RealtimeEndpointProps,
    )
    builds = {
        Settings: (RealtimeEndpointProps,),
        VoxtralSettings: (*endpoint, RollingUpdate, BridgeAlarmThresholds),
        SonicSettings: endpoint,
        EcsSettings: (GpuCapacity, LoadBalancing),
        NetworkSettings: (PrivateNetworkProps,),
        ConnectSettings: (ConnectTranscriptionProps,),
        AgentSettings: (AgentSizing,),
    }
    written_twice = []
    for section, props in builds.items():
        for f in dataclasses.fields(section):
            if (
                f.metadata.get(ctx.DEFAULT_FROM)
                or f.default is dataclasses.MISSING
                or f.default is None
            ):
                continue
            for cls in props:
                same = next((g for g in dataclasses.fields(cls) if g.name == f.name), None)
                if (
                    same is not None
                    and type(same.default) is type(f.default)
                    and same.default == f.default
                ):
                    written_twice.append(f"{section.__name__}.{f.name} ({cls.__name__})")
    assert written_twice == []
