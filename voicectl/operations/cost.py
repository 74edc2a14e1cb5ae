"""``voicectl cost``: what the configured endpoints cost, from the AWS Price List API at run time.

For each enabled endpoint of the settings (cdk.json ``context`` plus ``-c key=value``, read by the
same ``load_settings`` as ``cdk synth``), prints the on-demand SageMaker real-time inference price
of its instance type in the ``region`` setting (:mod:`voicectl.operations.pricing`), and from it:

- per month: 730 hours (the AWS Pricing Calculator's month) x the price x ``min_instances`` and
  ``max_instances``;
- per live stream-hour: the price / the streams one instance serves at once. Voxtral:
  ``voxtral.max_num_seqs`` (vLLM's cap on sequences in flight, which the bridge enforces per
  instance; ``auto`` resolves it with the capacity model, constructs_lib/facts/capacity.py), and at
  the autoscaling target (``max_num_seqs x scaling_target_fraction``, where autoscaling holds a busy
  fleet). A live stream transcribes audio as it is spoken, so a stream-hour is also an hour of
  audio. Sonic: concurrent synthesis requests per instance, :data:`SONIC_STREAMS_PER_INSTANCE`
  (Cartesia's published figure) or ``--sonic-streams-per-instance``.
- the Sonic software fee: AWS Marketplace bills it per instance-hour on top of the instance, but it
  is not in the Price List API (Marketplace prices live on the product's listing; AWS Marketplace
  Seller Guide, "Machine learning product pricing"); the output says so and where to read it instead
  of showing a figure.

Exit codes: 0 every configured endpoint priced; 1 a price could not be read (no credentials,
AccessDenied on ``pricing:GetProducts``, no price for an instance type, the API unreachable): one
line saying why; 2 bad input (an invalid setting, an unknown profile, a Region this command cannot
price). Read-only: Price List GetProducts only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions

from config.settings import Settings, SettingsError, load_settings
from voicectl.cli import UsageError
from voicectl.operations import pricing

#: Hours in the month the AWS Pricing Calculator bills (365 x 24 / 12 = 730).
HOURS_PER_MONTH = 730

#: Concurrent synthesis requests one Sonic instance serves, by instance type. Source: Cartesia's
#: documentation, "Cloud Service Provisioning" (SageMaker: "Each instance is capable of serving 8
#: concurrent requests" on ml.g6e.xlarge) and "Hardware selection" (8 per NVIDIA L40S). Only the
#: one-GPU G6e sizes are listed: Cartesia publishes no figure for the G7e/G7 GPUs, and does not say
#: whether the model package uses more than one GPU of a multi-GPU instance. Other types need
#: ``--sonic-streams-per-instance``.
SONIC_STREAMS_PER_INSTANCE: dict[str, int] = {
    f"ml.g6e.{size}": 8 for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
}
SONIC_STREAMS_SOURCE = "Cartesia's figure for one NVIDIA L40S"

#: Where the Sonic software price is published: the Pricing tab of its AWS Marketplace listing
#: (seller Cartesia).
SONIC_LISTING_SEARCH_URL = (
    "https://aws.amazon.com/marketplace/search/results?searchTerms=Cartesia+Sonic"
)
SONIC_SOFTWARE_FEE_NOTE = (
    "not in the AWS Price List API (AWS Marketplace prices are published on the listing, not in "
    "the Price List): AWS Marketplace bills it per instance-hour on top of the figures above; "
    f"read it on the Pricing tab of the Cartesia Sonic listing, {SONIC_LISTING_SEARCH_URL}, or "
    "under AWS Marketplace > Manage subscriptions once subscribed"
)

FOOTNOTE = (
    "Idle endpoints bill every hour: a real-time endpoint is billed per instance-second from "
    "creation to deletion, busy or idle, so min_instances x the hourly price runs all month "
    "without traffic (`make destroy` stops it). Not included: ML storage volumes, data processed "
    "in and out, CloudWatch, KMS, S3, ECR, taxes; no Savings Plans or private pricing."
)


@dataclass(frozen=True)
class EndpointCost:
    """The figures of one endpoint. Prices in USD; ``price`` is None (and ``error`` set) when it
    could not be read.

    Attributes:
        section: settings section, ``voxtral`` or ``sonic``.
        endpoint_name: the SageMaker EndpointName.
        instance_type: the ProductionVariant's instance type.
        min_instances / max_instances: the autoscaling range (instances).
        streams_per_instance: live streams one instance serves at once, or None when unknown.
        streams_source: where ``streams_per_instance`` comes from (a setting name or an assumption).
        target_streams_per_instance: streams per instance at the autoscaling target (Voxtral), else
            None.
        target_source: how ``target_streams_per_instance`` is derived.
        price: the on-demand hosting price, or None.
        error: why ``price`` is None.
        software_fee_note: for a Marketplace model package, what is known of its software fee.
    """

    section: str
    endpoint_name: str
    instance_type: str
    min_instances: int
    max_instances: int
    streams_per_instance: float | None
    streams_source: str
    target_streams_per_instance: float | None = None
    target_source: str = ""
    price: pricing.HostingPrice | None = None
    error: str | None = None
    software_fee_note: str | None = None

    def usd_per_month(self, instances: int) -> float | None:
        """USD for ``instances`` instances running a 730-hour month, or None without a price."""
        return None if self.price is None else self.price.usd_per_hour * HOURS_PER_MONTH * instances

    @property
    def usd_per_stream_hour(self) -> float | None:
        """USD per live stream-hour with every instance full, or None (no price or no stream
        figure)."""
        if self.price is None or not self.streams_per_instance:
            return None
        return self.price.usd_per_hour / self.streams_per_instance

    @property
    def usd_per_stream_hour_at_target(self) -> float | None:
        """USD per live stream-hour at the autoscaling target, or None."""
        if self.price is None or not self.target_streams_per_instance:
            return None
        return self.price.usd_per_hour / self.target_streams_per_instance


def load_cost_settings(cdk_json: Path | None, overrides: dict[str, str]) -> Settings:
    """The settings ``cdk synth`` would use: ``cdk_json``'s ``context`` (None: the built-in
    defaults) plus ``overrides`` (the ``-c key=value`` pairs).

    Raises:
        UsageError: ``cdk_json`` is unreadable, or a setting is invalid (the message lists every
            problem).
    """
    context: dict[str, Any] = {}
    if cdk_json is not None:
        try:
            context = dict(json.loads(cdk_json.read_text())["context"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise UsageError(
                f"--cdk-json {cdk_json}: cannot read its 'context' ({type(error).__name__}: "
                f"{error})"
            ) from error
    context.update(overrides)
    try:
        return load_settings(context)
    except SettingsError as error:
        raise UsageError(str(error)) from None


def settings_from_args(args: argparse.Namespace, command: str) -> tuple[Settings, dict[str, str]]:
    """The settings of a command's ``-c``, ``--region`` and ``--cdk-json`` arguments, and the
    overrides among them.

    ``--cdk-json`` defaults to ``./cdk.json``; without one the built-in defaults are used, and
    ``voicectl <command>`` says so on standard error.

    Raises:
        UsageError: as :func:`parse_overrides` and :func:`load_cost_settings`.
    """
    overrides = parse_overrides(args.context, args.region)
    cdk_json = args.cdk_json
    if cdk_json is None and Path("cdk.json").is_file():
        cdk_json = Path("cdk.json")
    elif cdk_json is None:
        print(
            f"voicectl {command}: no cdk.json in the current directory: using the built-in "
            "default settings",
            file=sys.stderr,
        )
    return load_cost_settings(cdk_json, overrides), overrides


def endpoint_costs(
    settings: Settings,
    lookup: Callable[[str], pricing.HostingPrice],
    sonic_streams_per_instance: int | None = None,
) -> list[EndpointCost]:
    """The figures of every enabled endpoint of ``settings``.

    Args:
        settings: the loaded settings.
        lookup: instance type -> its price in ``settings.region``; raises
            :class:`pricing.PriceNotFound` (recorded on that endpoint) or another
            :class:`pricing.PricingError` (propagated: the whole lookup failed).
        sonic_streams_per_instance: overrides :data:`SONIC_STREAMS_PER_INSTANCE`.
    """
    costs: list[EndpointCost] = []
    plan = settings.capacity_plan
    if settings.voxtral.enabled and settings.voxtral.target == "ecs":
        v = settings.voxtral
        costs.append(
            _on_ecs(
                "voxtral",
                v.endpoint_name,
                settings.ecs.instance_type,
                settings.ecs.min_tasks,
                settings.ecs.max_tasks,
                plan.streams_per_instance,
            )
        )
    elif settings.voxtral.enabled:
        v = settings.voxtral
        # The priced type's own cap: with instance pools each pool type runs at its own
        # (ModelNameOverride).
        cap = plan.of(v.instance_type).stream_cap
        costs.append(
            _priced(
                lookup,
                EndpointCost(
                    section="voxtral",
                    endpoint_name=v.endpoint_name,
                    instance_type=v.instance_type,
                    min_instances=v.min_capacity,
                    max_instances=v.max_capacity,
                    streams_per_instance=cap,
                    streams_source=_voxtral_streams_source(v.stream_cap),
                    target_streams_per_instance=plan.target_fraction * cap,
                    target_source=(
                        f"voxtral.scaling_target_fraction {plan.target_fraction:g} x {cap}"
                    ),
                ),
            )
        )
    if settings.sonic.enabled and settings.sonic.target == "ecs":
        sonic = settings.sonic
        costs.append(
            _on_ecs(
                "sonic",
                sonic.endpoint_name,
                sonic.ecs_instance_type,
                sonic.min_capacity,
                sonic.max_capacity,
                SONIC_STREAMS_PER_INSTANCE.get(f"ml.{sonic.ecs_instance_type}") or 0,
            )
        )
    elif settings.sonic.enabled:
        s = settings.sonic
        if sonic_streams_per_instance is not None:
            streams, source = sonic_streams_per_instance, "--sonic-streams-per-instance"
        else:
            streams = SONIC_STREAMS_PER_INSTANCE.get(s.instance_type)
            source = (
                SONIC_STREAMS_SOURCE
                if streams
                else "unknown for this type: pass --sonic-streams-per-instance"
            )
        costs.append(
            _priced(
                lookup,
                EndpointCost(
                    section="sonic",
                    endpoint_name=s.endpoint_name,
                    instance_type=s.instance_type,
                    min_instances=s.min_capacity,
                    max_instances=s.max_capacity,
                    streams_per_instance=streams,
                    streams_source=source,
                    software_fee_note=SONIC_SOFTWARE_FEE_NOTE,
                ),
            )
        )
    return costs


def _voxtral_streams_source(max_num_seqs: int | str) -> str:
    """Where Voxtral's streams per instance come from: the setting, or the capacity model for
    ``auto``."""
    if max_num_seqs == "auto":
        return "voxtral.max_num_seqs=auto, the capacity model"
    return "voxtral.max_num_seqs"


def _on_ecs(
    section: str, name: str, ec2_type: str, min_tasks: int, max_tasks: int, streams: float
) -> EndpointCost:
    """An endpoint on the ECS target: EC2 instances (and a load balancer), which this command does
    not price."""
    return EndpointCost(
        section=section,
        endpoint_name=name,
        instance_type=ec2_type,
        min_instances=min_tasks,
        max_instances=max_tasks,
        streams_per_instance=streams,
        streams_source="",
        error=(
            f"{section}.target=ecs: ECS tasks on EC2 {ec2_type} (On-Demand or Spot) behind a "
            "load balancer; this command prices SageMaker hosting only (see Amazon EC2 pricing "
            "for that type)"
        ),
    )


def _priced(lookup: Callable[[str], pricing.HostingPrice], cost: EndpointCost) -> EndpointCost:
    try:
        return dataclasses.replace(cost, price=lookup(cost.instance_type))
    except pricing.PriceNotFound as error:
        return dataclasses.replace(cost, error=str(error))


# --- Output -------------------------------------------------------------------------------------


def _usd(value: float | None, places: int = 4) -> str:
    return "n/a" if value is None else f"USD {value:,.{places}f}"


def _streams(value: float) -> str:
    return f"{value:g}"


WIDTH = 116
INDENT = " " * 24


def format_text(costs: list[EndpointCost], region: str) -> str:
    """The human-readable report: one block per endpoint, then what the figures leave out."""
    endpoint_region = pricing.price_list_endpoint_region(region)
    lines = [
        f"On-demand Amazon SageMaker real-time inference prices in {region}, USD "
        f"(AWS Price List API, endpoint {endpoint_region}):"
    ]
    for c in costs:
        lines.append("")
        lines.append(f"{c.endpoint_name} ({c.section}): {c.instance_type}")
        if c.price is None:
            lines += textwrap.wrap(
                f"no price: {c.error}",
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
            continue
        p = c.price
        lines.append(
            f"  per instance-hour     {_usd(p.usd_per_hour)}  (SKU {p.sku}, {p.usage_type}, "
            f"effective {p.effective_date[:10] or 'n/a'})"
        )
        low = (
            f"{_usd(c.usd_per_month(c.min_instances), 2)} at "
            f"{c.section}.min_instances={c.min_instances}"
        )
        if c.max_instances != c.min_instances:
            low += (
                f"; {_usd(c.usd_per_month(c.max_instances), 2)} at "
                f"{c.section}.max_instances={c.max_instances}"
            )
        lines.append(f"  per month ({HOURS_PER_MONTH} h)     {low}")
        if c.streams_per_instance:
            unit = "live streams" if c.section == "voxtral" else "concurrent requests"
            lines.append(
                f"  per live stream-hour  {_usd(c.usd_per_stream_hour)} at "
                f"{_streams(c.streams_per_instance)} {unit} per instance ({c.streams_source})"
            )
            if c.target_streams_per_instance:
                lines.append(
                    f"{INDENT}{_usd(c.usd_per_stream_hour_at_target)} at the autoscaling target, "
                    f"{_streams(c.target_streams_per_instance)} per instance ({c.target_source})"
                )
        else:
            lines.append(f"  per live stream-hour  n/a: streams per instance {c.streams_source}")
        if c.software_fee_note:
            lines.append(
                textwrap.fill(
                    c.software_fee_note,
                    WIDTH,
                    initial_indent="  software fee          ",
                    subsequent_indent=INDENT,
                    break_on_hyphens=False,
                    break_long_words=False,
                )
            )
    lines.extend(["", textwrap.fill(FOOTNOTE, WIDTH, break_on_hyphens=False)])
    return "\n".join(lines)


def to_json(costs: list[EndpointCost], region: str) -> dict[str, Any]:
    """The report as one JSON object. Money in USD (keys say the unit), rounded to 6 decimal
    places."""

    def money(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    endpoints = []
    for c in costs:
        p = c.price
        endpoints.append(
            {
                "section": c.section,
                "endpoint_name": c.endpoint_name,
                "instance_type": c.instance_type,
                "usd_per_instance_hour": None if p is None else p.usd_per_hour,
                "sku": None if p is None else p.sku,
                "usage_type": None if p is None else p.usage_type,
                "price_description": None if p is None else p.description,
                "effective_date": None if p is None else p.effective_date,
                "min_instances": c.min_instances,
                "max_instances": c.max_instances,
                "usd_per_month_at_min_instances": money(c.usd_per_month(c.min_instances)),
                "usd_per_month_at_max_instances": money(c.usd_per_month(c.max_instances)),
                "streams_per_instance": c.streams_per_instance,
                "streams_per_instance_source": c.streams_source,
                "usd_per_live_stream_hour": money(c.usd_per_stream_hour),
                "autoscaling_target_streams_per_instance": c.target_streams_per_instance,
                "autoscaling_target_source": c.target_source or None,
                "usd_per_live_stream_hour_at_autoscaling_target": money(
                    c.usd_per_stream_hour_at_target
                ),
                "software_fee_usd_per_instance_hour": None,
                "software_fee_note": c.software_fee_note,
                "error": c.error,
            }
        )
    return {
        "region": region,
        "price_list_endpoint_region": pricing.price_list_endpoint_region(region),
        "currency": "USD",
        "hours_per_month": HOURS_PER_MONTH,
        "endpoints": endpoints,
        "not_included": FOOTNOTE,
    }


# --- Command ------------------------------------------------------------------------------------

DESCRIPTION = (
    "Print what the configured endpoints cost: the on-demand SageMaker real-time inference price "
    "of each endpoint's instance type in the 'region' setting, read now from the AWS Price List "
    "API, per instance-hour, per 730-hour month at min_instances and max_instances, and per live "
    "stream-hour at the streams one instance serves (Voxtral: voxtral.max_num_seqs; Sonic: "
    "Cartesia's published concurrency). Settings come from cdk.json and -c key=value, as for "
    "make synth. Needs AWS credentials allowed pricing:GetProducts; calls nothing else."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``cost`` to the voicectl parser."""
    parser = subparsers.add_parser(
        "cost",
        help="what the configured endpoints cost per hour, month and live stream-hour (AWS Price "
        "List API)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting, as for cdk synth (repeatable), e.g. -c "
        "voxtral.instance_type=ml.g6e.xlarge",
    )
    parser.add_argument(
        "--region",
        help="price another Region: the same as -c region=REGION "
        "(default: the 'region' setting, where make deploy deploys)",
    )
    parser.add_argument(
        "--cdk-json",
        type=Path,
        default=None,
        help="the cdk.json to read settings from (default: ./cdk.json, or the built-in defaults "
        "when there is none)",
    )
    parser.add_argument(
        "--sonic-streams-per-instance",
        type=_positive_int,
        default=None,
        metavar="N",
        help="concurrent Sonic requests one instance serves (default: Cartesia's published figure "
        "for the instance type, 8 on the one-GPU ml.g6e sizes)",
    )
    parser.add_argument(
        "--profile", help="AWS profile for the credentials (default: the standard chain)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the report"
    )
    parser.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def parse_overrides(pairs: list[str], region: str | None) -> dict[str, str]:
    """``-c key=value`` pairs (and ``--region``) as a context mapping.

    Raises:
        UsageError: a pair without ``=``, or ``--region`` together with a different ``-c region=``.
    """
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(
                f"-c {pair!r}: expected KEY=VALUE, e.g. -c voxtral.instance_type=ml.g6e.xlarge"
            )
        overrides[key] = value
    if region is not None:
        if overrides.get("region", region) != region:
            raise UsageError(
                f"--region {region} and -c region={overrides['region']} disagree; give one"
            )
        overrides["region"] = region
    return overrides


def run(args: argparse.Namespace) -> int:
    """Run ``voicectl cost``: validate everything, then one GetProducts per distinct instance type.

    Raises:
        UsageError: bad settings or arguments (exit 2).
    """
    settings, overrides = settings_from_args(args, "cost")
    try:
        pricing.price_list_endpoint_region(settings.region)
    except pricing.PricingError as error:
        raise UsageError(str(error)) from None
    _note_environment_region(settings.region, "region" in overrides)

    try:
        session = boto3.Session(profile_name=args.profile)
    except botocore.exceptions.ProfileNotFound as error:
        raise UsageError(f"{error}; list profiles with `aws configure list-profiles`") from None
    try:
        client = pricing.pricing_client(session, settings.region)
        prices: dict[str, pricing.HostingPrice] = {}

        def lookup(instance_type: str) -> pricing.HostingPrice:
            if instance_type not in prices:
                prices[instance_type] = pricing.hosting_price(
                    instance_type, settings.region, client=client
                )
            return prices[instance_type]

        costs = endpoint_costs(settings, lookup, args.sonic_streams_per_instance)
    except pricing.PricingError as error:
        print(f"voicectl cost: {error}", file=sys.stderr)
        return 1

    if args.json:
        print(json.dumps(to_json(costs, settings.region), indent=2))
    else:
        print(format_text(costs, settings.region))
    failed = [c for c in costs if c.price is None]
    for c in failed:
        print(f"voicectl cost: {c.section} ({c.instance_type}): {c.error}", file=sys.stderr)
    return 1 if failed else 0


def _note_environment_region(region: str, explicit: bool) -> None:
    """Say so on stderr when ``AWS_REGION`` (or ``AWS_DEFAULT_REGION``) names another Region than
    the one priced.

    The priced Region is the ``region`` setting because that is where ``make deploy`` puts the
    stacks (stacks/__init__.py builds every stack's Environment from it); the environment's Region
    does not move them.
    """
    name = "AWS_REGION" if os.environ.get("AWS_REGION") else "AWS_DEFAULT_REGION"
    environment = os.environ.get(name)
    if environment and environment != region and not explicit:
        print(
            f"voicectl cost: note: {name}={environment}, but the 'region' setting is {region} "
            f"and make deploy deploys there, so these are {region} prices; pass --region "
            f"{environment} (or -c region={environment}) to price {environment}",
            file=sys.stderr,
        )
