"""Where the Voxtral endpoint's image and weights come from (README.md here):
:class:`~.bridge_image.BridgeImage` (ECR repository and the image copy),
:class:`~.model_bucket.ModelBucket`, and :class:`~.model_staging.ModelStaging` (a CodeBuild project
that stages pinned weights, run by a custom resource). Its assets sit beside it:
``model_staging_build/`` (the CodeBuild source, the CDK-free ``stage_model`` package that ``voicectl
stage-model`` also runs) and ``model_staging_waiter/`` (the Lambda code of the custom resource).

This package module imports nothing, so that ``stage_model`` loads without ``aws_cdk``; the public
names are exported by :mod:`constructs_lib`.
"""
