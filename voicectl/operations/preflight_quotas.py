"""The SageMaker instance quotas of ``voicectl preflight deploy``
(:mod:`voicectl.operations.preflight`): how many instances of each type a deploy may run, steady and
while an update overlaps old and new, against the account's Service Quotas. Read-only."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import botocore.exceptions

from config.settings import Settings
from voicectl.operations.preflight_findings import Finding, Status, unchecked

#: Name of a SageMaker real-time instance quota in Service Quotas (service code "sagemaker").
ENDPOINT_QUOTA_NAME = "{instance_type} for endpoint usage"
QUOTA_CONSOLE_URL = (
    "https://{region}.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/{code}"
)


@dataclass
class InstanceNeed:
    """How many instances of one type the deploy may run at once.

    Attributes:
        instance_type: e.g. ``ml.g6.4xlarge``.
        steady: the sum of the endpoints' maximum instance counts (autoscaling may reach it).
        peak: ``steady`` plus what an update adds while old and new instances overlap.
        why: per endpoint, how ``steady`` and ``peak`` were counted.
    """

    instance_type: str
    steady: int = 0
    peak: int = 0
    why: list[str] = field(default_factory=list)


def instance_needs(settings: Settings) -> dict[str, InstanceNeed]:
    """``{instance type: need}`` of the enabled endpoints. Voxtral updates roll one batch of new
    instances in before old ones go (one, or ``voxtral.rollout_batch_percent`` of the count rounded
    up; RollingUpdatePolicy); Sonic updates are blue/green, all at once (Marketplace containers have
    no deployment guardrails), so a whole new fleet overlaps the old one. With instance pools, each
    pool's type needs the full count: SageMaker falls back to a pool when the ones before it have no
    capacity, and may then run every instance of the variant on it."""
    needs: dict[str, InstanceNeed] = {}

    def add(instance_types: tuple[str, ...], steady: int, peak: int, why: str) -> None:
        for instance_type in instance_types:
            need = needs.setdefault(instance_type, InstanceNeed(instance_type))
            need.steady += steady
            need.peak += peak
            need.why.append(
                why
                + (
                    f" (instance pool {instance_types.index(instance_type) + 1} of "
                    f"{len(instance_types)})"
                    if len(instance_types) > 1
                    else ""
                )
            )

    if settings.voxtral.enabled:
        v = settings.voxtral
        batch = math.ceil(v.max_capacity * v.batch_percent / 100) if v.batch_percent else 1
        add(
            v.variant().instance_types,
            v.max_capacity,
            v.max_capacity + batch,
            f"Voxtral up to {v.max_capacity}, {v.max_capacity + batch} during a rolling update",
        )
    if settings.sonic.enabled:
        s = settings.sonic
        add(
            s.variant().instance_types,
            s.max_capacity,
            2 * s.max_capacity,
            f"Sonic up to {s.max_capacity}, {2 * s.max_capacity} during a blue/green update",
        )
    return needs


def _endpoint_quotas(quotas: Any, names: set[str]) -> dict[str, dict]:
    """``{quota name: quota}`` for ``names``: the applied values, else AWS's defaults."""
    found: dict[str, dict] = {}
    for operation in ("list_service_quotas", "list_aws_default_service_quotas"):
        for page in quotas.get_paginator(operation).paginate(ServiceCode="sagemaker"):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") in names and quota["QuotaName"] not in found:
                    found[quota["QuotaName"]] = quota
            if names <= set(found):
                return found
    return found


def check_quotas(quotas: Any, region: str, needs: dict[str, InstanceNeed]) -> list[Finding]:
    """One finding per instance type: STOP below the steady need, WARN below the peak."""
    names = {ENDPOINT_QUOTA_NAME.format(instance_type=t): t for t in needs}
    try:
        found = _endpoint_quotas(quotas, set(names))
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        console = (
            f"https://{region}.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas"
        )
        return [
            unchecked(
                f"service quota '{name}'",
                "servicequotas:ListServiceQuotas",
                error,
                f"{names[name]} needs {needs[names[name]].steady}; look it up in {console}",
            )
            for name in sorted(names)
        ]
    findings = []
    for name, instance_type in sorted(names.items()):
        need, check = needs[instance_type], f"service quota '{name}'"
        if name not in found:
            findings.append(
                Finding(
                    Status.UNCHECKED,
                    check,
                    f"Service Quotas lists no such SageMaker quota in {region}",
                )
            )
            continue
        quota = found[name]
        value = int(quota.get("Value", 0))
        link = QUOTA_CONSOLE_URL.format(region=region, code=quota.get("QuotaCode", ""))
        request = (
            f"request an increase at {link} or with `aws service-quotas "
            "request-service-quota-increase --service-code sagemaker --quota-code "
            f"{quota.get('QuotaCode', '')} --desired-value {need.peak} --region {region}`"
        )
        counted = (
            "; ".join(need.why)
            + f"; the quota is shared with every other endpoint of the account in {region}"
        )
        if value < need.steady:
            findings.append(
                Finding(
                    Status.STOP,
                    check,
                    f"{value} in {region}, below the {need.steady} this deploy may run "
                    f"({counted}); SageMaker would fail the endpoint after the stack waited for "
                    f"it. Lower the max instances, choose another instance type, or {request}",
                )
            )
        elif value < need.peak:
            findings.append(
                Finding(
                    Status.WARN,
                    check,
                    f"{value} in {region}: enough for {need.steady}, not for the "
                    f"{need.peak} an update may run at the maximum count ({counted}); {request}",
                )
            )
        else:
            findings.append(Finding(Status.OK, check, f"{value} in {region} ({counted})"))
    return findings
