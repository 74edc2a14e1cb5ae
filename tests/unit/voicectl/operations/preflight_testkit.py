"""What the preflight tests share: moto for STS and SSM, botocore's Stubber for every other service
a test stubs, an account bootstrapped at a version, and the settings under which a deploy needs no
hub token."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

REGION = "us-east-1"
#: Settings under which the deploy needs no hub token (the token check is tested on its own).
NO_STAGING = [
    "-c",
    "voxtral.stage_model=false",
    "-c",
    "voxtral.model_s3_uri=s3://team-models/voxtral/2602/",
]


@pytest.fixture(name="fake_credentials")
def fixture_fake_credentials(monkeypatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


class StubbedAws:
    """The ``clients`` factory of the preflight: moto for STS and SSM, a Stubber-backed client for
    every other service a test stubs; an unstubbed service fails the test."""

    def __init__(self, session: boto3.Session) -> None:
        self.session = session
        self.stubbed: dict[str, tuple[object, Stubber]] = {}

    def stub(self, service: str, region: str = REGION) -> Stubber:
        client = boto3.client(
            service,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        stubber = Stubber(client)
        stubber.activate()
        self.stubbed[service] = (client, stubber)
        return stubber

    def __call__(self, service: str, region: str):
        if service in ("sts", "ssm", "kms"):  # moto answers these
            return self.session.client(service, region_name=region)
        assert service in self.stubbed, (
            f"the preflight called {service}, which this test does not stub"
        )
        return self.stubbed[service][0]

    def assert_all_used(self) -> None:
        for _, stubber in self.stubbed.values():
            stubber.assert_no_pending_responses()


@pytest.fixture(name="aws")
def fixture_aws(fake_credentials):
    with mock_aws():
        stubbed = StubbedAws(boto3.Session(region_name=REGION))
        yield stubbed
        stubbed.assert_all_used()


def bootstrapped(aws: StubbedAws, version: str = "30") -> None:
    aws.session.client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value=version, Type="String"
    )
