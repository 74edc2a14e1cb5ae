"""The developer guides' rules (tools/cfn_rules/guide_rules.py): each fails on a template
written to break it and holds on the same template mended."""

from __future__ import annotations

import pytest

from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import guide_rules as gr


def endpoint(kind: str, value, count=1) -> dict:
    return {
        "Resources": {
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "ProductionVariants": [{"VariantName": "v", "InitialInstanceCount": count}]
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                    "DeploymentConfig": {
                        "RollingUpdatePolicy": {
                            "MaximumBatchSize": {"Type": kind, "Value": value},
                            "WaitIntervalInSeconds": 600,
                        }
                    },
                },
            },
        }
    }


def found(tpl) -> list[str]:
    return [message for _, message in gr.RollingUpdateBatchSize().findings(tpl)]


@pytest.mark.parametrize(
    "kind, value, count",
    [("INSTANCE_COUNT", 1, 1), ("CAPACITY_PERCENT", 25, 4), ("CAPACITY_PERCENT", 50, 2)],
)
def test_a_batch_of_at_least_one_instance_holds(kind, value, count):
    assert found(endpoint(kind, value, count)) == []


def test_a_percent_below_one_instance_asks_for_an_instance_count():
    assert found(endpoint("CAPACITY_PERCENT", 25, 1)) == [
        "25 % of 1 instance(s) is less than one instance (rounding unconfirmed): use "
        "INSTANCE_COUNT 1"
    ]


def test_a_percent_outside_5_to_50_and_a_count_below_1_fail():
    assert found(endpoint("CAPACITY_PERCENT", 60, 4)) == ["60 % is outside 5-50 %"]
    assert found(endpoint("INSTANCE_COUNT", 0)) == ["a batch of 0 is below the minimum 1"]


def rule_found(rule, tpl) -> list[str]:
    return [message for _, message in rule().findings(tpl)]


def res(kind: str, **props) -> dict:
    return {"Type": kind, "Properties": props}


def test_a_custom_target_tracking_metric_names_its_dimensions():
    custom = {
        "Namespace": "VoiceConnect",
        "MetricName": "ActiveCalls",
        "Statistic": "Average",
        "Dimensions": [{"Name": "Deployment", "Value": "RealtimeVoice"}],
    }
    tpl = {
        "Resources": {
            "P": res(
                "AWS::ApplicationAutoScaling::ScalingPolicy",
                PolicyType="TargetTrackingScaling",
                TargetTrackingScalingPolicyConfiguration={
                    "CustomizedMetricSpecification": custom,
                    "TargetValue": 3,
                },
            )
        }
    }
    assert rule_found(gr.TargetTrackingMetricIsTheTargets, tpl) == []
    del custom["Dimensions"]
    assert rule_found(gr.TargetTrackingMetricIsTheTargets, tpl) == [
        "VoiceConnect/ActiveCalls has no dimensions: every writer of it counts, not only this "
        "target's capacity"
    ]


def fargate(**props) -> dict:
    return {
        "Resources": {
            "T": res(
                "AWS::ECS::TaskDefinition",
                **{
                    "RequiresCompatibilities": ["FARGATE"],
                    "NetworkMode": "awsvpc",
                    "Cpu": "1024",
                    "Memory": "2048",
                    "ContainerDefinitions": [{"Name": "c"}],
                    **props,
                },
            )
        }
    }


def test_a_fargate_task_is_awsvpc_with_a_fargate_cpu_memory_pair_and_no_gpu():
    assert rule_found(gr.FargateTaskDefinition, fargate()) == []
    assert rule_found(gr.FargateTaskDefinition, fargate(NetworkMode="bridge")) == [
        "a Fargate task needs awsvpc, not bridge"
    ]
    assert rule_found(gr.FargateTaskDefinition, fargate(Memory="1024")) == [
        "1024 CPU units and 1024 MiB are not a Fargate pair"
    ]
    gpu = fargate(
        ContainerDefinitions=[
            {"Name": "c", "ResourceRequirements": [{"Type": "GPU", "Value": "1"}]}
        ]
    )
    assert rule_found(gr.FargateTaskDefinition, gpu) == ["Fargate does not support GPUs"]


def queues(source: dict, dlq: dict, count=5) -> dict:
    return {
        "Resources": {
            "Dlq": res("AWS::SQS::Queue", **dlq),
            "Q": res(
                "AWS::SQS::Queue",
                RedrivePolicy={
                    "deadLetterTargetArn": {"Fn::GetAtt": ["Dlq", "Arn"]},
                    "maxReceiveCount": count,
                },
                **source,
            ),
        }
    }


def test_a_dead_letter_queue_is_of_the_same_kind_and_keeps_messages_longer():
    assert (
        rule_found(
            gr.QueueRedrive,
            queues({"MessageRetentionPeriod": 86400}, {"MessageRetentionPeriod": 1209600}),
        )
        == []
    )
    assert rule_found(
        gr.QueueRedrive,
        queues({"MessageRetentionPeriod": 1209600}, {"MessageRetentionPeriod": 86400}),
    ) == [
        "Dlq keeps messages 86400 s, not longer than Q's 1209600 s: a message moved late expires "
        "there at once"
    ]
    assert rule_found(
        gr.QueueRedrive, queues({"FifoQueue": True, "MessageRetentionPeriod": 60}, {})
    ) == ["Q and its dead-letter queue Dlq are not both standard or both FIFO"]
    assert rule_found(gr.QueueRedrive, queues({"MessageRetentionPeriod": 60}, {}, count=0)) == [
        "maxReceiveCount 0 is outside 1-1000"
    ]


def test_a_key_policy_is_at_most_32_kb():
    statement = {
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
        "Action": "kms:*",
        "Resource": "*",
        "Sid": "x" * 100,
    }
    tpl = {"Resources": {"K": res("AWS::KMS::Key", KeyPolicy={"Statement": [statement] * 10})}}
    assert rule_found(gr.KeyPolicySize, tpl) == []
    tpl["Resources"]["K"]["Properties"]["KeyPolicy"]["Statement"] = [statement] * 200
    (message,) = rule_found(gr.KeyPolicySize, tpl)
    assert message.startswith("the key policy is ") and message.endswith(" bytes, over 32 KB")


def test_a_contact_flow_is_at_most_256000_characters():
    tpl = {
        "Resources": {
            "F": res("AWS::Connect::ContactFlow", Content={"Fn::Sub": ["x" * 256000, {}]})
        }
    }
    assert rule_found(gr.ContactFlowContent, tpl) == []
    tpl["Resources"]["F"]["Properties"]["Content"] = "x" * 256001
    assert rule_found(gr.ContactFlowContent, tpl) == ["256001 characters, not 1-256000"]
