"""What a run declares, round by round: the client-level Gaussian release each ledger event describes.

A ledger event is a mechanism (its noise multiplier z and, when subsampled, q and the scheme) plus the assumptions its
producer wrote. The checks need more than z: the clip C, the noise std on the sum of clipped updates, what the sum is
divided by, and where the updates are clipped. privaudit's three producers of client-level (``server``) events state
them in fixed phrases, read here:

* privaudit's own central DP (:mod:`privaudit.fl.privacy.central_dp`, ``dp-fedavg``; McMahan, Ramage, Talwar & Zhang
  2018): θ_r = θ_{r−1} + (Σ_k clip_C(Δ_k) + N(0, σ²C²I))/(q·N) — the clip and σ are read from the manifest's
  ``algorithm.privacy`` (exact; ``clip_history`` for adaptive clipping), the divisor q·N is the expected number of
  clients (or the fixed sample size); the server clips.
* Flower's fixed-clipping wrappers as the audit tap records them (:mod:`privaudit.interop.flower.tap`): the mean of
  the n updates that arrived plus N(0, (σC/m)²): noise std zC on their sum with z = σn/m, divisor n; clipped on the
  server (``DifferentialPrivacyServerSideFixedClipping``) or by the clients' ``fixedclipping_mod``.
* Flower's adaptive-clipping wrappers as the tap records them (:mod:`privaudit.interop.flower.adaptive`): the mean
  release of round t, clipped to C_t, noise std z·C_t on the sum (z as the phrase states it), divisor n; its noisy
  count of clipped updates is another release, not checked here;
* a :class:`~privaudit.interop.releases.GaussianRelease` with ``level="client"`` recorded by the recorder: "Gaussian
  noise of std s on contributions clipped to C = …": noise std s on the sum; the divisor is not recorded, and is
  taken to be DP-FedAvg's fixed denominator q·N under Poisson sampling (q < 1) and the number of updates that arrived
  otherwise (they coincide with the fixed sample size); where the clipping happens is not recorded either, and is
  taken to be the server (the releases are what the clients sent). :class:`Overrides` replaces any of these.

Record-level events (a client's own releases, DP-SGD) and no-guarantee events are listed, not parsed: their noise
cannot be separated from the client's data. A client-level event that states none of these phrases and that its producer
already recorded as invalid (its ``note`` says why: e.g. noise scaled by unrecorded, data-dependent norms) declares no
noise law to test: it is listed with the producer's reason, and ``--clip`` does not make it checkable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.check.base import MARK
from privaudit.checks import finite_positive, parse_enum
from privaudit.errors import InvalidParameterError


class ClipSite(str, Enum):
    """Where the updates are clipped: by each client before it sends (its recorded release is clipped) or by the
    server after (the recorded release is what the client sent, unclipped)."""

    CLIENT = "client"
    SERVER = "server"

    @classmethod
    def parse(cls, value: str | ClipSite) -> ClipSite:
        return parse_enum(cls, value, "clipping site")


#: How the clipped sum is averaged: by the expected number of clients q·N (DP-FedAvg's fixed denominator), by the
#: number of updates that arrived, or by a given number.
EXPECTED, REALISED = "expected", "realised"


@dataclass(frozen=True)
class Overrides:
    """What the user states on top of (or instead of) the run's declarations: the clip C, the divisor of the clipped
    sum (``"expected"``, ``"realised"`` or a number) and the clipping site."""

    clip: float | None = None
    divisor: str | float | None = None
    clipped_at: ClipSite | str | None = None

    def __post_init__(self) -> None:
        if self.clip is not None:
            object.__setattr__(self, "clip", finite_positive("clip", self.clip))
        if self.divisor is not None:
            object.__setattr__(self, "divisor", parse_divisor(self.divisor))
        if self.clipped_at is not None:
            object.__setattr__(self, "clipped_at", ClipSite.parse(self.clipped_at))


def parse_divisor(value: str | float) -> str | float:
    """``expected``, ``realised`` (also ``realized``) or a positive number."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in (EXPECTED, REALISED, "realized"):
            return REALISED if text == "realized" else text
        try:
            return finite_positive("divisor", float(text))
        except ValueError:
            raise InvalidParameterError(f"divisor must be 'expected', 'realised' or a positive number, got {value!r}") from None
    return finite_positive("divisor", value)


@dataclass(frozen=True)
class CentralRelease:
    """The client-level Gaussian release of one round, as declared (see the module docstring).

    ``event``: the index of its event in the ledger; ``noise_std``: the std of the noise on the *sum* of the clipped
    updates (None: not declared); ``divisor``: what the sum is divided by (:data:`EXPECTED`, :data:`REALISED` or a
    number); ``population`` N; ``problem``: why its noise cannot be checked (None: it can).
    """

    round: int
    event: int
    source: str
    multiplier: float
    noise_std: float | None
    clip: float | None
    sample_rate: float
    sampling: Sampling | None
    population: int
    divisor: str | float
    clipped_at: ClipSite
    problem: str | None = None
    declared_sampled: int | None = None
    #: whether the event's mechanism is this release alone (its multiplier can be scaled to a certified bound); an
    #: event that composes it with another release (Flower's adaptive count, sampled jointly) cannot
    alone: bool = True

    def aggregate_divisor(self, arrived: int) -> float:
        """The number the clipped sum of ``arrived`` updates is divided by."""
        if self.divisor == EXPECTED:
            return self.sample_rate * self.population
        if self.divisor == REALISED:
            return float(arrived)
        return float(self.divisor)

    def describe(self) -> str:
        rule = {EXPECTED: f"q·N = {self.sample_rate * self.population:g}", REALISED: "the number of updates that arrived"}
        divisor = rule[self.divisor] if isinstance(self.divisor, str) else f"{self.divisor:g}"
        std = "?" if self.noise_std is None else f"{self.noise_std:.6g}"
        clip = "?" if self.clip is None else f"{self.clip:.6g}"
        return (f"round {self.round} ({self.source}): θ_r = θ_(r−1) + (Σ_k clip_C(Δ_k) + N(0, s²I))/A with C = {clip} "
                f"({self.clipped_at.value}-side), s = {std}, A = {divisor}")


@dataclass(frozen=True)
class Declarations:
    """Every round's client-level release (``central``), the record-level and no-guarantee events, and what could not
    be read (``problems``: round → why)."""

    central: Mapping[int, CentralRelease]
    record_level: tuple[int, ...]
    no_guarantee: tuple[int, ...]
    problems: Mapping[int, str]


_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_CLIP = re.compile(r"clipped to C = " + _NUMBER)
_RELEASE_STD = re.compile(r"^Gaussian noise of std " + _NUMBER + r" on contributions clipped to C = " + _NUMBER
                          + r" \(L2 sensitivity Δ = " + _NUMBER)
_FLOWER = re.compile(r"^Flower (\w+) \(McMahan et al\. 2018\): updates clipped to C = " + _NUMBER
                     + r", N\(0, \(σC/m\)²\) added to their mean with σ = " + _NUMBER + r", m = (\d+); (\d+) update")
_FLOWER_SAMPLED = re.compile(r"^(\d+) of (\d+) nodes sampled")
_FLOWER_ADAPTIVE = re.compile(r"^Flower (\w+) mean release: updates clipped to C_t = " + _NUMBER + r" \((.*?)\), .*?, "
                              r"m = (\d+); (\d+) update\(s\) arrived: multiplier [^=]*= " + _NUMBER + " on their sum")
_FLOWER_COUNT = " count release (adaptive clipping"
_FEDAVG = re.compile(r"^DP-FedAvg \(McMahan et al\. 2018\): each update clipped to C = " + _NUMBER
                     + r" over all aggregated parameters, N\(0, σ²C²\) with σ = " + _NUMBER
                     + r" on the sum, fixed denominator q·N = " + _NUMBER)
_BITS = "adaptive clipping (Andrew et al. 2021)"


def _mechanism(event: PrivacyEvent) -> tuple[float, float, Sampling | None] | None:
    """(z, q, scheme) of a Gaussian or subsampled Gaussian event, else None."""
    m = event.mechanism
    if isinstance(m, Gaussian):
        return m.z, 1.0, None
    if isinstance(m, SubsampledGaussian):
        return m.z, m.sample_rate, m.sampling if m.sample_rate < 1 else None
    return None


def _privaudit_privacy(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    privacy = manifest.get("algorithm", {}).get("privacy") if isinstance(manifest.get("algorithm"), dict) else None
    return privacy if isinstance(privacy, dict) and privacy.get("mechanism") == "central-dp" else None


def _from_fedavg(event: PrivacyEvent, index: int, match: re.Match, manifest: Mapping[str, Any],
                 population: int) -> CentralRelease:
    z, q, sampling = _mechanism(event)  # type: ignore[misc]
    clip, divisor, sigma = float(match.group(1)), float(match.group(3)), float(match.group(2))
    joint = any(a.startswith(_BITS) for a in event.assumptions)  # the mean and the count sampled together: one event
    privacy = _privaudit_privacy(manifest)
    if privacy is not None:  # exact values (the phrase rounds them to 6 digits)
        history = privacy.get("clip_history") or []
        if 0 < event.round <= len(history) and isinstance(history[event.round - 1], dict) and "clip" in history[event.round - 1]:
            clip = float(history[event.round - 1]["clip"])
        elif not privacy.get("adaptive"):
            clip = float(privacy.get("clip_norm", clip))
        rate, n = privacy.get("client_rate"), privacy.get("num_clients")
        if isinstance(rate, int | float) and isinstance(n, int) and n > 0:
            poisson = privacy.get("client_sampling") == Sampling.POISSON.value
            divisor = rate * n if poisson else float(max(math.floor(rate * n + 1e-9), 1))
        if isinstance(privacy.get("noise_multiplier"), int | float):
            sigma = float(privacy["noise_multiplier"])
    if joint:
        z = sigma  # the event's multiplier combines the mean's σ with the count's: the mean's own is σ
    return CentralRelease(event.round, index, "privaudit DP-FedAvg", z, z * clip, clip, q, sampling, population, divisor,
                          ClipSite.SERVER, alone=not joint)


def _from_flower(event: PrivacyEvent, index: int, match: re.Match, population: int) -> CentralRelease:
    z, q, sampling = _mechanism(event)  # type: ignore[misc]
    wrapper, clip, m = match.group(1), float(match.group(2)), int(match.group(4))
    site = ClipSite.CLIENT if "ClientSide" in wrapper else ClipSite.SERVER
    for text in event.assumptions:
        sampled = _FLOWER_SAMPLED.match(text)
        if sampled:
            population = int(sampled.group(2))
    return CentralRelease(event.round, index, f"Flower {wrapper}", z, z * clip, clip, q, sampling, population, REALISED,
                          site, declared_sampled=m)


def _from_flower_adaptive(event: PrivacyEvent, index: int, match: re.Match, population: int) -> CentralRelease:
    _, q, sampling = _mechanism(event)  # type: ignore[misc]
    wrapper, clip, site, m, z = match.group(1), float(match.group(2)), match.group(3), int(match.group(4)), float(match.group(6))
    for text in event.assumptions:
        sampled = _FLOWER_SAMPLED.match(text)
        if sampled:
            population = int(sampled.group(2))
    where = ClipSite.CLIENT if "clients" in site and "mod clips" in site else ClipSite.SERVER
    return CentralRelease(event.round, index, f"Flower {wrapper} (adaptive)", z, z * clip, clip, q, sampling, population,
                          REALISED, where, declared_sampled=m, alone=q >= 1)


def _from_release(event: PrivacyEvent, index: int, match: re.Match, population: int) -> CentralRelease:
    z, q, sampling = _mechanism(event)  # type: ignore[misc]
    std, clip = float(match.group(1)), float(match.group(2))
    divisor = EXPECTED if (q < 1 and sampling is Sampling.POISSON) else REALISED
    problem = None if event.count == 1 else (f"the event counts {event.count} releases in round {event.round}: the noise "
                                             "check reads one aggregate per round")
    return CentralRelease(event.round, index, "GaussianRelease", z, std, clip, q, sampling, population, divisor,
                          ClipSite.SERVER, problem)


def _population(manifest: Mapping[str, Any]) -> int:
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    for value in (dataset.get("num_clients"), (_privaudit_privacy(manifest) or {}).get("num_clients")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def declarations(ledger: PrivacyLedger, manifest: Mapping[str, Any], overrides: Overrides | None = None) -> Declarations:
    """Each round's declared client-level release (module docstring), with ``overrides`` applied."""
    overrides = overrides or Overrides()
    population = _population(manifest)
    central: dict[int, CentralRelease] = {}
    record_level: set[int] = set()
    no_guarantee: set[int] = set()
    problems: dict[int, str] = {}
    for index, event in enumerate(ledger.events):
        if not event.has_guarantee:
            no_guarantee.add(event.round)
            continue
        if event.client_id != SERVER:
            record_level.add(event.round)
            continue
        counts = any(a.startswith(_BITS) or _FLOWER_COUNT in a for a in event.assumptions)
        if counts and not any(_FEDAVG.match(a) or _FLOWER_ADAPTIVE.match(a) for a in event.assumptions):
            continue  # an adaptive clip's noisy count of clipped updates alone, not the model release
        if _mechanism(event) is None:
            problems[event.round] = f"a client-level {event.mechanism.describe()} event (not Gaussian): no noise law to check"
            continue
        release = _parse(event, index, manifest, population)
        if release is None and not event.valid and not event.note.startswith(MARK):
            problems[event.round] = (f"its producer recorded the event as invalid ({event.note or 'no reason given'}) and "
                                     "states no noise law the check reads: nothing declared to test")
            continue
        if release is None:
            problems[event.round] = ("the event does not say how its release was formed (no clip C in its assumptions): "
                                     "pass the clip")
            if overrides.clip is None:
                continue
            z, q, sampling = _mechanism(event)  # type: ignore[misc]
            divisor = EXPECTED if (q < 1 and sampling is Sampling.POISSON) else REALISED
            release = CentralRelease(event.round, index, "declared by the user", z, None, None, q, sampling, population,
                                     divisor, ClipSite.SERVER)
        if event.round in central:
            problems[event.round] = f"round {event.round} has two client-level model releases; the check reads one per round"
            continue
        central[event.round] = _apply(release, overrides)
    for round_ in list(central):
        if round_ in problems and central[round_].clip is not None:
            problems.pop(round_)
    return Declarations(central, tuple(sorted(record_level)), tuple(sorted(no_guarantee)), problems)


def _parse(event: PrivacyEvent, index: int, manifest: Mapping[str, Any], population: int) -> CentralRelease | None:
    for text in event.assumptions:
        for pattern, build in ((_FEDAVG, lambda m: _from_fedavg(event, index, m, manifest, population)),
                               (_FLOWER, lambda m: _from_flower(event, index, m, population)),
                               (_FLOWER_ADAPTIVE, lambda m: _from_flower_adaptive(event, index, m, population)),
                               (_RELEASE_STD, lambda m: _from_release(event, index, m, population))):
            match = pattern.match(text)
            if match:
                return build(match)
    return None


def _apply(release: CentralRelease, overrides: Overrides) -> CentralRelease:
    changes: dict[str, Any] = {}
    if overrides.clip is not None:
        changes["clip"] = overrides.clip
        if release.noise_std is None or release.clip is None:
            changes["noise_std"] = release.multiplier * overrides.clip
        else:  # the declared multiplier is what the accountant used: keep z, rescale s = z·C
            changes["noise_std"] = release.noise_std * overrides.clip / release.clip
    if overrides.divisor is not None:
        changes["divisor"] = overrides.divisor
    if overrides.clipped_at is not None:
        changes["clipped_at"] = overrides.clipped_at
    return replace(release, **changes) if changes else release


def clip_of(text: str) -> float | None:
    """The clip C a producer's phrase states (``clipped to C = …``), else None."""
    match = _CLIP.search(text)
    return float(match.group(1)) if match else None


def rounds_with_events(ledger: PrivacyLedger) -> dict[int, list[int]]:
    """round → indices of its ledger events."""
    out: dict[int, list[int]] = {}
    for index, event in enumerate(ledger.events):
        out.setdefault(event.round, []).append(index)
    return out


def describe_declarations(decl: Declarations, limit: int = 3) -> list[str]:
    """A few lines saying what was read (for a check's assumptions)."""
    lines = [release.describe() for _, release in sorted(decl.central.items())[:limit]]
    if len(decl.central) > limit:
        lines.append(f"… and {len(decl.central) - limit} more round(s) alike")
    return lines


__all__: Sequence[str] = ("EXPECTED", "REALISED", "CentralRelease", "ClipSite", "Declarations", "Overrides",
                          "declarations", "describe_declarations", "parse_divisor", "rounds_with_events")
