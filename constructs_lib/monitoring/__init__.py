"""Monitoring of the endpoints: metric factories (how to read a metric), thresholds and alarm rules
(what we alarm on), the alarms construct, the alarm topic and the operations dashboard.

Read in this order: ``metrics.py``, ``thresholds.py``, ``alarms.py``, ``topic.py``,
``dashboard.py``. This package module imports nothing, so that the CDK-free ``thresholds`` module
loads without ``aws_cdk``; the public names are exported by :mod:`constructs_lib`.
"""
