"""The paper registry: what each audited system plugs into privaudit, discovered through one entry-point group.

Every audited paper (or anyone's system) is one package that exports one :class:`Paper` value, and one line of
``pyproject.toml`` names it::

    [project.entry-points."privaudit.papers"]
    upcycled = "privaudit.papers.upcycled:PAPER"

The engine, the audit, the report and the CLI iterate over :func:`papers` and name no paper; adding a fifth paper
is its folder plus that line (the standard Python plug-in mechanism, ``importlib.metadata`` entry points, PyPA's
entry points specification — a package outside privaudit registers the same way). A :class:`Paper` holds only
names: every part it contributes is a ``"module:attribute"`` reference (:class:`Ref`) imported when it is used, so
reading the registry imports no torch and runs no paper code. This module imports nothing of privaudit's but its
errors, so every layer may read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from types import MappingProxyType
from typing import Any

from privaudit.errors import InvalidParameterError

#: The entry-point group under which packages register their :class:`Paper`.
ENTRY_POINT_GROUP = "privaudit.papers"
#: The parts of a :class:`Paper` that map public names to a :class:`Ref`, merged over the papers by :func:`collected`.
PARTS = ("algorithm_wrappers", "privacy", "models", "closed_forms", "datasets", "attacks", "defences", "extras")


@dataclass(frozen=True)
class Ref:
    """A ``"package.module:attribute"`` reference, imported only by :meth:`load`."""

    target: str

    def __post_init__(self) -> None:
        module, sep, attribute = self.target.partition(":")
        if not sep or not module or not attribute:
            raise InvalidParameterError(f"a plug-in reference is 'package.module:attribute', got {self.target!r}")

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def load(self) -> Any:
        """The referenced object (imports its module; a missing attribute is one clear error)."""
        module, _, attribute = self.target.partition(":")
        value: Any = importlib.import_module(module)
        for part in attribute.split("."):
            try:
                value = getattr(value, part)
            except AttributeError:
                raise InvalidParameterError(f"plug-in reference {self.target!r}: {module} has no {attribute!r}") from None
        return value


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class EvidencePageRef:
    """One committed evidence page: result kind, page name (``reports/<name>.md``) and its renderer.

    ``data_keys`` are the keys a result of this kind must hold in its ``data`` and ``inputs`` the inputs it must
    declare (the other files its page is rendered with); both are checked when such a result is written or read.
    """

    kind: str
    name: str
    renderer: Ref
    data_keys: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Paper:
    """Everything one audited system contributes, as names (imported when used).

    ``key`` is the short name used in file names and CLI choices, ``title`` the citation shown to users. Each
    collection maps a public name to a :class:`Ref`; which protocol each referenced object follows is documented
    where the collection is consumed (the algorithm registry, the claim registry, the evidence pages, the model zoo,
    the closed forms of ``compute-epsilon``, …). ``defaults`` holds plain values (no references).
    """

    key: str
    title: str
    #: modules defining ``SPECS`` (torch-free algorithm specifications), read by the algorithm registry
    algorithm_specs: tuple[str, ...] = ()
    #: wrapper name → a ``privaudit.fl.algorithms.spec_types.WrapperSpec``: every base algorithm X is also ``<name>-X``
    algorithm_wrappers: Mapping[str, Ref] = field(default_factory=dict)
    #: ``--privacy`` name → a ``privaudit.fl.privacy.registry.PrivacySpec`` (mechanisms the paper defines or names)
    privacy: Mapping[str, Ref] = field(default_factory=dict)
    #: modules defining ``CLAIMS``, read by the claim registry
    claim_modules: tuple[str, ...] = ()
    evidence_pages: tuple[EvidencePageRef, ...] = ()
    #: model name → a ``privaudit.models.ModelSpec`` (builder and one-line summary), built by ``build_model``
    models: Mapping[str, Ref] = field(default_factory=dict)
    #: closed-form name → a ``privaudit.accounting.closed_form.ClosedFormSpec`` (the paper's printed bounds)
    closed_forms: Mapping[str, Ref] = field(default_factory=dict)
    datasets: Mapping[str, Ref] = field(default_factory=dict)
    attacks: Mapping[str, Ref] = field(default_factory=dict)
    #: client-side defences an inversion experiment can release under (``parse_defence``'s spec names)
    defences: Mapping[str, Ref] = field(default_factory=dict)
    #: named hooks with one consumer each, documented where consumed (``central-dp``: the
    #: ``privaudit.fl.privacy.central_dp.CentralDP`` subclass that runs its median variants)
    extras: Mapping[str, Ref] = field(default_factory=dict)
    #: plain values; ``default_models`` = {input kind: model name} for runs that name no model
    #: (``privaudit.models.default_model_for``)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: the paper's part of ``make demo``: a ``privaudit.cli.demo.DemoPart`` (its tour of ``compute-epsilon`` over the
    #: paper's headline settings and the evidence steps after the default audit suite)
    demo: Ref | None = None

    def __post_init__(self) -> None:
        if not self.key or not self.key.replace("-", "").replace("_", "").isalnum():
            raise InvalidParameterError(f"a paper's key is a short name (letters, digits, - and _), got {self.key!r}")
        for name in (*PARTS, "defaults"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


@cache
def papers() -> tuple[Paper, ...]:
    """Every registered :class:`Paper`, ordered by key; keys are unique (one clear error otherwise).

    Read once per process from the installed distributions' entry points (``pip install -e .`` records
    privaudit's own; a package of yours adds its line the same way).
    """
    found: dict[str, Paper] = {}
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        value = entry.load()
        if not isinstance(value, Paper):
            raise InvalidParameterError(f"entry point {entry.name} = {entry.value} is not a privaudit.plugins.Paper")
        if value.key in found:
            raise InvalidParameterError(f"two registered papers share the key {value.key!r}")
        found[value.key] = value
    if not found:
        raise InvalidParameterError(
            f"no paper is registered under the entry-point group {ENTRY_POINT_GROUP!r}: install privaudit "
            "(`pip install -e .` or `make`) so that its entry points are recorded")
    return tuple(found[key] for key in sorted(found))


def paper(key: str) -> Paper:
    """The registered paper called ``key``, or one clear error listing the known ones."""
    for candidate in papers():
        if candidate.key == key:
            return candidate
    raise InvalidParameterError(f"unknown paper {key!r}; registered: {', '.join(p.key for p in papers())}")


def collected(part: str) -> dict[str, tuple[Paper, Ref]]:
    """Every paper's ``part`` (one of :data:`PARTS`) merged by name, in paper-key order.

    A name contributed twice is one clear error naming both papers.
    """
    if part not in PARTS:
        raise InvalidParameterError(f"unknown plug-in part {part!r}; parts: {', '.join(PARTS)}")
    merged: dict[str, tuple[Paper, Ref]] = {}
    for candidate in papers():
        for name, ref in getattr(candidate, part).items():
            if name in merged:
                raise InvalidParameterError(f"{part} {name!r} is registered by both {merged[name][0].key} and {candidate.key}")
            merged[name] = (candidate, ref)
    return merged
