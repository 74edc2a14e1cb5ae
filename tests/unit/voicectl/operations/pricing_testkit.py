"""The Price List API as the pricing and cost tests see it: recorded-format GetProducts responses
(``data/pricing/``), the request the lookup must send, and a botocore Stubber in place of the
service (moto 5 has no ``pricing`` backend)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

DATA = Path(__file__).parent / "data" / "pricing"

NO_CREDENTIALS = {
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def response(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def params(instance_type: str, region: str, **extra) -> dict:
    """The GetProducts request the lookup must send."""
    return {
        "ServiceCode": "AmazonSageMaker",
        "FormatVersion": "aws_v1",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"},
        ],
        **extra,
    }


@pytest.fixture(name="fake_credentials")
def fixture_fake_credentials(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in {
        **NO_CREDENTIALS,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(name="client")
def fixture_client(fake_credentials):
    """A pricing client on the us-east-1 endpoint, stubbed; the test queues responses on
    ``client.stub``."""
    real = boto3.Session().client("pricing", region_name="us-east-1")
    stub = Stubber(real)
    stub.activate()
    real.stub = stub
    yield real
    stub.assert_no_pending_responses()
    stub.deactivate()
