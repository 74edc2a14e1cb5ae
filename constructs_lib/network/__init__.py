"""Private networking and encryption (README.md here): :class:`~.private_network.PrivateNetwork` (a
VPC, or an existing one, with the interface and gateway endpoints the services need), its props
(:mod:`.props`, CDK-free) and :class:`~.encryption.DataKey` (the customer managed key of the
deployment's data).

This package module imports nothing, so that the CDK-free props load without ``aws_cdk``; the public
names are exported by :mod:`constructs_lib`.
"""
