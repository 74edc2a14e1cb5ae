"""Helpers of the construct tests: each construct in a bare stack of its own app (no settings, no
app stacks), the way aws-cdk's ``aws-sagemaker-alpha`` tests its constructs."""

from __future__ import annotations

from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Template

from constructs_lib.sagemaker_endpoint.props import (
    ImageContainer,
    ProductionVariant,
    RealtimeEndpointProps,
)

ACCOUNT = "123456789012"
REGION = "us-east-1"
ENV = Environment(account=ACCOUNT, region=REGION)
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/team/bridge:v1"
IMAGE_REPOSITORY_ARN = f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/team/bridge"
PACKAGE = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/tts-v1"


def unit_app(**props) -> App:
    """An app for a construct test: ``App(**props)`` without the CDK's built-in CloudFormation
    validation.

    aws-cdk-lib runs that validation (its resource schemas and default rules, in a WebAssembly
    engine) at every synth unless told not to (``AppProps.builtinCloudFormationValidation``).
    Without the feature flag ``@aws-cdk/core:validateAgainstDefaultRules`` its findings are
    warnings: printed and written to validation-report.json, and the synth passes. Its engine cost
    about 3 s of CPU to start in each test process and more at every synth
    (tests/unit/constructs_lib took 34 s of CPU with it, 23 s without). It is a gate where the flag
    is: in cdk.json, so for the app and every variant of tests/app, and in the endpoint's cdk-nag
    test (sagemaker_endpoint/test_endpoint.py ``nagged_endpoint_app``), which builds a user's app
    with it."""
    return App(builtin_cloud_formation_validation=False, **props)


def bare_stack(name: str = "Test") -> Stack:
    """A stack in an app of its own (:func:`unit_app`), in a fixed account and Region."""
    return Stack(unit_app(), name, env=ENV)


def endpoint_props(**overrides) -> RealtimeEndpointProps:
    """The least a RealtimeEndpoint needs (an image and an instance type), plus ``overrides``."""
    props = {
        "container": ImageContainer(IMAGE),
        "variant": ProductionVariant("ml.g6.4xlarge"),
        **overrides,
    }
    return RealtimeEndpointProps(**props)


def resources(stack: Stack, resource_type: str) -> dict[str, dict]:
    """``{logical id: resource}`` of one type in the synthesized ``stack``."""
    return Template.from_stack(stack).find_resources(resource_type)


def only(stack: Stack, resource_type: str) -> tuple[str, dict]:
    """The one resource of ``resource_type``: (logical id, resource)."""
    (item,) = resources(stack, resource_type).items()
    return item


def statements(stack: Stack) -> dict[str, dict]:
    """``{Sid: statement}`` of every AWS::IAM::Policy in ``stack`` (statements without a Sid are
    keyed by action)."""
    out = {}
    for policy in resources(stack, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            out[statement.get("Sid") or str(statement["Action"])] = statement
    return out
