"""``voicectl preflight`` against the synthesized app: the bootstrap version it requires is the one
the cloud assembly asks for, and the instances each pool type needs (the preflight itself:
tests/unit/voicectl/operations/test_preflight.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    NO_STAGING,
    bootstrapped,
    fixture_aws,
    fixture_fake_credentials,
)
from voicectl.operations.preflight import MIN_BOOTSTRAP_VERSION, PreflightError, check
from voicectl.operations.preflight_quotas import instance_needs

# --- The bootstrap version -----------------------------------------------------------------------
# ``voicectl preflight`` against the synthesized app: the bootstrap version it requires is the one
# the cloud assembly asks for (the preflight itself:
# tests/unit/voicectl/operations/test_preflight.py).


def test_an_old_bootstrap_stops_and_the_minimum_is_what_the_synth_requires(aws, synthesized):
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    required = {
        a["properties"]["requiresBootstrapStackVersion"]
        for a in manifest["artifacts"].values()
        if "requiresBootstrapStackVersion" in a.get("properties", {})
    }
    assert required == {MIN_BOOTSTRAP_VERSION}
    bootstrapped(aws, version="5")
    with pytest.raises(
        PreflightError,
        match=r"^version 5 is older than the 6 this app needs. Run: make bootstrap "
        r"CDK_ARGS=aws://123456789012/us-east-1$",
    ):
        check("diff", NO_STAGING, ROOT, aws.session, aws)


# --- Instance pools: each pool type needs the full count ----------------------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the
# ProductionVariant's InstancePools, with every rule sized by the instance holding for each pool's
# type (settings, alarms, dashboard, quotas).


def test_each_pool_type_needs_the_full_maximum_count(pools_variant):
    needs = instance_needs(pools_variant.settings)
    # Voxtral: 2 instances at most, 3 during a rolling update (25 % batch, rounded up); Sonic: 3, 6
    # blue/green.
    assert {t: (n.steady, n.peak) for t, n in needs.items()} == {
        "ml.g6.4xlarge": (2, 3),
        "ml.g5.4xlarge": (2, 3),
        "ml.g6e.2xlarge": (2 + 3, 3 + 6),  # Voxtral's second pool and Sonic's second pool
        "ml.g6e.12xlarge": (3, 6),
    }
    assert needs["ml.g6e.2xlarge"].why == [
        "Voxtral up to 2, 3 during a rolling update (instance pool 2 of 3)",
        "Sonic up to 3, 6 during a blue/green update (instance pool 2 of 2)",
    ]
