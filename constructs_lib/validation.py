"""How the constructs of this library report bad props: all problems at once, each naming the prop,
the value given and what is allowed, raised as one :class:`PropsError` before any resource is
defined.

The checks are written once, here in the library, next to the props they check. The app's settings
layer runs the same checks on the values of its keys, and shows each problem under the key's name
instead of the prop's (``Problems(name=...)``), so a rule and its wording never exist twice.

CDK-free (no ``aws_cdk`` import): the settings layer, which ``voicectl`` imports, uses this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any


class PropsError(ValueError):
    """Props that a construct cannot be built from. ``problems`` lists one sentence per problem."""

    def __init__(self, what: str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"{what}: invalid props:\n" + "\n".join(f"  - {problem}" for problem in self.problems)
        )


def show(value: Any) -> str:
    """A value as problems show it: strings quoted (``'ml.g6.huge'``), everything else as JSON
    (``true``, ``null``, ``1.5``); what JSON cannot write, by ``repr``."""
    if isinstance(value, str):
        return repr(value)
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


class Problems:
    """Collects the problems of one set of props.

    Args:
        name: maps a prop's name to the name a problem shows (default: the prop's own name). The
            settings layer passes one that gives its key, e.g. ``initial_instance_count`` ->
            ``voxtral.initial_instance_count``.
    """

    def __init__(self, name: Callable[[str], str] | None = None) -> None:
        self.name = name or (lambda prop: prop)
        self._problems: list[str] = []

    def ref(self, prop: str, value: Any) -> str:
        """``<name>=<value>``: how a problem names a prop, also inside another prop's problem."""
        return f"{self.name(prop)}={show(value)}"

    def add(self, prop: str, value: Any, rule: str) -> None:
        """Record ``<name>=<value>: <rule>``; ``rule`` says what is allowed ("must be ...")."""
        self._problems.append(f"{self.ref(prop, value)}: {rule}")

    def note(self, problem: str) -> None:
        """Record a problem that concerns several props, worded by the caller."""
        self._problems.append(problem)

    def raise_if_any(self, what: str) -> None:
        """Raise :class:`PropsError` naming ``what`` (e.g. ``RealtimeEndpoint Voxtral``) when a
        problem was recorded."""
        if self._problems:
            raise PropsError(what, self._problems)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._problems))

    def __len__(self) -> int:
        return len(self._problems)
