"""The recorder's closing check: client-level releases declared Poisson-sampled whose rounds all sampled alike.

Under Poisson sampling at rate q of K clients the number sampled is Binomial(K, q) (each client independently with
probability q: the sampling scheme that Poisson privacy amplification assumes, Zhu & Wang 2019, "Poisson subsampled
Rényi differential privacy"), so R rounds that all sample one number c have probability Σ_c P(c)^R. A loop that draws
a fixed number (``random.sample``) does so every round; its guarantee is the fixed-size one, far weaker (the pairs of
:mod:`privaudit.accounting.pairs`). Such events are marked invalid with the reason rather than refused: the run is
kept (attacks and reports still read it) and ``compute-epsilon`` states no guarantee and says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Sampling, SubsampledGaussian

#: A constant number of sampled clients over rounds declared Poisson-sampled is flagged when, under the declared
#: Poisson sampling, all those rounds sampling one and the same number has a probability below this.
SAMPLING_ALPHA = 1e-3


def _is_poisson_server_release(event: PrivacyEvent) -> bool:
    m = event.mechanism
    return (event.client_id == SERVER and isinstance(m, SubsampledGaussian) and m.sampling is Sampling.POISSON
            and m.sample_rate < 1)


def poisson_count_check(events: list[PrivacyEvent], observed: Mapping[int, int], clients: int) -> list[PrivacyEvent]:
    """``events`` with the client-level Poisson releases of implausibly constant rounds marked invalid (the module
    docstring); ``observed`` maps a round to the number of clients seen training in it, ``clients`` is K."""
    groups: dict[float, list[int]] = {}
    for event in events:
        if _is_poisson_server_release(event) and event.round in observed:
            groups.setdefault(event.mechanism.sample_rate, []).append(event.round)  # type: ignore[union-attr]
    flagged: dict[tuple[float, int], str] = {}
    for q, rounds in groups.items():
        rounds = sorted(set(rounds))
        counts = {observed[r] for r in rounds}
        if len(rounds) < 2 or len(counts) != 1:
            continue
        p = _all_equal_probability(clients, q, len(rounds))
        if p >= SAMPLING_ALPHA:
            continue
        (count,) = counts
        reason = (f"declared Poisson sampling of clients at q = {q:g}, but all {len(rounds)} such rounds sampled "
                  f"exactly {count} of the {clients} clients (probability {p:.2g} under Poisson sampling): the loop "
                  "samples a fixed number, whose guarantee is the fixed-size one (sampling='fixed-size'; "
                  "compute-epsilon --mechanism subsampled-gaussian --sampling fixed-size gives it)")
        flagged.update({(q, r): reason for r in rounds})
    if not flagged:
        return events

    def checked(event: PrivacyEvent) -> PrivacyEvent:
        if not _is_poisson_server_release(event):
            return event
        reason = flagged.get((event.mechanism.sample_rate, event.round))  # type: ignore[union-attr]
        if reason is None:
            return event
        return replace(event, valid=False, note="; ".join(n for n in (event.note, reason) if n))

    return [checked(e) for e in events]


def _all_equal_probability(clients: int, q: float, rounds: int) -> float:
    """P(``rounds`` independent Binomial(``clients``, q) draws are all equal) = Σ_c P(c)^rounds."""
    total = 0.0
    for c in range(clients + 1):
        log_p = (math.lgamma(clients + 1) - math.lgamma(c + 1) - math.lgamma(clients - c + 1)
                 + c * math.log(q) + (clients - c) * math.log1p(-q))
        total += math.exp(rounds * log_p)
    return min(1.0, total)
