"""What the dev-tool commands (``local-runtime``, ``connect-replay``) share: the dev tools
(:mod:`voice_devtools`, devtools/) are a distribution of their own, installed in a clone only, so
these commands import them inside the command, through :func:`dev_tools_required`, and say how to
install them when they are missing."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

from voice_client.errors import UsageError

DEV_TOOLS_PACKAGE = "voice_devtools"
"""The dev tools' import package (devtools/pyproject.toml)."""

INSTALL_HINT = (
    "this command needs the dev tools (voice_devtools), which are not installed: install them "
    "from a clone of the repository (`pip install -e devtools`, or `make deps`)"
)
"""The one line a dev-tool command prints without them (exit 2, as a usage error)."""


@contextlib.contextmanager
def dev_tools_required() -> Iterator[None]:
    """Run the body (the dev tools' imports); a missing :mod:`voice_devtools` becomes a
    :class:`UsageError` saying how to install it. A missing module other than the dev tools' own
    propagates unchanged."""
    try:
        yield
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing != DEV_TOOLS_PACKAGE and not missing.startswith(DEV_TOOLS_PACKAGE + "."):
            raise
        raise UsageError(INSTALL_HINT) from error


def dev_tools_installed() -> bool:
    """Whether :mod:`voice_devtools` can be imported. Without it a dev-tool command's parser
    requires none of its arguments, so that the command's first word is the install hint, not a
    missing option."""
    return importlib.util.find_spec(DEV_TOOLS_PACKAGE) is not None
