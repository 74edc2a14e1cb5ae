"""On-demand price of a SageMaker real-time inference instance, from the AWS Price List Query API.

The one entry point other commands need is :func:`usd_per_hour` (``voicectl cost`` uses
:func:`hosting_price` for the SKU and effective date as well). Both take ``(instance_type, region)``
and a ``pricing`` client from :func:`pricing_client`, which checks the credentials before anything
is sent.

How the price is found (``GetProducts``, service code ``AmazonSageMaker``, TERM_MATCH filters):

- ``regionCode`` = the Region (``us-east-1``), ``instanceName`` = the instance type
  (``ml.g6.4xlarge``) and ``component`` = ``Hosting`` (real-time inference). These are the filters
  AWS Labs' llmeter uses for the same lookup (``llmeter/callbacks/cost/providers/sagemaker.py``,
  ``fetch_sm_hosting_od_price``); the SageMaker offer file
  (``/offers/v1.0/aws/AmazonSageMaker/current/index.json``) carries the same attributes on its
  ``productFamily`` "ML Instance" products.
- Of the products returned, the one whose ``usagetype`` is ``<Region prefix>-Host:<instance type>``
  (for example ``USE1-Host:ml.g6.4xlarge``; asynchronous inference is ``USE1-AsyncInf:...``) is the
  real-time hosting price. Its ``terms.OnDemand`` holds one term whose ``priceDimensions`` hold one
  dimension with ``unit`` ``Hrs`` and ``pricePerUnit.USD``, a decimal string such as
  ``"2.2640000000"``.

Each ``PriceList`` entry is a JSON *string* (``FormatVersion`` ``aws_v1``); the shape is described
in the Billing User Guide, "Using the AWS Price List Query API" and the price list file format it
describes.

Endpoints: the Query API answers only in us-east-1, eu-central-1 and ap-south-1 (the ``api.pricing``
entry of botocore's ``endpoints.json``; AWS Billing User Guide, "Using the AWS Price List Query
API"); every endpoint serves the prices of every commercial Region, so
:func:`price_list_endpoint_region` picks the nearest one, as AWS Labs' pricing MCP server does
(``aws-pricing-mcp-server``, ``pricing_client.py``). China Regions have their own endpoint
(cn-northwest-1) with prices in CNY and China-partition credentials: not supported here. GovCloud
Regions are looked up on us-east-1, which takes commercial-partition credentials (GovCloud ones are
rejected).

IAM: ``pricing:GetProducts`` on resource ``*`` (the Price List actions have no resource-level
permissions; Service Authorization Reference, "Actions, resources, and condition keys for AWS Price
List").

What the figure is: the public on-demand rate in USD before tax, without Savings Plans, private
pricing or the free tier. It covers the instance only: not the ML storage volume, data processed in
and out, or AWS Marketplace software fees (a Marketplace model package's fee is on its listing, not
in the Price List API).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import botocore.config
import botocore.exceptions

SERVICE_CODE = "AmazonSageMaker"
#: GetProducts filters (field -> value) beside the Region and instance type; see the module
#: docstring for sources.
HOSTING_FILTERS = {"component": "Hosting"}
#: The usage type of a real-time hosting instance: ``USE1-Host:ml.g6.4xlarge`` (Region prefix,
#: "Host", the type).
HOSTING_USAGE_TYPE = re.compile(r"^(?:[A-Z0-9]+-)?Host:(?P<instance_type>ml\..+)$")
#: Endpoints of the Price List Query API (botocore ``endpoints.json``, service ``api.pricing``,
#: partition ``aws``).
PRICE_LIST_ENDPOINT_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
#: The Price List's on-demand unit for instance time.
HOURLY_UNIT = "Hrs"

_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
# Bounded client: a price lookup should fail in seconds, not hang a command.
_CLIENT_CONFIG = botocore.config.Config(
    connect_timeout=10, read_timeout=30, retries={"mode": "standard", "max_attempts": 3}
)


class PricingError(Exception):
    """A price could not be read; the message says why and what to do."""


class NoCredentialsError(PricingError):
    """No AWS credentials were found, or they could not be loaded (an expired SSO token, a broken
    profile)."""


class PricingAccessDenied(PricingError):
    """The Price List API refused the call (``AccessDeniedException`` or rejected credentials)."""


class PriceNotFound(PricingError):
    """The Price List has no (or no unambiguous) on-demand hosting price for this instance type and
    Region."""


@dataclass(frozen=True)
class HostingPrice:
    """The on-demand price of one SageMaker real-time inference instance.

    Attributes:
        instance_type: e.g. ``ml.g6.4xlarge``.
        region: the Region the price applies to, e.g. ``us-east-1``.
        usd_per_hour: USD per instance-hour (billed per second of instance time).
        sku: the Price List product SKU.
        usage_type: the product's ``usagetype``, e.g. ``USE1-Host:ml.g6.4xlarge``.
        description: the price dimension's own description, e.g. "$2.264 per Hosting ml.g6.4xlarge
            hour in US East (N. Virginia)".
        effective_date: when this rate took effect (ISO 8601, from the on-demand term).
    """

    instance_type: str
    region: str
    usd_per_hour: float
    sku: str
    usage_type: str
    description: str
    effective_date: str


def price_list_endpoint_region(region: str) -> str:
    """The Price List Query API endpoint nearest to ``region``: ``eu-central-1`` for Europe, the
    Middle East, Israel and Africa, ``ap-south-1`` for Asia Pacific, ``us-east-1`` otherwise (any
    endpoint gives every Region's prices).

    Raises:
        PricingError: ``region`` is not a Region code, or is a China Region (prices in CNY, another
            partition).
    """
    if not _REGION.match(region):
        raise PricingError(f"region {region!r} is not an AWS Region code such as 'us-east-1'")
    if region.startswith("cn-"):
        raise PricingError(
            f"region {region}: China Region prices are in CNY from the China partition's Price "
            "List endpoint (cn-northwest-1); this command reads USD prices of the commercial "
            "partition only"
        )
    if region in PRICE_LIST_ENDPOINT_REGIONS:
        return region
    if region.startswith(("eu-", "me-", "il-", "af-")):
        return "eu-central-1"
    if region.startswith("ap-"):
        return "ap-south-1"
    return "us-east-1"


def pricing_client(session: Any, region: str) -> Any:
    """A ``pricing`` client on the endpoint nearest to ``region``, after checking that ``session``
    has credentials.

    Args:
        session: a ``boto3.Session`` (its profile and credential chain are used; its own Region is
            not).
        region: the Region whose prices will be read.

    Raises:
        NoCredentialsError: no credentials anywhere in the chain, or they could not be loaded.
        PricingError: ``region`` is not supported (see :func:`price_list_endpoint_region`).
    """
    endpoint_region = price_list_endpoint_region(region)
    try:
        credentials = session.get_credentials()
        if credentials is not None:
            # an SSO or assume-role chain resolves (or fails) here
            credentials.get_frozen_credentials()
    except botocore.exceptions.BotoCoreError as error:
        raise NoCredentialsError(
            f"could not load the AWS credentials ({error}); run `aws sso login` or check the "
            "profile, then try again"
        ) from None
    if credentials is None:
        raise NoCredentialsError(
            "no AWS credentials found: the Price List API needs signed requests (any identity "
            "allowed pricing:GetProducts). Configure them the usual way (`aws configure sso` and "
            "`export AWS_PROFILE=<profile>`, environment variables, or an instance or container "
            "role)"
        )
    return session.client("pricing", region_name=endpoint_region, config=_CLIENT_CONFIG)


def hosting_price(instance_type: str, region: str, *, client: Any) -> HostingPrice:
    """The on-demand real-time inference price of ``instance_type`` in ``region``.

    Args:
        instance_type: a SageMaker instance type, ``ml.<family>.<size>``.
        region: the Region of the endpoint, e.g. ``us-east-1``.
        client: a boto3 ``pricing`` client (:func:`pricing_client`).

    Raises:
        ValueError: ``instance_type`` or ``region`` is malformed (checked before any call).
        PriceNotFound: no hosting product, several, or one without an hourly USD on-demand price.
        PricingAccessDenied: the call was denied or the credentials rejected.
        PricingError: any other failure of the call (network, throttling after retries, service
            error).
    """
    if not _INSTANCE_TYPE.match(instance_type):
        raise ValueError(
            f"instance type {instance_type!r} is not a SageMaker instance type such as "
            "'ml.g6.4xlarge'"
        )
    if not _REGION.match(region):
        raise ValueError(f"region {region!r} is not an AWS Region code such as 'us-east-1'")
    filters = [
        {"Type": "TERM_MATCH", "Field": field, "Value": value}
        for field, value in (
            ("regionCode", region),
            ("instanceName", instance_type),
            *HOSTING_FILTERS.items(),
        )
    ]
    products = [json.loads(entry) for entry in _get_products(client, filters)]
    hosting = [p for p in products if _usage_type_instance(p) == instance_type]
    where = f"{instance_type} in {region}"
    if not hosting:
        seen = sorted(
            {p.get("product", {}).get("attributes", {}).get("usagetype", "?") for p in products}
        )
        raise PriceNotFound(
            f"the AWS Price List has no on-demand SageMaker real-time inference price for {where}"
            + (f" (it lists only {', '.join(seen)})" if seen else "")
            + "; the type may not be offered for hosting in that Region: check the SageMaker "
            "pricing page (https://aws.amazon.com/sagemaker/pricing/) or choose another instance "
            "type or Region"
        )
    if len(hosting) > 1:
        skus = ", ".join(sorted(p["product"].get("sku", "?") for p in hosting))
        raise PriceNotFound(
            f"the AWS Price List has {len(hosting)} real-time inference products for {where} "
            f"(SKUs {skus}); refusing to guess which one applies"
        )
    return _parse_on_demand(hosting[0], instance_type, region)


def usd_per_hour(instance_type: str, region: str, *, client: Any) -> float:
    """USD per instance-hour of ``instance_type`` on a SageMaker real-time endpoint in ``region``
    (on demand).

    Same arguments and errors as :func:`hosting_price`.
    """
    return hosting_price(instance_type, region, client=client).usd_per_hour


#: EC2 On-Demand Linux instance-hours (the ECS target's hosts): service code ``AmazonEC2`` with the
#: TERM_MATCH filters that single out the plain on-demand product of an instance type (AWS Billing
#: User Guide, "Using the AWS Price List Query API"; the attribute names of the EC2 offer file):
#: Linux, shared tenancy, no pre-installed software, no license, and ``capacitystatus`` ``Used``
#: (the other statuses price Capacity Reservations).
EC2_SERVICE_CODE = "AmazonEC2"
EC2_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "licenseModel": "No License required",
    "capacitystatus": "Used",
}
#: Usage type of an EC2 on-demand instance-hour: ``BoxUsage:g6.xlarge`` in us-east-1,
#: ``EUC1-BoxUsage:...`` elsewhere.
EC2_USAGE_TYPE = re.compile(r"^(?:[A-Z0-9]+-)?BoxUsage:(?P<instance_type>[a-z0-9-]+\.[a-z0-9]+)$")
_EC2_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")


def ec2_usd_per_hour(instance_type: str, region: str, *, client: Any) -> float:
    """USD per instance-hour of the EC2 instance ``instance_type`` (``g6.xlarge``; Linux, on demand)
    in ``region``.

    Raises:
        ValueError: ``instance_type`` or ``region`` is malformed (checked before any call).
        PriceNotFound / PricingAccessDenied / PricingError: as :func:`hosting_price`.
    """
    if instance_type.startswith("ml.") or not _EC2_INSTANCE_TYPE.match(instance_type):
        raise ValueError(
            f"instance type {instance_type!r} is not an EC2 instance type such as 'g6.xlarge'"
        )
    if not _REGION.match(region):
        raise ValueError(f"region {region!r} is not an AWS Region code such as 'us-east-1'")
    filters = [
        {"Type": "TERM_MATCH", "Field": field, "Value": value}
        for field, value in (
            ("regionCode", region),
            ("instanceType", instance_type),
            *EC2_FILTERS.items(),
        )
    ]
    products = [json.loads(entry) for entry in _get_products(client, filters, EC2_SERVICE_CODE)]
    boxes = [
        p
        for p in products
        if (
            m := EC2_USAGE_TYPE.match(
                p.get("product", {}).get("attributes", {}).get("usagetype", "")
            )
        )
        and m["instance_type"] == instance_type
    ]
    where = f"EC2 {instance_type} in {region}"
    if len(boxes) != 1:
        raise PriceNotFound(
            f"the AWS Price List has {len(boxes)} on-demand Linux products for {where}, not one; "
            "check the EC2 On-Demand pricing page (https://aws.amazon.com/ec2/pricing/on-demand/)"
        )
    return _parse_on_demand(boxes[0], instance_type, region).usd_per_hour


def _get_products(
    client: Any, filters: list[dict[str, str]], service_code: str = SERVICE_CODE
) -> list[str]:
    """Every ``PriceList`` entry of GetProducts (all pages), with the call's failures turned into
    PricingError."""
    entries: list[str] = []
    endpoint = getattr(getattr(client, "meta", None), "endpoint_url", "the Price List API")
    try:
        for page in client.get_paginator("get_products").paginate(
            ServiceCode=service_code, Filters=filters, FormatVersion="aws_v1"
        ):
            entries.extend(page.get("PriceList", []))
    except botocore.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        message = error.response.get("Error", {}).get("Message", "")
        if code in ("AccessDeniedException", "AccessDenied"):
            raise PricingAccessDenied(
                f"the Price List API denied pricing:GetProducts ({code}: {message}); the caller "
                "needs an IAM policy allowing pricing:GetProducts on resource '*'"
            ) from None
        if code in (
            "UnrecognizedClientException",
            "InvalidClientTokenId",
            "ExpiredTokenException",
            "InvalidSignatureException",
        ):
            raise PricingAccessDenied(
                f"the AWS credentials were rejected by the Price List API ({code}: {message}); "
                "refresh them (`aws sso login`) or use credentials of the commercial partition"
            ) from None
        raise PricingError(
            f"the Price List API call GetProducts failed ({code}: {message})"
        ) from None
    except botocore.exceptions.BotoCoreError as error:
        raise PricingError(f"could not reach the Price List API at {endpoint}: {error}") from None
    return entries


def _usage_type_instance(product: dict) -> str | None:
    """The instance type of a real-time hosting product (from its usage type), or None for any other
    product."""
    match = HOSTING_USAGE_TYPE.match(
        product.get("product", {}).get("attributes", {}).get("usagetype", "")
    )
    return match["instance_type"] if match else None


def _parse_on_demand(product: dict, instance_type: str, region: str) -> HostingPrice:
    """Read the single hourly USD on-demand dimension of ``product``."""
    where = f"{instance_type} in {region}"
    sku = product["product"].get("sku", "?")
    terms = list(product.get("terms", {}).get("OnDemand", {}).values())
    if len(terms) != 1:
        raise PriceNotFound(
            f"the Price List product {sku} for {where} has {len(terms)} on-demand terms, not one"
        )
    dimensions = [
        d for d in terms[0].get("priceDimensions", {}).values() if d.get("unit") == HOURLY_UNIT
    ]
    if len(dimensions) != 1:
        raise PriceNotFound(
            f"the Price List product {sku} for {where} has {len(dimensions)} hourly price "
            f"dimensions ('{HOURLY_UNIT}'), not one"
        )
    raw = dimensions[0].get("pricePerUnit", {}).get("USD")
    try:
        price = float(raw)
    except (TypeError, ValueError):
        raise PriceNotFound(
            f"the Price List product {sku} for {where} has no USD price (pricePerUnit: "
            f"{dimensions[0].get('pricePerUnit')})"
        ) from None
    if not price > 0:
        raise PriceNotFound(
            f"the Price List product {sku} for {where} lists USD {raw} per hour; a GPU instance "
            "is never free, so this is not its on-demand rate"
        )
    return HostingPrice(
        instance_type=instance_type,
        region=region,
        usd_per_hour=price,
        sku=sku,
        usage_type=product["product"]["attributes"]["usagetype"],
        description=dimensions[0].get("description", ""),
        effective_date=terms[0].get("effectiveDate", ""),
    )
