"""Where the Voxtral endpoint's image and weights come from (README.md here):
:class:`~.bridge_image.BridgeImage` (ECR repository and the image copy),
:class:`~.model_bucket.ModelBucket`, and :class:`~.model_staging.ModelStaging` (a CodeBuild project
that stages pinned weights, run by a custom resource). Its assets are in ``services/``:
``model_staging/`` (the CodeBuild source, the CDK-free ``stage_model`` package that ``voicectl
stage-model`` also runs) and ``handlers/model_staging_waiter/`` (the Lambda code of the custom
resource), found by :mod:`constructs_lib.service_code`.

This package module imports nothing; the public names are exported by :mod:`constructs_lib`.
"""
