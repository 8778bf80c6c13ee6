"""The claims registry: each privacy claim of the seed papers, as data.

A :class:`Claim` records where the claim is made (paper, seed file, theorem/figure), what it says, the
mechanism and its parameters, the claimed (ε, δ), the assumptions it rests on, the audit points it tests (``spec_points``, listed in the README),
the paper's own words (:class:`Quote`: the verbatim sentence, table cell or formula, with its seed file and
section), where every number comes from (:class:`Number`: *stated* by the paper, with where, or *chosen* by
privaudit, with why — a δ the paper never gives is chosen, never passed off as the paper's), and the *recipe*
that builds its readings (``"module:function"``, imported only when the claim is run, so
listing claims stays torch-free). A recipe has the signature::

    recipe(claim: Claim, trials: int) -> Sequence[Reading | ClaimDetails]      # privaudit.audit.plan

The claims are the registered papers' (each paper's ``claim_modules``, :class:`privaudit.plugins.Paper`), read
through the paper registry in paper-key order. Suites (``privaudit.audit.suites``) take their members from each
claim's ``suites`` entries.

Sources: the papers (seed files 000–004, cited in full in the README) and their reference code
(osu-srml/Upcycled-FL@4dd7400, BHui97/PrivateFL, Zoesgithub/FedReg@34b081f, Emory-AIMS/PFA@72b3f89); the audit
points U1–U10 (Upcycled-FL), P1–P10 (PrivateFL), R1–R6 (FedReg) and F1–F6 (PFA) are listed in the README.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from privaudit import plugins
from privaudit.audit.plan import ClaimDetails, Reading
from privaudit.errors import InvalidParameterError

NUMBER_SOURCES = ("stated", "chosen")


@dataclass(frozen=True)
class Quote:
    """The paper's own words for a claim: a sentence, table cell or formula, where it is printed.

    ``text`` is verbatim except that formulas are transcribed from the paper's LaTeX into plain notation;
    ``seed_file`` names the paper text (``003_….txt``), ``where`` its section, theorem, table or caption.
    """

    text: str
    seed_file: str
    where: str

    def __post_init__(self) -> None:
        if not (self.text.strip() and self.seed_file.strip() and self.where.strip()):
            raise InvalidParameterError("a quote needs its text, seed file and where it is printed")

    @property
    def source(self) -> str:
        """Short citation: ``003 Fig. 3 caption``."""
        return f"{self.seed_file.split('_')[0]} {self.where}"

    def to_dict(self) -> dict[str, str]:
        return {"text": self.text, "seed_file": self.seed_file, "where": self.where, "source": self.source}


@dataclass(frozen=True)
class Number:
    """One number of a claim and where it comes from.

    ``source="stated"``: the paper prints it — ``where`` says where (seed file and section);
    ``source="chosen"``: the paper does not give it and privaudit picked it — ``reason`` says why (and
    ``where`` where the value was taken from, e.g. the reference code's default, if anywhere).
    """

    name: str
    value: Any
    source: str
    where: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.source not in NUMBER_SOURCES:
            raise InvalidParameterError(f"a number's source is 'stated' or 'chosen', got {self.source!r}")
        if self.source == "stated" and not self.where.strip():
            raise InvalidParameterError(f"stated number {self.name!r} needs where the paper states it")
        if self.source == "chosen" and not self.reason.strip():
            raise InvalidParameterError(f"chosen number {self.name!r} needs the reason privaudit chose it")

    def text(self) -> str:
        """``δ = 0.001 (chosen: …)`` — one line for tables and the CLI."""
        value = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
        if self.source == "stated":
            return f"{self.name} = {value} ({self.where})"
        return f"{self.name} = {value} ({self.reason}{'; from ' + self.where if self.where else ''})"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source, "where": self.where, "reason": self.reason}


def stated(name: str, value: Any, where: str) -> Number:
    """A number the paper prints, and where."""
    return Number(name, value, "stated", where=where)


def chosen(name: str, value: Any, reason: str, where: str = "") -> Number:
    """A number the paper does not give: privaudit's choice, and why (``where`` it was taken from, if anywhere)."""
    return Number(name, value, "chosen", where=where, reason=reason)


@dataclass(frozen=True)
class Claim:
    """One privacy claim of a paper (see the module docstring)."""

    claim_id: str
    paper: str
    seed_file: str
    where: str
    statement: str
    mechanism: str
    epsilon: float | None  # None: the paper states no ε (a comparison claim, privaudit.audit.comparison)
    delta: float | None
    parameters: tuple[tuple[str, Any], ...]
    assumptions: tuple[str, ...]
    spec_points: tuple[str, ...]
    recipe: str
    default_trials: int = 200
    suites: tuple[tuple[str, int], ...] = ()
    quotes: tuple[Quote, ...] = ()
    numbers: tuple[Number, ...] = ()
    #: "dp": an (ε, δ) claim (refuted / consistent / inconclusive); "comparison": a claim that states no ε, audited as
    #: stated by ``criterion`` (supported / not supported / inconclusive, privaudit.audit.comparison), ε and δ None.
    kind: str = "dp"
    criterion: str = ""

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.parameters)

    @property
    def quote(self) -> Quote | None:
        """The claim's first quote (the sentence or cell the claim rests on), or None if none is recorded."""
        return self.quotes[0] if self.quotes else None

    def number(self, name: str) -> Number | None:
        """The provenance of the number called ``name`` (``"epsilon"``, ``"delta"``, a parameter), if recorded."""
        return next((n for n in self.numbers if n.name == name), None)

    def provenance(self) -> dict[str, str]:
        """``{"epsilon": "stated", "delta": "chosen"}`` — "unrecorded" where the registry says nothing."""
        return {name: (n.source if (n := self.number(name)) is not None else "unrecorded") for name in ("epsilon", "delta")}

    def sources_dict(self) -> dict[str, Any]:
        """The claim's quotes and numbers, split into stated and chosen (for JSON and the report)."""
        return {
            "quotes": [q.to_dict() for q in self.quotes],
            "numbers": [n.to_dict() for n in self.numbers],
            "stated": [n.to_dict() for n in self.numbers if n.source == "stated"],
            "chosen": [n.to_dict() for n in self.numbers if n.source == "chosen"],
            "claimed_provenance": self.provenance(),
        }

    def recipe_function(self) -> Callable[[Claim, int], Sequence[Reading | ClaimDetails]]:
        return plugins.Ref(self.recipe).load()

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "paper": self.paper,
            "seed_file": self.seed_file,
            "where": self.where,
            "statement": self.statement,
            "mechanism": self.mechanism,
            "claimed": {"epsilon": self.epsilon, "delta": self.delta},
            "claim_kind": self.kind,
            "criterion": self.criterion,
            "parameters": dict(self.parameters),
            "assumptions": list(self.assumptions),
            "spec_points": list(self.spec_points),
            **self.sources_dict(),
        }


def claim_modules() -> tuple[str, ...]:
    """The modules that define ``CLAIMS``: each registered paper's, in paper-key order."""
    return tuple(module for paper in plugins.papers() for module in paper.claim_modules)


@cache
def all_claims() -> tuple[Claim, ...]:
    """Every registered claim, in the order of :func:`claim_modules`; claim ids are unique."""
    claims = tuple(c for module in claim_modules() for c in importlib.import_module(module).CLAIMS)
    ids = [c.claim_id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids registered twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    return claims


@cache
def claims_by_id() -> dict[str, Claim]:
    """Claim id → claim (one dict, built once)."""
    return {claim.claim_id: claim for claim in all_claims()}


def claim_ids() -> list[str]:
    return [claim.claim_id for claim in all_claims()]


def get_claim(claim_id: str) -> Claim:
    """The registered claim with this id; an unknown id is one clear error that lists the known ones."""
    claim = claims_by_id().get(str(claim_id).strip())
    if claim is None:
        raise InvalidParameterError(f"unknown claim {claim_id!r}; known claims: {', '.join(claim_ids())}")
    return claim


def list_claims() -> list[Claim]:
    """Every registered claim (for ``privaudit audit --list``); listing imports no recipe and no torch."""
    return list(all_claims())
