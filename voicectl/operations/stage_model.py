"""``voicectl stage-model``: put the model's weights under an S3 prefix, pinned, verified and
resumable.

The command's code lives in ``services/model_staging/stage_model/`` (see its
:mod:`command` module), the folder the in-stack staging
(:class:`constructs_lib.artifacts.model_staging.ModelStaging`) ships to CodeBuild as is, so a
workstation and the deploy stage with the same code. This module only adds it to ``voicectl``.
"""

from __future__ import annotations

import argparse
from typing import Any

from model_staging.stage_model import command
from voice_client.aws import aws_session
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
    """Run the staging command with voicectl's session (:func:`voice_client.aws.aws_session`:
    ``--region``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile), made after every argument is
    checked; the command's bad-input error becomes voicectl's (exit code 2)."""
    try:
        return command.run(args, open_session=_session)
    except command.UsageError as error:
        raise UsageError(str(error)) from error


def _session(args: argparse.Namespace) -> Any:
    return aws_session(region=args.region, region_required=command.needs_region(args))
