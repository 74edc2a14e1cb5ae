"""The self-managed GPU target (README.md here): :class:`~.service.GpuEcsService` (an ECS service on
EC2 GPU instances behind an Application Load Balancer), its props (:mod:`.props`, CDK-free) and its
monitoring (:mod:`.monitoring`: GPU and load balancer metrics, alarm rules, dashboard rows).

This package module imports nothing, so that the CDK-free props load without ``aws_cdk``; the public
names are exported by :mod:`constructs_lib`.
"""
