"""``voicectl capacity``: live Voxtral streams per instance, the GPU memory split and the cost per live stream-hour.

For the Voxtral endpoint of the settings (cdk.json ``context`` plus ``-c key=value``, read by the same
``load_settings`` as ``cdk synth``) and any ``--instance-type`` added for comparison, prints what the capacity model
(:mod:`constructs_lib.capacity`, which follows vLLM 0.31.0's KV-cache accounting) says one instance serves:

- streams per instance: ``voxtral.max_num_seqs`` resolved (``auto``: the smaller of the KV-cache fit and the compute
  budget; a number: that number), and both bounds;
- GPU memory split: the part of the GPU vLLM takes (``gpu_memory_utilization``) into weights, KV cache and
  overhead (activations, CUDA graphs, memory outside torch), and the KV one live stream holds;
- vLLM's own startup figure ("Maximum concurrency for max_model_len tokens per request"), which charges every
  request a full prefill batch in flight and so is lower;
- with ``--prices`` (AWS credentials allowed ``pricing:GetProducts``): the on-demand price per instance-hour
  (:func:`voicectl.pricing.usd_per_hour`), per live stream-hour (price / streams per instance) and per audio hour at
  the autoscaling target (price / (streams x ``scaling_target_fraction``): the fleet autoscaling holds). A live stream
  transcribes audio as it is spoken, so one stream-hour is one hour of audio.

Exit codes: 0 done; 1 a price could not be read (``--prices``); 2 bad input. Without ``--prices`` it calls nothing.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constructs_lib import capacity as model
from constructs_lib import instance_types
from voicectl.cli import UsageError
from voicectl.cost import settings_from_args

GiB = 2**30


@dataclass(frozen=True)
class Row:
    """One instance type's figures. ``streams`` is what the endpoint would run with (the setting, resolved);
    ``usd_per_hour`` is None without ``--prices`` or when the price could not be read (``price_error`` says why)."""

    capacity: model.Capacity
    streams: int
    streams_source: str
    target_fraction: float
    usd_per_hour: float | None = None
    price_error: str | None = None

    @property
    def usd_per_stream_hour(self) -> float | None:
        return None if self.usd_per_hour is None or not self.streams else self.usd_per_hour / self.streams

    @property
    def usd_per_audio_hour_at_target(self) -> float | None:
        target = self.streams * self.target_fraction
        return None if self.usd_per_hour is None or not target else self.usd_per_hour / target


def rows(settings: Any, extra_types: list[str]) -> list[Row]:
    """The figures of ``voxtral.instance_type`` (or each of ``voxtral.instance_pools``) and each of ``extra_types``
    (settings otherwise unchanged).

    Raises:
        UsageError: an extra type is not a GPU type of the catalogue.
    """
    v = settings.voxtral
    configured = list(dict.fromkeys(v.instance_pools or [v.instance_type]))
    result = []
    for instance_type in [*configured, *[t for t in extra_types if t not in configured]]:
        spec = instance_types.lookup(instance_type)
        if spec is None or not spec.gpus:
            raise UsageError(f"--instance-type {instance_type}: not a GPU instance type of "
                             f"constructs_lib/instance_types.py (GPU types: {instance_types.gpu_families()})")
        fitted = model.fit(spec, v.max_model_len, v.gpu_memory_utilization)
        if v.max_num_seqs == "auto" and instance_type in configured and len(configured) > 1:
            # vLLM gets one max_num_seqs on every pool type: the type that serves the fewest sets it.
            streams, source = v.streams_per_instance, "auto: the fewest of voxtral.instance_pools"
        elif v.max_num_seqs == "auto":
            streams, source = max(1, fitted.streams), f"auto: {fitted.limited_by} bound"
        else:
            streams, source = v.max_num_seqs, "voxtral.max_num_seqs"
        result.append(Row(fitted, streams, source, v.scaling_target_fraction))
    return result


def _gib(value: int) -> str:
    return f"{value / GiB:.1f}"


def format_text(table: list[Row], settings: Any) -> str:
    """The report: a header with the settings the figures depend on, then one block per instance type."""
    v = settings.voxtral
    minutes = v.max_model_len / model.VOXTRAL_REALTIME.tokens_per_audio_s / 60
    # Lines stay within 120 characters (the README shows this report as it is printed).
    lines = [f"Voxtral Realtime on vLLM 0.31.0: max_model_len {v.max_model_len} tokens ({minutes:g} min of audio per "
             "stream),",
             f"gpu_memory_utilization {v.gpu_memory_utilization:g} (capacity model: constructs_lib/capacity.py)"]
    for row in table:
        c = row.capacity
        compute = "n/a (no speed facts for this GPU)" if c.compute_cap is None else str(c.compute_cap)
        lines += [
            "",
            f"{c.instance_type}: one {c.gpu.name} ({_gib(c.gpu.memory_bytes)} GiB) serves the model",
            f"  streams per instance  {row.streams} ({row.streams_source}; KV cache fits {c.fit}, compute budget "
            f"{compute})",
            f"  GPU memory for vLLM   {_gib(c.budget_bytes)} GiB = weights {_gib(c.weight_bytes)} + KV cache "
            f"{_gib(c.kv_bytes)} + overhead {_gib(c.overhead_bytes)}",
            f"                        (overhead: activations of {c.max_num_batched_tokens} batched tokens, CUDA "
            "graphs, outside torch)",
            f"  KV per live stream    {c.stream_kv_bytes / GiB:.2f} GiB ({c.stream_blocks} blocks of "
            f"{c.block_bytes // 2**20} MiB; pool {c.num_blocks} blocks)",
            f"  vLLM's startup figure {c.vllm_max_concurrency:.2f}x maximum concurrency for {v.max_model_len}-token "
            "requests",
            f"                        ({c.vllm_request_blocks} blocks each: 2 batches of {c.max_num_batched_tokens} "
            "tokens in flight)",
        ]
        if row.usd_per_hour is not None:
            target = row.streams * row.target_fraction
            lines += [
                f"  on demand             USD {row.usd_per_hour:.4f} per instance-hour",
                f"  per live stream-hour  USD {row.usd_per_stream_hour:.4f} at {row.streams} streams per instance",
                f"  per audio hour        USD {row.usd_per_audio_hour_at_target:.4f} at the autoscaling target "
                f"({row.target_fraction:g} x {row.streams} = {target:g} streams per instance)",
            ]
        elif row.price_error:
            lines.append(f"  no price: {row.price_error}")
    if all(row.usd_per_hour is None and not row.price_error for row in table):
        lines += ["", "Prices: add --prices (AWS credentials allowed pricing:GetProducts) for the on-demand price "
                      "per instance-hour,", "per live stream-hour and per audio hour."]
    return "\n".join(lines)


def to_json(table: list[Row], settings: Any) -> dict[str, Any]:
    """The report as one JSON object. Bytes in bytes, money in USD (keys say the unit)."""
    v = settings.voxtral
    out = []
    for row in table:
        c = row.capacity
        out.append({
            "instance_type": c.instance_type, "gpu": c.gpu.name, "gpu_memory_bytes": c.gpu.memory_bytes,
            "streams_per_instance": row.streams, "streams_source": row.streams_source,
            "kv_cache_fit": c.fit, "compute_cap": c.compute_cap,
            "vllm_budget_bytes": c.budget_bytes, "weight_bytes": c.weight_bytes, "kv_cache_bytes": c.kv_bytes,
            "overhead_bytes": c.overhead_bytes, "kv_bytes_per_stream": c.stream_kv_bytes,
            "pool_blocks": c.num_blocks, "block_bytes": c.block_bytes,
            "max_num_batched_tokens": c.max_num_batched_tokens,
            "vllm_max_concurrency": round(c.vllm_max_concurrency, 4),
            "usd_per_instance_hour": row.usd_per_hour,
            "usd_per_live_stream_hour": row.usd_per_stream_hour,
            "usd_per_audio_hour_at_autoscaling_target": row.usd_per_audio_hour_at_target,
            "price_error": row.price_error,
        })
    return {"max_model_len": v.max_model_len, "gpu_memory_utilization": v.gpu_memory_utilization,
            "region": settings.region, "instance_types": out}


DESCRIPTION = (
    "Print how many live Voxtral streams one instance serves (voxtral.max_num_seqs resolved, the KV-cache fit and "
    "the compute budget of the capacity model), the GPU memory split (weights, KV cache, overhead), vLLM's own "
    "startup figure and, with --prices, the on-demand cost per live stream-hour and per audio hour. Settings come "
    "from cdk.json and -c key=value, as for make synth. Needs no AWS access unless --prices is given."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``capacity`` to the voicectl parser."""
    parser = subparsers.add_parser(
        "capacity", help="live Voxtral streams per instance, GPU memory split and cost per live stream-hour",
        description=DESCRIPTION)
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting, as for cdk synth (repeatable), e.g. -c voxtral.max_model_len=7500")
    parser.add_argument("--instance-type", action="append", default=[], metavar="TYPE",
                        help="also show this instance type (repeatable), e.g. --instance-type ml.g6e.xlarge")
    parser.add_argument("--cdk-json", type=Path, default=None,
                        help="the cdk.json to read settings from (default: ./cdk.json, or the built-in defaults)")
    parser.add_argument("--prices", action="store_true",
                        help="add on-demand prices from the AWS Price List API (needs pricing:GetProducts)")
    parser.add_argument("--region", help="price another Region (the same as -c region=REGION)")
    parser.add_argument("--profile", help="AWS profile for --prices (default: the standard chain)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``voicectl capacity``.

    Raises:
        UsageError: bad settings or arguments (exit 2).
    """
    settings, _ = settings_from_args(args, "capacity")
    table = rows(settings, args.instance_type)
    failed = False
    if args.prices:
        table, failed = _priced(table, settings.region, args.profile)
    print(json.dumps(to_json(table, settings), indent=2) if args.json else format_text(table, settings))
    return 1 if failed else 0


def _priced(table: list[Row], region: str, profile: str | None) -> tuple[list[Row], bool]:
    """``table`` with prices; whether any could not be read (each row says why)."""
    import dataclasses

    import boto3
    import botocore.exceptions

    from voicectl import pricing

    try:
        session = boto3.Session(profile_name=profile)
    except botocore.exceptions.ProfileNotFound as error:
        raise UsageError(f"{error}; list profiles with `aws configure list-profiles`") from None
    try:
        client = pricing.pricing_client(session, region)
    except pricing.PricingError as error:  # no client, so no row has a price: each says why (not "add --prices")
        return [dataclasses.replace(row, price_error=str(error)) for row in table], True
    priced, failed = [], False
    for row in table:
        try:
            priced.append(dataclasses.replace(
                row, usd_per_hour=pricing.usd_per_hour(row.capacity.instance_type, region, client=client)))
        except pricing.PricingError as error:
            priced.append(dataclasses.replace(row, price_error=str(error)))
            failed = True
    return priced, failed
