"""What the tests of the ECS target's bearer token share (the library's and the command's): the
token, a wrong one, the fake vLLM's words, and moto's Secrets Manager (the ``secrets`` fixture,
which both folders' ``conftest.py`` import)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

TOKEN = "Zk3p9QwXr7Lm2Vb8Nc4Hs6Td1Fg5Jy0AeUoIiPl"
WRONG = "Zk3p9QwXr7Lm2Vb8Nc4Hs6Td1Fg5Jy0AeUoIiPX"  # the last character differs
DELTAS = ("Hello ", "from ", "ECS.")
REGION = "eu-west-1"


@pytest.fixture
def secrets(monkeypatch):
    """moto's Secrets Manager with fake credentials; AWS_REGION names another Region than the
    secrets' ARNs."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-2",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        client = boto3.client("secretsmanager", region_name=REGION)

        def create(name: str, value: str) -> str:
            return client.create_secret(Name=name, SecretString=value)["ARN"]

        yield create
