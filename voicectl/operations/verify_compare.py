"""Comparing deployed values with a synth's, for ``voicectl verify``
(:mod:`voicectl.operations.verify`): one :class:`Check` per field, naming the field, the expected
and the found value; maps and lists are compared entry by entry (:func:`differences`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from voicectl.operations.verify_resolver import TemplateResolver, Unresolvable

#: Maps whose keys must match exactly (an extra environment variable changes the container's
#: behaviour); in other maps SageMaker may add keys of its own, so only the template's keys are
#: compared.
EXACT_KEYS = frozenset({"Environment"})
#: Lists whose order means nothing.
UNORDERED = frozenset({"Subnets", "SecurityGroupIds"})


@dataclass(frozen=True)
class Check:
    """One comparison: ``ok`` when ``actual`` is what the synth expects; ``skipped`` when it could
    not be judged."""

    endpoint: str
    what: str
    expected: str
    actual: str
    ok: bool
    skipped: bool = False

    def line(self) -> str:
        status = "SKIP" if self.skipped else ("OK" if self.ok else "MISMATCH")
        detail = (
            self.actual
            if self.ok or self.skipped
            else f"expected {self.expected}, found {self.actual}"
        )
        return f"{status:<8} {self.endpoint}: {self.what}: {detail}"


class _Absent:
    """A value the template or SageMaker leaves out (falsy, like an empty map or list)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "unset"


ABSENT = _Absent()
#: OK lines show a map or list in full up to this many characters, else only how many entries it
#: has.
SUMMARY_CHARS = 100


def _show(value: Any) -> str:
    """A value as the user reads it: JSON for maps and lists, "unset" for a missing one."""
    if value is ABSENT or value is None or value == {} or value == []:
        return "unset"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return str(value)


def _summary(value: Any) -> str:
    """:func:`_show`, shortened for maps and lists longer than :data:`SUMMARY_CHARS`."""
    shown = _show(value)
    if isinstance(value, (dict, list)) and len(shown) > SUMMARY_CHARS:
        return f"as synthesized ({len(value)} {'entry' if len(value) == 1 else 'entries'})"
    return shown


def _same_scalar(expected: Any, actual: Any) -> bool:
    """Equal leaves: numbers by value (the template says 1, the API 1.0), unset equals None (and
    False for a flag, SageMaker's default)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return (expected or False) is (actual or False)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(expected) == float(actual)
    if (
        not expected
        and not actual
        and expected in (None, ABSENT, "")
        and actual in (None, ABSENT, "")
    ):
        return True
    return expected == actual


def differences(expected: Any, actual: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``[(path, expected, found)]`` for every leaf where ``actual`` differs from ``expected``.

    Maps compare the template's keys (and, for :data:`EXACT_KEYS`, report the deployed map's extra
    keys too); lists compare item by item (:data:`UNORDERED` ones as sets of strings); numbers
    compare by value; a missing value equals None.
    """
    name = path.rsplit(".", 1)[-1]
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[tuple[str, Any, Any]] = []
        keys = list(expected) + (
            [key for key in actual if key not in expected] if name in EXACT_KEYS else []
        )
        for key in keys:
            found += differences(
                expected.get(key, ABSENT),
                actual.get(key, ABSENT),
                f"{path}.{key}" if path else key,
            )
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if name in UNORDERED:
            return (
                []
                if sorted(map(str, expected)) == sorted(map(str, actual))
                else [(path, expected, actual)]
            )
        if len(expected) != len(actual):
            return [(path, expected, actual)]
        return [
            item
            for index, (e, a) in enumerate(zip(expected, actual, strict=True))
            for item in differences(e, a, f"{path}[{index}]")
        ]
    if isinstance(expected, (dict, list)) or isinstance(actual, (dict, list)):
        return [] if not expected and not actual else [(path, expected, actual)]
    return [] if _same_scalar(expected, actual) else [(path, expected, actual)]


def _pools_by_priority(pools: Any, drop: tuple[str, ...] = ("ModelNameOverride",)) -> Any:
    """InstancePools sorted by Priority, without ``drop`` keys (each pool's Model is verified on its
    own)."""
    if not isinstance(pools, list):
        return pools
    return [
        {k: v for k, v in pool.items() if k not in drop}
        for pool in sorted(pools, key=lambda pool: int(pool.get("Priority", 0)))
    ]


class Comparer:
    """Collects the checks of one endpoint, resolving template values on the way."""

    def __init__(self, endpoint: str, resolver: TemplateResolver) -> None:
        self.endpoint = endpoint
        self.resolver = resolver
        self.checks: list[Check] = []

    def add(self, what: str, expected: str, actual: str, ok: bool, skipped: bool = False) -> None:
        self.checks.append(Check(self.endpoint, what, expected, actual, ok=ok, skipped=skipped))

    def field(
        self,
        what: str,
        key: str,
        template_value: Any,
        actual: Any,
        normalise: Callable[[Any], Any] = lambda v: v,
    ) -> None:
        """One check named ``what``: the deployed ``actual`` of property ``key`` against the
        template's value, resolved. A mismatch inside a map or list names each differing entry
        (``SM_VLLM_MAX_MODEL_LEN=7500``)."""
        try:
            # Normalised before resolving too: what normalising drops (a pool's ModelNameOverride)
            # need not resolve.
            wanted = normalise(self.resolver.resolve_deep(normalise(template_value)))
        except Unresolvable as error:
            self.add(
                what, "?", f"cannot resolve the template's value ({error})", ok=False, skipped=True
            )
            return
        actual = normalise(actual)
        diffs = differences(wanted, actual, key)
        if not diffs:
            self.add(what, _summary(wanted), _summary(actual), ok=True)
        elif len(diffs) == 1 and diffs[0][0] == key:
            self.add(what, _show(diffs[0][1]), _show(diffs[0][2]), ok=False)
        else:
            inner = [(path[len(key) :].lstrip("."), e, a) for path, e, a in diffs]
            self.add(
                what,
                "; ".join(f"{path}={_show(e)}" for path, e, _ in inner),
                "; ".join(f"{path}={_show(a)}" for path, _, a in inner),
                ok=False,
            )

    def properties(
        self,
        prefix: str,
        template: Mapping[str, Any],
        deployed: Mapping[str, Any],
        not_compared: frozenset[str],
        defaults: Mapping[str, Any],
    ) -> None:
        """One :meth:`field` per template property (but ``not_compared``) and per ``defaults`` key
        it leaves out."""
        for name, value in template.items():
            if name not in not_compared:
                self.field(
                    f"{prefix} {name}",
                    name,
                    value,
                    deployed.get(name, ABSENT),
                    _pools_by_priority if name == "InstancePools" else lambda v: v,
                )
        for name, default in defaults.items():
            if name not in template:
                self.field(
                    f"{prefix} {name}",
                    name,
                    default,
                    deployed.get(name, ABSENT),
                    _pools_by_priority if name == "InstancePools" else lambda v: v,
                )
