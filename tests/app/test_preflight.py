"""``voicectl preflight`` against the synthesized app: the bootstrap version it requires is the one the cloud
assembly asks for (the preflight itself: tests/unit/voicectl/operations/test_preflight.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    NO_STAGING,
    aws,
    bootstrapped,
    fake_credentials,
)
from voicectl.operations.preflight import MIN_BOOTSTRAP_VERSION, PreflightError, check


def test_an_old_bootstrap_stops_and_the_minimum_is_what_the_synth_requires(aws, synthesized):
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    required = {a["properties"]["requiresBootstrapStackVersion"] for a in manifest["artifacts"].values()
                if "requiresBootstrapStackVersion" in a.get("properties", {})}
    assert required == {MIN_BOOTSTRAP_VERSION}
    bootstrapped(aws, version="5")
    with pytest.raises(PreflightError, match="^version 5 is older than the 6 this app needs. Run: make bootstrap "
                       "CDK_ARGS=aws://123456789012/us-east-1$"):
        check("diff", NO_STAGING, ROOT, aws.session, aws)
