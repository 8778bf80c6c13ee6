"""A training framework's own ε, judged against the releases the run recorded: certified, not an upper bound, or refuted.

A framework (opacus, Flower, …) reports an ε computed by *its* accountant for *its* model of the mechanism. That
figure bounds what ran only when (1) the accountant gives an upper bound for the mechanisms it composed (RDP and
PRV's upper end do; a central-limit approximation such as opacus's ``gdp`` does not) and (2) those mechanisms are
the ones the run's ledger records — under the same neighbouring relation — and the ledger marks them valid.

:func:`assess_reported` classifies one reported figure, at the δ it was reported at:

* ``certified`` — both hold: a certified upper bound (privaudit's own figure beside it is usually tighter);
* ``not-an-upper-bound`` — the framework's accountant approximates, or it composed other mechanisms than the run's
  (e.g. Flower's ``no-amplification`` accounting of Gaussian(σ) with sensitivity C for rounds that sample m of N
  clients, where an added client displaces a sampled one and the noised sum moves by up to 2C);
* ``refuted`` — a certified *lower* bound on the ε of the mechanism that ran exceeds the figure: the exact ε of a
  Gaussian composition (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 3.3), or the lower end of the PRV
  accountant's certified interval (Gopi, Lee & Wutschitz 2021, Thm 5.5) for the dominating pair of the recorded
  mechanism, which the mechanism attains on worst-case neighbours (:mod:`privaudit.accounting.pairs`, *Dominating
  pairs*); only releases the ledger marks valid are used;
* ``unverified`` — privaudit cannot tell: the framework's model was not recorded, or the run's ledger marks the
  releases it accounts invalid (then no figure bounds what ran).

What a framework's accountant composed is stated by the adapter that read it, as a :class:`FrameworkAccounting`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.gaussian import plain_gaussian_mu
from privaudit.accounting.ledger import PrivacyLedger
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Mechanism,
    Neighbouring,
    SubsampledGaussian,
    mechanism_from_dict,
    mechanism_to_dict,
)
from privaudit.accounting.prv import PrvAccountant
from privaudit.errors import InvalidParameterError, NumericalFailure, UnsupportedMechanismError

CERTIFIED = "certified"
NOT_AN_UPPER_BOUND = "not-an-upper-bound"
REFUTED = "refuted"
UNVERIFIED = "unverified"
#: How each status reads in one line.
STATUS_WORDS = {
    CERTIFIED: "a certified upper bound",
    NOT_AN_UPPER_BOUND: "not an upper bound for what ran",
    REFUTED: "refuted",
    UNVERIFIED: "unverified",
}
#: Relative margin a lower bound must clear before a reported figure counts as refuted (rounding of the report).
REFUTE_MARGIN = 1e-6


@dataclass(frozen=True)
class FrameworkAccounting:
    """What a framework's accountant composed, in privaudit's terms.

    ``method`` names its accountant (``rdp``, ``prv``, ``gdp``, …); ``bound`` is ``"upper"`` when its answer is a
    certified upper bound for the mechanisms it composed, ``"approximation"`` otherwise; ``model`` says in words what
    it assumed; ``caveat`` says when that model is not the run (shown when the recorded releases differ).
    """

    method: str
    mechanisms: tuple[tuple[Mechanism, int], ...]
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    bound: str = "upper"
    model: str = ""
    caveat: str = ""

    def __post_init__(self) -> None:
        if self.bound not in ("upper", "approximation"):
            raise InvalidParameterError(f"a framework accountant's bound is 'upper' or 'approximation', got {self.bound!r}")
        object.__setattr__(self, "mechanisms", Composition(self.mechanisms).entries)
        object.__setattr__(self, "neighbouring", Neighbouring.parse(self.neighbouring))

    @property
    def composition(self) -> Composition:
        return Composition(self.mechanisms, self.neighbouring)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "bound": self.bound, "neighbouring": self.neighbouring.value,
                "mechanisms": [{"mechanism": mechanism_to_dict(m), "count": c} for m, c in self.mechanisms],
                "model": self.model, "caveat": self.caveat}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameworkAccounting:
        try:
            mechanisms = tuple((mechanism_from_dict(item["mechanism"]), int(item["count"])) for item in data["mechanisms"])
            return cls(str(data["method"]), mechanisms, Neighbouring.parse(data.get("neighbouring", Neighbouring.ADD_REMOVE)),
                       str(data.get("bound", "upper")), str(data.get("model", "")), str(data.get("caveat", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidParameterError(f"malformed framework accounting: {exc}") from None


def _canonical(composition: Composition) -> tuple[str, frozenset]:
    """A composition as a set of (mechanism, count), plain Gaussians as Gaussian(σ/Δ), numbers to 10 digits."""
    entries: dict[Any, int] = {}
    for mechanism, count in composition:
        if isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate >= 1.0:
            mechanism = Gaussian(mechanism.noise_multiplier)
        if isinstance(mechanism, Gaussian):
            mechanism = Gaussian(mechanism.z)
        key = tuple((k, float(f"{v:.10g}") if isinstance(v, float) else v) for k, v in mechanism_to_dict(mechanism).items())
        entries[key] = entries.get(key, 0) + count
    return composition.neighbouring.value, frozenset(entries.items())


def certified_lower_bound(composition: Composition, delta: float) -> tuple[float, str] | None:
    """(ε, how) a certified lower bound on the ε at ``delta`` of ``composition`` on worst-case neighbours, or ``None``.

    The exact ε of a composition of Gaussian releases, else the lower end of the PRV accountant's interval
    (supported: subsampled Gaussians under add/remove, Laplace, pure DP)."""
    if composition.is_empty:
        return None
    prv = PrvAccountant()
    if not prv.supports(composition):
        return None
    try:
        result = prv.epsilon(composition, delta)
    except (NumericalFailure, UnsupportedMechanismError):
        return None
    if result.lower is None:
        return None
    how = ("the exact ε of the Gaussian composition" if plain_gaussian_mu(composition) is not None
           else "the lower end of the PRV accountant's certified interval")
    return float(result.lower), how


def _number(value: Any) -> float | None:
    if value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def assess_reported(entry: Mapping[str, Any], ledger: PrivacyLedger, accountant: str = "auto") -> dict[str, Any]:
    """The classification of one ``reported_epsilon`` entry of a checkpoint manifest (see the module docstring).

    Returns ``{"status", "reason", "lower_bound", "privaudit_epsilon", "privaudit_accountant", "delta",
    "ledger_valid"}``; the ε values are at the δ the figure was reported at, privaudit's a certified upper bound only
    when ``ledger_valid``."""
    epsilon, delta = _number(entry.get("epsilon")), _number(entry.get("delta"))
    client = entry.get("client")
    out: dict[str, Any] = {"status": UNVERIFIED, "reason": "", "lower_bound": None, "privaudit_epsilon": None,
                           "privaudit_accountant": None, "delta": delta, "ledger_valid": None}
    if epsilon is None or delta is None or not 0 < delta < 1:
        out["reason"] = "the reported figure has no usable (ε, δ)"
        return out
    clients = ledger.clients()
    if client is None and len(clients) == 1:
        client = clients[0]
    events = ledger.events_for(client) if client is not None and str(client) in clients else []
    if not events:
        out["reason"] = (f"the run's ledger records no release for client {client!r}, whose ε this is" if client is not None
                         else "the figure names no client and the ledger holds several")
        return out
    recorded = ledger.composition_for(client)
    certified = "auto" if get_accountant(accountant).approximate else accountant  # privaudit's side is always a bound
    mine = ledger.epsilon_for(client, delta, certified)
    out["privaudit_epsilon"], out["privaudit_accountant"] = mine.epsilon, mine.accountant
    failed = sorted({e.note or "marked invalid" for e in events if not e.valid})
    out["ledger_valid"] = not failed
    if failed:
        out["reason"] = ("the run's ledger marks the releases it accounts invalid (" + "; ".join(failed) +
                         "): neither this figure nor privaudit's bounds what ran")
        return out
    lower = certified_lower_bound(recorded, delta)
    if lower is not None:
        out["lower_bound"] = {"epsilon": lower[0], "method": lower[1]}
    model_raw = entry.get("accounted_as")
    model = FrameworkAccounting.from_dict(model_raw) if isinstance(model_raw, Mapping) else None
    if model is None:
        status, reason = UNVERIFIED, "the framework's model of the mechanism was not recorded, so privaudit cannot tell what it bounds"
    elif model.bound != "upper":
        status = NOT_AN_UPPER_BOUND
        reason = f"its {model.method} accountant is an approximation, not a bound" + (f" ({model.model})" if model.model else "")
    elif _canonical(model.composition) != _canonical(recorded):
        status = NOT_AN_UPPER_BOUND
        reason = (f"its {model.method} accountant composed {model.composition.describe()}"
                  + (f" ({model.model})" if model.model else "")
                  + f", but the run recorded {recorded.describe()}" + (f": {model.caveat}" if model.caveat else ""))
    else:
        status = CERTIFIED
        reason = (f"its {model.method} accountant bounds {recorded.describe()}, the releases the run recorded"
                  + (f" ({model.model})" if model.model else ""))
    if lower is not None and lower[0] > epsilon * (1 + REFUTE_MARGIN) + 1e-12:
        status = REFUTED
        reason = (f"{lower[1]} of the recorded releases is ε ≥ {lower[0]:.6g} at δ = {delta:g}, above the reported "
                  f"{epsilon:.6g}; {reason}")
    out["status"], out["reason"] = status, reason
    return out


def assess_all(reported: Iterable[Any], ledger: PrivacyLedger, accountant: str = "auto") -> list[dict[str, Any]]:
    """Every entry of a manifest's ``reported_epsilon`` with its ``assessment`` added (entries that are not objects
    are kept as they are)."""
    out = []
    for entry in reported:
        if isinstance(entry, Mapping):
            out.append({**entry, "assessment": assess_reported(entry, ledger, accountant)})
        else:
            out.append(entry)
    return out


def describe_assessment(entry: Mapping[str, Any]) -> str:
    """One line: ``<source> (for client c): ε = x at δ = d — <status words>: <reason>``."""
    assessment = entry.get("assessment") if isinstance(entry.get("assessment"), Mapping) else {}
    value = _number(entry.get("epsilon"))
    shown = "?" if value is None else ("∞" if math.isinf(value) else f"{value:.6g}")
    who = "" if entry.get("client") is None else f" for client {entry['client']}"
    words = STATUS_WORDS.get(str(assessment.get("status")), str(assessment.get("status", "unclassified")))
    line = f"{entry.get('source', 'a framework')}{who}: ε = {shown} at δ = {entry.get('delta')} — {words}"
    if assessment.get("reason"):
        line += f": {assessment['reason']}"
    mine = _number(assessment.get("privaudit_epsilon"))
    if mine is not None:
        which = "certified ε" if assessment.get("ledger_valid") else "ε, if the failed assumptions held,"
        line += (f". privaudit's {which} at that δ: {'∞' if math.isinf(mine) else f'{mine:.6g}'} "
                 f"({assessment.get('privaudit_accountant')})")
    return line
