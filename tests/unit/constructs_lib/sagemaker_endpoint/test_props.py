"""constructs_lib/sagemaker_endpoint/props.py: the endpoint's props and their checks without aws_cdk."""

from __future__ import annotations

import pytest

from constructs_lib.sagemaker_endpoint.props import rolling_update_timeout_s


@pytest.mark.parametrize("percent, start_s, wait_s, expected", [
    (25, 2400, 600, 12000),   # 4 batches
    (50, 60, 0, 600),         # 2 x 60 s is below the 600 s minimum
    (5, 2400, 3600, 28800),   # 20 batches x 6000 s is above the 28800 s maximum
    (30, 100, 100, 800),      # ceil(100 / 30) = 4 batches
])
def test_rolling_update_timeout(percent, start_s, wait_s, expected):
    assert rolling_update_timeout_s(percent, start_s, wait_s) == expected
