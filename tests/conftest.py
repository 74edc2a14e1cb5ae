"""Shared fixtures: the app is synthesized once per test session (synthesis takes seconds)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20,22")


def cdk_json_context() -> dict[str, Any]:
    """The ``context`` of cdk.json: what ``cdk synth`` uses when no ``-c`` is given."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@dataclass
class Synthesized:
    """One synthesized app: its settings, stacks, output directory and templates (by stack name)."""

    settings: Any
    voice_app: Any
    outdir: Path
    templates: dict[str, dict]

    def template(self, suffix: str) -> dict:
        """The template of the stack whose name ends with ``-<suffix>`` (Artifacts, Voxtral, Sonic)."""
        (name,) = [n for n in self.templates if n.endswith(f"-{suffix}")]
        return self.templates[name]


def synthesize(outdir: Path, overrides: dict[str, Any] | None = None) -> Synthesized:
    """Synthesize the app with cdk.json's context plus ``overrides`` into ``outdir``, and hold every template to
    AWS's rules (tests/tools/cfn_rules: the rule book, botocore's API models, the Service Authorization Reference).
    Every variant any test synthesizes is checked this way, with no synthesis of its own.

    Raises:
        AssertionError: a template breaks a rule; the message lists each finding with its source.
    """
    from app import create_app
    from tests.tools.cfn_rules._gate import template_findings

    context = {**cdk_json_context(), **(overrides or {})}
    app, settings, voice_app = create_app(context, outdir=str(outdir))
    app.synth()
    templates = {
        stack.stack_name: json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
        for stack in voice_app.stacks
    }
    findings = template_findings(templates)
    if findings:
        raise AssertionError(f"the app synthesized with {overrides or {}} breaks AWS's rules:\n" + "\n".join(findings))
    return Synthesized(settings, voice_app, outdir, templates)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> Synthesized:
    """The app with the settings of cdk.json, synthesized once for the whole session."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def synthesized_vpc(tmp_path_factory) -> Synthesized:
    """network.mode=vpc with everything else as in cdk.json (a new VPC and a key the app makes), synthesized once
    for the whole session."""
    return synthesize(tmp_path_factory.mktemp("cdk.out.vpc"), {"network.mode": "vpc"})


CONNECT_INSTANCE = "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
CONNECT_QUEUE = f"{CONNECT_INSTANCE}/queue/99999999-8888-7777-6666-555555555555"
CONNECT = {"connect.enabled": True, "connect.instance_arn": CONNECT_INSTANCE, "connect.create_storage_config": True,
           "connect.create_example_flow": True, "connect.queue_arn": CONNECT_QUEUE, "encryption.create_key": True}
CONNECT_VPC = {**CONNECT, "network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0",
               "network.subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
               "network.availability_zones": "us-east-1a,us-east-1b",
               "network.route_table_ids": "rtb-0123456789abcdef0,rtb-0123456789abcdef1",
               "network.vpc_cidr": "10.20.0.0/16"}


@pytest.fixture(scope="session")
def synthesized_connect(tmp_path_factory) -> Synthesized:
    """connect.enabled with the storage config, the example flow and a key the app makes (public mode)."""
    return synthesize(tmp_path_factory.mktemp("cdk.out.connect"), CONNECT)


@pytest.fixture(scope="session")
def synthesized_connect_vpc(tmp_path_factory) -> Synthesized:
    """As synthesized_connect, in network.mode=vpc with an existing VPC (its subnets have egress)."""
    return synthesize(tmp_path_factory.mktemp("cdk.out.connect.vpc"), CONNECT_VPC)
