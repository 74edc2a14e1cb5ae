"""constructs_lib/ecs_service/props.py: the timings the ECS service derives from the bridge's drain
and idle timeout, the size of its GPU capacity, and the service's and its bridge add-on's props,
checked without a construct."""

from __future__ import annotations

import pytest

from constructs_lib.ecs_service.props import (
    ECS_MAX_STOP_TIMEOUT_S,
    GpuCapacity,
    GpuEcsServiceProps,
    GpuEcsServiceWithBridgeProps,
    LoadBalancing,
    alb_idle_timeout_s,
    deregistration_delay_s,
    stop_timeout_s,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from constructs_lib.validation import Problems


def test_timing_rules_follow_the_bridge():
    # stopTimeout = drain + the bridge's exit after it (10 s), within ECS's 120 s.
    assert stop_timeout_s(25) == 35
    assert stop_timeout_s(110) == ECS_MAX_STOP_TIMEOUT_S
    with pytest.raises(ValueError, match="at most 120 s"):
        stop_timeout_s(111)
    # The load balancer waits longer than the bridge, so the bridge ends an idle session with its
    # own error.
    assert alb_idle_timeout_s(60) == 70
    assert deregistration_delay_s(24.5) == 25


def test_capacity_sizes_the_auto_scaling_group_for_one_gpu_per_task():
    assert (
        GpuCapacity("g6.xlarge", max_tasks=4).max_instances == 5
    )  # 4 one-GPU instances + 1 for a deployment
    assert GpuCapacity("g6e.12xlarge", max_tasks=8).max_instances == 3  # 4 GPUs each
    p = Problems()
    GpuCapacity("g6.xlarge", root_volume_gib=20).problems(p)
    assert list(p) == [
        "root_volume_gib=20: must be 30-16384 GiB (gp3; the image and weights need ~30)"
    ]


def test_the_bridge_keeps_no_connection_idle_for_reuse_so_a_longer_alb_idle_timeout_meets_no_502():
    """The ALB guide's 502 (target idle timeout below the load balancer's) is a race on a kept-alive
    connection: the target closes it at its idle timeout while the load balancer sends the next
    request on it. Over real sockets: the bridge answers a plain request with ``Connection: close``
    and closes the connection, never answering a second request pipelined on it; a WebSocket, once
    upgraded, is one session and carries no other request. So no connection stays idle for reuse and
    the load balancer's longer idle timeout (which lets the bridge end a silent stream with its own
    idle_timeout error) cannot meet that race."""
    import asyncio

    from tests.bridge.bridge_testkit import bounded_runner, running_bridge
    from voice_devtools.local.fake_vllm import FakeVllm

    request = b"GET /ping HTTP/1.1\r\nHost: bridge\r\nConnection: keep-alive\r\n\r\n"

    async def scenario() -> bytes:
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
            try:
                writer.write(
                    request * 2
                )  # a second request on the same connection, as a reusing balancer would
                return await asyncio.wait_for(
                    reader.read(), 5
                )  # everything until the bridge closes
            finally:
                writer.close()

    received = bounded_runner(30)(scenario())
    assert received.count(b"HTTP/1.1 ") == 1
    head = received.partition(b"\r\n\r\n")[0].decode().lower()
    assert head.startswith("http/1.1 200") and "\r\nconnection: close" in head


def problems_of(props: GpuEcsServiceProps) -> list[str]:
    p = Problems()
    props.problems(p)
    return list(p)


def test_the_service_props_are_checked_without_a_construct():
    """Plain values (no VPC or image needed): what the settings layer runs before any construct."""
    props = GpuEcsServiceProps(
        service_name="tts",
        vpc=None,
        image=None,
        capacity=GpuCapacity("g6e.xlarge"),
        requests_per_target=0,
        gpu_namespace="Team/Gpu",
        response_time_p90_ms=-1,
        load_balancing=LoadBalancing(require_token=False),
        drain_s=111,
    )
    assert problems_of(props) == [
        "requests_per_target=0: must be a positive number of requests per task per minute "
        "without bridge",
        "response_time_p90_ms=-1: must be a positive number of ms, or None",
        "drain_s=111: a drain of 111 s needs a stopTimeout of 121 s; ECS allows at most 120 s",
    ]
    assert props.gpu_metrics_namespace() == "Team/Gpu"


def test_the_bridge_add_ons_props_extend_the_services_with_keyword_only_fields():
    bridge = BridgeAlarmThresholds(namespace="Team/Bridge", stream_cap=4)
    props = GpuEcsServiceWithBridgeProps(
        "stt",
        None,
        None,
        GpuCapacity("g6.xlarge"),
        bridge=bridge,
        model_bucket=object(),
        model_prefix="w/v1/",
        streams_target=2.1,
    )
    assert isinstance(props, GpuEcsServiceProps)
    assert problems_of(props) == []
    assert props.gpu_metrics_namespace() == "Team/Bridge/Gpu"  # the bridge's namespace + /Gpu
    given = GpuEcsServiceWithBridgeProps(
        service_name="stt",
        vpc=None,
        image=None,
        capacity=GpuCapacity("g6.xlarge"),
        bridge=bridge,
        model_bucket=object(),
        model_prefix="w/v1/",
        streams_target=2.1,
        gpu_namespace="Team/Gpu",
    )
    assert given.gpu_metrics_namespace() == "Team/Gpu"
    with pytest.raises(TypeError, match="positional"):
        GpuEcsServiceWithBridgeProps(
            "stt",
            None,
            None,
            GpuCapacity("g6.xlarge"),
            None,
            None,
            8080,
            "/ping",
            None,
            None,
            LoadBalancing(),
            25.0,
            60.0,
            30,
            False,
            None,
            (),
            (),
            None,
            bridge,
        )
