"""The ``voicectl`` command line: one argparse parser, one subcommand per module.

A subcommand module exposes ``register(subparsers) -> None``; it adds its parser and sets ``func``
to a callable ``func(args) -> int`` (the process exit code). Add new modules to
``SUBCOMMAND_MODULES`` and their one-line help to ``SUMMARIES``. :func:`main` imports only the
module of the subcommand it runs: boto3, numpy and the SDKs load for the commands that use them,
not for ``voicectl --help``. A module that fails to import (a missing optional dependency, a broken
install) does not take the other subcommands down: its subcommand is still listed and reports the
import error when it is used.

AWS failures: :func:`run_command` prints the exceptions of a missing AWS setup or a refused request
as one line (:func:`voice_client.aws.describe_aws_failure`), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Collection

from voice_client.aws import describe_aws_failure
from voice_client.errors import UsageError  # subcommands import it from here too

DESCRIPTION = (
    "Work with the real-time voice endpoints on Amazon SageMaker: transcribe recordings or the "
    "microphone through the Voxtral endpoint, make the Sonic endpoint speak, and check or stage "
    "a deployment."
)
"""What ``voicectl --help`` says about the tool."""

# Modules are imported lazily by name so that a subcommand whose optional dependency is missing
# (gradio for `mic`) does not break the others.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "voicectl.operations.preflight",
    "voicectl.operations.stage_model",
    "voicectl.commands.transcribe",
    "voicectl.commands.speak",
    "voicectl.commands.mic",
    "voicectl.commands.talk",
    "voicectl.operations.verify",
    "voicectl.operations.cost",
    "voicectl.operations.capacity",
    "voicectl.commands.local_runtime",
    "voicectl.commands.connect_replay",
)

SUMMARIES: dict[str, str] = {
    "voicectl.operations.preflight": "check credentials, bootstrap, subscription, quotas and "
    "CUDA before make deploy|diff|destroy|bootstrap",
    "voicectl.operations.stage_model": "stage the model weights from the Hugging Face Hub (or a "
    "local copy) to an S3 prefix",
    "voicectl.commands.transcribe": "transcribe a recording (WAV, FLAC, OGG) through the Voxtral "
    "endpoint",
    "voicectl.commands.speak": "make the Sonic endpoint speak a text into a WAV file",
    "voicectl.commands.mic": "transcribe your microphone live in a local web page",
    "voicectl.commands.talk": "talk with the voice agent in a local web page",
    "voicectl.operations.verify": "check that each endpoint runs the Model and EndpointConfig "
    "this synth describes (read-only)",
    "voicectl.operations.cost": "what the configured endpoints cost per hour, month and live "
    "stream-hour (AWS Price List API)",
    "voicectl.operations.capacity": "live Voxtral streams per instance, GPU memory split and "
    "cost per live stream-hour",
    "voicectl.commands.local_runtime": "serve a local SageMaker runtime (HTTPS, HTTP/2, SigV4) "
    "in front of local containers",
    "voicectl.commands.connect_replay": "play a stereo recording as a live Amazon Connect call and "
    "print both speakers' transcripts",
}
"""The one-line help each module registers, which ``voicectl --help`` lists without importing the
modules (a test keeps them equal). A module without one is imported whenever the parser is built."""

EXIT_UNAVAILABLE = 1
"""Exit code of a subcommand whose module could not be imported."""


def subcommand_name(module_name: str) -> str:
    """The subcommand a module registers, by convention: ``voicectl.operations.stage_model`` ->
    ``stage-model``."""
    return module_name.rsplit(".", 1)[-1].replace("_", "-")


def _register_unavailable(
    subparsers: argparse._SubParsersAction, module_name: str, error: BaseException
) -> None:
    """Register a stand-in subcommand that reports why ``module_name`` could not be imported."""
    name = subcommand_name(module_name)
    reason = f"{type(error).__name__}: {error}"
    # No option prefix: every argument after the name is accepted as is, so the import error is what
    # gets reported.
    parser = subparsers.add_parser(
        name,
        help=f"(unavailable: {reason})",
        add_help=False,
        prefix_chars="\x00",
        description=f"This subcommand could not be loaded ({reason}).",
    )
    parser.add_argument("arguments", nargs="*", help=argparse.SUPPRESS)

    def unavailable(args: argparse.Namespace) -> int:
        print(
            f"voicectl {name}: this subcommand could not be loaded ({reason}); reinstall the "
            "project (`make deps`, or `pip install .` from the repository root)",
            file=sys.stderr,
        )
        return EXIT_UNAVAILABLE

    parser.set_defaults(func=unavailable)


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """Return the top-level parser: the subcommands named in ``load`` registered by their modules
    (None: every one; a stand-in for a module that fails to import), the others listed with their
    :data:`SUMMARIES` line only."""
    parser = argparse.ArgumentParser(prog="voicectl", description=DESCRIPTION)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        name = subcommand_name(module_name)
        if load is not None and name not in load and module_name in SUMMARIES:
            # Listed only: main() loads the module of the subcommand it is asked for.
            subparsers.add_parser(name, help=SUMMARIES[module_name], add_help=False)
            continue
        try:
            module = importlib.import_module(module_name)
        except (
            Exception
        ) as error:  # any import-time failure: report it only when the subcommand is used
            _register_unavailable(subparsers, module_name, error)
            continue
        module.register(subparsers)
    return parser


def run_command(
    name: str, func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace
) -> int:
    """Run one subcommand's ``func(args)`` and return the exit code: its own, 2 for
    :class:`UsageError`, 130 for Ctrl-C, and 1 or 2 for a missing AWS setup or a request AWS refused
    (:func:`voice_client.aws.describe_aws_failure`); each failure is one line on stderr, ``voicectl
    <name>: <what happened>``."""
    try:
        return int(func(args) or 0)
    except UsageError as error:
        print(f"voicectl {name}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"voicectl {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        # No credentials, no Region, no network, a refused request: one line, not a traceback.
        described = describe_aws_failure(error)
        if described is None:
            raise
        code, message = described
        print(f"voicectl {name}: {message}", file=sys.stderr)
        return code


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand and return its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # No top-level option takes a value: the first argument that is not an option names the
    # subcommand.
    command = next((argument for argument in argv if not argument.startswith("-")), None)
    parser = build_parser(load=() if command is None else (command,))
    args = parser.parse_args(argv)
    return run_command(args.command, args.func, args)
