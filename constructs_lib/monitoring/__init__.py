"""Monitoring of the endpoints: metric factories (how to read a metric), alarm rules and the alarms construct (what
we alarm on), the alarm topic and the operations dashboard.

Read in this order: ``metrics.py``, ``alarms.py``, ``topic.py``, ``dashboard.py``.
"""

from constructs_lib.monitoring.alarms import (
    AlarmRule,
    BridgeAlarmThresholds,
    EndpointAlarms,
    EndpointAlarmsProps,
    EndpointAlarmThresholds,
    MonitoredEndpoint,
    alarm_rules,
)
from constructs_lib.monitoring.dashboard import DashboardEndpoint, OperationsDashboard, OperationsDashboardProps
from constructs_lib.monitoring.metrics import BridgeMetrics, EndpointMetrics, milliseconds_to_microseconds
from constructs_lib.monitoring.topic import AlarmTopic, AlarmTopicProps

__all__ = [
    "AlarmRule",
    "AlarmTopic",
    "AlarmTopicProps",
    "BridgeAlarmThresholds",
    "BridgeMetrics",
    "DashboardEndpoint",
    "EndpointAlarmThresholds",
    "EndpointAlarms",
    "EndpointAlarmsProps",
    "EndpointMetrics",
    "MonitoredEndpoint",
    "OperationsDashboard",
    "OperationsDashboardProps",
    "alarm_rules",
    "milliseconds_to_microseconds",
]
