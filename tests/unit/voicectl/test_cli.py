"""The ``voicectl`` parser: user-facing help, the installed console script, and a subcommand module
that fails to import (reported only when that subcommand is used)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from voicectl import cli

CONSOLE_SCRIPT = Path(sys.executable).parent / "voicectl"
"""The console script `make deps` installs next to the interpreter (pyproject
``[project.scripts]``)."""


def test_a_subcommand_whose_module_fails_to_import_is_reported_only_when_used(monkeypatch, capsys):
    monkeypatch.setattr(
        cli, "SUBCOMMAND_MODULES", ("voicectl.commands.transcribe", "voicectl.no_such_module")
    )
    parser = cli.build_parser()  # must not raise
    help_text = parser.format_help()
    assert "transcribe" in help_text and "no-such-module" in help_text
    # The healthy subcommand still parses; the broken one exits 1 with the import error and what to
    # do.
    assert parser.parse_args(["transcribe", "a.wav", "--url", "ws://h:1/x"]).command == "transcribe"
    assert cli.main(["no-such-module", "--any", "value"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert (
        "voicectl no-such-module: this subcommand could not be loaded (ModuleNotFoundError: " in err
    )
    assert "pip install ." in err


def test_help_texts_are_written_for_users():
    parser = cli.build_parser()
    top = parser.format_help()
    assert "Entry point" not in top and cli.DESCRIPTION.split(":")[0] in " ".join(top.split())
    subparsers = next(action for action in parser._actions if action.dest == "command")
    assert sorted(subparsers.choices) == sorted(
        cli.subcommand_name(module) for module in cli.SUBCOMMAND_MODULES
    )
    for name, subparser in subparsers.choices.items():
        description = subparser.description
        assert description and len(description) > 60 and not description.startswith("``"), (
            name,
            description,
        )
        assert "``" not in description
    assert all(action.help for action in subparsers._choices_actions), (
        "every subcommand has a one-line help"
    )


def test_installed_console_script_runs_from_any_directory(tmp_path):
    assert CONSOLE_SCRIPT.is_file(), f"{CONSOLE_SCRIPT} is missing: run `make deps`"
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name in ("transcribe", "speak", "mic", "preflight"):
        assert name in done.stdout
    assert "Entry point" not in done.stdout


@pytest.mark.parametrize("command", ["transcribe", "speak", "mic"])
def test_subcommand_help_from_the_console_script(tmp_path, command):
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), command, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"usage: voicectl {command}" in done.stdout
    assert "``" not in done.stdout


@pytest.mark.parametrize("command", ["transcribe", "mic"])
def test_the_commands_that_transcribe_name_their_limits_in_help(command):
    """The bounds on what a server may send are named, with their values, in --help."""
    if (
        command == "mic" and importlib.util.find_spec("gradio") is None
    ):  # found, not imported: 2 s of CPU spared
        pytest.skip("the mic extra is not installed (make test installs requirements-mic.lock)")
    from voice_client.realtime import MAX_EVENT_BYTES, MAX_EVENT_DEPTH, MAX_TRANSCRIPT_CHARS

    parser = cli.build_parser()
    (subparsers,) = [action for action in parser._actions if action.dest == "command"]
    description = " ".join(subparsers.choices[command].description.split())
    for name, value in (
        ("MAX_EVENT_BYTES", f"{MAX_EVENT_BYTES:,}"),
        ("MAX_EVENT_DEPTH", str(MAX_EVENT_DEPTH)),
        ("MAX_TRANSCRIPT_CHARS", f"{MAX_TRANSCRIPT_CHARS:,}"),
    ):
        assert f"{value}" in description and f"({name})" in description, (command, name)


def test_every_subcommand_loads_without_the_cdk():
    """Building the parser imports every subcommand module: none may import aws_cdk (jsii starts
    node, seconds per command) or the stacks, and each registers itself (no stand-in for an import
    failure)."""
    code = (
        "import sys\nfrom voicectl import cli\nparser = cli.build_parser()\nprint(sorted(m for m "
        "in ('aws_cdk', 'jsii', 'constructs', 'stacks') if m in sys.modules))\nactions = [a for "
        "a in parser._actions if a.dest == 'command']\nprint(sorted(name for name, sub in "
        "actions[0].choices.items() if '(unavailable' in (sub.description or '') or 'could not "
        "be loaded' in (sub.description or '')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == ["[]", "[]"]


def test_the_listed_summaries_are_what_each_module_registers_and_help_lists_them_all():
    full = cli.build_parser()
    (subparsers,) = [action for action in full._actions if action.dest == "command"]
    registered = {choice.dest: choice.help for choice in subparsers._choices_actions}
    summaries = {cli.subcommand_name(module): line for module, line in cli.SUMMARIES.items()}
    assert summaries == registered
    assert cli.build_parser(load=()).format_help() == full.format_help()


#: Runs ``voicectl ARGV`` in a fresh interpreter and prints which heavy dependencies and which
#: subcommand modules it loaded.
LOADED = """
import sys
from voicectl import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
heavy = ('boto3', 'botocore', 'numpy', 'soxr', 'awscrt', 'aiohttp', 'websockets')
print(sorted(name for name in heavy if name in sys.modules),
      [name for name in cli.SUBCOMMAND_MODULES if name in sys.modules], file=sys.stderr)
"""


def test_help_imports_no_subcommand_module_and_a_subcommand_only_its_own():
    """``voicectl --help`` lists the subcommands without their dependencies (boto3, numpy)."""

    def loaded(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", LOADED, *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stderr.strip().splitlines()[-1]

    assert loaded("--help") == "[] []"
    assert loaded() == "[] []"  # no subcommand: the usage error
    assert loaded("cost", "--help").endswith("['voicectl.operations.cost']")
