"""Model weights staging: model hub (or a local directory) -> S3 prefix, pinned, verified and resumable.

The same code runs on a workstation (``voicectl stage-model``) and inside AWS CodeBuild for the in-stack staging
(``python -m voicectl.stage_model``, started by :mod:`constructs_lib.model_staging`). Modules:

- :mod:`voicectl.staging.constants`: the model's file allow-list, defaults and stack output names.
- :mod:`voicectl.staging.files`: selects and hashes the local files to stage.
- :mod:`voicectl.staging.hub`: downloads a pinned revision from the Hugging Face Hub and checks it against the Hub.
- :mod:`voicectl.staging.upload`: uploads with boto3's managed transfer; skips identical objects; resumes parts.
- :mod:`voicectl.staging.manifest`: the manifest written next to the weights, and the verification of a prefix.
- :mod:`voicectl.staging.progress`: bytes, rate and time left on stderr.

Importing this package needs only boto3 and huggingface_hub (the CodeBuild image installs just those).
"""
