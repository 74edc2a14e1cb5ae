"""Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct as Voxtral's,
without the bridge's parts; its settings and their errors; public mode and vpc mode with both services on ECS."""

from __future__ import annotations

import json

import pytest

from config.settings import SettingsError, load_settings
from tests.app.variants import SONIC_ECS
from tests.app.variants import SONIC_ECS_IMAGE as IMAGE
from tests.conftest import cdk_json_context, cfn_lint
from tests.app.ecs_kit import nag_violations
from tests.app.test_voxtral_ecs_stack import container, of_type, one



@pytest.fixture(scope="module")
def sonic_ecs(app_variant):
    return app_variant("sonic_ecs")


@pytest.fixture(scope="module")
def both_private(app_variant):
    """Both services on ECS in the private network."""
    return app_variant("both_ecs_vpc")


def sonic_problems(**overrides) -> list[str]:
    context = {**cdk_json_context(), "sonic.target": "ecs", **{k.replace("__", "."): v for k, v in overrides.items()}}
    with pytest.raises(SettingsError) as caught:
        load_settings(context)
    return caught.value.problems


def test_sonic_ecs_replaces_the_sagemaker_stack_and_leaves_the_operations_dashboard(sonic_ecs):
    assert sorted(sonic_ecs.templates) == ["RealtimeVoice-Artifacts", "RealtimeVoice-Operations",
                                           "RealtimeVoice-SonicEcs", "RealtimeVoice-Voxtral"]
    body = json.dumps(sonic_ecs.template("Operations"))
    assert "sonic-tts" not in body and "voxtral-realtime" in body
    assert not of_type(sonic_ecs.template("SonicEcs"), "AWS::SageMaker::Endpoint")


def test_the_container_gets_its_image_port_and_one_gpu_and_none_of_the_bridge(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    c = container(t)
    assert (c["Name"], c["Image"], c["PortMappings"]) == ("Model", IMAGE, [{"ContainerPort": 8000, "Protocol": "tcp"}])
    assert c["ResourceRequirements"] == [{"Type": "GPU", "Value": "1"}]
    assert c["StopTimeout"] == 35
    env = {e["Name"] for e in c.get("Environment", [])}
    assert not env & {"MODEL_S3_URI", "MODEL_CACHE_DIR", "DRAIN_S", "ENDPOINT_NAME", "IDLE_TIMEOUT_S"}
    assert "HealthCheck" not in c and "MountPoints" not in c and "Secrets" not in c
    assert not of_type(t, "AWS::SecretsManager::Secret")
    task = one(t, "AWS::ECS::TaskDefinition")
    assert "Volumes" not in task or task["Volumes"] == []
    # The task role reads no model data and protects no task: only the bridge does either.
    task_statements = json.dumps([p["Properties"]["PolicyDocument"] for p in of_type(t, "AWS::IAM::Policy").values()
                                  if "TaskRole" in json.dumps(p["Properties"]["Roles"])])
    assert "s3:GetObject" not in task_statements and "ecs:UpdateTaskProtection" not in task_statements
    # The execution role pulls from the image's repository only.
    assert "arn:aws:ecr:us-east-1:123456789012:repository/cartesia/sonic" in json.dumps(t["Resources"])
    data = one(t, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert data["InstanceType"] == "g6e.xlarge"
    user_data = json.dumps(data["UserData"])
    assert "RealtimeVoice/Sonic/Gpu" in user_data and "realtime-voice/weights" not in user_data


def test_internal_load_balancer_forwards_every_path_and_checks_the_health_path(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    assert one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")["Scheme"] == "internal"
    group = one(t, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert (group["Port"], group["HealthCheckPath"], group["Matcher"], group["TargetType"]) == (
        8000, "/health", {"HttpCode": "200"}, "ip")
    rule = one(t, "AWS::ElasticLoadBalancingV2::ListenerRule")
    assert rule["Conditions"] == [{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/*"]}}]
    (listener,) = of_type(t, "AWS::ElasticLoadBalancingV2::Listener").values()
    assert listener["Properties"]["Port"] == 80
    assert t["Outputs"]["HealthUrl"]["Value"]["Fn::Join"][1][-1] == "/health"


def test_scales_on_requests_per_task_within_the_task_range(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    target = one(t, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 3)
    assert "DesiredCount" not in one(t, "AWS::ECS::Service")  # the scalable target's minimum sets it
    tracking = one(t, "AWS::ApplicationAutoScaling::ScalingPolicy")["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    assert tracking["TargetValue"] == 60  # sonic.scaling_target: requests per task per minute
    assert one(t, "AWS::AutoScaling::AutoScalingGroup")["MaxSize"] == "4"  # 3 one-GPU tasks + 1 for a deployment


def test_alarms_from_the_same_rules_plus_response_time(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in of_type(t, "AWS::CloudWatch::Alarm").values()}
    assert sorted(alarms) == [f"sonic-tts-ecs-{n}" for n in (
        "GPUMemoryUsed", "GPUUtilization", "LoadBalancer5XX", "ResponseTimeP90", "RunningTasks", "Target5XX",
        "UnhealthyTargets")]
    latency = alarms["sonic-tts-ecs-ResponseTimeP90"]
    assert (latency["MetricName"], latency["ExtendedStatistic"], latency["Threshold"]) == (
        "TargetResponseTime", "p90", 3.0)  # sonic.alarm_model_latency_p90_ms = 3000 ms, in seconds
    assert alarms["sonic-tts-ecs-RunningTasks"]["Threshold"] == 2
    assert alarms["sonic-tts-ecs-GPUMemoryUsed"]["Threshold"] == 97  # percent of the GPU's reported total
    assert "/health check" in alarms["sonic-tts-ecs-UnhealthyTargets"]["AlarmDescription"]
    topic = [a["AlarmActions"] for a in alarms.values()]
    assert all(len(actions) == 1 for actions in topic)
    dashboard = one(t, "AWS::CloudWatch::Dashboard")
    assert dashboard["DashboardName"] == "RealtimeVoice-SonicEcs-us-east-1"
    body = json.dumps(dashboard["DashboardBody"])
    assert "Requests per task" in body and "Response time p90" in body and "Live streams" not in body


def test_both_services_on_ecs_in_the_private_network(both_private):
    foundation = both_private.template("Foundation")
    assert len(of_type(foundation, "AWS::EC2::VPCEndpoint")) == 11
    for stack in ("VoxtralEcs", "SonicEcs"):
        t = both_private.template(stack)
        assert not of_type(t, "AWS::EC2::VPC") and not of_type(t, "AWS::EC2::NatGateway")
        balancer = one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        assert balancer["Scheme"] == "internal"
        assert all("RealtimeVoice-Foundation:" in json.dumps(s) for s in balancer["Subnets"])
        (log_group,) = [g["Properties"] for k, g in of_type(t, "AWS::Logs::LogGroup").items()
                        if k.startswith("ServiceLogs")]
        assert "DataKey" in json.dumps(log_group["KmsKeyId"])
    assert nag_violations(both_private) == {}  # cdk-nag's three packs, and no CDK warning
    templates = sorted(str(p) for p in both_private.outdir.glob("*.template.json"))
    assert cfn_lint(*templates) == []


def test_public_sonic_ecs_is_clean_for_cdk_nag_and_cfn_lint(sonic_ecs):
    assert nag_violations(sonic_ecs) == {}
    assert cfn_lint(sonic_ecs.outdir / "RealtimeVoice-SonicEcs.template.json") == []


# --- Settings -------------------------------------------------------------------------------------------------------

def test_the_image_is_required_and_must_be_in_ecr_of_the_region():
    assert sonic_problems() == [
        "sonic.image_uri=null: must be set with sonic.target='ecs': the Sonic container your Cartesia licence "
        "provides, in ECR (it is not public; README 'Sonic on ECS')"]
    (problem,) = sonic_problems(sonic__image_uri="cartesia/sonic:3.6")
    assert problem.startswith("sonic.image_uri='cartesia/sonic:3.6': must be a private ECR image")
    (problem,) = sonic_problems(sonic__image_uri=IMAGE.replace("us-east-1", "eu-west-1"))
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_outside_1_to_65535_fails(port):
    assert sonic_problems(sonic__image_uri=IMAGE, sonic__container_port=port) == [
        f"sonic.container_port={port}: must be a TCP port 1-65535 (the port the container listens on; with awsvpc "
        "networking every port of the task's own interface is free)"]


@pytest.mark.parametrize("path", ["ping", "/ping?deep=1", "/my path", "", "/" + "a" * 1024])
def test_a_health_path_not_starting_with_a_slash_or_with_a_query_fails(path):
    problems = sonic_problems(sonic__image_uri=IMAGE, sonic__health_path=path)
    if path == "":
        assert problems == ["sonic.health_path='': must be set: this setting has no 'unset' value (null is allowed "
                            "for optional settings only)"]
    else:
        assert problems == [f"sonic.health_path={path!r}: must be a URL path starting with '/' (e.g. '/ping'), at "
                            "most 1024 characters, without spaces or a query string ('?')"]


def test_good_ports_and_paths_pass():
    for port, path in [(1, "/"), (65535, "/v1/health"), (443, "/healthz")]:
        settings = load_settings({**cdk_json_context(), "sonic.target": "ecs", "sonic.image_uri": IMAGE,
                                  "sonic.container_port": port, "sonic.health_path": path})
        assert (settings.sonic.container_port, settings.sonic.health_path) == (port, path)


def test_instance_type_scaling_metric_and_task_range_are_checked():
    problems = sonic_problems(sonic__image_uri=IMAGE, sonic__ecs_instance_type="m5.large",
                              sonic__scaling_metric="concurrent_requests", sonic__min_instances=3)
    assert [p.split(":")[0] for p in problems] == [
        "sonic.max_instances=2", "sonic.ecs_instance_type='m5.large'", "sonic.scaling_metric='concurrent_requests'"]
    assert problems[0] == "sonic.max_instances=2: must be at least sonic.min_instances=3"
    assert problems[1].startswith("sonic.ecs_instance_type='m5.large': has no NVIDIA GPU")
    assert problems[2].startswith("sonic.scaling_metric='concurrent_requests': must be 'invocations_per_instance' "
                                  "with sonic.target='ecs'")


def test_sagemaker_only_checks_do_not_apply_on_ecs():
    # No Marketplace package in eu-west-1: a problem for SageMaker, none for the licensed container on ECS.
    image = IMAGE.replace("us-east-1", "eu-west-1")
    settings = load_settings({**cdk_json_context(), "region": "eu-west-1", "voxtral.enabled": False,
                              "sonic.target": "ecs", "sonic.image_uri": image})
    assert settings.sonic_on_ecs and settings.uses_ecs
    capacity = settings.sonic.ecs_capacity(settings.ecs)
    assert (capacity.instance_type, capacity.min_tasks, capacity.max_tasks) == ("g6e.xlarge", 1, 2)
    assert settings.sonic.ecs_load_balancing(settings.ecs).internet_facing is False
