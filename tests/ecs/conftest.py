"""The app with voxtral.target=ecs, synthesized once per session (defaults, and one variant with every option)."""

from __future__ import annotations

import pytest

from tests.conftest import Synthesized, synthesize

CERT = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
#: Internet-facing with HTTPS, Spot, one zone in a cluster placement group.
VARIANT = {"voxtral.target": "ecs", "ecs.load_balancer": "internet_facing", "ecs.certificate_arn": CERT,
           "ecs.capacity": "spot", "ecs.placement": "single_az", "ecs.instance_type": "g6e.2xlarge",
           "ecs.min_tasks": 3, "ecs.max_tasks": 6}


@pytest.fixture(scope="session")
def ecs_app(tmp_path_factory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk.out.ecs"), {"voxtral.target": "ecs"})


@pytest.fixture(scope="session")
def ecs_variant(tmp_path_factory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk.out.ecs-variant"), VARIANT)


def nag_violations(app: Synthesized) -> dict[str, list]:
    """``{report name: violations}`` of the validation report: cdk-nag's packs, and the construct annotations that
    @aws-cdk/core:annotationsInValidationReport adds as the report "Construct Annotations" (CDK's warnings)."""
    import json

    reports = json.loads((app.outdir / "validation-report.json").read_text())["pluginReports"]
    return {report["pluginName"]: report["violations"] for report in reports if report["violations"]}
