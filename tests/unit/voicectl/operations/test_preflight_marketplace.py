"""The preflight's Sonic checks (voicectl/operations/preflight_marketplace.py) in a deploy's
preflight: the Marketplace subscription, the model package's instance types and region, and what
they cannot check (stand-ins: test_preflight.py)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    ACCOUNT,
    ENOUGH,
    NO_STAGING,
    PACKAGE,
    PRODUCT,
    SONIC_LISTING_ID,
    access_denied,
    bootstrapped,
    findings,
    fixture_aws,
    fixture_fake_credentials,
    listing,
    stub_quotas,
    stub_sonic,
)
from voicectl.operations.preflight import PreflightError, check
from voicectl.operations.preflight_findings import Status
from voicectl.operations.preflight_marketplace import SONIC_LISTING_URL


def test_an_account_without_the_sonic_subscription_stops_with_how_to_subscribe(aws):
    bootstrapped(aws)
    stub_sonic(aws, agreements=0)
    stub_quotas(aws, ENOUGH)
    with pytest.raises(PreflightError) as raised:
        check("deploy", NO_STAGING, ROOT, aws.session, aws)
    assert str(raised.value) == (
        f"account {ACCOUNT} is not subscribed to the AWS Marketplace listing 'Sonic 3.6 by "
        "Cartesia' (product "
        f"{PRODUCT}), so creating the Sonic Model would fail with "
        '"Caller is not subscribed to the marketplace '
        f"offering\". To subscribe, open {SONIC_LISTING_URL}, choose 'Continue to Subscribe' "
        "and accept the offer "
        "(needs aws-marketplace:Subscribe; the AWS managed policy "
        "AWSMarketplaceManageSubscriptions has it), or "
        "deploy without Sonic: -c sonic.enabled=false"
    )
    # The report printed before the stop has every check, the stop among them.
    assert any(
        line.startswith("  STOP      Sonic Marketplace subscription: account")
        for line in raised.value.lines
    )
    assert any(line.startswith("  OK        service quota") for line in raised.value.lines)


def test_a_package_that_does_not_support_the_instance_type_stops(aws):
    bootstrapped(aws)
    stub_sonic(aws, supported=("ml.g6e.xlarge", "ml.g7e.2xlarge"))
    stub_quotas(aws, ENOUGH)
    finding = findings(aws)["Sonic model package"]
    assert (finding.status, finding.message) == (
        Status.STOP,
        "sonic36-sagemaker-v0 does not support "
        "sonic.instance_type=ml.g6e.2xlarge; it supports ml.g6e.xlarge, ml.g7e.2xlarge",
    )


@pytest.mark.parametrize(
    ("code", "status", "start"),
    [
        (
            "ValidationException",
            Status.STOP,
            f"{PACKAGE} cannot be read in us-east-1 (ValidationException: Model Package "
            "not found); set sonic.model_package_arn to the package of this region",
        ),
        (
            "ThrottlingException",
            Status.UNCHECKED,
            "could not check (sagemaker:DescribeModelPackage failed: "
            "ThrottlingException: Model Package not found)",
        ),
    ],
)
def test_a_package_missing_in_the_region_stops_but_throttling_does_not(aws, code, status, start):
    bootstrapped(aws)
    aws.stub("sagemaker").add_client_error(
        "describe_model_package", code, "Model Package not found", 400
    )
    aws.stub("marketplace-discovery").add_response(
        "get_listing", listing(), {"listingId": SONIC_LISTING_ID}
    )
    aws.stub("marketplace-agreement").add_response(
        "search_agreements", {"agreementViewSummaries": [{"agreementId": "agmt-0"}]}
    )
    stub_quotas(aws, ENOUGH)
    finding = findings(aws)["Sonic model package"]
    assert finding.status is status and finding.message.startswith(start), finding.message


def test_a_missing_agreement_permission_is_unchecked(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    aws.stubbed["marketplace-agreement"][1].deactivate()
    stubber = aws.stub("marketplace-agreement")
    access_denied(stubber, "search_agreements")
    stub_quotas(aws, ENOUGH)
    finding = findings(aws)["Sonic Marketplace subscription"]
    assert finding.status is Status.UNCHECKED
    assert finding.message.startswith(
        "could not check (missing permission aws-marketplace:SearchAgreements: "
    )
    assert (
        "without a subscription to 'Sonic 3.6 by Cartesia' creating the Sonic Model fails"
        in finding.message
    )
