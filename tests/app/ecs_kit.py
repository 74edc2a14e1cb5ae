"""Helpers of the ECS tests; the apps with voxtral.target=ecs are registry variants (tests/app/variants.py) and their
fixtures (ecs_app, ecs_variant) live in tests/conftest.py."""

from __future__ import annotations

from tests.app.variants import ECS_CERT as CERT  # noqa: F401 (the tests import it here)
from tests.app.variants import ECS_OPTIONS as VARIANT  # noqa: F401
from tests.conftest import Synthesized


def nag_violations(app: Synthesized) -> dict[str, list]:
    """``{report name: violations}`` of the validation report: cdk-nag's packs, and the construct annotations that
    @aws-cdk/core:annotationsInValidationReport adds as the report "Construct Annotations" (CDK's warnings)."""
    import json

    reports = json.loads((app.outdir / "validation-report.json").read_text())["pluginReports"]
    return {report["pluginName"]: report["violations"] for report in reports if report["violations"]}
