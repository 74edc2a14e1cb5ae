"""Lambda handlers of the model staging custom resource (CDK Provider framework with completion
polling).

``on_event`` starts one CodeBuild build of the staging project on Create and Update (CloudFormation
sends an Update only when a property changed: repository id, revision or S3 URI) and stops a still
running build on Delete. What the build stages comes from the event's ``ResourceProperties``
(StartBuild ``environmentVariablesOverride``), never from the project's own environment: on an
update rollback CloudFormation sends the custom resource the old properties before it reverts the
project, so the project still describes the failed update at that moment.

For the same reason the build role's policy, scoped to the model prefix, still names the failed
update's prefix during that rollback, so a build of the old prefix would be denied and leave the
stack UPDATE_ROLLBACK_FAILED. So an Update that goes back to another S3 URI while the stack is
rolling back (DescribeStacks: UPDATE_ROLLBACK_IN_PROGRESS) starts no build: the old prefix was
staged and verified when the stack last reached that state, and the failed update wrote only under
its own prefix. A rollback to the same S3 URI builds as usual (the policy allows that prefix).
``is_complete`` polls the build (BatchGetBuilds) until it ends; a build that did not succeed fails
the resource with its status, failed phase and log link. The physical resource id is the build id.

Event and response shapes:
https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.custom_resources-readme.html (Provider
framework: ``onEvent`` returns ``PhysicalResourceId`` and ``Data``; ``isComplete`` returns
``IsComplete``). Build fields:
https://docs.aws.amazon.com/codebuild/latest/APIReference/API_Build.html
"""

from __future__ import annotations

import os

import boto3

#: Build states that mean "still running" (BuildStatus in the CodeBuild API reference).
RUNNING = "IN_PROGRESS"
SUCCEEDED = "SUCCEEDED"
#: Stack status while CloudFormation reverts a failed update (StackStatus in the CloudFormation API
#: reference).
UPDATE_ROLLBACK_IN_PROGRESS = "UPDATE_ROLLBACK_IN_PROGRESS"
#: BuildId attribute of a rollback that started no build (see the module docstring).
NO_BUILD_ON_ROLLBACK = "none: rollback to a prefix staged before"

_codebuild = None
_cloudformation = None


def _client():
    global _codebuild
    if _codebuild is None:
        _codebuild = boto3.client("codebuild")
    return _codebuild


def _cloudformation_client():
    global _cloudformation
    if _cloudformation is None:
        _cloudformation = boto3.client("cloudformation")
    return _cloudformation


def _is_rollback_to_another_prefix(event: dict) -> bool:
    """True for an Update back to another S3 URI sent while the stack rolls back a failed update."""
    if event["RequestType"] != "Update":
        return False
    old_uri = event.get("OldResourceProperties", {}).get("S3Uri")
    if old_uri is None or old_uri == event["ResourceProperties"]["S3Uri"]:
        return False
    stacks = _cloudformation_client().describe_stacks(StackName=event["StackId"]).get("Stacks", [])
    return bool(stacks) and stacks[0]["StackStatus"] == UPDATE_ROLLBACK_IN_PROGRESS


def _data(properties: dict, build_id: str) -> dict:
    uri = properties["S3Uri"]
    return {"S3Uri": uri, "ManifestUri": uri + os.environ["MANIFEST_NAME"], "BuildId": build_id}


def build_environment(properties: dict) -> list[dict]:
    """The StartBuild ``environmentVariablesOverride`` naming what to stage: repository id, revision
    and S3 URI of the custom resource's ``properties`` (the buildspec passes them to
    ``stage-model``)."""
    return [
        {"name": "MODEL_REPOSITORY_ID", "value": properties["RepositoryId"], "type": "PLAINTEXT"},
        {"name": "MODEL_REVISION", "value": properties["Revision"], "type": "PLAINTEXT"},
        {"name": "MODEL_S3_URI", "value": properties["S3Uri"], "type": "PLAINTEXT"},
    ]


def on_event(event: dict, context: object) -> dict:
    """Start the staging build (Create, Update) or stop a running one (Delete)."""
    properties = event["ResourceProperties"]
    project = properties["ProjectName"]
    if _is_rollback_to_another_prefix(event):
        print(f"rollback to {properties['S3Uri']}, staged before: no build")
        return {
            "PhysicalResourceId": event["PhysicalResourceId"],
            "Data": _data(properties, NO_BUILD_ON_ROLLBACK),
        }
    if event["RequestType"] in ("Create", "Update"):
        response = _client().start_build(
            projectName=project, environmentVariablesOverride=build_environment(properties)
        )
        build_id = response["build"]["id"]
        print(
            f"started {build_id} for {properties['RepositoryId']} @ {properties['Revision']} -> "
            f"{properties['S3Uri']}"
        )
        return {"PhysicalResourceId": build_id, "Data": _data(properties, build_id)}
    physical_id = event["PhysicalResourceId"]
    # The weights stay in place on Delete: the bucket owns them (and empties itself on `cdk destroy`
    # when its settings say so). A build still running (stack rollback, cancelled update) is stopped
    # so it stops writing.
    if physical_id.startswith(f"{project}:"):
        builds = _client().batch_get_builds(ids=[physical_id]).get("builds", [])
        if builds and builds[0]["buildStatus"] == RUNNING:
            _client().stop_build(id=physical_id)
            print(f"stopped {physical_id}")
    return {"PhysicalResourceId": physical_id}


def is_complete(event: dict, context: object) -> dict:
    """``{"IsComplete": bool}`` for the build named by the physical id; raise when it ended without
    success.

    ``event`` is the Provider framework's: the CloudFormation request merged with :func:`on_event`'s
    response.
    """
    if (
        event["RequestType"] == "Delete"
        or event.get("Data", {}).get("BuildId") == NO_BUILD_ON_ROLLBACK
    ):
        return {"IsComplete": True}
    build_id = event["PhysicalResourceId"]
    builds = _client().batch_get_builds(ids=[build_id]).get("builds", [])
    if not builds:
        raise RuntimeError(f"model staging build {build_id} not found")
    build = builds[0]
    status = build["buildStatus"]
    if status == RUNNING:
        print(f"{build_id}: {build.get('currentPhase')}")
        return {"IsComplete": False}
    if status == SUCCEEDED:
        return {"IsComplete": True, "Data": _data(event["ResourceProperties"], build_id)}
    failed = [p for p in build.get("phases", []) if p.get("phaseStatus") not in (None, SUCCEEDED)]
    where = f" in phase {failed[0]['phaseType']}" if failed else ""
    detail = "; ".join(
        c.get("message", "") for p in failed for c in p.get("contexts", []) if c.get("message")
    )
    logs = build.get("logs", {}).get("deepLink", "no log link")
    raise RuntimeError(
        f"model staging build {build_id} ended {status}{where}: {detail or 'see the log'} ({logs})"
    )
