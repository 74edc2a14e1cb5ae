"""voicectl/operations/pricing.py: the on-demand price of a SageMaker hosting instance from the
Price List API (GetProducts), against recorded-format responses through botocore's Stubber
(pricing_testkit.py)."""

from __future__ import annotations

import json
import os
import socket

import boto3
import botocore.config
import pytest

from tests.unit.voicectl.operations.pricing_testkit import (  # noqa: F401 (fixtures)
    NO_CREDENTIALS,
    fixture_client,
    fixture_fake_credentials,
    params,
    response,
)
from voicectl.operations import pricing


def test_the_hourly_usd_rate_of_the_hosting_product_is_read(client):
    client.stub.add_response(
        "get_products",
        response("hosting_ml.g6.4xlarge_us-east-1.json"),
        params("ml.g6.4xlarge", "us-east-1"),
    )
    price = pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)
    assert price == pricing.HostingPrice(
        instance_type="ml.g6.4xlarge",
        region="us-east-1",
        usd_per_hour=2.264,
        sku="7QXH2ZK9M4TRB6VE",
        usage_type="USE1-Host:ml.g6.4xlarge",
        description="$2.264 per Hosting ml.g6.4xlarge hour in US East (N. Virginia)",
        effective_date="2026-11-01T00:00:00Z",
    )


def test_usd_per_hour_is_the_reusable_figure(client):
    client.stub.add_response(
        "get_products",
        response("hosting_ml.g6e.2xlarge_us-east-1.json"),
        params("ml.g6e.2xlarge", "us-east-1"),
    )
    assert pricing.usd_per_hour("ml.g6e.2xlarge", "us-east-1", client=client) == 2.8026


def test_every_page_is_read_and_other_usage_types_are_skipped(client):
    client.stub.add_response(
        "get_products",
        response("paged_ml.g6.4xlarge_us-east-1_page1.json"),
        params("ml.g6.4xlarge", "us-east-1"),
    )
    client.stub.add_response(
        "get_products",
        response("paged_ml.g6.4xlarge_us-east-1_page2.json"),
        params("ml.g6.4xlarge", "us-east-1", NextToken="page-2-token"),
    )
    price = pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)
    assert (price.sku, price.usage_type, price.usd_per_hour) == (
        "7QXH2ZK9M4TRB6VE",
        "USE1-Host:ml.g6.4xlarge",
        2.264,
    )


def test_a_type_without_a_hosting_product_is_named_in_the_error(client):
    client.stub.add_response(
        "get_products", response("empty.json"), params("ml.g6.48xlarge", "us-east-1")
    )
    with pytest.raises(
        pricing.PriceNotFound,
        match=r"no on-demand SageMaker real-time inference price for "
        r"ml\.g6\.48xlarge in us-east-1; the type may not be offered",
    ):
        pricing.hosting_price("ml.g6.48xlarge", "us-east-1", client=client)


def test_only_other_usage_types_are_listed_in_the_error(client):
    client.stub.add_response(
        "get_products",
        response("paged_ml.g6.4xlarge_us-east-1_page1.json") | {"NextToken": ""},
        params("ml.g6.4xlarge", "us-east-1"),
    )
    with pytest.raises(pricing.PriceNotFound, match=r"it lists only USE1-AsyncInf:ml\.g6\.4xlarge"):
        pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)


def _edited(name: str, edit) -> dict:
    """A response file with its single product changed by ``edit(product) -> None``."""
    data = response(name)
    product = json.loads(data["PriceList"][0])
    edit(product)
    data["PriceList"] = [json.dumps(product)]
    return data


def _dimension(product: dict) -> dict:
    (term,) = product["terms"]["OnDemand"].values()
    (dimension,) = term["priceDimensions"].values()
    return dimension


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda p: _dimension(p).update(pricePerUnit={"CNY": "15.0"}), r"has no USD price"),
        (
            lambda p: _dimension(p).update(pricePerUnit={"USD": "0.0000000000"}),
            r"lists USD 0\.0000000000 per hour",
        ),
        (
            lambda p: _dimension(p).update(unit="Quantity"),
            r"has 0 hourly price dimensions \('Hrs'\)",
        ),
        (lambda p: p["terms"].update(OnDemand={}), r"has 0 on-demand terms"),
    ],
    ids=["no USD", "zero", "no hourly unit", "no on-demand term"],
)
def test_a_product_without_one_hourly_usd_price_is_refused(client, edit, message):
    client.stub.add_response(
        "get_products",
        _edited("hosting_ml.g6.4xlarge_us-east-1.json", edit),
        params("ml.g6.4xlarge", "us-east-1"),
    )
    with pytest.raises(
        pricing.PriceNotFound,
        match=r"product 7QXH2ZK9M4TRB6VE for ml\.g6\.4xlarge in us-east-1 " + message,
    ):
        pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)


def test_two_hosting_products_are_not_guessed_between(client):
    data = response("hosting_ml.g6.4xlarge_us-east-1.json")
    other = json.loads(data["PriceList"][0])
    other["product"]["sku"] = "2WQ9Z7XK4M8RHN5T"
    data["PriceList"].append(json.dumps(other))
    client.stub.add_response("get_products", data, params("ml.g6.4xlarge", "us-east-1"))
    with pytest.raises(
        pricing.PriceNotFound,
        match=r"has 2 real-time inference products for ml\.g6\.4xlarge in "
        r"us-east-1 \(SKUs 2WQ9Z7XK4M8RHN5T, 7QXH2ZK9M4TRB6VE\)",
    ):
        pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)


def test_access_denied_names_the_permission(client):
    client.stub.add_client_error(
        "get_products",
        "AccessDeniedException",
        "User: arn:aws:iam::123456789012:user/x is not authorized to perform: pricing:GetProducts",
        expected_params=params("ml.g6.4xlarge", "us-east-1"),
    )
    with pytest.raises(
        pricing.PricingAccessDenied,
        match=r"denied pricing:GetProducts \(AccessDeniedException: "
        r"User: .*allowing pricing:GetProducts on resource '\*'",
    ):
        pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)


def test_rejected_credentials_are_reported_as_such(client):
    client.stub.add_client_error(
        "get_products",
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
        expected_params=params("ml.g6.4xlarge", "us-east-1"),
    )
    with pytest.raises(
        pricing.PricingAccessDenied,
        match=r"credentials were rejected .*UnrecognizedClientException",
    ):
        pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=client)


def test_an_unreachable_endpoint_is_one_pricing_error(fake_credentials):
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = boto3.Session().client(
        "pricing",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=2),
    )
    with pytest.raises(
        pricing.PricingError,
        match=rf"could not reach the Price List API at http://127.0.0.1:{port}",
    ):
        pricing.hosting_price("ml.g6.4xlarge", "us-east-1", client=unreachable)


@pytest.mark.parametrize(
    "instance_type, region", [("g6.4xlarge", "us-east-1"), ("ml.g6.4xlarge", "US East")]
)
def test_malformed_arguments_fail_before_any_call(client, instance_type, region):
    with pytest.raises(ValueError, match="is not"):
        pricing.hosting_price(instance_type, region, client=client)


@pytest.mark.parametrize(
    "region, endpoint",
    [
        ("us-east-1", "us-east-1"),
        ("us-west-2", "us-east-1"),
        ("ca-central-1", "us-east-1"),
        ("sa-east-1", "us-east-1"),
        ("us-gov-west-1", "us-east-1"),
        ("eu-west-1", "eu-central-1"),
        ("eu-central-1", "eu-central-1"),
        ("me-central-1", "eu-central-1"),
        ("il-central-1", "eu-central-1"),
        ("af-south-1", "eu-central-1"),
        ("ap-northeast-1", "ap-south-1"),
        ("ap-south-1", "ap-south-1"),
    ],
)
def test_the_nearest_price_list_endpoint_is_used(region, endpoint):
    assert pricing.price_list_endpoint_region(region) == endpoint
    assert endpoint in pricing.PRICE_LIST_ENDPOINT_REGIONS


def test_every_endpoint_region_is_one_botocore_knows():
    import botocore.session

    known = botocore.session.get_session().get_available_regions("pricing")
    assert sorted(pricing.PRICE_LIST_ENDPOINT_REGIONS) == sorted(known)


@pytest.mark.parametrize(
    "region, message", [("cn-north-1", "in CNY"), ("Ireland", "not an AWS Region code")]
)
def test_regions_that_cannot_be_priced_are_refused(region, message):
    with pytest.raises(pricing.PricingError, match=message):
        pricing.price_list_endpoint_region(region)


def test_the_client_uses_the_nearest_endpoint(fake_credentials):
    client = pricing.pricing_client(boto3.Session(), "eu-west-1")
    assert client.meta.region_name == "eu-central-1"
    assert client.meta.endpoint_url == "https://api.pricing.eu-central-1.amazonaws.com"


def test_no_credentials_stop_before_any_call(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in NO_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(
        pricing.NoCredentialsError, match=r"no AWS credentials found: .*pricing:GetProducts"
    ):
        pricing.pricing_client(boto3.Session(), "us-east-1")
