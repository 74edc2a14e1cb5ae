"""Where the Voxtral endpoint's image and weights come from (README.md here): :class:`~.bridge_image.BridgeImage`
(ECR repository and the image copy), :class:`~.model_bucket.ModelBucket`, and :class:`~.model_staging.ModelStaging`
(a CodeBuild project that stages pinned weights, run by a custom resource). Its assets sit beside it:
``model_staging_build/`` (the CodeBuild source, the CDK-free ``stage_model`` package that ``voicectl stage-model``
also runs) and ``model_staging_waiter/`` (the Lambda code of the custom resource).

This package module imports nothing (it holds one constant the assets share), so that ``stage_model`` loads without
``aws_cdk``; the public names are exported by :mod:`constructs_lib`.
"""

#: Left out of every asset built from a source folder here (the bridge image's build context, the staging build's
#: source, the waiter's code): the bytecode Python writes beside the sources when they are imported or tested. Left
#: in, it changes the asset hash from one machine or test run to the next, so a deploy would rebuild for nothing.
BYTECODE_EXCLUDE = ["**/__pycache__", "**/*.pyc"]
