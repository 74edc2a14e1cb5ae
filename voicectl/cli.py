"""Entry point of ``voicectl``: one argparse parser, one subcommand per module.

A subcommand module exposes ``register(subparsers) -> None``; it adds its parser and sets ``func`` to a callable
``func(args) -> int`` (the process exit code). Add new modules to ``SUBCOMMAND_MODULES``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules are imported lazily by name so that a subcommand whose optional dependency is missing (gradio for `mic`)
# does not break the others.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "voicectl.preflight",
    "voicectl.stage_model",
    "voicectl.transcribe",
    "voicectl.speak",
    "voicectl.mic",
    "voicectl.verify",
)


class UsageError(Exception):
    """Bad input from the user: the message names what was wrong and what is allowed. Exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="voicectl", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as error:
        print(f"voicectl {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"voicectl {args.command}: interrupted", file=sys.stderr)
        return 130
