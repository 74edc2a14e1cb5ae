"""The app with voxtral.target=ecs from the registry (tests/app/variants.py): defaults, and one with every option."""

from __future__ import annotations

import pytest

from tests.app.variants import ECS_CERT as CERT  # noqa: F401 (the tests import it here)
from tests.app.variants import ECS_OPTIONS as VARIANT  # noqa: F401
from tests.conftest import Synthesized


@pytest.fixture(scope="session")
def ecs_app(variant) -> Synthesized:
    return variant("ecs")


@pytest.fixture(scope="session")
def ecs_variant(variant) -> Synthesized:
    return variant("ecs_options")


def nag_violations(app: Synthesized) -> dict[str, list]:
    """``{report name: violations}`` of the validation report: cdk-nag's packs, and the construct annotations that
    @aws-cdk/core:annotationsInValidationReport adds as the report "Construct Annotations" (CDK's warnings)."""
    import json

    reports = json.loads((app.outdir / "validation-report.json").read_text())["pluginReports"]
    return {report["pluginName"]: report["violations"] for report in reports if report["violations"]}
