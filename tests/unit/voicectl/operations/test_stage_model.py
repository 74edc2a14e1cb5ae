"""voicectl/operations/stage_model.py: ``voicectl stage-model`` is the staging build's own command
(the same code the in-stack staging runs), with voicectl's session and voicectl's usage errors. (Its
messages without a Region or credentials, from the command line:
tests/unit/voice_client/test_aws.py.)"""

from __future__ import annotations

import argparse

import pytest

from model_staging.stage_model import command
from voice_client.errors import UsageError
from voicectl import cli
from voicectl.operations import stage_model

# the staging tests' bucket and prefix (test_command.py)
URI = "s3://voice-models-test/models/voxtral/"


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="voicectl")
    stage_model.register(root.add_subparsers())
    return root


def test_the_subcommand_is_the_staging_builds_command():
    args = parser().parse_args(["stage-model", "--s3-uri", "s3://team-models/voxtral/"])
    assert args.func is stage_model.run and args.s3_uri == "s3://team-models/voxtral/"
    (subparsers,) = [
        action for action in parser()._actions if isinstance(action, argparse._SubParsersAction)
    ]
    assert subparsers.choices["stage-model"].description == command.DESCRIPTION


def test_no_option_is_abbreviated_so_a_token_is_never_taken_for_the_secret_option(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["stage-model", "--hf-token-secret", "hub-token"])
    assert "unrecognized arguments: --hf-token-secret hub-token" in capsys.readouterr().err


def test_bad_input_is_voicectls_usage_error_before_any_session_is_made(monkeypatch):
    monkeypatch.setattr(
        stage_model,
        "_session",
        lambda args: pytest.fail("no session before the arguments are checked"),
    )
    args = parser().parse_args(["stage-model"])
    with pytest.raises(UsageError) as caught:
        stage_model.run(args)
    assert str(caught.value) == (
        "say where to stage: --s3-uri s3://bucket/prefix/ or --stack <stack with a "
        "ModelS3Uri output>"
    )
    assert not isinstance(caught.value, command.UsageError)


def test_the_session_asks_for_a_region_only_when_a_regional_api_is_called(monkeypatch):
    asked = []
    monkeypatch.setattr(
        stage_model,
        "aws_session",
        lambda region, region_required: asked.append((region, region_required)),
    )
    stage_model._session(parser().parse_args(["stage-model", "--s3-uri", "s3://b/p/"]))
    stage_model._session(
        parser().parse_args(
            ["stage-model", "--stack", "RealtimeVoice-Voxtral", "--region", "eu-west-1"]
        )
    )
    assert asked == [(None, False), ("eu-west-1", True)]


def test_stage_model_is_a_voicectl_subcommand(monkeypatch):
    assert "voicectl.operations.stage_model" in cli.SUBCOMMAND_MODULES
    # Only this module: the other subcommands are other people's work and may not exist in this
    # branch.
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ("voicectl.operations.stage_model",))
    args = cli.build_parser().parse_args(["stage-model", "--s3-uri", URI, "--revision", "a" * 40])
    assert args.func is stage_model.run
    assert (args.s3_uri, args.revision, args.part_size_mib) == (URI, "a" * 40, 64)


def test_voicectl_reports_bad_input_of_the_staging_code_as_its_own_usage_error(monkeypatch, capsys):
    """The staging code (shipped alone to CodeBuild) has its own UsageError; voicectl exits 2 with
    its message."""
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ("voicectl.operations.stage_model",))
    assert (
        cli.main(["stage-model", "--s3-uri", URI, "--part-size-mib", "0", "--revision", "a" * 40])
        == 2
    )
    assert (
        capsys.readouterr().err.strip()
        == "voicectl stage-model: --part-size-mib must be at least 1, got 0"
    )
