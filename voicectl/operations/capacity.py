"""``voicectl capacity``: live Voxtral streams per instance, the GPU memory split and the cost per
live stream-hour.

For the Voxtral endpoint of the settings (cdk.json ``context`` plus ``-c key=value``, read by the
same ``load_settings`` as ``cdk synth``) and any ``--instance-type`` added for comparison, prints
what the capacity model (:mod:`constructs_lib.facts.capacity`, which follows vLLM 0.31.0's KV-cache
accounting) says one instance serves:

- streams per instance: ``voxtral.max_num_seqs`` resolved (``auto``: the smaller of the KV-cache fit
  and the compute budget; a number: that number), and both bounds;
- GPU memory split: the part of the GPU vLLM takes (``gpu_memory_utilization``) into weights, KV
  cache and overhead (activations, CUDA graphs, memory outside torch), and the KV one live stream
  holds;
- vLLM's own startup figure ("Maximum concurrency for max_model_len tokens per request"), which
  charges every request a full prefill batch in flight and so is lower;
- with ``--prices`` (AWS credentials allowed ``pricing:GetProducts``): the on-demand price per
  instance-hour (:func:`voicectl.operations.pricing.usd_per_hour`), per live stream-hour (price /
  streams per instance) and per audio hour at the autoscaling target (price / (streams x
  ``scaling_target_fraction``): the fleet autoscaling holds). A live stream transcribes audio as it
  is spoken, so one stream-hour is one hour of audio.

With ``--compare``: every GPU instance type of the catalogue
(constructs_lib/facts/instance_types.py) that serves the model, on both targets (SageMaker ``ml.*``
types; the ECS target's EC2 types, one task per GPU), at the settings' ``max_model_len``,
``gpu_memory_utilization`` and ``kv_cache_dtype``: streams per instance (``auto``) with the range
the model's assumptions allow, what bounds it, instances for ``--streams N`` concurrent streams at
the autoscaling target, USD per instance-hour, per live stream-hour and per hour for the N streams,
cheapest per live stream-hour first. Prices come from the Price List API with ``--prices``, else
from the dated table shipped with voicectl (:mod:`voicectl.operations.price_table`), and the report
says which. Types left out are listed with the reason (no BF16, nothing fits, idle GPUs, FP8 KV
refused there).

Exit codes: 0 done; 1 a price could not be read (``--prices``); 2 bad input. Without ``--prices`` it
calls nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.capacity_plan import size
from constructs_lib.ecs_service.props import gpu_spec as ecs_gpu_spec
from constructs_lib.facts import capacity as model, instance_types
from voicectl.cli import UsageError
from voicectl.operations import price_table
from voicectl.operations.cost import settings_from_args

GiB = 2**30


@dataclass(frozen=True)
class Row:
    """One instance type's figures. ``streams`` is what the endpoint would run with (the setting,
    resolved); ``usd_per_hour`` is None without ``--prices`` or when the price could not be read
    (``price_error`` says why)."""

    capacity: model.Capacity
    streams: int
    streams_source: str
    target_fraction: float
    usd_per_hour: float | None = None
    price_error: str | None = None

    @property
    def usd_per_stream_hour(self) -> float | None:
        return (
            None
            if self.usd_per_hour is None or not self.streams
            else self.usd_per_hour / self.streams
        )

    @property
    def usd_per_audio_hour_at_target(self) -> float | None:
        target = self.streams * self.target_fraction
        return None if self.usd_per_hour is None or not target else self.usd_per_hour / target


def rows(settings: Any, extra_types: list[str]) -> list[Row]:
    """The figures of ``voxtral.instance_type`` (or each of ``voxtral.instance_pools``) and each of
    ``extra_types`` (settings otherwise unchanged).

    Raises:
        UsageError: an extra type is not a GPU type of the catalogue.
    """
    v, plan = settings.voxtral, settings.capacity_plan
    configured = list(dict.fromkeys(v.instance_pools or [v.instance_type]))
    planned = {t.instance_type: t for t in plan.types}
    result = []
    for instance_type in [*configured, *[t for t in extra_types if t not in configured]]:
        spec = instance_types.lookup(instance_type)
        if spec is None or not spec.gpus:
            raise UsageError(
                f"--instance-type {instance_type}: not a GPU instance type of "
                "constructs_lib/facts/instance_types.py (GPU types: "
                f"{instance_types.gpu_families()})"
            )
        # The plan's figures for the types the service runs; the same sizing for the others.
        sized = planned.get(instance_type) or size(v, instance_type)
        fitted = sized.capacity
        assert fitted is not None, "valid settings size every GPU type"
        if v.stream_cap == "auto" and instance_type in configured and len(configured) > 1:
            # Each pool type runs a Model of its own (InstancePool ModelNameOverride) with its own
            # cap.
            source = (
                f"auto: {fitted.limited_by} bound; the variant's Model"
                if instance_type == configured[0]
                else f"auto: {fitted.limited_by} bound; this pool's own Model"
            )
        elif v.stream_cap == "auto":
            source = f"auto: {fitted.limited_by} bound"
        else:
            source = "voxtral.max_num_seqs"
        result.append(Row(fitted, sized.stream_cap, source, plan.target_fraction))
    return result


def _gib(value: int) -> str:
    return f"{value / GiB:.1f}"


def format_text(table: list[Row], settings: Any) -> str:
    """The report: a header with the settings the figures depend on, then one block per instance
    type."""
    v = settings.voxtral
    minutes = v.max_model_len / model.VOXTRAL_REALTIME.tokens_per_audio_s / 60
    # Lines stay within 120 characters (the README shows this report as it is printed).
    kv = "" if v.kv_cache_dtype == "auto" else f", kv_cache_dtype {v.kv_cache_dtype}"
    lines = [
        f"Voxtral Realtime on vLLM 0.31.0: max_model_len {v.max_model_len} tokens ({minutes:g} "
        "min of audio per stream),",
        f"gpu_memory_utilization {v.gpu_memory_utilization:g}{kv} (capacity model: "
        "constructs_lib/facts/capacity.py)",
    ]
    for row in table:
        c = row.capacity
        compute = (
            "n/a (no speed facts for this GPU)" if c.compute_cap is None else str(c.compute_cap)
        )
        low, high = c.streams_range or (c.streams, c.streams)
        lines += [
            "",
            f"{c.instance_type}: one {c.gpu.name} ({_gib(c.gpu.memory_bytes)} GiB) serves the "
            "model",
            f"  streams per instance  {row.streams} ({row.streams_source}; KV cache fits "
            f"{c.fit}, compute budget {compute})",
            f"  range                 {low}-{high} streams at the ends of the model's "
            "assumptions (README 'Capacity')",
            f"  GPU memory for vLLM   {_gib(c.budget_bytes)} GiB = weights "
            f"{_gib(c.weight_bytes)} + KV cache {_gib(c.kv_bytes)} + overhead "
            f"{_gib(c.overhead_bytes)}",
            f"                        (overhead: activations of {c.max_num_batched_tokens} "
            "batched tokens, CUDA graphs, outside torch)",
            f"  KV per live stream    {c.stream_kv_bytes / GiB:.2f} GiB ({c.stream_blocks} "
            f"blocks of {c.block_bytes // 2**20} MiB; pool {c.num_blocks} blocks)",
            f"  vLLM's startup figure {c.vllm_max_concurrency:.2f}x maximum concurrency for "
            f"{v.max_model_len}-token requests",
            f"                        ({c.vllm_request_blocks} blocks each: 2 batches of "
            f"{c.max_num_batched_tokens} tokens in flight)",
        ]
        if row.usd_per_hour is not None:
            target = row.streams * row.target_fraction
            lines += [
                f"  on demand             USD {row.usd_per_hour:.4f} per instance-hour",
                f"  per live stream-hour  USD {row.usd_per_stream_hour:.4f} at {row.streams} "
                "streams per instance",
                f"  per audio hour        USD {row.usd_per_audio_hour_at_target:.4f} at the "
                f"autoscaling target ({row.target_fraction:g} x {row.streams} = {target:g} "
                "streams per instance)",
            ]
        elif row.price_error:
            lines.append(f"  no price: {row.price_error}")
    if all(row.usd_per_hour is None and not row.price_error for row in table):
        lines += [
            "",
            "Prices: add --prices (AWS credentials allowed pricing:GetProducts) for the "
            "on-demand price per instance-hour,",
            "per live stream-hour and per audio hour.",
        ]
    return "\n".join(lines)


def to_json(table: list[Row], settings: Any) -> dict[str, Any]:
    """The report as one JSON object. Bytes in bytes, money in USD (keys say the unit)."""
    v = settings.voxtral
    out = []
    for row in table:
        c = row.capacity
        out.append(
            {
                "instance_type": c.instance_type,
                "gpu": c.gpu.name,
                "gpu_memory_bytes": c.gpu.memory_bytes,
                "streams_per_instance": row.streams,
                "streams_source": row.streams_source,
                "kv_cache_fit": c.fit,
                "compute_cap": c.compute_cap,
                "streams_range": list(c.streams_range) if c.streams_range else None,
                "vllm_budget_bytes": c.budget_bytes,
                "weight_bytes": c.weight_bytes,
                "kv_cache_bytes": c.kv_bytes,
                "overhead_bytes": c.overhead_bytes,
                "kv_bytes_per_stream": c.stream_kv_bytes,
                "pool_blocks": c.num_blocks,
                "block_bytes": c.block_bytes,
                "max_num_batched_tokens": c.max_num_batched_tokens,
                "vllm_max_concurrency": round(c.vllm_max_concurrency, 4),
                "usd_per_instance_hour": row.usd_per_hour,
                "usd_per_live_stream_hour": row.usd_per_stream_hour,
                "usd_per_audio_hour_at_autoscaling_target": row.usd_per_audio_hour_at_target,
                "price_error": row.price_error,
            }
        )
    return {
        "max_model_len": v.max_model_len,
        "gpu_memory_utilization": v.gpu_memory_utilization,
        "kv_cache_dtype": v.kv_cache_dtype,
        "region": settings.region,
        "instance_types": out,
    }


# --- --compare: every type that serves the model, cheapest per live stream-hour first -----------

#: ``--streams`` when not given: a contact centre's floor of concurrent calls.
DEFAULT_STREAMS = 100


@dataclass(frozen=True)
class Option:
    """One instance type on one target, sized for ``--streams`` concurrent streams.

    Attributes:
        target: ``sagemaker`` (a real-time endpoint, one vLLM on one GPU) or ``ecs`` (EC2 hosts, one
            task per GPU).
        instance_type: ``ml.g6e.xlarge`` (SageMaker) or ``g6e.xlarge`` (EC2).
        capacity: the capacity model's answer for one GPU.
        gpus: GPUs that serve streams (1 on SageMaker; every GPU of an ECS host).
        streams: live streams per instance (``auto``: streams per GPU x ``gpus``).
        streams_range: ``(low, high)`` per instance at the ends of the model's assumptions.
        instances: instances that hold ``wanted`` streams at the autoscaling target (``ceil(wanted /
            (streams x target fraction))``).
        usd_per_hour / price_source: USD per instance-hour and where it comes from, or None
            (``price_error`` says why).
    """

    target: str
    instance_type: str
    capacity: model.Capacity
    gpus: int
    streams: int
    streams_range: tuple[int, int]
    instances: int
    usd_per_hour: float | None = None
    price_source: str | None = None
    price_error: str | None = None

    @property
    def usd_per_stream_hour(self) -> float | None:
        """USD per live stream-hour at the cap (price / streams per instance)."""
        return None if self.usd_per_hour is None else self.usd_per_hour / self.streams

    @property
    def usd_per_hour_for_streams(self) -> float | None:
        """USD per hour of the ``instances`` that hold the wanted streams at the autoscaling
        target."""
        return None if self.usd_per_hour is None else self.usd_per_hour * self.instances


@dataclass(frozen=True)
class Comparison:
    """``voicectl capacity --compare``: the options, cheapest first, and what was left out and
    why."""

    wanted: int
    target_fraction: float
    options: list[Option]
    left_out: list[tuple[str, str]]
    prices: str


def candidates(
    settings: Any,
) -> tuple[list[tuple[str, str, instance_types.InstanceSpec]], list[tuple[str, str]]]:
    """``([(target, instance type, spec)], [(instance type, why left out)])`` over the catalogue's
    GPU types."""
    v = settings.voxtral
    chosen, left_out = [], []
    for name, spec in instance_types.CATALOGUE.items():
        if not spec.gpus:
            continue
        problem = model.serving_problem(spec.gpu_model)
        if problem is None and v.kv_cache_dtype == "fp8":
            problem = model.fp8_kv_cache_problem(spec.gpu_model)
            problem = problem and f"kv_cache_dtype fp8 refused on {spec.gpu_model}"
        if problem is not None:
            left_out.append((f"{name} / {name[3:]}", problem))
            continue
        if spec.gpus == 1:
            chosen.append(("sagemaker", name, spec))
        else:
            left_out.append(
                (
                    name,
                    f"{spec.gpus} GPUs; a SageMaker instance runs one vLLM on one GPU, so "
                    f"{spec.gpus - 1} would idle (the ECS target runs one task per GPU)",
                )
            )
        if ecs_gpu_spec(name[3:]) is not None:
            chosen.append(("ecs", name[3:], spec))
    return chosen, left_out


def compare(settings: Any, wanted: int, price_of: Any) -> Comparison:
    """Size every candidate for ``wanted`` streams and price it with ``price_of(target, instance
    type)`` -> ``(usd_per_hour | None, source | None, error | None)``; cheapest per live stream-hour
    first, unpriced last."""
    v = settings.voxtral
    chosen, left_out = candidates(settings)
    options = []
    for target, name, spec in chosen:
        fitted = model.fit(
            spec, v.max_model_len, v.gpu_memory_utilization, kv_cache_dtype=v.kv_cache_dtype
        )
        if fitted.streams < 1:
            left_out.append(
                (
                    name,
                    f"one {spec.gpu_model} holds no live stream of {v.max_model_len} tokens at "
                    f"gpu_memory_utilization {v.gpu_memory_utilization:g}",
                )
            )
            continue
        gpus = spec.gpus if target == "ecs" else 1
        low, high = fitted.streams_range or (fitted.streams, fitted.streams)
        streams = fitted.streams * gpus
        instances = math.ceil(wanted / (streams * v.scaling_target_fraction))
        usd, source, error = price_of(target, name)
        options.append(
            Option(
                target,
                name,
                fitted,
                gpus,
                streams,
                (low * gpus, high * gpus),
                instances,
                usd,
                source,
                error,
            )
        )
    options.sort(key=_cheapest)
    return Comparison(wanted, v.scaling_target_fraction, options, left_out, "")


def _cheapest(o: Option) -> tuple:
    """Cheapest per live stream-hour first, then per instance-hour; unpriced last, fewest vCPUs
    first."""
    spec = instance_types.lookup(
        o.instance_type if o.target == "sagemaker" else f"ml.{o.instance_type}"
    )
    return (
        o.usd_per_stream_hour is None,
        o.usd_per_stream_hour or 0.0,
        o.usd_per_hour or 0.0,
        spec.vcpus if spec else 0,
        o.instance_type,
    )


def collapse(result: Comparison) -> tuple[list[Option], list[tuple[Option, list[str]]]]:
    """``(shown, [(option, the other sizes of it)])``: of the sizes with the same GPUs on the same
    target (more vCPUs and host memory, the same streams), only the cheapest is shown; the others
    never cost less per stream."""
    kept: dict[tuple, Option] = {}
    others: dict[tuple, list[str]] = {}
    for o in result.options:  # cheapest first, so the first of each group is kept
        key = (o.target, o.capacity.gpu.name, o.gpus)
        if key in kept:
            others[key].append(o.instance_type)
        else:
            kept[key], others[key] = o, []
    return list(kept.values()), [(kept[key], names) for key, names in others.items() if names]


def _short_gpu(name: str) -> str:
    return name.removeprefix("NVIDIA ").removesuffix(" Server Edition")


def _bound(c: model.Capacity) -> str:
    return "memory*" if c.compute_cap is None else c.limited_by


def format_compare(result: Comparison, settings: Any, every_size: bool = False) -> str:
    """The comparison as a table (every line within 120 characters: the README shows it as printed);
    of the sizes with the same GPUs only the cheapest unless ``every_size`` (:func:`collapse`)."""
    v = settings.voxtral
    minutes = v.max_model_len / model.VOXTRAL_REALTIME.tokens_per_audio_s / 60
    fleet_title = f"USD/h for {result.wanted}"
    fleet_width = max(
        15, len(fleet_title) + 2
    )  # two spaces from the column before, however many streams
    lines = [
        f"Voxtral Realtime on vLLM 0.31.0: max_model_len {v.max_model_len} ({minutes:g} min of "
        f"audio), gpu_memory_utilization {v.gpu_memory_utilization:g}, kv_cache_dtype "
        f"{v.kv_cache_dtype}",
        f"Sized for {result.wanted} concurrent streams at the autoscaling target "
        f"({result.target_fraction:g} x the streams per instance)",
        *textwrap.wrap(f"Prices: USD on demand, {result.prices}", 120),
        "",
        f"{'target':<10}{'instance type':<16}{'GPU':<14}{'streams (range)':<17}{'bound':<9}"
        f"{'instances':>9}{'USD/instance-h':>16}{'USD/stream-h':>14}{fleet_title:>{fleet_width}}",
    ]
    shown, collapsed = (result.options, []) if every_size else collapse(result)
    for o in shown:
        price = "-" if o.usd_per_hour is None else f"{o.usd_per_hour:.4f}"
        per_stream = "-" if o.usd_per_stream_hour is None else f"{o.usd_per_stream_hour:.4f}"
        fleet = "-" if o.usd_per_hour_for_streams is None else f"{o.usd_per_hour_for_streams:.2f}"
        gpu = _short_gpu(o.capacity.gpu.name) + (f" x{o.gpus}" if o.gpus > 1 else "")
        lines.append(
            f"{o.target:<10}{o.instance_type:<16}{gpu[:13]:<14}"
            f"{f'{o.streams} ({o.streams_range[0]}-{o.streams_range[1]})':<17}"
            f"{_bound(o.capacity):<9}{o.instances:>9}{price:>16}{per_stream:>14}"
            f"{fleet:>{fleet_width}}"
        )
    unpriced = sorted({o.price_error for o in result.options if o.price_error})
    lines += [
        "",
        "streams: the cap auto gives one instance (ECS: one task per GPU); range: at the ends of "
        "the model's assumptions",
        "(README 'Capacity'); bound: memory (the KV cache), compute (decoding in real time), "
        "memory* (no speed facts",
        "for this GPU: the compute bound is unknown); -: no price ("
        + ("; ".join(unpriced) or "none missing")
        + ")",
    ]
    if collapsed:
        lines += [
            "",
            "The same GPUs with more vCPUs and host memory, never cheaper per stream (--all "
            "shows them):",
        ]
        for o, names in collapsed:
            lines += textwrap.wrap(
                f"{o.instance_type} ({o.target}): {', '.join(names)}",
                120,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    if result.left_out:
        lines += ["", "Left out:"]
        grouped: dict[str, list[str]] = {}
        for name, why in result.left_out:
            grouped.setdefault(why, []).append(name)
        for why, names in grouped.items():
            lines += textwrap.wrap(
                f"{', '.join(names)}: {why}", 120, initial_indent="  ", subsequent_indent="    "
            )
    return "\n".join(lines)


def compare_to_json(result: Comparison, settings: Any) -> dict[str, Any]:
    """The comparison as one JSON object; money in USD, keys say the unit."""
    v = settings.voxtral
    return {
        "max_model_len": v.max_model_len,
        "gpu_memory_utilization": v.gpu_memory_utilization,
        "kv_cache_dtype": v.kv_cache_dtype,
        "region": settings.region,
        "streams_wanted": result.wanted,
        "autoscaling_target_fraction": result.target_fraction,
        "prices": result.prices,
        "options": [
            {
                "target": o.target,
                "instance_type": o.instance_type,
                "gpu": o.capacity.gpu.name,
                "gpus_serving": o.gpus,
                "streams_per_instance": o.streams,
                "streams_range": list(o.streams_range),
                "bound": _bound(o.capacity),
                "kv_cache_fit_per_gpu": o.capacity.fit,
                "compute_cap_per_gpu": o.capacity.compute_cap,
                "instances_for_streams": o.instances,
                "usd_per_instance_hour": o.usd_per_hour,
                "usd_per_live_stream_hour": o.usd_per_stream_hour,
                "usd_per_hour_for_streams": o.usd_per_hour_for_streams,
                "price_source": o.price_source,
                "price_error": o.price_error,
            }
            for o in result.options
        ],
        "left_out": [{"instance_type": name, "reason": why} for name, why in result.left_out],
    }


def _table_price(region: str) -> Any:
    """``price_of`` from the shipped table (:mod:`voicectl.operations.price_table`)."""

    def price_of(target: str, instance_type: str) -> tuple[float | None, str | None, str | None]:
        found = price_table.lookup(instance_type, region)
        if found is None:
            why = (
                f"the table has no {region} prices"
                if region != price_table.REGION
                else "not in the price table"
            )
            return None, None, why
        return found.usd_per_hour, found.source, None

    return price_of


def _price_list_price(client: Any, region: str) -> Any:
    """``price_of`` from the Price List API (SageMaker hosting for ``ml.*``, EC2 Linux on demand
    otherwise)."""
    from voicectl.operations import pricing

    def price_of(target: str, instance_type: str) -> tuple[float | None, str | None, str | None]:
        try:
            if target == "sagemaker":
                return (
                    pricing.usd_per_hour(instance_type, region, client=client),
                    "Price List API",
                    None,
                )
            return (
                pricing.ec2_usd_per_hour(instance_type, region, client=client),
                "Price List API",
                None,
            )
        except pricing.PriceNotFound:
            return None, None, "not in the Price List"

    return price_of


def run_compare(args: argparse.Namespace, settings: Any) -> int:
    """``voicectl capacity --compare``: priced from the Price List with ``--prices`` (exit 1 if it
    cannot be read at all), else from the shipped table."""
    if args.streams < 1:
        raise UsageError(
            f"--streams {args.streams}: must be a whole number of concurrent streams, at least 1"
        )
    region = settings.region
    if args.prices:
        from voicectl.operations import pricing

        client = _pricing_client(args.profile, region)
        try:
            result = compare(settings, args.streams, _price_list_price(client, region))
        except pricing.PricingError as error:
            print(
                f"voicectl capacity: the Price List API could not be read: {error}", file=sys.stderr
            )
            return 1
        result = dataclasses.replace(result, prices=f"the AWS Price List API, {region} (read now)")
    else:
        result = compare(settings, args.streams, _table_price(region))
        result = dataclasses.replace(
            result, prices=price_table.describe() + "; add --prices for today's"
        )
    print(
        json.dumps(compare_to_json(result, settings), indent=2)
        if args.json
        else format_compare(result, settings, every_size=args.all)
    )
    return 0


def _pricing_client(profile: str | None, region: str) -> Any:
    """A Price List client, or UsageError/exit-1 reasons as for the per-type report."""
    import boto3
    import botocore.exceptions

    from voicectl.operations import pricing

    try:
        session = boto3.Session(profile_name=profile)
    except botocore.exceptions.ProfileNotFound as error:
        raise UsageError(f"{error}; list profiles with `aws configure list-profiles`") from None
    try:
        return pricing.pricing_client(session, region)
    except pricing.PricingError as error:
        raise PriceListUnavailable(str(error)) from None


class PriceListUnavailable(Exception):
    """``--compare --prices`` without a usable Price List client (exit 1, the reason on stderr)."""


DESCRIPTION = (
    "Print how many live Voxtral streams one instance serves (voxtral.max_num_seqs resolved, the "
    "KV-cache fit and the compute budget of the capacity model), the GPU memory split (weights, "
    "KV cache, overhead), vLLM's own startup figure and, with --prices, the on-demand cost per "
    "live stream-hour and per audio hour. --compare ranks every GPU instance type that serves "
    "the model (SageMaker and ECS) by cost per live stream-hour, priced from the price table "
    "shipped with voicectl, or from the Price List API with --prices. Settings come from "
    "cdk.json and -c key=value, as for make synth. Needs no AWS access unless --prices is given."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``capacity`` to the voicectl parser."""
    parser = subparsers.add_parser(
        "capacity",
        help="live Voxtral streams per instance, GPU memory split and cost per live stream-hour",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting, as for cdk synth (repeatable), e.g. -c voxtral.max_model_len=7500",
    )
    parser.add_argument(
        "--instance-type",
        action="append",
        default=[],
        metavar="TYPE",
        help="also show this instance type (repeatable), e.g. --instance-type ml.g6e.xlarge",
    )
    parser.add_argument(
        "--cdk-json",
        type=Path,
        default=None,
        help="the cdk.json to read settings from (default: ./cdk.json, or the built-in defaults)",
    )
    parser.add_argument(
        "--prices",
        action="store_true",
        help="add on-demand prices from the AWS Price List API (needs pricing:GetProducts)",
    )
    parser.add_argument("--region", help="price another Region (the same as -c region=REGION)")
    parser.add_argument("--profile", help="AWS profile for --prices (default: the standard chain)")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="compare every GPU instance type that serves the model (SageMaker and the ECS "
        "target's EC2 types), cheapest per live stream-hour first",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="with --compare: every size, also those with the same GPUs and more vCPUs",
    )
    parser.add_argument(
        "--streams",
        type=int,
        default=DEFAULT_STREAMS,
        metavar="N",
        help=f"with --compare: concurrent streams to size for (default {DEFAULT_STREAMS})",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the report"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``voicectl capacity``.

    Raises:
        UsageError: bad settings or arguments (exit 2).
    """
    settings, _ = settings_from_args(args, "capacity")
    if args.compare:
        if args.instance_type:
            raise UsageError(
                "--instance-type and --compare: --compare already shows every GPU instance type"
            )
        try:
            return run_compare(args, settings)
        except PriceListUnavailable as error:
            print(f"voicectl capacity: no prices from the Price List API: {error}", file=sys.stderr)
            return 1
    table = rows(settings, args.instance_type)
    failed = False
    if args.prices:
        table, failed = _priced(table, settings.region, args.profile)
    print(
        json.dumps(to_json(table, settings), indent=2)
        if args.json
        else format_text(table, settings)
    )
    return 1 if failed else 0


def _priced(table: list[Row], region: str, profile: str | None) -> tuple[list[Row], bool]:
    """``table`` with prices; whether any could not be read (each row says why)."""
    import dataclasses

    import boto3
    import botocore.exceptions

    from voicectl.operations import pricing

    try:
        session = boto3.Session(profile_name=profile)
    except botocore.exceptions.ProfileNotFound as error:
        raise UsageError(f"{error}; list profiles with `aws configure list-profiles`") from None
    try:
        client = pricing.pricing_client(session, region)
    except (
        pricing.PricingError
    ) as error:  # no client, so no row has a price: each says why (not "add --prices")
        return [dataclasses.replace(row, price_error=str(error)) for row in table], True
    priced, failed = [], False
    for row in table:
        try:
            priced.append(
                dataclasses.replace(
                    row,
                    usd_per_hour=pricing.usd_per_hour(
                        row.capacity.instance_type, region, client=client
                    ),
                )
            )
        except pricing.PricingError as error:
            priced.append(dataclasses.replace(row, price_error=str(error)))
            failed = True
    return priced, failed
