"""The error every ``voicectl`` subcommand raises for bad input, in a module of its own so that :mod:`voicectl.cli`
(which prints it) and :mod:`voicectl.aws` (which raises it) both import it without importing each other."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: the message names what was wrong and what is allowed. Exit code 2."""
