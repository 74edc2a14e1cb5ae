"""The SageMaker real-time endpoint family (README.md here): :class:`~.endpoint.RealtimeEndpoint`
(Model, EndpointConfig, Endpoint, log group, grants, metrics), its props (:mod:`.props`), its
interface (:mod:`.interface`), :class:`~.execution_role.SageMakerExecutionRole`, instance scaling
(:mod:`.scaling`, :mod:`.scaling_props`) and :class:`~.monitored_endpoint.MonitoredEndpoint`
(endpoint, alarms, scaling and outputs in one).

This package module imports nothing, so that the CDK-free props modules load without ``aws_cdk``;
the public names are exported by :mod:`constructs_lib`.
"""
