"""The custom resource handlers (on_event / is_complete) against a stubbed CodeBuild client."""

from __future__ import annotations

import importlib.util

import boto3
import pytest
from botocore.stub import Stubber

from tests.conftest import ROOT

HANDLER = ROOT / "services/handlers/model_staging_waiter/index.py"
PROJECT = "ModelStagingBuild-abc123"
BUILD_ID = f"{PROJECT}:4f1c2d3e-0000-4000-8000-000000000001"
PROPERTIES = {
    "ProjectName": PROJECT,
    "RepositoryId": "mistralai/Voxtral-Mini-4B-Realtime-2602",
    "Revision": "a" * 40,
    "S3Uri": "s3://models-bucket/models/voxtral/",
}


STACK_ID = (
    "arn:aws:cloudformation:us-east-1:123456789012:stack/RealtimeVoice-Voxtral/0a1b2c3d-0000-"
    "4000-8000-000000000002"
)


@pytest.fixture
def waiter(monkeypatch):
    """The handler module with stubbed CodeBuild and CloudFormation clients; yields (module,
    codebuild stubber); the CloudFormation stubber is ``module.cloudformation_stubber``. Unexpected
    calls fail the test."""
    monkeypatch.setenv("MANIFEST_NAME", "model-manifest.json")
    spec = importlib.util.spec_from_file_location("staging_waiter_index", HANDLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    credentials = {
        "region_name": "us-east-1",
        "aws_access_key_id": "x",
        "aws_secret_access_key": "x",
    }
    module._codebuild = boto3.client("codebuild", **credentials)
    module._cloudformation = boto3.client("cloudformation", **credentials)
    with Stubber(module._codebuild) as stubber, Stubber(module._cloudformation) as cloudformation:
        module.cloudformation_stubber = cloudformation
        yield module, stubber
        stubber.assert_no_pending_responses()
        cloudformation.assert_no_pending_responses()


def stack_status(module, status: str) -> None:
    module.cloudformation_stubber.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "RealtimeVoice-Voxtral",
                    "StackId": STACK_ID,
                    "StackStatus": status,
                    "CreationTime": "2026-01-01T00:00:00Z",
                }
            ]
        },
        {"StackName": STACK_ID},
    )


def build(status: str, **extra) -> dict:
    return {"id": BUILD_ID, "buildStatus": status, **extra}


#: What every StartBuild must carry: the staging target of the event's own properties, not the
#: project's.
OVERRIDES = [
    {"name": "MODEL_REPOSITORY_ID", "value": PROPERTIES["RepositoryId"], "type": "PLAINTEXT"},
    {"name": "MODEL_REVISION", "value": PROPERTIES["Revision"], "type": "PLAINTEXT"},
    {"name": "MODEL_S3_URI", "value": PROPERTIES["S3Uri"], "type": "PLAINTEXT"},
]


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_start_one_build(waiter, request_type):
    module, stubber = waiter
    stubber.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {"projectName": PROJECT, "environmentVariablesOverride": OVERRIDES},
    )

    response = module.on_event(
        {
            "RequestType": request_type,
            "ResourceProperties": PROPERTIES,
            "PhysicalResourceId": "old",
        },
        None,
    )

    assert response == {
        "PhysicalResourceId": BUILD_ID,
        "Data": {
            "S3Uri": PROPERTIES["S3Uri"],
            "ManifestUri": PROPERTIES["S3Uri"] + "model-manifest.json",
            "BuildId": BUILD_ID,
        },
    }


def test_update_builds_the_properties_of_the_event_not_the_projects_environment(waiter):
    """On an update rollback CloudFormation sends the old properties before it reverts the project:
    the build must stage what the event asks for, whatever the project's environment says."""
    module, stubber = waiter
    old = {
        **PROPERTIES,
        "Revision": "b" * 40,
        "S3Uri": "s3://models-bucket/models/voxtral/" + "b" * 40 + "/",
    }
    expected = [
        {"name": "MODEL_REPOSITORY_ID", "value": old["RepositoryId"], "type": "PLAINTEXT"},
        {"name": "MODEL_REVISION", "value": "b" * 40, "type": "PLAINTEXT"},
        {"name": "MODEL_S3_URI", "value": old["S3Uri"], "type": "PLAINTEXT"},
    ]
    stubber.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {"projectName": PROJECT, "environmentVariablesOverride": expected},
    )

    response = module.on_event(
        {
            "RequestType": "Update",
            "ResourceProperties": old,
            "OldResourceProperties": old,
            "PhysicalResourceId": "x",
        },
        None,
    )

    assert response["Data"]["S3Uri"] == old["S3Uri"]


NEW = {
    **PROPERTIES,
    "Revision": "c" * 40,
    "S3Uri": "s3://models-bucket/models/voxtral/" + "c" * 40 + "/",
}


def test_rollback_to_another_prefix_starts_no_build_and_completes(waiter):
    """The build role's policy still names the failed update's prefix while the custom resource
    rolls back: a build of the old prefix would be denied. The old prefix was staged when the stack
    was last in that state."""
    module, _ = (
        waiter  # no CodeBuild response stubbed: any StartBuild or BatchGetBuilds fails the test
    )
    stack_status(module, "UPDATE_ROLLBACK_IN_PROGRESS")
    event = {
        "RequestType": "Update",
        "StackId": STACK_ID,
        "ResourceProperties": PROPERTIES,
        "OldResourceProperties": NEW,
        "PhysicalResourceId": BUILD_ID,
    }

    response = module.on_event(event, None)

    assert response == {
        "PhysicalResourceId": BUILD_ID,
        "Data": {
            "S3Uri": PROPERTIES["S3Uri"],
            "ManifestUri": PROPERTIES["S3Uri"] + "model-manifest.json",
            "BuildId": "none: rollback to a prefix staged before",
        },
    }
    # The Provider framework hands is_complete the request merged with on_event's response.
    assert module.is_complete({**event, **response}, None) == {"IsComplete": True}


def test_forward_update_back_to_an_earlier_prefix_builds_it_again(waiter):
    """Going back to an earlier revision on purpose is no rollback: its prefix may have been removed
    since."""
    module, stubber = waiter
    stack_status(module, "UPDATE_IN_PROGRESS")
    stubber.add_response(
        "start_build",
        {"build": {"id": BUILD_ID}},
        {"projectName": PROJECT, "environmentVariablesOverride": OVERRIDES},
    )

    response = module.on_event(
        {
            "RequestType": "Update",
            "StackId": STACK_ID,
            "ResourceProperties": PROPERTIES,
            "OldResourceProperties": NEW,
            "PhysicalResourceId": "old",
        },
        None,
    )

    assert response["PhysicalResourceId"] == BUILD_ID


def test_is_complete_follows_the_build(waiter):
    module, stubber = waiter
    event = {
        "RequestType": "Create",
        "ResourceProperties": PROPERTIES,
        "PhysicalResourceId": BUILD_ID,
    }
    stubber.add_response(
        "batch_get_builds",
        {"builds": [build("IN_PROGRESS", currentPhase="BUILD")]},
        {"ids": [BUILD_ID]},
    )
    stubber.add_response("batch_get_builds", {"builds": [build("SUCCEEDED")]}, {"ids": [BUILD_ID]})

    assert module.is_complete(event, None) == {"IsComplete": False}
    done = module.is_complete(event, None)

    assert done["IsComplete"] is True
    assert done["Data"]["S3Uri"] == PROPERTIES["S3Uri"]


def test_failed_build_fails_the_resource_with_phase_reason_and_log_link(waiter):
    module, stubber = waiter
    failed = build(
        "FAILED",
        phases=[
            {"phaseType": "INSTALL", "phaseStatus": "SUCCEEDED"},
            {
                "phaseType": "BUILD",
                "phaseStatus": "FAILED",
                "contexts": [
                    {
                        "statusCode": "COMMAND_EXECUTION_ERROR",
                        "message": "Error while executing command: python -m stage_model. "
                        "Reason: exit status 1",
                    }
                ],
            },
        ],
        logs={"deepLink": "https://console.aws.amazon.com/cloudwatch/home#logsV2:log-groups"},
    )
    stubber.add_response("batch_get_builds", {"builds": [failed]}, {"ids": [BUILD_ID]})

    with pytest.raises(RuntimeError) as error:
        module.is_complete(
            {
                "RequestType": "Update",
                "ResourceProperties": PROPERTIES,
                "PhysicalResourceId": BUILD_ID,
            },
            None,
        )

    message = str(error.value)
    assert f"model staging build {BUILD_ID} ended FAILED in phase BUILD" in message
    assert "exit status 1" in message and "https://console.aws.amazon.com/cloudwatch" in message


def test_delete_stops_a_running_build_and_keeps_the_weights(waiter):
    module, stubber = waiter
    stubber.add_response(
        "batch_get_builds", {"builds": [build("IN_PROGRESS")]}, {"ids": [BUILD_ID]}
    )
    stubber.add_response("stop_build", {"build": build("STOPPED")}, {"id": BUILD_ID})

    response = module.on_event(
        {"RequestType": "Delete", "ResourceProperties": PROPERTIES, "PhysicalResourceId": BUILD_ID},
        None,
    )

    assert response == {"PhysicalResourceId": BUILD_ID}
    assert module.is_complete(
        {"RequestType": "Delete", "ResourceProperties": PROPERTIES, "PhysicalResourceId": BUILD_ID},
        None,
    ) == {"IsComplete": True}


def test_delete_after_a_failed_create_touches_nothing(waiter):
    module, _ = waiter  # no stubbed calls: any CodeBuild call would fail the test
    response = module.on_event(
        {
            "RequestType": "Delete",
            "ResourceProperties": PROPERTIES,
            "PhysicalResourceId": "request-id-1234",
        },
        None,
    )
    assert response == {"PhysicalResourceId": "request-id-1234"}
