"""The server rules of the PFA family (004): how a round's noisy updates Δx^m are combined, and what a client uploads.

Each family member's server is one small strategy object (:class:`ServerRule`), given the round's results, the
sample's public and private clients and every client's operating ε_m:

* :class:`ExampleWeighted` — FedAvg of the noisy updates (``fedavg-hdp`` and its baselines; equal client sizes:
  the mean);
* :class:`EpsilonWeighted` — WeiAvg (Alg. 1): Δx̄ = Σ_m W(ε_m)Δx^m, W_S(ε_m) = ε_m/Σ_{S} ε;
* :class:`Projected` — PFA (Alg. 3): Δx̄^pub = Σ_pub W(ε)Δx, V_k ← top-k eigenvectors of Δx̄^pub(Δx̄^pub)ᵀ
  (:mod:`privaudit.papers.pfa.projection`, never forming the p×p matrix), Δx̂^pri = V_kV_kᵀ Σ_pri W(ε)Δx,
  Δx̄ = (Σ_pub ε/Σ ε)·Δx̄^pub + (Σ_pri ε/Σ ε)·Δx̂^pri; a round without public clients is a WeiAvg round;
* :class:`ProjectedUploads` — PFA+ (Alg. 4/5): a private client uploads only V_k[t−1]ᵀΔx^m (k numbers per block)
  against the subspace the server computed from the *previous* round's public updates, and the server
  reconstructs V_k[t−1]·Σ_pri W(ε)·(coefficients); public clients upload in full and define V_k[t]. The warm-up
  round (no previous subspace yet) is a PFA round with every client uploading in full.

Blocks (:class:`Blocks`): the paper's Alg. 3 is printed for the flattened update (scope ``model``); its PFA+
communication analysis projects "the original parameters in a given layer", and the reference code projects
every tensor separately, so the default scope ``tensor`` projects each trainable tensor. Entries of the state
that are not trained (buffers) are ε-weighted averages, never projected.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import ClientResult
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import SeedTree
from privaudit.papers.pfa.projection import Subspace, public_subspace
from privaudit.papers.pfa.settings import ProjectionScope, ProjectionSettings
from privaudit.papers.pfa.uplink import projected_update_bytes

#: ``ClientResult.extras`` key of a PFA+ private client's uploaded coefficients (one float32 vector per block).
COEFFICIENTS = "pfa_coefficients"


@dataclass
class RoundRecord:
    """What the server did in one training round (JSON-ready)."""

    round: int
    aggregation: str
    public: list[int]
    private: list[int]
    projected_uploads: int = 0
    dims: list[int] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Blocks:
    """The blocks PFA projects separately: every trainable tensor (scope ``tensor``) or the whole model (``model``)."""

    trainable: tuple[str, ...]
    scope: ProjectionScope = ProjectionScope.TENSOR

    def __iter__(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        if self.scope is ProjectionScope.MODEL:
            return iter([("model", self.trainable)])
        return iter([(n, (n,)) for n in self.trainable])

    @staticmethod
    def flat(state: State, names: Sequence[str]) -> torch.Tensor:
        return torch.cat([state[n].reshape(-1).to(torch.float64) for n in names])

    @staticmethod
    def unflat(vector: torch.Tensor, names: Sequence[str], like: State) -> State:
        out, offset = {}, 0
        for n in names:
            size = like[n].numel()
            out[n] = vector[offset : offset + size].reshape(like[n].shape)
            offset += size
        return out


def weighted_states(results: Sequence[ClientResult], weights: dict[int, float]) -> State:
    """x − Σ_m w_m Δx^m / Σ w (= Σ w_m x^m / Σ w for every state entry)."""
    return P.weighted_average([r.state for r in results], [weights[r.client_id] for r in results])


class ServerRule:
    """How the server aggregates a round, and what a private client uploads (in full, unless overridden)."""

    #: The rule's name in the family's report (``RoundRecord.aggregation``).
    aggregation = "fedavg"
    #: Whether the rule needs public clients in a sample (the ``no_public`` policy applies to it).
    needs_public = False

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult], public: list[int], private: list[int],
                  eps: dict[int, float]) -> tuple[State, RoundRecord]:
        raise NotImplementedError

    def upload(self, global_state: State, result: ClientResult) -> tuple[ClientResult, int] | None:
        """A private client's projected upload and its bytes, or ``None``: it uploads its update in full."""
        return None


class ExampleWeighted(ServerRule):
    """FedAvg of the noisy updates, weighted by the clients' example counts."""

    def aggregate(self, round, global_state, results, public, private, eps):
        weights = {r.client_id: float(r.num_examples) for r in results}
        return weighted_states(results, weights), RoundRecord(round, "fedavg", public, private)


class EpsilonWeighted(ServerRule):
    """WeiAvg (Alg. 1): weights W_S(ε_m) = ε_m/Σ_S ε."""

    aggregation = "weiavg"

    def aggregate(self, round, global_state, results, public, private, eps):
        return weighted_states(results, eps), RoundRecord(round, "weiavg", public, private)


class Projected(ServerRule):
    """PFA (Alg. 3): private updates projected on the top-k subspace of this round's public updates."""

    aggregation = "pfa"
    needs_public = True

    def __init__(self, settings: ProjectionSettings, blocks: Blocks, seeds: SeedTree) -> None:
        self.settings, self.blocks, self.seeds = settings, blocks, seeds

    # -- what PFA+ changes ----------------------------------------------------------------------------
    def falls_back(self, public: list[int]) -> bool:
        """Whether the round is aggregated by WeiAvg instead (no public client to define a subspace)."""
        return not public

    def subspace(self, block: str, current: dict[str, Subspace]) -> Subspace:
        """The subspace private updates are projected on."""
        return current[block]

    def note(self, public: list[int]) -> str:
        return ""

    def keep(self, current: dict[str, Subspace], public: list[int]) -> None:
        """Keep what the next round needs (PFA: nothing)."""

    # -- the round ------------------------------------------------------------------------------------
    def aggregate(self, round, global_state, results, public, private, eps):
        """PFA's server round (004 Alg. 3): the public clients' updates span each block's top-k subspace, the private
        ones are projected on it and the ε-weighted combination applied; WeiAvg when the sample has no public client."""
        if self.falls_back(public):
            note = "no public client in the sample: WeiAvg this round"
            return weighted_states(results, eps), RoundRecord(round, "weiavg", public, private, note=note)
        by_client = {r.client_id: r for r in results}
        projected_uploads = sum(1 for c in private if COEFFICIENTS in by_client[c].extras)
        if projected_uploads not in (0, len(private)):  # pragma: no cover - uploads follow one subspace per round
            raise RuntimeError("PFA+ received projected and full private updates in one round")
        note = self.note(public)  # before keep(): PFA+'s warm-up is judged on the subspace the round started with
        current: dict[str, Subspace] = {}
        dims: list[int] = []
        new_state = P.clone(global_state)
        for index, (block, names) in enumerate(self.blocks):
            base = Blocks.flat(global_state, names)
            pub_updates = [base - Blocks.flat(by_client[c].state, names) for c in public]
            pub_weights = [eps[c] for c in public]
            if public:
                current[block] = self._public_subspace(pub_updates, pub_weights, round, index)
            subspace = self.subspace(block, current)
            dims.append(subspace.dims)
            delta = self._combined_update(base, pub_updates, pub_weights, subspace, block, names, by_client, private, eps)
            for n, value in Blocks.unflat(base - delta, names, global_state).items():
                new_state[n] = value.to(global_state[n].dtype)
        self._carry_buffers(new_state, global_state, results, eps)
        self.keep(current, public)
        return new_state, RoundRecord(round, self.aggregation, public, private, projected_uploads, dims, note)

    def _public_subspace(self, updates: list[torch.Tensor], weights: list[float], round: int, index: int) -> Subspace:
        s = self.settings
        return public_subspace(updates, weights, s.projection_dims, s.projection, s.eigensolver, iterations=s.lanczos_iterations,
                               seed=self.seeds.integer("pfa-eigen", round, index))

    def _combined_update(self, base: torch.Tensor, pub_updates: list[torch.Tensor], pub_weights: list[float], subspace: Subspace,
                         block: str, names: tuple[str, ...], by_client: dict[int, ClientResult], private: list[int],
                         eps: dict[int, float]) -> torch.Tensor:
        """Δx̄ = (Σ_pub ε/Σ ε)·Δx̄^pub + (Σ_pri ε/Σ ε)·Δx̂^pri for one block."""
        eps_pub = sum(pub_weights)
        eps_pri = sum(eps[c] for c in private)
        total = eps_pub + eps_pri
        delta = torch.zeros_like(base)
        if pub_updates:
            mean_pub = sum(w * u for w, u in zip(pub_weights, pub_updates, strict=True)) / eps_pub
            delta += (eps_pub / total) * mean_pub
        if private:
            if COEFFICIENTS in by_client[private[0]].extras:  # PFA+ (Alg. 5 lines 3–4): V_k[t−1]·Σ_pri W(ε)·(coefficients)
                coefficients = sum(eps[c] * by_client[c].extras[COEFFICIENTS][block].to(torch.float64) for c in private)
                projected_pri = subspace.reconstruct(coefficients / eps_pri)
            else:  # PFA (Alg. 3 lines 6–7): V_k V_kᵀ Σ_pri W(ε)Δx
                mean_pri = sum(eps[c] * (base - Blocks.flat(by_client[c].state, names)) for c in private) / eps_pri
                projected_pri = subspace.project(mean_pri)
            delta += (eps_pri / total) * projected_pri
        return delta

    def _carry_buffers(self, new_state: State, global_state: State, results: Sequence[ClientResult], eps: dict[int, float]) -> None:
        """State entries that are not trained (buffers) are ε-weighted averages, never projected."""
        others = [k for k in global_state if k not in set(self.blocks.trainable)]
        if others:
            total = sum(eps[r.client_id] for r in results)
            for k in others:
                new_state[k] = sum(eps[r.client_id] / total * r.state[k] for r in results)


class ProjectedUploads(Projected):
    """PFA+ (Alg. 4/5): projection on the previous round's public subspace, private clients upload coefficients."""

    aggregation = "pfa-plus"

    def __init__(self, settings: ProjectionSettings, blocks: Blocks, seeds: SeedTree) -> None:
        super().__init__(settings, blocks, seeds)
        #: V_k[t−1] per block: the subspace of the last round that had public clients (``None`` before the first).
        self.previous: dict[str, Subspace] | None = None

    def falls_back(self, public: list[int]) -> bool:
        return not public and self.previous is None

    def subspace(self, block: str, current: dict[str, Subspace]) -> Subspace:
        return current[block] if self.previous is None else self.previous[block]

    def note(self, public: list[int]) -> str:
        if not public:
            return "no public client in the sample: the previous subspace is kept"
        return "warm-up: every client uploaded in full" if self.previous is None else ""

    def keep(self, current: dict[str, Subspace], public: list[int]) -> None:
        if public:
            self.previous = current

    def upload(self, global_state: State, result: ClientResult) -> tuple[ClientResult, int] | None:
        """Vᵀ(Δx − c) per block against V_k[t−1] (none before the first subspace: the warm-up uploads in full)."""
        if self.previous is None:
            return None
        coefficients, reconstructed = {}, dict(result.state)
        for block, names in self.blocks:
            update = Blocks.flat(global_state, names) - Blocks.flat(result.state, names)
            subspace = self.previous[block]
            coeff = subspace.coefficients(update)
            coefficients[block] = coeff.to(torch.float32)
            seen = subspace.reconstruct(coeff.to(torch.float32).to(torch.float64))
            for n, value in Blocks.unflat(Blocks.flat(global_state, names) - seen, names, global_state).items():
                reconstructed[n] = value.to(global_state[n].dtype)
        nbytes = projected_update_bytes([c.numel() for c in coefficients.values()])
        extras = {**result.extras, COEFFICIENTS: coefficients}
        return replace(result, state=reconstructed, extras=extras, info={**result.info, "pfa_upload": "projected"}), nbytes
