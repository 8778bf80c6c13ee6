"""Trials of PrivateFL's claims: the client-level canary audit (one CDP federation per trial, with canary clients)
and the LDP participation simulation (:func:`participation_trial`, no training).

Andrew et al. 2024 ("One-shot empirical privacy estimation for federated learning", ICLR 2024, §3): m canary
clients, each a fixed random unit direction c_j over the *aggregated* parameters, each inserted as a client with
probability ½ (:mod:`privaudit.fl.canaries.clients`). An inserted canary's update is M·c_j with M huge, so the
server's clipping always binds; it takes part in PrivateFL-CDP's release (:class:`privaudit.papers.privatefl.central_dp.PrivateFLCentralDP`)
like any client. The wrapper order is ``CanaryClientInsertion(CentralDP(PrivateFL))``: the canary's local model
is replaced before the server's clip and noise.

Directions live on the aggregated parameters only: PrivateFL keeps the personalised transformation on the client
(it is never released), so a direction component there would never reach the release. Scores
(:func:`attacks.membership.canary_client_cosines`): the cosine of c_j with the final model's delta (final-model
threat model, the one the bound uses) and the maximum over rounds of its cosine with each round's released
aggregate (all iterates, reported beside it). In-scores are the inserted canaries', out-scores the unseen ones'.

One trial = one training run; every run draws its own directions, membership bits, data order and noise from the
trial's seed, so pooled canaries of several runs are one bigger one-run experiment (each canary's bit is an
independent fair coin and each canary enters one run only).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np

from attacks.membership import canary_client_cosines
from privaudit.audit.recipes.participation import fixed_size_selection, running_counts
from privaudit.fl.canaries.clients import CLIP_SCALE, CanaryClientInsertion, CanaryClients, add_canary_clients
from privaudit.fl.canaries.directions import membership_bits, random_unit_directions
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.params import model_state
from privaudit.fl.engine.recording import ReleaseRecorder
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from privaudit.papers.privatefl.algorithm import PrivateFL
from privaudit.papers.privatefl.experiment import (
    PrivateFLConfig,
    build_model,
    load_privatefl_dataset,
    named_model,
    wrap_privacy,
)
from privaudit.papers.privatefl.transform import PERSONAL_PREFIX


def _config(spec: dict[str, Any], seed: int):
    run = dict(spec["run"])
    return PrivateFLConfig(**run, privacy="cdp", cdp_variant=spec["variant"], epsilon=float(spec["epsilon"]),
                           delta=float(spec["delta"]), seed=int(seed), eval_every=10**6)


@lru_cache(maxsize=4)
def _dataset(config_key: str):
    return load_privatefl_dataset(PrivateFLConfig(**json.loads(config_key)))


def _shared_directions(state, personal: tuple[str, ...], count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` unit directions over the flattened state, uniform on the sphere of the aggregated coordinates."""
    mask = np.concatenate([np.full(v.numel(), name not in personal) for name, v in state.items()])
    directions = np.zeros((count, mask.size))
    directions[:, mask] = random_unit_directions(count, int(mask.sum()), rng)
    return directions


def canary_client_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """One PrivateFL-CDP run with ``spec["canaries"]`` canary clients; returns their cosines by membership.

    Spec keys: ``run`` (PrivateFLConfig fields: data, model, rounds, clients per round, ...), ``variant`` (CDP
    variant), ``epsilon``/``delta`` (the claim σ is calibrated for), ``canaries`` (m).
    """
    tree = SeedTree(int(seed))
    config = _config(spec, tree.integer("training") & ((1 << 62) - 1))
    data_key = json.dumps({k: v for k, v in spec["run"].items()
                           if k in ("dataset", "num_clients", "classes_per_client", "shares", "partition", "data_seed")},
                          sort_keys=True)
    dataset = _dataset(data_key)
    model = build_model(config, tuple(dataset.input_shape), dataset.num_classes, SeedTree(config.seed).integer("model-init"))
    state = model_state(model)
    personal = tuple(n for n in state if n.startswith(PERSONAL_PREFIX))
    rng = tree.numpy("canaries")
    count = int(spec["canaries"])
    directions = _shared_directions(state, personal, count, rng)
    canaries = CanaryClients(directions, membership_bits(count, rng), int(seed) & 0xFFFFFFFF,
                             update_norm=CLIP_SCALE * float(config.clip_cap))
    grown, canaries = add_canary_clients(dataset, canaries)
    algorithm, calibration = wrap_privacy(config, PrivateFL(), grown, model)
    wrapped = CanaryClientInsertion(algorithm, canaries)
    federation = FederationConfig(
        rounds=config.rounds,
        local=LocalTrainingConfig(epochs=config.local_epochs, batch_size=config.batch_size, lr=config.learning_rate,
                                  momentum=config.momentum),
        clients_per_round=config.clients_per_round, sampling=config.sampling, seed=config.seed, execution="sequential",
        eval_every=config.eval_every,
    )
    recorder = ReleaseRecorder(client_releases=False)
    name = named_model(config)
    run_federation(grown, name if name is not None else model, wrapped, federation, observers=[recorder], progress=False)
    final = canary_client_cosines(recorder, canaries, threat_model="final-model")
    iterates = canary_client_cosines(recorder, canaries, threat_model="all-iterates")
    inserted = canaries.inserted
    cdp = algorithm.clip_history  # the CentralDP wrapper of privacy "cdp"
    return {
        "in": final[inserted].tolist(), "out": final[~inserted].tolist(),
        "all_iterates_in": iterates[inserted].tolist(), "all_iterates_out": iterates[~inserted].tolist(),
        "noise_multiplier": float(calibration["noise_multiplier"]),
        "clip_history": [dict(c) for c in cdp] if cdp else [],
        "dimension": int((directions[0] != 0).sum()),
        "real_clients": int(dataset.num_clients),
    }


def participation_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """Audit point P4: participation counts of one simulated run of the reference's client sampling
    (BHui97/PrivateFL@f686b6f:FedAverage.py, ``np.random.choice(N, int(sr·N), replace=False)`` every round): per
    round, the largest count so far; final counts."""
    n, rounds = int(spec["num_clients"]), int(spec["rounds"])
    per_round = int(spec["sample_rate"] * n)
    selection = fixed_size_selection(n, per_round, rounds, np.random.default_rng(int(seed)))
    counts = running_counts(selection, n)
    out = {"max_count_by_round": counts.max(axis=1).tolist(), "final_counts": counts[-1].tolist()}
    if spec.get("keep_selection"):
        out["selection"] = selection.tolist()
    return out
