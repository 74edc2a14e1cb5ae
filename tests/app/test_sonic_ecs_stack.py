"""The <prefix>-SonicEcs stack's template (sonic.target=ecs): the licensed container's task, its
load balancer, scaling and alarms. Tests that read this stack together with another are in
test_cross_stack.py; cfn-lint and cdk-nag over each variant in test_lint.py; settings refused before
a synth in test_settings_app.py."""

from __future__ import annotations

import json

from tests.app.kit import container, fixture_sonic_ecs, one, resources  # noqa: F401 (fixtures)
from tests.app.variants import SONIC_ECS_IMAGE as IMAGE

# --- Sonic on ECS --------------------------------------------------------------------------------
# Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct
# as Voxtral's, without the bridge's parts; its settings and their errors; public mode and vpc mode
# with both services on ECS.


def test_the_container_gets_its_image_port_and_one_gpu_and_none_of_the_bridge(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    c = container(t)
    assert (c["Name"], c["Image"], c["PortMappings"]) == (
        "Model",
        IMAGE,
        [{"ContainerPort": 8000, "Protocol": "tcp"}],
    )
    assert c["ResourceRequirements"] == [{"Type": "GPU", "Value": "1"}]
    assert c["StopTimeout"] == 35
    env = {e["Name"] for e in c.get("Environment", [])}
    assert not env & {
        "MODEL_S3_URI",
        "MODEL_CACHE_DIR",
        "DRAIN_S",
        "ENDPOINT_NAME",
        "IDLE_TIMEOUT_S",
    }
    assert "HealthCheck" not in c and "MountPoints" not in c and "Secrets" not in c
    assert not resources(t, "AWS::SecretsManager::Secret")
    task = one(t, "AWS::ECS::TaskDefinition")
    assert "Volumes" not in task or task["Volumes"] == []
    # The task role reads no model data and protects no task: only the bridge does either.
    task_statements = json.dumps(
        [
            p["Properties"]["PolicyDocument"]
            for p in resources(t, "AWS::IAM::Policy").values()
            if "TaskRole" in json.dumps(p["Properties"]["Roles"])
        ]
    )
    assert (
        "s3:GetObject" not in task_statements and "ecs:UpdateTaskProtection" not in task_statements
    )
    # The execution role pulls from the image's repository only.
    assert "arn:aws:ecr:us-east-1:123456789012:repository/cartesia/sonic" in json.dumps(
        t["Resources"]
    )
    data = one(t, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert data["InstanceType"] == "g6e.xlarge"
    user_data = json.dumps(data["UserData"])
    assert "RealtimeVoice/Sonic/Gpu" in user_data and "realtime-voice/weights" not in user_data


def test_internal_load_balancer_forwards_every_path_and_checks_the_health_path(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    assert one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")["Scheme"] == "internal"
    group = one(t, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert (group["Port"], group["HealthCheckPath"], group["Matcher"], group["TargetType"]) == (
        8000,
        "/health",
        {"HttpCode": "200"},
        "ip",
    )
    rule = one(t, "AWS::ElasticLoadBalancingV2::ListenerRule")
    assert rule["Conditions"] == [
        {"Field": "path-pattern", "PathPatternConfig": {"Values": ["/*"]}}
    ]
    (listener,) = resources(t, "AWS::ElasticLoadBalancingV2::Listener").values()
    assert listener["Properties"]["Port"] == 80
    assert t["Outputs"]["HealthUrl"]["Value"]["Fn::Join"][1][-1] == "/health"


def test_scales_on_requests_per_task_within_the_task_range(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    target = one(t, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 3)
    assert "DesiredCount" not in one(
        t, "AWS::ECS::Service"
    )  # the scalable target's minimum sets it
    tracking = one(t, "AWS::ApplicationAutoScaling::ScalingPolicy")[
        "TargetTrackingScalingPolicyConfiguration"
    ]
    assert (
        tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "ALBRequestCountPerTarget"
    )
    assert tracking["TargetValue"] == 60  # sonic.scaling_target: requests per task per minute
    assert (
        one(t, "AWS::AutoScaling::AutoScalingGroup")["MaxSize"] == "4"
    )  # 3 one-GPU tasks + 1 for a deployment


def test_alarms_from_the_same_rules_plus_response_time(sonic_ecs):
    t = sonic_ecs.template("SonicEcs")
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in resources(t, "AWS::CloudWatch::Alarm").values()
    }
    assert sorted(alarms) == [
        f"sonic-tts-ecs-{n}"
        for n in (
            "GPUMemoryUsed",
            "GPUUtilization",
            "LoadBalancer5XX",
            "ResponseTimeP90",
            "RunningTasks",
            "Target5XX",
            "UnhealthyTargets",
        )
    ]
    latency = alarms["sonic-tts-ecs-ResponseTimeP90"]
    assert (latency["MetricName"], latency["ExtendedStatistic"], latency["Threshold"]) == (
        "TargetResponseTime",
        "p90",
        3.0,
    )  # sonic.alarm_model_latency_p90_ms = 3000 ms, in seconds
    assert alarms["sonic-tts-ecs-RunningTasks"]["Threshold"] == 2
    assert (
        alarms["sonic-tts-ecs-GPUMemoryUsed"]["Threshold"] == 97
    )  # percent of the GPU's reported total
    assert "/health check" in alarms["sonic-tts-ecs-UnhealthyTargets"]["AlarmDescription"]
    topic = [a["AlarmActions"] for a in alarms.values()]
    assert all(len(actions) == 1 for actions in topic)
    dashboard = one(t, "AWS::CloudWatch::Dashboard")
    assert dashboard["DashboardName"] == "RealtimeVoice-SonicEcs-us-east-1"
    body = json.dumps(dashboard["DashboardBody"])
    assert (
        "Requests per task" in body and "Response time p90" in body and "Live streams" not in body
    )
