"""``voicectl stage-model``: put the model's weights under an S3 prefix, pinned, verified and resumable.

The command's code lives in ``constructs_lib/model_staging_build/stage_model/`` (see its :mod:`command` module),
the folder the in-stack staging (:class:`constructs_lib.model_staging.ModelStaging`) ships to CodeBuild as is, so a
workstation and the deploy stage with the same code. This module only adds it to ``voicectl``.
"""

from __future__ import annotations

import argparse

from constructs_lib.model_staging_build.stage_model import command
from voicectl.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``stage-model`` subcommand to ``voicectl``."""
    parser = subparsers.add_parser(
        "stage-model",
        help="stage the model weights from the Hugging Face Hub (or a local copy) to an S3 prefix",
        description=command.DESCRIPTION,
        # No abbreviations: "--hf-token" would otherwise be taken for --hf-token-secret-id.
        allow_abbrev=False,
    )
    command.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the staging command; its bad-input error becomes voicectl's (exit code 2)."""
    try:
        return command.run(args)
    except command.UsageError as error:
        raise UsageError(str(error)) from error
