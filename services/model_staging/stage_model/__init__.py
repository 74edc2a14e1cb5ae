"""Model weights staging: model hub (or a local directory) -> S3 prefix, pinned, verified and
resumable.

Self-contained but for the contracts: it imports nothing of this project outside this package
except ``contracts`` (the model's identity and S3 prefix, the manifest's format and hash), and only
boto3 and huggingface_hub besides the standard library, because CodeBuild runs it alone
(``python -m stage_model``, started by :class:`constructs_lib.model_staging.ModelStaging`, whose
build source carries ``contracts`` beside it) while ``voicectl stage-model`` runs it on a
workstation. Modules:

- :mod:`.command`: the options, the steps and the exit codes of a staging run.
- :mod:`.constants`: the model's file allow-list, the transfer's defaults, the stack output
  names.
- :mod:`.files`: selects and hashes the local files to stage.
- :mod:`.hub`: downloads a pinned revision from the Hugging Face Hub and checks it against the Hub.
- :mod:`.upload`: uploads with boto3's managed transfer; skips identical objects; resumes parts.
- :mod:`.manifest`: the manifest written next to the weights (its format:
  :mod:`contracts.weights`), and the verification of a prefix.
- :mod:`.progress`: bytes, rate and time left on stderr.
"""
