"""Fixtures of the operations tests: the default app comes from the session fixture ``synthesized``
(tests/conftest.py); the variants with other operations settings (ops_variant, pools_variant: tests/conftest.py) come
from the registry (tests/app/variants.py)."""

from __future__ import annotations

from tests.app.variants import EXTERNAL_WEIGHTS, PREBUILT_IMAGE, POOLS  # noqa: F401 (the tests import them here)
from tests.app.variants import OPS as VARIANT  # noqa: F401


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    """``{logical id: resource}`` of one type."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def alarms_by_name(template: dict) -> dict[str, dict]:
    """``{AlarmName: Properties}`` of every CloudWatch alarm in ``template``."""
    return {r["Properties"]["AlarmName"]: r["Properties"] for r in resources(template, "AWS::CloudWatch::Alarm").values()}
