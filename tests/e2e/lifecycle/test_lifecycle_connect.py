"""The Connect stack's lifecycle with the pinned CDK CLI against moto's server: deploy
(connect.enabled with the SageMaker target), update (another consumer image and calls per task),
destroy, leaving nothing behind.

moto creates the queue, table, bus, function, ECS cluster, task definitions and service; what it
does not model (AWS::Connect::* resources, alarms, dashboards, Application Auto Scaling) is asserted
at template level in tests/app/test_connect_stack.py. The consumer image is given by URI (no Docker
engine here).
"""

from __future__ import annotations

import pytest

from tests.conftest import CONNECT_INSTANCE
from tests.e2e.lifecycle.lifecycle_cdk import Phases, bootstrap_target, run_cdk, synthesize_assembly
from tests.e2e.lifecycle.lifecycle_moto import ACCOUNT, REGION, moto_server
from tests.e2e.lifecycle.lifecycle_resources import Aws, read_stack
from tests.e2e.lifecycle.test_lifecycle_deploy import BOOTSTRAP_STACK, IMAGE_URI, load_templates

pytestmark = [
    pytest.mark.lifecycle,
    pytest.mark.starts_first,  # a minute or more (tests/e2e/conftest.py)
    pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning"),
]

STACK = "RealtimeVoice-Connect"
CONSUMER_1 = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/voice-connect-consumer:1"
CONSUMER_2 = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/voice-connect-consumer:2"


def test_connect_stack_deploy_update_destroy(tmp_path):
    phases = Phases("Connect lifecycle")
    cdk_log = tmp_path / "cdk.log"
    first = {
        "voxtral.image_uri": IMAGE_URI,
        "sonic.enabled": "false",
        "connect.enabled": "true",
        "connect.instance_arn": CONNECT_INSTANCE,
        "connect.image_uri": CONSUMER_1,
    }
    second = {**first, "connect.image_uri": CONSUMER_2, "connect.calls_per_task": "40"}
    with moto_server() as server:
        aws = Aws(server.url)
        assembly_1, assembly_2 = tmp_path / "cdk.out.1", tmp_path / "cdk.out.2"
        with phases("synth"):
            synthesize_assembly(assembly_1, first, server.url)
        with phases("bootstrap"):
            run_cdk(
                ["bootstrap", bootstrap_target(), "--app", str(assembly_1)], server.url, cdk_log
            )
        with phases("deploy"):
            run_cdk(
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_1)],
                server.url,
                cdk_log,
            )
        templates = load_templates(assembly_1)
        assert STACK in templates
        stack = read_stack(aws, STACK, templates[STACK])
        task = aws.ecs.describe_task_definition(
            taskDefinition=stack.one("AWS::ECS::TaskDefinition").physical_id
        )["taskDefinition"]
        (container,) = task["containerDefinitions"]
        assert container["image"] == CONSUMER_1
        assert {e["name"]: e["value"] for e in container["environment"]}["MAX_CALLS"] == "50"
        table_output = stack.outputs["TranscriptsTable"]
        assert table_output == stack.one("AWS::DynamoDB::Table").physical_id

        with phases("synth (update)"):
            synthesize_assembly(assembly_2, second, server.url)
        with phases("deploy (update)"):
            run_cdk(
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_2)],
                server.url,
                cdk_log,
            )
        updated = read_stack(aws, STACK, load_templates(assembly_2)[STACK])
        task = aws.ecs.describe_task_definition(
            taskDefinition=updated.one("AWS::ECS::TaskDefinition").physical_id
        )["taskDefinition"]
        (container,) = task["containerDefinitions"]
        assert container["image"] == CONSUMER_2
        assert {e["name"]: e["value"] for e in container["environment"]}["MAX_CALLS"] == "40"

        with phases("destroy"):
            run_cdk(["destroy", "--all", "--force", "--app", str(assembly_2)], server.url, cdk_log)
        assert [s["StackName"] for s in aws.cloudformation.describe_stacks()["Stacks"]] == [
            BOOTSTRAP_STACK
        ]
        left = {
            "tables": aws.dynamodb.list_tables()["TableNames"],
            "queues": aws.sqs.list_queues().get("QueueUrls", []),
            "buses": [
                b["Name"]
                for b in aws.events.list_event_buses()["EventBuses"]
                if b["Name"] != "default"
            ],
            "functions": [f["FunctionName"] for f in aws.lambda_.list_functions()["Functions"]],
            "log groups": [g["logGroupName"] for g in aws.logs.describe_log_groups()["logGroups"]],
        }
        assert {what: items for what, items in left.items() if items} == {}
    phases.report()
