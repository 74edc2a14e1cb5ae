"""Facts the constructs and the settings reason with, each with its source, and no ``aws_cdk``
import (a test holds this package to that), so that ``config`` and ``voicectl`` load them without
the CDK:

- :mod:`.capacity`: how many live streams a GPU holds (vLLM's KV-cache accounting).
- :mod:`.cuda_compat`: which image CUDA runs on which SageMaker inference AMI's driver.
- :mod:`.instance_types`: the instance catalogue (vCPUs, GPUs, memory, local storage).
- :mod:`.names`: the naming rules and ARN/URI shapes of the AWS names the props take.
- :class:`S3Prefix`: an S3 "folder" (``s3://bucket/prefix/``), the one parser of such URIs in the
  project. It is defined in the model staging build
  (``constructs_lib/artifacts/model_staging_build/stage_model/location.py``), which CodeBuild runs
  alone from that folder and so must carry it; everything else imports it from here.
"""

from __future__ import annotations

from constructs_lib.artifacts.model_staging_build.stage_model.location import S3Prefix

__all__ = ["S3Prefix"]
