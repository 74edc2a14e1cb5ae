"""The <prefix>-Connect stack's template (connect.enabled): least privilege, the Connect resources
as the references require, removal policies, the consumers' network in both network modes. Tests
that read this stack together with another are in test_cross_stack.py; cfn-lint and cdk-nag over
each variant in test_lint.py; settings refused before a synth in test_settings_app.py."""

from __future__ import annotations

import json

import pytest

from tests.app.kit import fixture_own_vpc  # noqa: F401 (fixtures)
from tests.conftest import CONNECT_INSTANCE, CONNECT_QUEUE, ROOT

# --- The Connect stack ---------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references
# require, removal policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth
# and fails it on any finding).


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def all_statements(template: dict) -> list[dict]:
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def statements(template: dict) -> dict[str, dict]:
    return {
        statement["Sid"]: statement for statement in all_statements(template) if "Sid" in statement
    }


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
    assert "Fn::ImportValue" in json.dumps(decrypt["Resource"]) or "arn:aws:kms" in json.dumps(
        decrypt["Resource"]
    )
    assert decrypt["Condition"] == {
        "StringEquals": {"kms:ViaService": "kinesisvideo.us-east-1.amazonaws.com"}
    }


def test_every_decrypt_of_a_key_in_the_connect_stack_goes_through_a_named_service(connect):
    """The data key is the stream key when connect.stream_kms_key_arn is unset (this variant): one
    unconditioned kms:Decrypt on it (CDK's queue grants add one) would make DecryptCallStreams'
    condition moot."""
    decrypts = [s for s in all_statements(connect) if {"kms:Decrypt", "kms:*"} & set(_actions(s))]
    assert sorted(s["Sid"] for s in decrypts) == [
        "DecryptCallStreams",
        "DecryptCalls",
        "EncryptCalls",
        "UseTableKey",
    ]
    vias = {s["Sid"]: s["Condition"]["StringEquals"]["kms:ViaService"] for s in decrypts}
    assert vias == {
        "DecryptCallStreams": "kinesisvideo.us-east-1.amazonaws.com",
        "DecryptCalls": "sqs.us-east-1.amazonaws.com",
        "EncryptCalls": "sqs.us-east-1.amazonaws.com",
        "UseTableKey": "dynamodb.us-east-1.amazonaws.com",
    }
    consume = statements(connect)["ConsumeCalls"]
    (queue,) = [
        name
        for name, r in resources(connect, "AWS::SQS::Queue").items()
        if "RedrivePolicy" in r["Properties"]
    ]
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
    # aws:SourceAccount is the instance's account (the source), named by its ARN.
    assert permission["Properties"]["SourceAccount"] == CONNECT_INSTANCE.split(":")[4]


def test_the_example_flow_waits_for_the_function_association(connect):
    """'Before you can use an AWS Lambda function in a flow, you must add it to your Amazon Connect
    instance'."""
    (flow,) = resources(connect, "AWS::Connect::ContactFlow").values()
    (association,) = resources(connect, "AWS::Connect::IntegrationAssociation")
    assert association in flow.get("DependsOn", [])


def test_the_encrypted_bus_has_an_encrypted_standard_dead_letter_queue(connect):
    """EventBridge strongly recommends a DLQ for a bus under a customer managed key; the DLQ is a
    standard queue with a policy that lets EventBridge send to it from this bus only. It is
    encrypted by SQS (SSE-SQS), not with the bus's key: it takes the events of 'the specified
    customer managed key being disabled or missing', which would refuse a queue under that key
    too."""
    (bus,) = resources(connect, "AWS::Events::EventBus").values()
    assert "KmsKeyIdentifier" in bus["Properties"]
    target = bus["Properties"]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    queue = resources(connect, "AWS::SQS::Queue")[target]["Properties"]
    assert queue.get("SqsManagedSseEnabled") is True and "KmsMasterKeyId" not in queue
    assert "FifoQueue" not in queue
    sends = [
        s
        for p in resources(connect, "AWS::SQS::QueuePolicy").values()
        if target in json.dumps(p["Properties"]["Queues"])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
    ]
    assert [(s["Principal"], s["Action"]) for s in sends] == [
        ({"Service": "events.amazonaws.com"}, "sqs:SendMessage")
    ]
    assert (
        json.dumps(sends[0]["Condition"]).count(
            next(iter(resources(connect, "AWS::Events::EventBus")))
        )
        == 1
    )


def test_the_storage_config_keeps_audio_under_the_prefix_encrypted_and_long_enough_to_resume(
    connect,
):
    (config,) = resources(connect, "AWS::Connect::InstanceStorageConfig").values()
    props = config["Properties"]
    assert (
        props["ResourceType"] == "MEDIA_STREAMS" and props["StorageType"] == "KINESIS_VIDEO_STREAM"
    )
    kvs = props["KinesisVideoStreamConfig"]
    assert kvs["Prefix"] == "voice-live" and kvs["RetentionPeriodHours"] == 24
    assert kvs["EncryptionConfig"]["EncryptionType"] == "KMS" and kvs["EncryptionConfig"]["KeyId"]


def test_the_example_flow_invokes_the_start_function_and_is_within_the_content_limit(connect):
    (flow,) = resources(connect, "AWS::Connect::ContactFlow").values()
    (function,) = [
        name
        for name, f in resources(connect, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") == "index.handler" and "StartFunction" in name
    ]
    body, variables = flow["Properties"]["Content"]["Fn::Sub"]
    assert variables == {
        "StartFunctionArn": {"Fn::GetAtt": [function, "Arn"]},
        "QueueArn": CONNECT_QUEUE,
    }
    content = json.loads(body)
    (target,) = [a for a in content["Actions"] if a["Type"] == "UpdateContactTargetQueue"]
    assert target["Parameters"] == {"QueueId": "${QueueArn}"}
    invoke = [a for a in content["Actions"] if a["Type"] == "InvokeLambdaFunction"]
    assert invoke[0]["Parameters"]["LambdaFunctionARN"] == "${StartFunctionArn}"
    assert len(body) <= 256000
    association = resources(connect, "AWS::Connect::IntegrationAssociation")
    assert [a["Properties"]["IntegrationType"] for a in association.values()] == ["LAMBDA_FUNCTION"]


def test_the_outputs_have_the_names_docs_connect_md_gives_them(connect):
    """docs/connect.md tells a user to read the stack outputs StartFunctionArn, TranscriptsBus and
    TranscriptsTable."""
    docs = (ROOT / "docs" / "connect.md").read_text()
    outputs = connect["Outputs"]
    for name in ("StartFunctionArn", "TranscriptsBus", "TranscriptsTable"):
        assert f"`{name}`" in docs and name in outputs, (name, sorted(outputs))
    assert outputs["TranscriptsTable"]["Value"] == {
        "Ref": next(iter(resources(connect, "AWS::DynamoDB::Table")))
    }
    assert outputs["TranscriptsBus"]["Value"] == {
        "Ref": next(iter(resources(connect, "AWS::Events::EventBus")))
    }


def test_transcripts_expire_and_are_removed_with_the_stack_unless_retained(connect):
    (table,) = resources(connect, "AWS::DynamoDB::Table").values()
    assert table["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": "ExpiresAt",
        "Enabled": True,
    }
    assert table["DeletionPolicy"] == "Delete" and table["UpdateReplacePolicy"] == "Delete"
    for queue in resources(connect, "AWS::SQS::Queue").values():
        assert queue["DeletionPolicy"] == "Delete"


def test_the_consumers_scale_on_calls_per_task_and_alarm_on_the_shared_topic(connect):
    (policy,) = resources(connect, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    spec = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert spec["CustomizedMetricSpecification"]["MetricName"] == "ActiveCalls"
    assert spec["TargetValue"] == 35.0  # 70 % of connect.calls_per_task (50)
    alarms = {
        a["Properties"]["AlarmName"]: a
        for a in resources(connect, "AWS::CloudWatch::Alarm").values()
    }
    assert sorted(alarms) == [
        "RealtimeVoice-connect-behind-real-time",
        "RealtimeVoice-connect-calls-dropped",
        "RealtimeVoice-connect-calls-failed",
        "RealtimeVoice-connect-calls-untranscribed",
        "RealtimeVoice-connect-calls-waiting",
        "RealtimeVoice-connect-transcripts-undelivered",
    ]
    waiting = alarms["RealtimeVoice-connect-calls-waiting"]["Properties"]
    assert (
        waiting["MetricName"],
        waiting["Statistic"],
        waiting["EvaluationPeriods"],
        waiting["Threshold"],
    ) == ("CallsWaiting", "Maximum", 5, 0)
    untranscribed = alarms["RealtimeVoice-connect-calls-untranscribed"]["Properties"]
    assert (
        untranscribed["MetricName"],
        untranscribed["Statistic"],
        untranscribed["Threshold"],
    ) == ("CallsUntranscribed", "Sum", 0)
    for alarm in alarms.values():
        assert "Fn::ImportValue" in json.dumps(alarm["Properties"]["AlarmActions"])


def test_in_vpc_mode_the_consumers_run_in_the_private_subnets_without_public_addresses(
    synthesized_connect_vpc,
):
    connect = synthesized_connect_vpc.template("Connect")
    (service,) = resources(connect, "AWS::ECS::Service").values()
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    assert network["Subnets"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert resources(connect, "AWS::EC2::VPC") == {}
    # Kinesis Video Streams' one interface endpoint (control plane and GetMedia), private DNS on as
    # it requires, in the consumers' subnets and open on 443 to the consumers only.
    (endpoint,) = resources(connect, "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["ServiceName"] == "com.amazonaws.us-east-1.kinesisvideo"
    assert (
        endpoint["Properties"]["PrivateDnsEnabled"] is True
        and endpoint["Properties"]["VpcEndpointType"] == "Interface"
    )
    assert endpoint["Properties"]["SubnetIds"] == [
        "subnet-0123456789abcdef0",
        "subnet-0123456789abcdef1",
    ]
    ingress = [
        r["Properties"] for r in resources(connect, "AWS::EC2::SecurityGroupIngress").values()
    ]
    assert [(i["FromPort"], i["ToPort"]) for i in ingress] == [(443, 443)]
    assert ingress[0]["SourceSecurityGroupId"]["Fn::GetAtt"][0] in {
        g["Fn::GetAtt"][0] for g in network["SecurityGroups"]
    }


# -- Connect in the isolated VPC the app makes (variant connect_own_vpc) -------------------------


def test_in_the_apps_own_vpc_the_consumers_run_in_its_isolated_subnets(own_vpc):
    connect = own_vpc.template("Connect")
    (service,) = resources(connect, "AWS::ECS::Service").values()
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    assert len(network["Subnets"]) == 2
    assert all(
        "Fn::ImportValue" in json.dumps(subnet) for subnet in network["Subnets"]
    )  # the Foundation's subnets
    assert resources(connect, "AWS::EC2::VPC") == {}


def test_in_the_apps_own_vpc_fargate_pulls_through_the_endpoints_and_logs_with_awslogs(own_vpc):
    """Fargate platform version 1.4.0 or later pulls ECR images through the task's network
    interface, so through the VPC's ecr.api, ecr.dkr and S3 gateway endpoints (Amazon ECS developer
    guide, "Migrating to Linux platform version 1.4.0"); absent, PlatformVersion is LATEST (1.4.0
    and later). The log driver is awslogs, served by ``logs``."""
    connect = own_vpc.template("Connect")
    (service,) = resources(connect, "AWS::ECS::Service").values()
    version = service["Properties"].get("PlatformVersion", "LATEST")
    assert version == "LATEST" or tuple(map(int, version.split("."))) >= (1, 4, 0)
    (task,) = resources(connect, "AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"


def _start_function(template: dict) -> dict:
    (function,) = [
        f
        for name, f in resources(template, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") == "index.handler" and "StartFunction" in name
    ]
    return function


def test_in_the_apps_own_vpc_the_start_function_environment_is_under_the_data_key(own_vpc):
    """network.mode=vpc puts the app's data under the data key (docs/private-deployment.md): the
    start function's environment (the calls queue's URL, the instance's ARN) too, the key of the
    queue it names."""
    connect = own_vpc.template("Connect")
    (calls,) = [
        queue
        for queue in resources(connect, "AWS::SQS::Queue").values()
        if "RedrivePolicy" in queue["Properties"]
    ]
    key = calls["Properties"]["KmsMasterKeyId"]
    assert "DataKey" in json.dumps(key)  # the Foundation stack's key, imported
    assert _start_function(connect)["Properties"]["KmsKeyArn"] == key


def test_the_start_function_skips_three_checkov_checks_with_sources_and_meets_the_key_one(own_vpc):
    """checkov's reserved concurrency, dead-letter queue and VPC checks are skipped beside the
    function, each with its reason and source; the environment key check (CKV_AWS_173) is met,
    not skipped."""
    function = _start_function(own_vpc.template("Connect"))
    skips = {skip["id"]: skip["comment"] for skip in function["Metadata"]["checkov"]["skip"]}
    assert sorted(skips) == ["CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"]
    assert "Configuring reserved concurrency for a function" in skips["CKV_AWS_115"]
    assert "SYNCHRONOUS" in skips["CKV_AWS_116"]
    assert "asynchronous invocations" in skips["CKV_AWS_116"]
    assert "resources in an Amazon VPC" in skips["CKV_AWS_117"]


def test_on_ecs_the_consumers_read_the_token_and_decrypt_its_key_only_through_secrets_manager(
    app_variant,
):
    """The ECS service's token secret is encrypted with the app's key: GetSecretValue needs
    kms:Decrypt on it for the caller (Secrets Manager user guide, "Permissions for the KMS key"),
    through Secrets Manager and for that secret only (the encryption context Secrets Manager passes
    is the secret's ARN)."""
    template = app_variant("connect_ecs").template("Connect")
    statements = {
        statement.get("Sid"): statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    }
    read, decrypt = statements["ReadBridgeToken"], statements["DecryptBridgeToken"]
    assert read["Action"] == "secretsmanager:GetSecretValue"
    assert decrypt["Action"] == "kms:Decrypt" and decrypt["Effect"] == "Allow"
    condition = decrypt["Condition"]["StringEquals"]
    assert condition["kms:EncryptionContext:SecretARN"] == read["Resource"]
    assert "secretsmanager" in json.dumps(condition["kms:ViaService"])
    assert decrypt["Resource"] != "*"


def test_the_consumers_metrics_carry_the_deployments_dimension_and_scaling_and_alarms_read_it(
    connect, monkeypatch, capsys
):
    """A second deployment in the same account and Region writes its own series: the task definition
    gives the consumers METRIC_DIMENSIONS, emit_metric puts them on every metric, and the scaling
    policy and the alarms on VoiceConnect metrics read exactly those dimensions (else they would see
    the sum of every deployment)."""
    from connect_consumer import service

    (task,) = resources(connect, "AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    environment = {e["Name"]: e["Value"] for e in container["Environment"]}
    dimensions = json.loads(environment["METRIC_DIMENSIONS"])
    assert dimensions == {"Deployment": "RealtimeVoice"}
    monkeypatch.setenv("METRIC_DIMENSIONS", environment["METRIC_DIMENSIONS"])
    service.emit_metric("ActiveCalls", 3)
    record = json.loads(capsys.readouterr().out)
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Deployment"]]
    assert record["Deployment"] == "RealtimeVoice"
    expected = [{"Name": "Deployment", "Value": "RealtimeVoice"}]
    (policy,) = resources(connect, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    custom = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"][
        "CustomizedMetricSpecification"
    ]
    assert (custom["Namespace"], custom["Dimensions"]) == ("VoiceConnect", expected)
    alarms = [
        a["Properties"]
        for a in resources(connect, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "VoiceConnect"
    ]
    assert len(alarms) == 4 and all(a["Dimensions"] == expected for a in alarms)


def test_the_bus_dead_letter_queue_has_an_alarm_on_the_shared_topic(connect):
    """Events in the bus's dead-letter queue are transcripts no target got: an alarm says so at the
    first one."""
    (bus,) = resources(connect, "AWS::Events::EventBus").values()
    queue = bus["Properties"]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    (alarm,) = [
        a["Properties"]
        for a in resources(connect, "AWS::CloudWatch::Alarm").values()
        if a["Properties"]["AlarmName"] == "RealtimeVoice-connect-transcripts-undelivered"
    ]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
    ]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"]


def test_an_instance_of_another_account_is_a_settings_error_before_any_construct(
    monkeypatch, tmp_path
):
    """With the CLI's credentials (CDK_DEFAULT_ACCOUNT) naming another account than
    connect.instance_arn, the app stops with one settings message (app.main prints it without a
    jsii stack trace), not a construct's ValueError."""
    from app import create_app
    from config.settings import SettingsError
    from tests.app.variants import CONNECT
    from tests.conftest import cdk_json_context

    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "210987654321")
    with pytest.raises(
        SettingsError,
        match=(
            r"connect\.instance_arn=arn:aws:connect:us-east-1:123456789012:instance/\S+: the "
            r"instance is in account 123456789012, this deployment in 210987654321; deploy the app "
            r"in the instance's account"
        ),
    ):
        create_app({**cdk_json_context(), **CONNECT}, outdir=str(tmp_path))
    # The instance's own account is accepted.
    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "123456789012")
    create_app({**cdk_json_context(), **CONNECT}, outdir=str(tmp_path))
