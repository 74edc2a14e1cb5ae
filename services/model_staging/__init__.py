"""The CodeBuild source of :class:`constructs_lib.model_staging.ModelStaging`, shipped as one asset
exactly as it is here: the staging code (:mod:`stage_model`) and its hash-pinned dependencies
(``requirements.txt``), nothing else.

The build runs ``python -m pip install --require-hashes -r requirements.txt`` and ``python -m
stage_model ...`` from this folder; ``voicectl stage-model`` imports the same package from here, so
both stage with one code. Regenerate ``requirements.txt`` after ``make lock`` (``make lock`` does
it: tools/staging_requirements.py).
"""
