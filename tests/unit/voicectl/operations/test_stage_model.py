"""voicectl/operations/stage_model.py: ``voicectl stage-model`` is the staging build's own command (the same code
the in-stack staging runs), with voicectl's session and voicectl's usage errors. (Its messages without a Region or
credentials, from the command line: tests/unit/voicectl/test_aws.py.)"""

from __future__ import annotations

import argparse

import pytest

from constructs_lib.artifacts.model_staging_build.stage_model import command
from voicectl.errors import UsageError
from voicectl.operations import stage_model


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="voicectl")
    stage_model.register(root.add_subparsers())
    return root


def test_the_subcommand_is_the_staging_builds_command():
    args = parser().parse_args(["stage-model", "--s3-uri", "s3://team-models/voxtral/"])
    assert args.func is stage_model.run and args.s3_uri == "s3://team-models/voxtral/"
    (subparsers,) = [action for action in parser()._actions if isinstance(action, argparse._SubParsersAction)]
    assert subparsers.choices["stage-model"].description == command.DESCRIPTION


def test_no_option_is_abbreviated_so_a_token_is_never_taken_for_the_secret_option(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["stage-model", "--hf-token-secret", "hub-token"])
    assert "unrecognized arguments: --hf-token-secret hub-token" in capsys.readouterr().err


def test_bad_input_is_voicectls_usage_error_before_any_session_is_made(monkeypatch):
    monkeypatch.setattr(stage_model, "_session",
                        lambda args: pytest.fail("no session before the arguments are checked"))
    args = parser().parse_args(["stage-model"])
    with pytest.raises(UsageError) as caught:
        stage_model.run(args)
    assert str(caught.value) == ("say where to stage: --s3-uri s3://bucket/prefix/ or --stack <stack with a "
                                 "ModelS3Uri output>")
    assert not isinstance(caught.value, command.UsageError)


def test_the_session_asks_for_a_region_only_when_a_regional_api_is_called(monkeypatch):
    asked = []
    monkeypatch.setattr(stage_model, "aws_session", lambda region, region_required: asked.append(
        (region, region_required)))
    stage_model._session(parser().parse_args(["stage-model", "--s3-uri", "s3://b/p/"]))
    stage_model._session(parser().parse_args(["stage-model", "--stack", "RealtimeVoice-Voxtral",
                                              "--region", "eu-west-1"]))
    assert asked == [(None, False), ("eu-west-1", True)]
