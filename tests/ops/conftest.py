"""Fixtures of the operations tests: the default app comes from the session fixture ``synthesized``
(tests/conftest.py); one variant with other operations settings is synthesized once per session, on first use."""

from __future__ import annotations

import pytest

from tests.conftest import synthesize

PREBUILT_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01"
EXTERNAL_WEIGHTS = "s3://team-models/voxtral/2602/"

#: Operations settings that differ from cdk.json: Sonic on a 4-GPU instance scaling on concurrency, Voxtral at a fixed
#: size (no scalable target) with a lower latency threshold, an alarm e-mail, and literal image and weights URIs (so
#: `voicectl verify` can be tested against moto without CloudFormation exports).
VARIANT = {
    "alarm_email": "oncall@example.com",
    # The default before issue 28 (one L4 and 16 vCPUs): the alarm and verify figures below are pinned to it.
    "voxtral.instance_type": "ml.g6.4xlarge",
    "sonic.instance_type": "ml.g6e.12xlarge",
    "sonic.scaling_metric": "concurrent_requests",
    "sonic.scaling_target": "4",
    "sonic.max_instances": "3",
    "voxtral.min_instances": "2",
    "voxtral.max_instances": "2",
    "voxtral.initial_instance_count": "2",
    "voxtral.alarm_model_latency_p90_ms": "250",
    "voxtral.image_uri": PREBUILT_IMAGE,
    "voxtral.model_s3_uri": EXTERNAL_WEIGHTS,
}


@pytest.fixture(scope="session")
def ops_variant(tmp_path_factory):
    """The app with :data:`VARIANT` over cdk.json's settings, synthesized once."""
    return synthesize(tmp_path_factory.mktemp("ops-variant"), VARIANT)


#: :data:`VARIANT` with capacity fallback: Voxtral on L4, else L40S, else A10G (one GPU each, 16 then 8 vCPUs); Sonic
#: on a 4-GPU ml.g6e.12xlarge, else a 1-GPU ml.g6e.2xlarge, with its own provisioning timeout.
POOLS = {
    "voxtral.instance_pools": "ml.g6.4xlarge,ml.g6e.2xlarge,ml.g5.4xlarge",
    "sonic.instance_pools": "ml.g6e.12xlarge,ml.g6e.2xlarge",
    "sonic.instance_provision_timeout_s": "900",
}


@pytest.fixture(scope="session")
def pools_variant(tmp_path_factory):
    """The app with :data:`VARIANT` and :data:`POOLS` over cdk.json's settings, synthesized once."""
    return synthesize(tmp_path_factory.mktemp("pools-variant"), {**VARIANT, **POOLS})


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    """``{logical id: resource}`` of one type."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def alarms_by_name(template: dict) -> dict[str, dict]:
    """``{AlarmName: Properties}`` of every CloudWatch alarm in ``template``."""
    return {r["Properties"]["AlarmName"]: r["Properties"] for r in resources(template, "AWS::CloudWatch::Alarm").values()}
