"""OperationsDashboard: the checks of its name and of each endpoint."""

from __future__ import annotations

import pytest

from constructs_lib.sagemaker_endpoint.scaling_props import (
    INVOCATIONS_PER_INSTANCE,
    InstanceScaling,
    TargetTracking,
)
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import bare_stack, only

SCALING = InstanceScaling(
    1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE)
)


def test_the_dashboard_checks_its_name_and_each_endpoint():
    from constructs_lib.monitoring.dashboard import (
        DashboardEndpoint,
        OperationsDashboard,
        OperationsDashboardProps,
    )
    from constructs_lib.monitoring.thresholds import EndpointAlarmThresholds

    with pytest.raises(PropsError) as caught:
        OperationsDashboard(
            bare_stack(),
            "Dashboard",
            OperationsDashboardProps(
                dashboard_name="ops board",
                endpoints=[
                    DashboardEndpoint(
                        "Speech", "asr", "ml.inf2.xlarge", EndpointAlarmThresholds(disk_percent=0)
                    )
                ],
            ),
        )
    assert [problem.split(":")[0] for problem in caught.value.problems] == [
        "dashboard_name='ops board'",
        "instance_type='ml.inf2.xlarge'",
        "disk_percent=0",
    ]
    stack = bare_stack()
    OperationsDashboard(
        stack,
        "Dashboard",
        OperationsDashboardProps(
            dashboard_name="ops-us-east-1",
            endpoints=[
                DashboardEndpoint("Speech", "asr", "ml.g6.4xlarge", min_capacity=1, max_capacity=4)
            ],
        ),
    )
    _, dashboard = only(stack, "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "ops-us-east-1"
    assert "## Speech: `asr`" in str(dashboard["Properties"]["DashboardBody"])
