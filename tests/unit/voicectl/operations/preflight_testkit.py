"""What the preflight tests share: moto for STS and SSM, botocore's Stubber for every other service
a test stubs, an account bootstrapped at a version, the settings under which a deploy needs no hub
token, and the answers of the stubbed services (the Sonic package, listing and agreement; the
quotas; a missing permission)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from config.models import SONIC_MODEL_PACKAGES
from tests.conftest import ROOT
from voicectl.operations.preflight import run_checks
from voicectl.operations.preflight_findings import Finding
from voicectl.operations.preflight_marketplace import SONIC_LISTING_ID

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


ACCOUNT = "123456789012"
PACKAGE = SONIC_MODEL_PACKAGES[REGION]
PRODUCT = "prod-sonic36example"
QUOTA_G6 = "ml.g6.xlarge for endpoint usage"
QUOTA_G6E = "ml.g6e.2xlarge for endpoint usage"


def quota(name: str, value: float, code: str) -> dict:
    return {
        "ServiceCode": "sagemaker",
        "ServiceName": "Amazon SageMaker",
        "QuotaName": name,
        "Value": value,
        "QuotaCode": code,
        "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:sagemaker/{code}",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def stub_sonic(
    aws: StubbedAws, *, supported=("ml.g6e.xlarge", "ml.g6e.2xlarge"), agreements=1
) -> None:
    """DescribeModelPackage, GetListing and SearchAgreements as AWS answers a subscribed account."""
    aws.stub("sagemaker").add_response(
        "describe_model_package",
        {
            "ModelPackageName": "sonic36-sagemaker-v0",
            "ModelPackageArn": PACKAGE,
            "ModelPackageStatus": "Completed",
            "ModelPackageStatusDetails": {"ValidationStatuses": []},
            "CreationTime": "2026-09-01T00:00:00Z",
            "CertifyForMarketplace": True,
            "InferenceSpecification": {
                "Containers": [{"Image": "sonic"}],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["text/event-stream"],
                "SupportedRealtimeInferenceInstanceTypes": list(supported),
            },
        },
        {"ModelPackageName": PACKAGE},
    )
    aws.stub("marketplace-discovery").add_response(
        "get_listing", listing(), {"listingId": SONIC_LISTING_ID}
    )
    aws.stub("marketplace-agreement").add_response(
        "search_agreements",
        {
            "agreementViewSummaries": [
                {"agreementId": f"agmt-{n}", "status": "ACTIVE"} for n in range(agreements)
            ]
        },
        {
            "catalog": "AWSMarketplace",
            "filters": [
                {"name": "PartyType", "values": ["Acceptor"]},
                {"name": "AgreementType", "values": ["PurchaseAgreement"]},
                {"name": "ResourceIdentifier", "values": [PRODUCT]},
                {"name": "Status", "values": ["ACTIVE"]},
            ],
        },
    )


def listing() -> dict:
    """A GetListing answer with every member the API model requires; only the name and the product
    matter here."""
    cartesia = {"sellerProfileId": "seller-example", "displayName": "Cartesia"}
    return {
        "listingId": SONIC_LISTING_ID,
        "listingName": "Sonic 3.6 by Cartesia",
        "catalog": "AWSMarketplace",
        "associatedEntities": [
            {
                "product": {
                    "productId": PRODUCT,
                    "productName": "Sonic 3.6",
                    "manufacturer": cartesia,
                }
            }
        ],
        "fulfillmentOptionSummaries": [
            {"fulfillmentOptionType": "SAGEMAKER_MODEL", "displayName": "SageMaker model"}
        ],
        "publisher": cartesia,
        "shortDescription": "Text to speech",
        "longDescription": "Text to speech",
        "logoThumbnailUrl": "https://example.com/logo.png",
        **{
            name: []
            for name in (
                "badges",
                "categories",
                "highlights",
                "pricingModels",
                "pricingUnits",
                "promotionalMedia",
                "resources",
                "sellerEngagements",
                "useCases",
                "purchaseIndicators",
            )
        },
    }


def stub_quotas(aws: StubbedAws, applied: list[dict], defaults: list[dict] | None = None) -> None:
    stubber = aws.stub("service-quotas")
    stubber.add_response("list_service_quotas", {"Quotas": applied}, {"ServiceCode": "sagemaker"})
    if defaults is not None:
        stubber.add_response(
            "list_aws_default_service_quotas", {"Quotas": defaults}, {"ServiceCode": "sagemaker"}
        )


def findings(aws: StubbedAws, *cdk_args: str) -> dict[str, Finding]:
    _, found = run_checks("deploy", [*NO_STAGING, *cdk_args], ROOT, aws.session, aws)
    return {finding.check: finding for finding in found}


def access_denied(stubber: Stubber, operation: str) -> None:
    stubber.add_client_error(
        operation,
        "AccessDeniedException",
        "User: arn:aws:iam::123456789012:user/ci is not authorized to perform this action",
        403,
    )


ENOUGH = [quota(QUOTA_G6, 10, "L-G6X4"), quota(QUOTA_G6E, 4, "L-G6EX2")]
