"""Facts the constructs and the settings reason with, each with its source, and no ``aws_cdk``
import (a test holds this package to that), so that ``config`` and ``voicectl`` load them without
the CDK:

- :mod:`.capacity`: how many live streams a GPU holds (vLLM's KV-cache accounting).
- :mod:`.cuda_compat`: which image CUDA runs on which SageMaker inference AMI's driver.
- :mod:`.instance_types`: the instance catalogue (vCPUs, GPUs, memory, local storage).
- :mod:`.names`: the naming rules and ARN/URI shapes of the AWS names the props take.
- :class:`S3Prefix`: an S3 "folder" (``s3://bucket/prefix/``), the one parser of such URIs in the
  project, the contracts' (:mod:`contracts.model`; the staging build and the bridge read it too),
  and a public name of the library.
"""

from __future__ import annotations

from contracts.model import S3Prefix

__all__ = ["S3Prefix"]
