"""Shadow federations for LiRA: the target's recipe retrained on random halves of its data pool.

Design (Carlini et al. 2022 §IV train shadows on random halves so every example is IN for about half of
them): the pool is every record of the target's dataset (:func:`~attacks.membership.examples.dataset_pool`),
each record staying with its home client (pooled test records get a fixed, seeded home). Shadows come in
complementary pairs: shadow 2p keeps a uniformly random half of *each client's* records, shadow 2p+1 keeps the
other half, so every record is IN for exactly half of the paired shadows and every client keeps data.

Each shadow is one trial of :mod:`privaudit.executor` — :func:`shadow_trial` is a module-level function of a
JSON-able spec and a seed — so shadows run in-process, in a process pool or on Ray, resume from
``<out>/trials.jsonl``, and give the same φ on every executor. By default (in-process) all shadows train
together in lockstep, each round's clients of every shadow as lanes of one stacked run
(:mod:`attacks.membership.batched_shadows`; ``LiRAConfig(shadow_batch=False)`` trains them one after another).
A trial retrains the recipe (same algorithm, privacy mechanism and federation settings; its own training seed)
and returns φ = log(p_y/(1−p_y)) of the candidate examples under its final global model.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError, PrivauditError
from privaudit.fl.canaries import compose
from privaudit.output_folder import folder_for

from .examples import MembershipExamples, dataset_pool
from .signals import logit_scaled_confidence
from .target import TargetModel, load_training_data, train_spec_from_dict

DESIGN_FILE = "shadow-design.json"


def shadow_homes(pool: MembershipExamples, num_clients: int, seed: int) -> np.ndarray:
    """Home client of every pool record; records without one get a fixed uniformly random client."""
    homes = pool.client.copy()
    loose = np.flatnonzero(homes < 0)
    if loose.size:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x40]))
        homes[loose] = rng.integers(0, num_clients, size=loose.size)
    return homes


def shadow_membership(homes: np.ndarray, shadows: int, seed: int) -> np.ndarray:
    """(shadows × records) keep mask: complementary pairs of per-client random halves (see module docstring)."""
    if int(shadows) < 1:
        raise InvalidParameterError(f"need at least one shadow model, got {shadows}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5A]))
    keep = np.zeros((int(shadows), len(homes)), dtype=bool)
    groups = [np.flatnonzero(homes == k) for k in np.unique(homes)]
    for pair in range((int(shadows) + 1) // 2):
        first = np.zeros(len(homes), dtype=bool)
        for rows in groups:
            half = len(rows) // 2 + (int(rng.random() < 0.5) if len(rows) % 2 else 0)
            first[rng.permutation(rows)[:half]] = True
        keep[2 * pair] = first
        if 2 * pair + 1 < shadows:
            keep[2 * pair + 1] = ~first
    return keep


@functools.lru_cache(maxsize=4)
def _membership_of(homes: bytes, shadows: int, seed: int) -> np.ndarray:
    keep = shadow_membership(np.frombuffer(homes, dtype=np.int64), shadows, seed)
    keep.flags.writeable = False
    return keep


def shadow_keep(homes: np.ndarray, shadows: int, seed: int, shadow: int) -> np.ndarray:
    """Row ``shadow`` of :func:`shadow_membership`, the whole design computed once per process, not once per shadow
    (a shadow trial needs only its row; the design costs O(shadows × records) and 64 trials asked for it 64 times)."""
    return _membership_of(np.ascontiguousarray(homes, dtype=np.int64).tobytes(), int(shadows), int(seed))[int(shadow)].copy()


def shadow_dataset(dataset: FederatedDataset, pool: MembershipExamples, homes: np.ndarray, keep: np.ndarray) -> FederatedDataset:
    """Client k trains on its kept pool records and holds the rest as its test split."""
    clients = []
    for k in range(dataset.num_clients):
        train = np.flatnonzero(keep & (homes == k))
        test = np.flatnonzero(~keep & (homes == k))
        if train.size == 0:
            raise InvalidParameterError(f"client {k} keeps no record in a shadow federation (LiRA needs ≥ 2 records per client)")
        clients.append(ClientData(pool.x[train], pool.y[train], pool.x[test], pool.y[test]))
    return FederatedDataset(name=f"{dataset.name}/shadow", clients=clients, num_classes=dataset.num_classes,
                            input_shape=dataset.input_shape, data_range=dataset.data_range,
                            normalization=dataset.normalization, metadata={"shadow_of": dataset.name})


# -- how a trial gets its data -----------------------------------------------------------------------
def inline_data(dataset: FederatedDataset) -> dict[str, Any]:
    """A JSON-able copy of an in-memory dataset (for targets whose data cannot be reloaded by name)."""
    return {
        "kind": "inline", "name": dataset.name, "num_classes": dataset.num_classes, "input_shape": list(dataset.input_shape),
        "data_range": list(dataset.data_range), "fingerprint": dataset.fingerprint(),
        "clients": [[c.x_train.tolist(), c.y_train.tolist(), c.x_test.tolist(), c.y_test.tolist()] for c in dataset.clients],
        "test": None if dataset.test is None else [dataset.test[0].tolist(), dataset.test[1].tolist()],
    }


def data_source(dataset: FederatedDataset, recipe) -> dict[str, Any]:
    """``{"kind": "load"}`` when the recipe's loader reproduces ``dataset`` exactly, else :func:`inline_data`."""
    fingerprint = dataset.fingerprint()
    try:
        if load_training_data(recipe).fingerprint() == fingerprint:
            return {"kind": "load", "fingerprint": fingerprint}
    except PrivauditError:
        pass
    return inline_data(dataset)


def _dataset_from(source: dict[str, Any], recipe) -> FederatedDataset:
    if source["kind"] == "load":
        dataset = load_training_data(recipe)
    else:
        shape = tuple(source["input_shape"])

        def array(values, dtype, trailing=()):
            out = np.asarray(values, dtype=dtype)
            return out.reshape(0, *trailing) if out.size == 0 else out

        clients = [ClientData(array(a, np.float32, shape), array(b, np.int64), array(c, np.float32, shape), array(d, np.int64))
                   for a, b, c, d in source["clients"]]
        test = None if source["test"] is None else (array(source["test"][0], np.float32, shape), array(source["test"][1], np.int64))
        dataset = FederatedDataset(name=source["name"], clients=clients, num_classes=int(source["num_classes"]), input_shape=shape,
                                   test=test, data_range=tuple(source["data_range"]))
    if dataset.fingerprint() != source["fingerprint"]:
        raise InvalidParameterError("a shadow trial rebuilt different data than the target's (fingerprint mismatch)")
    return dataset


def shadow_trial(spec: dict[str, Any], seed: int, *, make_trainer=None) -> dict[str, Any]:
    """Train shadow ``spec["shadow"]`` and return φ of the candidate examples under its final global model.

    ``spec``: ``train`` (the recipe as a dict), ``data`` (:func:`data_source`), ``shadows``, ``shadow``,
    ``design_seed`` and ``candidates`` (pool indices). ``seed`` is the shadow's training seed.
    ``make_trainer``: the federation's trainer factory (:mod:`attacks.membership.batched_shadows` passes one
    that trains many shadows' clients as lanes of one stacked run); default: the engine's own.
    """
    recipe = train_spec_from_dict(spec["train"])
    dataset = _dataset_from(spec["data"], recipe)
    pool = dataset_pool(dataset)
    homes = shadow_homes(pool, dataset.num_clients, spec["design_seed"])
    keep = shadow_keep(homes, spec["shadows"], spec["design_seed"], spec["shadow"])
    shadow = shadow_dataset(dataset, pool, homes, keep)
    result = compose.run_spec_on_dataset(recipe, shadow, seed=seed, eval_every=recipe.rounds, make_trainer=make_trainer)
    candidates = np.asarray(spec["candidates"], dtype=np.int64)
    target = TargetModel.from_result(result)
    phi = logit_scaled_confidence(target.logits(pool.x[candidates]), pool.y[candidates])
    return {"phi": [float(v) for v in phi], "accuracy": result.final_accuracy, "execution": result.info.execution_mode}


def design_digest(specs: list[dict[str, Any]]) -> str:
    """sha256 of what the shadow results depend on, to refuse reusing another design's results."""
    first = dict(specs[0])
    first.pop("shadow", None)
    return hashlib.sha256(json.dumps(first, sort_keys=True, default=str).encode()).hexdigest()


def guard_out_dir(out_dir: str | Path | None, digest: str) -> None:
    """Record the design in ``out_dir``; refuse a directory that holds shadows of another design."""
    if out_dir is None:
        return
    folder = folder_for(out_dir, "lira-shadows")  # the command's --out when it opened one (privaudit.output_folder)
    path = folder.file(DESIGN_FILE)
    if path.exists():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8")).get("digest")
        except (ValueError, AttributeError):  # not JSON, not UTF-8, or not an object
            raise InvalidParameterError(f"{path} is not a shadow-design record privaudit wrote; choose an empty "
                                        "directory or remove the file") from None
        if recorded != digest:
            raise InvalidParameterError(f"{out_dir} holds shadow models of another target or design; choose an empty directory")
        return
    folder.save(DESIGN_FILE, json.dumps({"digest": digest}) + "\n")  # a failed write names the file and moves the folder
