"""What the verify tests share: moto's SageMaker with fake credentials, a deployment written into it
as CloudFormation would leave it, and the checks' failures by name."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.sagemaker.models import FakeEndpointConfig, sagemaker_backends

REGION = "us-east-1"
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/execution"
OLD_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/0b8f7c1e-0000-4000-8000-000000000001"


@pytest.fixture(name="aws")
def fixture_aws(monkeypatch):
    """moto in-process, with fake credentials; moto's instance-type list predates G6 and G6e, so it
    is not checked."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setattr(
        FakeEndpointConfig, "validate_instance_type", lambda self, instance_type: None
    )
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def backend():
    return sagemaker_backends[ACCOUNT][REGION]


def deploy(
    session,
    name: str,
    config: str,
    model: str,
    container: dict,
    instance_type: str,
    count: int,
    *,
    isolation: bool = False,
    vpc: dict | None = None,
    variant: dict | None = None,
    **config_extra,
) -> None:
    """What CloudFormation would create for one endpoint: Model, EndpointConfig, Endpoint.
    ``variant`` replaces the ProductionVariant's fields (beyond name, model, type and count);
    ``config_extra`` adds EndpointConfig fields."""
    sm = session.client("sagemaker")
    sm.create_model(
        ModelName=model,
        ExecutionRoleArn=ROLE,
        PrimaryContainer=container,
        **({"VpcConfig": vpc} if vpc else {}),
    )
    backend()._models[
        model
    ].enable_network_isolation = isolation  # moto drops EnableNetworkIsolation
    # moto requires an InstanceType; SageMaker stores none for a variant with instance pools
    # (instance_type None).
    moto_type = instance_type or (variant or {})["InstancePools"][0]["InstanceType"]
    sm.create_endpoint_config(
        EndpointConfigName=config,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InstanceType": moto_type,
                "InitialInstanceCount": count,
                **(variant or {}),
            }
        ],
        **config_extra,
    )
    if instance_type is None:
        del backend().endpoint_configs[config].production_variants[0]["InstanceType"]
    if name in backend().endpoints:
        # moto has no UpdateEndpoint; recreating leaves the same state: InService on the other
        # EndpointConfig.
        sm.delete_endpoint(EndpointName=name)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=config)


def by_what(checks) -> dict[str, Any]:
    return {f"{c.endpoint}: {c.what}": c for c in checks}


def failures(checks) -> dict[str, str]:
    """``{check: line}`` of the checks that failed."""
    return {f"{c.endpoint}: {c.what}": c.line() for c in checks if not c.ok and not c.skipped}
