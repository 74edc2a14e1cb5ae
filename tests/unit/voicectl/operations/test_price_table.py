"""voicectl/operations/price_table.py: the dated on-demand prices shipped with voicectl, for its
Region only."""

from __future__ import annotations

import pytest

from constructs_lib.facts import instance_types
from voicectl.operations import price_table


def test_a_sagemaker_type_is_priced_as_hosting_and_an_ec2_type_as_ec2():
    assert price_table.lookup("ml.g6.4xlarge", "us-east-1") == price_table.TablePrice(
        1.654, "price table 2026-12-01"
    )
    assert price_table.lookup("g6.4xlarge", "us-east-1") == price_table.TablePrice(
        1.3232, "price table 2026-12-01"
    )


def test_another_region_or_an_unknown_type_has_no_table_price():
    assert price_table.lookup("ml.g6.4xlarge", "eu-west-1") is None
    assert price_table.lookup("ml.p5.48xlarge", "us-east-1") is None


def test_every_priced_type_is_one_the_instance_catalogue_knows():
    assert set(price_table.SAGEMAKER_USD_PER_HOUR) <= set(instance_types.CATALOGUE)
    assert {f"ml.{name}" for name in price_table.EC2_USD_PER_HOUR} == set(
        price_table.SAGEMAKER_USD_PER_HOUR
    )


@pytest.mark.parametrize("name", sorted(set(price_table.SAGEMAKER_USD_PER_HOUR) - {"ml.g5.xlarge"}))
def test_sagemaker_hosting_is_the_ec2_rate_times_1_25_as_the_docstring_says(name):
    assert price_table.SAGEMAKER_USD_PER_HOUR[name] == pytest.approx(
        price_table.EC2_USD_PER_HOUR[name.removeprefix("ml.")] * 1.25, abs=0.001
    )


def test_the_report_line_names_the_date_region_and_source():
    assert price_table.describe() == (
        "the price table shipped with voicectl (voicectl/operations/price_table.py), us-east-1, "
        f"recorded 2026-12-01 from {price_table.SOURCE}"
    )
