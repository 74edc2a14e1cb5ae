"""The <prefix>-Connect stack's template: least privilege, the Connect resources as the references require, removal
policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth and fails it on any finding)."""

from __future__ import annotations

import json
import re

import pytest

from config.settings import SettingsError, load_settings
from tests.conftest import (CONNECT, CONNECT_INSTANCE, CONNECT_QUEUE, CONNECT_VPC, ROOT, cdk_json_context,
                            cfn_lint)


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def all_statements(template: dict) -> list[dict]:
    return [statement for policy in resources(template, "AWS::IAM::Policy").values()
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]]


def statements(template: dict) -> dict[str, dict]:
    return {statement["Sid"]: statement for statement in all_statements(template) if "Sid" in statement}


@pytest.fixture(scope="module")
def connect(synthesized_connect):
    return synthesized_connect.template("Connect")


def test_the_consumers_read_only_the_instance_streams_under_its_prefix(connect):
    read = statements(connect)["ReadCallStreams"]
    assert sorted(read["Action"]) == ["kinesisvideo:GetDataEndpoint", "kinesisvideo:GetMedia"]
    assert json.dumps(read["Resource"]).endswith(':stream/voice-live*/*"]]}')


def test_the_stream_key_is_usable_only_through_kinesis_video_streams(connect):
    decrypt = statements(connect)["DecryptCallStreams"]
    assert decrypt["Action"] == "kms:Decrypt"
    assert "Fn::ImportValue" in json.dumps(decrypt["Resource"]) or "arn:aws:kms" in json.dumps(decrypt["Resource"])
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "kinesisvideo.us-east-1.amazonaws.com"}}


def test_every_decrypt_of_a_key_in_the_connect_stack_goes_through_a_named_service(connect):
    """The data key is the stream key when connect.stream_kms_key_arn is unset (this variant): one unconditioned
    kms:Decrypt on it (CDK's queue grants add one) would make DecryptCallStreams' condition moot."""
    decrypts = [s for s in all_statements(connect) if {"kms:Decrypt", "kms:*"} & set(_actions(s))]
    assert sorted(s["Sid"] for s in decrypts) == ["DecryptCallStreams", "DecryptCalls", "EncryptCalls", "UseTableKey"]
    vias = {s["Sid"]: s["Condition"]["StringEquals"]["kms:ViaService"] for s in decrypts}
    assert vias == {"DecryptCallStreams": "kinesisvideo.us-east-1.amazonaws.com",
                    "DecryptCalls": "sqs.us-east-1.amazonaws.com", "EncryptCalls": "sqs.us-east-1.amazonaws.com",
                    "UseTableKey": "dynamodb.us-east-1.amazonaws.com"}
    consume = statements(connect)["ConsumeCalls"]
    (queue,) = [name for name, r in resources(connect, "AWS::SQS::Queue").items() if "RedrivePolicy" in r["Properties"]]
    assert consume["Resource"] == {"Fn::GetAtt": [queue, "Arn"]}


def _actions(statement: dict) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def test_events_go_to_this_bus_only_and_the_endpoint_is_the_voxtral_one(connect):
    put = [s for s in all_statements(connect) if "events:PutEvents" in json.dumps(s["Action"])]
    (bus,) = resources(connect, "AWS::Events::EventBus")
    assert [s["Resource"] for s in put] == [{"Fn::GetAtt": [bus, "Arn"]}]
    invoke = statements(connect)["InvokeVoxtral"]
    assert invoke["Action"] == "sagemaker:InvokeEndpointWithBidirectionalStream"
    assert json.dumps(invoke["Resource"]).endswith(':endpoint/voxtral-realtime"]]}')


def test_connect_may_invoke_the_start_function_for_this_instance_only(connect):
    (permission,) = resources(connect, "AWS::Lambda::Permission").values()
    assert permission["Properties"]["Principal"] == "connect.amazonaws.com"
    assert permission["Properties"]["SourceArn"] == CONNECT_INSTANCE
    assert permission["Properties"]["SourceAccount"] == {"Ref": "AWS::AccountId"}


def test_the_storage_config_keeps_audio_under_the_prefix_encrypted_and_long_enough_to_resume(connect):
    (config,) = resources(connect, "AWS::Connect::InstanceStorageConfig").values()
    props = config["Properties"]
    assert props["ResourceType"] == "MEDIA_STREAMS" and props["StorageType"] == "KINESIS_VIDEO_STREAM"
    kvs = props["KinesisVideoStreamConfig"]
    assert kvs["Prefix"] == "voice-live" and kvs["RetentionPeriodHours"] == 24
    assert kvs["EncryptionConfig"]["EncryptionType"] == "KMS" and kvs["EncryptionConfig"]["KeyId"]


def test_the_example_flow_invokes_the_start_function_and_is_within_the_content_limit(connect):
    (flow,) = resources(connect, "AWS::Connect::ContactFlow").values()
    (function,) = [name for name, f in resources(connect, "AWS::Lambda::Function").items()
                   if f["Properties"].get("Handler") == "index.handler" and "StartFunction" in name]
    body, variables = flow["Properties"]["Content"]["Fn::Sub"]
    assert variables == {"StartFunctionArn": {"Fn::GetAtt": [function, "Arn"]}, "QueueArn": CONNECT_QUEUE}
    content = json.loads(body)
    (target,) = [a for a in content["Actions"] if a["Type"] == "UpdateContactTargetQueue"]
    assert target["Parameters"] == {"QueueId": "${QueueArn}"}
    invoke = [a for a in content["Actions"] if a["Type"] == "InvokeLambdaFunction"]
    assert invoke[0]["Parameters"]["LambdaFunctionARN"] == "${StartFunctionArn}"
    assert len(body) <= 256000
    association = resources(connect, "AWS::Connect::IntegrationAssociation")
    assert [a["Properties"]["IntegrationType"] for a in association.values()] == ["LAMBDA_FUNCTION"]


def test_the_outputs_have_the_names_docs_connect_md_gives_them(connect):
    """docs/connect.md tells a user to read the stack outputs StartFunctionArn, TranscriptsBus and TranscriptsTable."""
    docs = (ROOT / "docs" / "connect.md").read_text()
    outputs = connect["Outputs"]
    for name in ("StartFunctionArn", "TranscriptsBus", "TranscriptsTable"):
        assert f"`{name}`" in docs and name in outputs, (name, sorted(outputs))
    assert outputs["TranscriptsTable"]["Value"] == {"Ref": next(iter(resources(connect, "AWS::DynamoDB::Table")))}
    assert outputs["TranscriptsBus"]["Value"] == {"Ref": next(iter(resources(connect, "AWS::Events::EventBus")))}


def test_transcripts_expire_and_are_removed_with_the_stack_unless_retained(connect):
    (table,) = resources(connect, "AWS::DynamoDB::Table").values()
    assert table["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "ExpiresAt", "Enabled": True}
    assert table["DeletionPolicy"] == "Delete" and table["UpdateReplacePolicy"] == "Delete"
    for queue in resources(connect, "AWS::SQS::Queue").values():
        assert queue["DeletionPolicy"] == "Delete"


def test_the_consumers_scale_on_calls_per_task_and_alarm_on_the_shared_topic(connect):
    (policy,) = resources(connect, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    spec = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert spec["CustomizedMetricSpecification"]["MetricName"] == "ActiveCalls"
    assert spec["TargetValue"] == 35.0  # 70 % of connect.calls_per_task (50)
    alarms = {a["Properties"]["AlarmName"]: a for a in resources(connect, "AWS::CloudWatch::Alarm").values()}
    assert sorted(alarms) == ["RealtimeVoice-connect-behind-real-time", "RealtimeVoice-connect-calls-dropped",
                              "RealtimeVoice-connect-calls-failed", "RealtimeVoice-connect-calls-untranscribed",
                              "RealtimeVoice-connect-calls-waiting"]
    waiting = alarms["RealtimeVoice-connect-calls-waiting"]["Properties"]
    assert (waiting["MetricName"], waiting["Statistic"], waiting["EvaluationPeriods"], waiting["Threshold"]) == (
        "CallsWaiting", "Maximum", 5, 0)
    untranscribed = alarms["RealtimeVoice-connect-calls-untranscribed"]["Properties"]
    assert (untranscribed["MetricName"], untranscribed["Statistic"], untranscribed["Threshold"]) == (
        "CallsUntranscribed", "Sum", 0)
    for alarm in alarms.values():
        assert "Fn::ImportValue" in json.dumps(alarm["Properties"]["AlarmActions"])


def test_in_vpc_mode_the_consumers_run_in_the_private_subnets_without_public_addresses(synthesized_connect_vpc):
    connect = synthesized_connect_vpc.template("Connect")
    (service,) = resources(connect, "AWS::ECS::Service").values()
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    assert network["Subnets"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert resources(connect, "AWS::EC2::VPC") == {}
    # Kinesis Video Streams' one interface endpoint (control plane and GetMedia), private DNS on as it requires,
    # in the consumers' subnets and open on 443 to the consumers only.
    (endpoint,) = resources(connect, "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["ServiceName"] == "com.amazonaws.us-east-1.kinesisvideo"
    assert endpoint["Properties"]["PrivateDnsEnabled"] is True and endpoint["Properties"]["VpcEndpointType"] == "Interface"
    assert endpoint["Properties"]["SubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    ingress = [r["Properties"] for r in resources(connect, "AWS::EC2::SecurityGroupIngress").values()]
    assert [(i["FromPort"], i["ToPort"]) for i in ingress] == [(443, 443)]
    assert ingress[0]["SourceSecurityGroupId"]["Fn::GetAtt"][0] in {
        g["Fn::GetAtt"][0] for g in network["SecurityGroups"]}


# -- Connect in the isolated VPC the app makes (variant connect_own_vpc) ----------------------------------------------

#: boto3 client name -> the VPC endpoint service (``com.amazonaws.REGION.<suffix>``) its calls go to.
CLIENT_ENDPOINT = {"sqs": "sqs", "events": "events", "dynamodb": "dynamodb", "kinesisvideo": "kinesisvideo",
                   "kinesis-video-media": "kinesisvideo", "secretsmanager": "secretsmanager"}
#: What a Fargate task (platform 1.4.0+) calls before the code runs and beside it (Amazon ECR user guide, "Amazon ECR
#: interface VPC endpoints", considerations for Fargate: ecr.api, ecr.dkr, the S3 gateway; logs for awslogs), and
#: the SageMaker runtime the consumers stream to (voicectl.clients.sagemaker_stream).
PLATFORM_ENDPOINTS = {"ecr.api", "ecr.dkr", "s3", "logs", "sagemaker.runtime"}


@pytest.fixture(scope="module")
def own_vpc(app_variant):
    return app_variant("connect_own_vpc")


def endpoint_services(synthesized) -> list[tuple[str, str, dict]]:
    """``(service suffix, stack, properties)`` of every VPC endpoint of the app (ServiceName is a literal or a join
    of ``com.amazonaws.``, the region, and the suffix)."""
    found = []
    for stack_name, template in synthesized.templates.items():
        for endpoint in resources(template, "AWS::EC2::VPCEndpoint").values():
            name = endpoint["Properties"]["ServiceName"]
            text = name if isinstance(name, str) else "".join(
                part if isinstance(part, str) else "REGION" for part in name["Fn::Join"][1])
            found.append((text.split(".", 3)[3], stack_name.rsplit("-", 1)[1], endpoint["Properties"]))
    return found


def consumer_clients() -> set[str]:
    """The boto3 clients the consumer's code makes (voicectl/connect/*.py): a new one without an endpoint fails."""
    source = "".join(path.read_text() for path in (ROOT / "voicectl" / "connect").glob("*.py"))
    return set(re.findall(r"\.client\(\s*\"([a-z-]+)\"", source))


def test_in_the_apps_own_vpc_every_service_the_consumers_call_has_one_endpoint(own_vpc):
    clients = consumer_clients()
    assert {"sqs", "events", "dynamodb", "kinesisvideo", "kinesis-video-media"} <= clients
    # Secrets Manager: the ECS target's token only (service.py); this variant streams to SageMaker.
    needed = {CLIENT_ENDPOINT[client] for client in clients - {"secretsmanager"}} | PLATFORM_ENDPOINTS
    services = [service for service, _stack, _props in endpoint_services(own_vpc)]
    assert needed <= set(services), needed - set(services)
    assert sorted(services) == sorted(set(services)), "one endpoint per service in the VPC"
    by_service = {service: (stack, props) for service, stack, props in endpoint_services(own_vpc)}
    assert by_service["kinesisvideo"][0] == "Connect"  # the Connect construct owns it (connect.kvs_vpc_endpoint)
    for service in ("dynamodb", "s3"):
        assert by_service[service][1]["VpcEndpointType"] == "Gateway"
    for service in needed - {"dynamodb", "s3"}:
        props = by_service[service][1]
        assert (props["VpcEndpointType"], props["PrivateDnsEnabled"]) == ("Interface", True), service


def test_the_dynamodb_gateway_is_on_the_route_tables_of_the_consumers_subnets(own_vpc):
    foundation = own_vpc.template("Foundation")
    (gateway,) = [p for service, _s, p in endpoint_services(own_vpc) if service == "dynamodb"]
    tables = {r["Properties"]["RouteTableId"]["Ref"]
              for r in resources(foundation, "AWS::EC2::SubnetRouteTableAssociation").values()}
    assert {table["Ref"] for table in gateway["RouteTableIds"]} == tables and len(tables) == 2


def test_the_consumers_endpoints_accept_https_from_the_vpc_only(own_vpc):
    foundation = own_vpc.template("Foundation")
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (connect_group,) = [name for name in groups if name.startswith("NetworkConnectEndpointsSecurityGroup")]
    props = groups[connect_group]["Properties"]
    assert [(r["CidrIp"], r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in props["SecurityGroupIngress"]] == [
        ("10.80.0.0/16", "tcp", 443, 443)]
    # allow_all_outbound=False: CDK's placeholder rule that matches no traffic.
    assert [r["CidrIp"] for r in props["SecurityGroupEgress"]] == ["255.255.255.255/32"]
    users = {service for service, _s, p in endpoint_services(own_vpc)
             if {"Fn::GetAtt": [connect_group, "GroupId"]} in p.get("SecurityGroupIds", [])}
    assert users == {"sqs", "events", "logs"}
    (registry,) = [g["Properties"] for name, g in groups.items() if name.startswith("NetworkRegistryEndpoints")]
    assert ("10.80.0.0/16", 443) in {(r.get("CidrIp"), r["FromPort"]) for r in registry.get("SecurityGroupIngress", [])}


def test_in_the_apps_own_vpc_the_consumers_run_in_its_isolated_subnets(own_vpc):
    connect = own_vpc.template("Connect")
    (service,) = resources(connect, "AWS::ECS::Service").values()
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    assert len(network["Subnets"]) == 2
    assert all("Fn::ImportValue" in json.dumps(subnet) for subnet in network["Subnets"])  # the Foundation's subnets
    assert resources(connect, "AWS::EC2::VPC") == {}


def test_in_the_apps_own_vpc_fargate_pulls_through_the_endpoints_and_logs_with_awslogs(own_vpc):
    """Fargate platform version 1.4.0 or later pulls ECR images through the task's network interface, so through the
    VPC's ecr.api, ecr.dkr and S3 gateway endpoints (Amazon ECS developer guide, "Migrating to Linux platform version
    1.4.0"); absent, PlatformVersion is LATEST (1.4.0 and later). The log driver is awslogs, served by ``logs``."""
    connect = own_vpc.template("Connect")
    (service,) = resources(connect, "AWS::ECS::Service").values()
    version = service["Properties"].get("PlatformVersion", "LATEST")
    assert version == "LATEST" or tuple(map(int, version.split("."))) >= (1, 4, 0)
    (task,) = resources(connect, "AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"


@pytest.mark.parametrize("variant", ["default", "vpc", "vpc_existing", "ecs_vpc"])
def test_without_connect_the_network_makes_none_of_the_consumers_endpoints(variant, app_variant):
    services = {service for service, _s, _p in endpoint_services(app_variant(variant))}
    assert not {"sqs", "events", "dynamodb", "kinesisvideo"} & services


@pytest.mark.parametrize("fixture", ["synthesized_connect", "synthesized_connect_vpc", "own_vpc",
                                     "connect_ecs"])
def test_cfn_lint_finds_nothing_in_the_connect_stack(fixture, request, app_variant):
    synthesized = app_variant(fixture) if fixture == "connect_ecs" else request.getfixturevalue(fixture)
    template = next(synthesized.outdir.glob("*-Connect.template.json"))
    findings = cfn_lint(template)
    assert findings == [], json.dumps(findings)[:3000]


@pytest.mark.parametrize("overrides, expected", [
    ({"connect.instance_arn": None}, "connect.instance_arn=null: must name the Amazon Connect instance"),
    ({"connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-west-1")}, "must be in the app's region"),
    ({"connect.instance_arn": "arn:aws:connect:us-east-1:123:instance/x"}, "must be an Amazon Connect instance ARN"),
    ({"connect.stream_kms_key_arn": "alias/connect"},
     "connect.stream_kms_key_arn='alias/connect': must be a KMS key ARN"),
    ({"connect.stream_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555"},
     "the key is in eu-west-1 but the stack deploys to us-east-1"),
    ({"connect.alarm_millis_behind": -1}, "connect.alarm_millis_behind=-1: must be at least 1"),
    ({"connect.retention_hours": 0}, "0 keeps no data"),
    ({"connect.queue_arn": None}, "connect.queue_arn=null: must name the queue the example flow transfers calls to"),
    ({"connect.queue_arn": CONNECT_INSTANCE}, "must be an Amazon Connect queue ARN"),
    ({"connect.queue_arn": CONNECT_QUEUE.replace("11111111-", "22222222-")}, "must be a queue of the instance"),
    ({"connect.cpu": 1000}, "connect.cpu=1000: must be Fargate task CPU units, one of 256, 512, 1024, 2048"),
    ({"connect.memory_mib": 1024}, "connect.memory_mib=1024: must be a memory Fargate pairs with connect.cpu=1024: "
                                   "2048, 3072, 4096, 5120, 6144, 7168, 8192 MiB"),
    ({"connect.cpu": 8192, "connect.memory_mib": 18432}, "pairs with connect.cpu=8192: 16384-61440 in steps of 4096 MiB"),
    ({"connect.stream_prefix": "bad prefix"}, "must be 1-128 of [a-zA-Z0-9_.-]"),
    ({"encryption.create_key": False}, "needs a KMS key (EncryptionConfig is required)"),
    ({"network.mode": "vpc", "connect.kvs_vpc_endpoint": False},
     "connect.kvs_vpc_endpoint=false: must be true with network.mode=vpc and no network.vpc_id"),
    ({"network.mode": "vpc", "network.create_endpoints": False}, "keep network.create_endpoints=true"),
    ({"network.mode": "vpc", "region": "eu-north-1",
      "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
      "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1")},
     "name an existing VPC whose subnets have egress (network.vpc_id)"),
    ({"voxtral.enabled": False}, "needs voxtral.enabled=true"),
    ({**CONNECT_VPC, "region": "eu-north-1", "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
      "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1")},
     "Kinesis Video Streams has no interface VPC endpoint in eu-north-1 (it has one in af-south-1"),
])
def test_connect_settings_are_refused_with_the_rule_they_break(overrides, expected):
    with pytest.raises(SettingsError) as raised:
        load_settings({**cdk_json_context(), **CONNECT, **overrides})
    assert expected in str(raised.value)


def test_the_shared_operations_dashboard_has_a_connect_row_with_its_alarms(synthesized_connect):
    operations = synthesized_connect.template("Operations")
    (dashboard,) = resources(operations, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "## Amazon Connect live transcription" in body
    for metric in ("ActiveCalls", "MillisBehindNow", "CallsFailed", "CallsWaiting", "CallsUntranscribed"):
        assert f'\\"VoiceConnect\\",\\"{metric}\\"' in body
    connect = synthesized_connect.template("Connect")
    names = sorted(a["Properties"]["AlarmName"] for a in resources(connect, "AWS::CloudWatch::Alarm").values())
    for name in names:  # the status widget shows every Connect alarm, by the name the Connect stack gives it
        assert f":alarm:{name}" in body
    assert "Fn::ImportValue" not in body  # nothing of the Connect stack: Operations deploys first


def _key_policy_sids(app) -> dict[str, dict]:
    (key,) = [r for r in app.template("Foundation")["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    return {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}


def test_the_data_key_lets_eventbridge_encrypt_the_transcripts_bus(synthesized_connect, synthesized_vpc):
    """The bus is encrypted with the data key (KmsKeyIdentifier), and EventBridge needs kms:DescribeKey,
    kms:GenerateDataKey and kms:Decrypt in the key policy for that (EventBridge user guide, "Authorizing EventBridge
    to use a customer managed key"), limited to the account's buses; a key without Connect does not name EventBridge."""
    (bus,) = [r for r in synthesized_connect.template("Connect")["Resources"].values()
              if r["Type"] == "AWS::Events::EventBus"]
    assert "KmsKeyIdentifier" in bus["Properties"]
    statement = _key_policy_sids(synthesized_connect)["EventBridgeEncryptBuses"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"]
    assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert "aws:SourceAccount" in statement["Condition"]["StringEquals"]
    assert "aws:SourceArn" in statement["Condition"]["ArnLike"]
    assert "EventBridgeEncryptBuses" not in _key_policy_sids(synthesized_vpc)


def test_on_ecs_the_consumers_read_the_token_and_decrypt_its_key_only_through_secrets_manager(app_variant):
    """The ECS service's token secret is encrypted with the app's key: GetSecretValue needs kms:Decrypt on it for the
    caller (Secrets Manager user guide, "Permissions for the KMS key"), through Secrets Manager and for that secret
    only (the encryption context Secrets Manager passes is the secret's ARN)."""
    template = app_variant("connect_ecs").template("Connect")
    statements = {statement.get("Sid"): statement for resource in template["Resources"].values()
                  if resource["Type"] == "AWS::IAM::Policy"
                  for statement in resource["Properties"]["PolicyDocument"]["Statement"]}
    read, decrypt = statements["ReadBridgeToken"], statements["DecryptBridgeToken"]
    assert read["Action"] == "secretsmanager:GetSecretValue"
    assert decrypt["Action"] == "kms:Decrypt" and decrypt["Effect"] == "Allow"
    condition = decrypt["Condition"]["StringEquals"]
    assert condition["kms:EncryptionContext:SecretARN"] == read["Resource"]
    assert "secretsmanager" in json.dumps(condition["kms:ViaService"])
    assert decrypt["Resource"] != "*"
