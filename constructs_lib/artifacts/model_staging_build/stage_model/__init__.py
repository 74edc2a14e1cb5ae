"""Model weights staging: model hub (or a local directory) -> S3 prefix, pinned, verified and
resumable.

Self-contained: it imports nothing of this project outside this package, and only boto3 and
huggingface_hub besides the standard library, because CodeBuild runs it alone (``python -m
stage_model``, started by :class:`constructs_lib.model_staging.ModelStaging`) while ``voicectl
stage-model`` runs it on a workstation. Modules:

- :mod:`.command`: the options, the steps and the exit codes of a staging run.
- :mod:`.constants`: the model's file allow-list, defaults and stack output names.
- :mod:`.files`: selects and hashes the local files to stage.
- :mod:`.hub`: downloads a pinned revision from the Hugging Face Hub and checks it against the Hub.
- :mod:`.upload`: uploads with boto3's managed transfer; skips identical objects; resumes parts.
- :mod:`.manifest`: the manifest written next to the weights, and the verification of a prefix.
- :mod:`.location`: the S3 prefix the weights go to (the project's one parser of
  ``s3://bucket/prefix`` URIs).
- :mod:`.progress`: bytes, rate and time left on stderr.
"""
