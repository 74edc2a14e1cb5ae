"""What every settings section shares: its fields are named after the props fields they give, so one
method builds any props class from them (:meth:`Section.props`), and the props' own checks report
problems under the keys users write (:class:`SectionProblems`).

A field whose context key or default differs from the props' says so where it is declared
(:func:`config.context.setting`): no table maps one name to another. A subclass that declares a
field again with a plain value changes only its default; the key and choices stay the base's.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any, TypeVar

from config import context as ctx
from constructs_lib.validation import Problems, show

Props = TypeVar("Props")


class Section:
    """Base class of the settings sections (each a frozen dataclass).

    At class creation (before ``@dataclass`` runs), a field declared with
    ``setting(default_from=Props)`` takes the default ``Props`` declares for the same name, and a
    field declared again with a plain value keeps the base field's key and choices.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        is_dataclass = dataclasses.is_dataclass(cls)  # a subclass of a section: the base's fields
        inherited = {f.name: f for f in dataclasses.fields(cls)} if is_dataclass else {}
        for name in inspect.get_annotations(cls):
            value = cls.__dict__.get(name, dataclasses.MISSING)
            # What a field declared again keeps of the base's: its key and choices, not where its
            # default was.
            base = inherited[name].metadata if name in inherited else {}
            kept = {k: v for k, v in base.items() if k != ctx.DEFAULT_FROM}
            if isinstance(value, dataclasses.Field):
                value.metadata = types.MappingProxyType({**kept, **value.metadata})
                source = value.metadata.get(ctx.DEFAULT_FROM)
                if source is not None:
                    _take_default(cls, name, value, source)
            elif name in inherited and value is not dataclasses.MISSING:
                setattr(cls, name, dataclasses.field(default=value, metadata=kept))

    def props(self, cls: type[Props], **given: Any) -> Props:
        """``cls`` from this section's fields of the same names, and ``given`` (which takes
        precedence)."""
        names = {f.name for f in dataclasses.fields(cls)} - set(given)  # type: ignore[arg-type]
        mine = dataclasses.fields(self)  # type: ignore[arg-type]
        values = {f.name: getattr(self, f.name) for f in mine if f.name in names}
        return cls(**values, **given)

    @classmethod
    def problems_named(cls, prefix: str) -> SectionProblems:
        """A :class:`SectionProblems` naming this section's props by ``prefix`` and its keys."""
        return SectionProblems(prefix, cls)


def _take_default(cls: type, name: str, declared: dataclasses.Field, source: type) -> None:
    """Give ``declared`` (field ``name`` of ``cls``) the default ``source`` declares for the same
    name."""
    found = {f.name: f for f in dataclasses.fields(source)}.get(name)
    missing = dataclasses.MISSING
    if found is None or (found.default is missing and found.default_factory is missing):
        raise TypeError(
            f"{cls.__name__}.{name}: {source.__name__} declares no default for {name!r}"
        )
    declared.default, declared.default_factory = found.default, found.default_factory


class SectionProblems(Problems):
    """Problems of a section's props, each named after the key users write: a prop that is a
    field of the section shows as ``<prefix><key>``, any other as ``<prefix><prop>``, and a value
    with choices in its spelling (``ecs.load_balancer='internet_facing'`` for
    ``internet_facing=True``)."""

    def __init__(self, prefix: str, section: type) -> None:
        self._keys = {k.field: k for k in ctx.section_keys(section, prefix)}
        super().__init__(
            name=lambda prop: self._keys[prop].name if prop in self._keys else prefix + prop
        )

    def ref(self, prop: str, value: Any) -> str:
        key = self._keys.get(prop)
        if key is not None and key.choices is not None:
            return f"{key.name}={show(key.spell(value))}"
        return super().ref(prop, value)
