"""The voice agent's stack (agent.enabled): two variants of the registry carry it, public_key
(public mode, a Bedrock model id, internet-facing on HTTPS, Voxtral and Sonic on SageMaker) and
ecs_vpc (network.mode=vpc, the default inference profile, Voxtral on ECS). Values, not counts: the
IAM actions and resources, the load balancer, the environment the bot reads, the network, the
alarms. The settings' refusals are at the end."""

from __future__ import annotations

import json

import pytest

from config.settings import DEFAULT_LLM_MODEL_ID, SettingsError, load_settings
from contracts.agent_env import AgentEnv
from tests.app.kit import (  # noqa: F401 (fixtures)
    alarms_by_name,
    fixture_private_ecs,
    fixture_public_with_key,
    one,
    only,
    resources,
)
from tests.app.variants import AGENT_MODEL, ECS_CERT
from tests.conftest import cdk_json_context

PARTITION = {"Ref": "AWS::Partition"}
ACCOUNT = {"Ref": "AWS::AccountId"}


def statements(template: dict) -> dict[str, dict]:
    """``{Sid: statement}`` of every IAM policy of the Agent stack that names its statements."""
    found = {}
    for policy in resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "Sid" in statement:
                found[statement["Sid"]] = statement
    return found


def environment(template: dict) -> dict:
    (task,) = resources(template, "AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    return {item["Name"]: item["Value"] for item in container["Environment"]}


def joined(*parts) -> dict:
    return {"Fn::Join": ["", list(parts)]}


def test_public_grants_name_the_two_endpoints_and_the_one_model(public_with_key):
    t = public_with_key.template("Agent")
    found = statements(t)
    assert found["ListenWithVoxtral"]["Action"] == "sagemaker:InvokeEndpointWithBidirectionalStream"
    assert found["ListenWithVoxtral"]["Resource"] == joined(
        "arn:", PARTITION, ":sagemaker:us-east-1:", ACCOUNT, ":endpoint/voxtral-realtime"
    )
    assert found["SpeakWithSonic"]["Action"] == "sagemaker:InvokeEndpointWithResponseStream"
    assert found["SpeakWithSonic"]["Resource"] == joined(
        "arn:", PARTITION, ":sagemaker:us-east-1:", ACCOUNT, ":endpoint/sonic-tts"
    )
    # A model id (no profile): the foundation model of the stack's Region only.
    assert found["Converse"] == {
        "Action": "bedrock:InvokeModelWithResponseStream",
        "Effect": "Allow",
        "Sid": "Converse",
        "Resource": joined(
            "arn:", PARTITION, f":bedrock:us-east-1::foundation-model/{AGENT_MODEL}"
        ),
    }
    assert "ConverseThroughProfile" not in found and "ReadVoxtralToken" not in found
    (cluster,) = resources(t, "AWS::ECS::Cluster")
    assert found["ProtectLiveSessions"]["Action"] == [
        "ecs:GetTaskProtection",
        "ecs:UpdateTaskProtection",
    ]
    assert found["ProtectLiveSessions"]["Resource"] == joined(
        "arn:", PARTITION, ":ecs:us-east-1:", ACCOUNT, ":task/", {"Ref": cluster}, "/*"
    )


def test_no_statement_of_the_agent_has_a_star_resource_but_the_registry_login(
    public_with_key, private_ecs
):
    for app in (public_with_key, private_ecs):
        t = app.template("Agent")
        stars = []
        for policy in resources(t, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Resource"] == "*":
                    stars.append(statement["Action"])
        # ecr:GetAuthorizationToken supports no resource-level permission (the image asset's pull).
        assert stars == ["ecr:GetAuthorizationToken"]


def test_vpc_grants_the_inference_profile_and_its_model_and_the_voxtral_token(private_ecs):
    t = private_ecs.template("Agent")
    found = statements(t)
    model = DEFAULT_LLM_MODEL_ID.split(".", 1)[1]
    assert found["ConverseThroughProfile"]["Resource"] == joined(
        "arn:",
        PARTITION,
        ":bedrock:us-east-1:",
        ACCOUNT,
        f":inference-profile/{DEFAULT_LLM_MODEL_ID}",
    )
    # The profile's destination Regions are Bedrock's choice: the one model, in any Region.
    assert found["ConverseProfileModel"]["Resource"] == joined(
        "arn:", PARTITION, f":bedrock:*::foundation-model/{model}"
    )
    for sid in ("ConverseThroughProfile", "ConverseProfileModel"):
        assert found[sid]["Action"] == "bedrock:InvokeModelWithResponseStream"
    assert "ListenWithVoxtral" not in found  # Voxtral on ECS: its URL and token instead
    token = found["ReadVoxtralToken"]
    assert token["Action"] == "secretsmanager:GetSecretValue"
    assert "RealtimeVoice-VoxtralEcs:ExportsOutputRefServiceToken" in json.dumps(token["Resource"])
    decrypt = found["DecryptVoxtralToken"]
    assert (
        decrypt["Condition"]["StringEquals"]["kms:ViaService"]
        == "secretsmanager.us-east-1.amazonaws.com"
    )


def test_the_environment_is_the_agent_contract(public_with_key, private_ecs):
    env = environment(public_with_key.template("Agent"))
    assert env == {
        "AGENT_VOXTRAL_ENDPOINT": "voxtral-realtime",
        "AGENT_SONIC_ENDPOINT": "sonic-tts",
        "AGENT_SONIC_VOICE": "6ccbfb76-1fc6-48f7-b71d-91ac6298247b",
        "AGENT_LANGUAGE": "en",
        "AGENT_LLM_MODEL_ID": AGENT_MODEL,
        "AGENT_SYSTEM_PROMPT": cdk_json_context()["agent.system_prompt"],
        "AGENT_GREETING": "Hello! How can I help you today?",
        "AGENT_MAX_SESSIONS": "10",
        "AGENT_MAX_SESSION_S": "1800",
        "AGENT_IDLE_S": "60",
        "METRIC_DIMENSIONS": '{"Deployment": "RealtimeVoice"}',
        "TASK_PROTECTION_MINUTES": "31",
        "AGENT_HOST": "0.0.0.0",
        "AGENT_PORT": "8080",
    }
    parsed = AgentEnv.from_env(env)
    assert (parsed.voxtral_endpoint, parsed.max_sessions, parsed.metric_dimensions) == (
        "voxtral-realtime",
        10,
        {"Deployment": "RealtimeVoice"},
    )
    vpc_env = environment(private_ecs.template("Agent"))
    assert "AGENT_VOXTRAL_ENDPOINT" not in vpc_env
    assert vpc_env["AGENT_VOXTRAL_URL"]["Fn::Join"][1][0] == "ws://"
    assert vpc_env["AGENT_VOXTRAL_URL"]["Fn::Join"][1][2] == "/invocations-bidirectional-stream"
    assert vpc_env["AGENT_LLM_MODEL_ID"] == DEFAULT_LLM_MODEL_ID


def test_public_load_balancer_is_internet_facing_https_with_a_websocket_idle_timeout(
    public_with_key,
):
    t = public_with_key.template("Agent")
    _, balancer = only(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert balancer["Properties"]["Scheme"] == "internet-facing"
    attributes = {a["Key"]: a["Value"] for a in balancer["Properties"]["LoadBalancerAttributes"]}
    assert attributes["idle_timeout.timeout_seconds"] == "70"  # agent.idle_s 60 + 10
    _, listener = only(t, "AWS::ElasticLoadBalancingV2::Listener")
    assert listener["Properties"]["Port"] == 443 and listener["Properties"]["Protocol"] == "HTTPS"
    assert listener["Properties"]["Certificates"] == [{"CertificateArn": ECS_CERT}]
    _, group = only(t, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert (group["Properties"]["HealthCheckPath"], group["Properties"]["Port"]) == (
        "/health",
        8080,
    )
    assert group["Properties"]["TargetType"] == "ip"
    assert t["Outputs"]["AgentUrl"]["Value"]["Fn::Join"][1][0] == "wss://"


def test_vpc_load_balancer_is_internal_for_the_vpc_and_tasks_have_no_route_out(private_ecs):
    t = private_ecs.template("Agent")
    _, balancer = only(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert balancer["Properties"]["Scheme"] == "internal"
    groups = resources(t, "AWS::EC2::SecurityGroup")
    (lb_group,) = [g for k, g in groups.items() if k.startswith("ServiceLoadBalancerSecurityGroup")]
    assert [
        (r["CidrIp"], r["FromPort"]) for r in lb_group["Properties"]["SecurityGroupIngress"]
    ] == [("10.80.0.0/16", 80)]
    (task_group,) = [g for k, g in groups.items() if k.startswith("ServiceTaskSecurityGroup")]
    assert [
        (r["CidrIp"], r["FromPort"]) for r in task_group["Properties"]["SecurityGroupEgress"]
    ] == [("0.0.0.0/0", 443), ("10.80.0.0/16", 80)]
    # The tasks run in the Foundation stack's isolated subnets: their route tables hold no NAT or
    # internet gateway.
    _, service = only(t, "AWS::ECS::Service")
    subnets = json.dumps(
        service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    )
    assert "NetworkVpcPrivateSubnet1" in subnets and "NetworkVpcPrivateSubnet2" in subnets
    assert (
        service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"]
        == "DISABLED"
    )
    foundation = private_ecs.template("Foundation")
    routes = resources(foundation, "AWS::EC2::Route")
    assert not [r for r in routes.values() if {"NatGatewayId", "GatewayId"} & set(r["Properties"])]
    assert not resources(foundation, "AWS::EC2::InternetGateway") and not resources(
        foundation, "AWS::EC2::NatGateway"
    )


def test_vpc_mode_makes_the_bedrock_runtime_endpoint_for_the_vpc(private_ecs):
    foundation = private_ecs.template("Foundation")
    (bedrock,) = [
        e["Properties"]
        for e in resources(foundation, "AWS::EC2::VPCEndpoint").values()
        if json.dumps(e["Properties"]["ServiceName"]).endswith('.bedrock-runtime"')
    ]
    assert bedrock["PrivateDnsEnabled"] is True and bedrock["VpcEndpointType"] == "Interface"
    (group,) = [
        k
        for k in resources(foundation, "AWS::EC2::SecurityGroup")
        if k.startswith("NetworkAgentEndpointsSecurityGroup")
    ]
    assert bedrock["SecurityGroupIds"] == [{"Fn::GetAtt": [group, "GroupId"]}]
    rules = resources(foundation, "AWS::EC2::SecurityGroup")[group]["Properties"][
        "SecurityGroupIngress"
    ]
    assert [(r["CidrIp"], r["FromPort"], r["ToPort"]) for r in rules] == [
        ("10.80.0.0/16", 443, 443)
    ]


def test_scaling_tracks_live_sessions_per_task(public_with_key):
    t = public_with_key.template("Agent")
    _, target = only(t, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 4)
    _, policy = only(t, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 7.0  # 0.7 x agent.max_sessions_per_task
    metric = tracking["CustomizedMetricSpecification"]
    assert (metric["Namespace"], metric["MetricName"], metric["Statistic"]) == (
        "VoiceAgent",
        "ActiveSessions",
        "Average",
    )
    assert metric["Dimensions"] == [{"Name": "Deployment", "Value": "RealtimeVoice"}]
    assert (tracking["ScaleInCooldown"], tracking["ScaleOutCooldown"]) == (600, 60)


def test_alarms_watch_failures_latency_and_each_stage_on_the_shared_topic(public_with_key):
    t = public_with_key.template("Agent")
    alarms = alarms_by_name(t)
    assert sorted(alarms) == sorted(
        f"RealtimeVoice-agent-{n}"
        for n in ("sessions-failed", "voice-to-voice-p95", "stt-errors", "llm-errors", "tts-errors")
    )
    latency = alarms["RealtimeVoice-agent-voice-to-voice-p95"]
    assert (latency["MetricName"], latency["ExtendedStatistic"], latency["Threshold"]) == (
        "VoiceToVoiceMs",
        "p95",
        1500,
    )
    assert (latency["EvaluationPeriods"], latency["DatapointsToAlarm"]) == (5, 3)
    for name, metric in (
        ("sessions-failed", "SessionsFailed"),
        ("stt-errors", "SttErrors"),
        ("llm-errors", "LlmErrors"),
        ("tts-errors", "TtsErrors"),
    ):
        alarm = alarms[f"RealtimeVoice-agent-{name}"]
        assert (
            alarm["Namespace"],
            alarm["MetricName"],
            alarm["Statistic"],
            alarm["Threshold"],
        ) == ("VoiceAgent", metric, "Sum", 0)
        assert alarm["Dimensions"] == [{"Name": "Deployment", "Value": "RealtimeVoice"}]
    for alarm in alarms.values():
        assert "RealtimeVoice-Operations:ExportsOutputRefAlarmTopic" in json.dumps(
            alarm["AlarmActions"]
        )


def test_every_metric_the_stack_reads_is_one_the_bot_writes(public_with_key):
    """Scaling and alarms read names of contracts.agent_metrics, which the bot's sink writes (and
    refuses any other: tests/agent/test_agent_metrics.py): the two halves cannot drift apart."""
    from contracts import agent_metrics

    t = public_with_key.template("Agent")
    _, policy = only(t, "AWS::ApplicationAutoScaling::ScalingPolicy")
    scaling = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"][
        "CustomizedMetricSpecification"
    ]
    read = {(scaling["Namespace"], scaling["MetricName"])}
    read |= {(alarm["Namespace"], alarm["MetricName"]) for alarm in alarms_by_name(t).values()}
    assert read == {
        ("VoiceAgent", name)
        for name in (
            "ActiveSessions",
            "SessionsFailed",
            "VoiceToVoiceMs",
            "SttErrors",
            "LlmErrors",
            "TtsErrors",
        )
    }
    assert {name for _, name in read} <= set(agent_metrics.METRICS)
    assert {namespace for namespace, _ in read} == {agent_metrics.NAMESPACE}
    assert agent_metrics.METRICS["VoiceToVoiceMs"] == "Milliseconds"
    assert agent_metrics.METRICS["ActiveSessions"] == "Count"


def test_the_image_context_holds_what_the_dockerfile_copies_and_nothing_else(public_with_key):
    from tests.agent.test_agent_image import copied_files

    (context,) = [
        path
        for path in public_with_key.outdir.glob("asset.*")
        if (path / "services" / "agent" / "Dockerfile").is_file()
    ]
    staged = {str(path.relative_to(context)) for path in context.rglob("*") if path.is_file()}
    assert staged == {*copied_files(), "services/agent/Dockerfile"}


def test_destroy_removes_the_logs_and_the_access_log_bucket(public_with_key):
    t = public_with_key.template("Agent")
    for kind in ("AWS::Logs::LogGroup", "AWS::S3::Bucket"):
        for resource in resources(t, kind).values():
            assert resource["DeletionPolicy"] == "Delete", kind
    (logs,) = [
        g for k, g in resources(t, "AWS::Logs::LogGroup").items() if k.startswith("ServiceLogs")
    ]
    assert (
        logs["Properties"]["KmsKeyId"]
        == "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    )


def test_operations_dashboard_has_the_agent_row(public_with_key):
    body = json.dumps(
        one(public_with_key.template("Operations"), "AWS::CloudWatch::Dashboard")["DashboardBody"]
    )
    assert (
        "## Voice agent" in body
        and "VoiceToVoiceMs" in body
        and "RealtimeVoice-agent-tts-errors" in body
    )


# --- Settings the app refuses ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"sonic.enabled": False},
            "agent.enabled=true needs voxtral.enabled=true and sonic.enabled=true (the bot "
            "listens with Voxtral and speaks with Sonic); found sonic.enabled=false",
        ),
        (
            {
                "region": "eu-west-1",
                "sonic.model_package_arn": "arn:aws:sagemaker:eu-west-1:123456789012:model-"
                "package/sonic-3-6-abc",
            },
            "agent.llm_model_id='us.anthropic.claude-haiku-4-5-20251001-v1:0': is a 'us.' "
            "inference profile, which region='eu-west-1' cannot call; use a profile of 'eu.' or "
            "'global.'",
        ),
        (
            {"agent.llm_url": "https://llm.example.internal/v1"},
            "agent.llm_url='https://llm.example.internal/v1': set exactly one of "
            "agent.llm_model_id",
        ),
        (
            {"agent.llm_model_id": "claude haiku"},
            "agent.llm_model_id='claude haiku': must be a Bedrock model id",
        ),
        (
            {"agent.cpu": 1024, "agent.memory_mib": 1024},
            "agent.memory_mib=1024: must be a memory Fargate pairs with agent.cpu=1024: "
            "2048-8192 MiB",
        ),
        (
            {"agent.internet_facing": True},
            "agent.certificate_arn=null: must be set with agent.internet_facing=true",
        ),
        (
            {
                "network.mode": "vpc",
                "agent.internet_facing": True,
                "agent.certificate_arn": ECS_CERT,
            },
            "agent.internet_facing=true: must be false with network.mode='vpc'",
        ),
        (
            {
                "sonic.target": "ecs",
                "sonic.image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/cartesia/sonic:"
                "3.6",
            },
            "agent.enabled=true needs sonic.target='sagemaker'",
        ),
        ({"agent.language": "xx"}, "agent.language='xx': must be a language Sonic speaks"),
        ({"agent.idle_s": 4000}, "agent.idle_s=4000: must be 1-3990 seconds"),
    ],
)
def test_the_settings_refuse_what_the_agent_cannot_run(overrides, message):
    with pytest.raises(SettingsError) as error:
        load_settings({**cdk_json_context(), "agent.enabled": True, **overrides})
    assert any(problem.startswith(message) for problem in error.value.problems), (
        error.value.problems
    )


def test_an_openai_compatible_url_replaces_bedrock():
    settings = load_settings(
        {
            **cdk_json_context(),
            "agent.enabled": True,
            "agent.llm_model_id": None,
            "agent.llm_url": "https://llm.example.internal/v1",
        }
    )
    assert (settings.agent.llm_model_id, settings.agent.llm_url) == (
        None,
        "https://llm.example.internal/v1",
    )
