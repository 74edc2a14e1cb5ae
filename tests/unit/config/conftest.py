"""What the tests of config/ share: the problems load_settings reports for cdk.json's context with
overrides."""

from __future__ import annotations

import pytest

from config.settings import SettingsError, load_settings
from tests.conftest import cdk_json_context


def problems_for(**overrides) -> list[str]:
    """The problems load_settings reports for cdk.json's context plus ``overrides`` (dots as in the
    keys)."""
    context = {**cdk_json_context(), **{k.replace("__", "."): v for k, v in overrides.items()}}
    with pytest.raises(SettingsError) as caught:
        load_settings(context)
    return caught.value.problems


def one_problem(**overrides) -> str:
    (problem,) = problems_for(**overrides)
    return problem
