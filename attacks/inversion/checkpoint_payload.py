"""From a trained federation's checkpoint to the inversion attack's input: one client's release in one round.

:func:`check_release` checks, without torch, that a checkpoint can be attacked (its model can be rebuilt, its
clients' records are known, it holds client releases, the client and round exist). :func:`checkpoint_payload` then
builds the :class:`~attacks.inversion.threat_model.InversionPayload` of the model ``client`` released in ``round``
(written by ``privaudit train --save-client-updates``, or recorded from another training loop by
:mod:`privaudit.interop.recorder`): the update is the released model minus the global model of round ``round − 1``,
the ground truth is the client's own records (reloaded from the checkpoint's recipe and checked against its data
fingerprint), and the attacker's knowledge (lr, local steps = epochs × ⌈n/B⌉, batch size B) comes from the
checkpoint's local-training config — the white-box threat model of Geiping et al. 2020 (§3), whose attacker knows the
client's protocol.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import torch

from attacks.inversion.registry import registered_attacks
from attacks.inversion.threat_model import ClientKnowledge, DataSpec, InversionPayload
from attacks.membership.target import load_training_data, train_spec_from_dict
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.architecture import build_architecture, rebuildable
from privaudit.fl.engine.checkpoint import TrainedFederation, read_manifest
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.recorded_data import data_problem, is_recorded, recorded_dataset
from privaudit.fl.run import TrainSpec
from privaudit.models import build_model

#: Algorithms whose local step the attacker's unrolled SGD models as it is (FedProx with its proximal μ).
PLAIN_SGD_ALGORITHMS = ("fedavg", "fedsgd", "fedprox")


class CheckpointRelease(NamedTuple):
    """What a checkpoint attack needs: the payload, the client's records (ground truth), their :class:`DataSpec`, notes
    on what the attacker does not model, and the run's context (algorithm, privacy, dataset, model, local training)."""

    payload: InversionPayload
    inputs: torch.Tensor
    labels: torch.Tensor
    spec: DataSpec
    notes: list[str]
    context: dict[str, Any]


def check_release(checkpoint: Path, client: int | None, round_: int | None) -> dict[str, Any]:
    """Torch-free checks that ``client``'s release in ``round_`` of ``checkpoint`` can be attacked; returns the manifest."""
    if client is None or round_ is None:
        raise InvalidParameterError("checkpoint mode needs --client and --round (the release to attack)")
    manifest = read_manifest(checkpoint)
    if not manifest["model"].get("name"):
        problem = rebuildable(manifest["model"]) if manifest["model"].get("architecture") else "it was trained with a custom module"
        if problem:
            raise InvalidParameterError(f"{checkpoint}: {problem}; the attack rebuilds the model from the checkpoint")
    if not manifest.get("train_spec") and not is_recorded(manifest):
        raise InvalidParameterError(f"{checkpoint} records no training recipe (train_spec), so the client's records are unknown; "
                                    "train it with privaudit train")
    if not manifest.get("train_spec"):  # recorded from another training loop (privaudit.interop.recorder)
        problem = data_problem(manifest)
        if problem:
            raise InvalidParameterError(f"{checkpoint}: {problem}")
        if not isinstance(manifest["config"].get("local"), dict):
            raise InvalidParameterError(f"{checkpoint} does not record its clients' local training (lr, epochs, batch size), which the "
                                        "attacker simulates; record it with FederationRecorder(..., local_training={...})")
    if not manifest.get("save_client_updates"):
        raise InvalidParameterError(f"{checkpoint} holds no client updates; retrain it with privaudit train ... --save-client-updates")
    rounds = int(manifest["config"]["rounds"])
    if not 1 <= round_ <= rounds:
        raise InvalidParameterError(f"round {round_} is not in {checkpoint}: it has rounds 1..{rounds}")
    num_clients = manifest["dataset"].get("num_clients")
    if client < 0 or (num_clients is not None and client >= int(num_clients)):
        raise InvalidParameterError(f"client {client} is not in {checkpoint}: it has clients 0..{int(num_clients or 0) - 1}")
    return manifest


def _training(federation: TrainedFederation, checkpoint: Path) -> tuple[Any, TrainSpec]:
    """The run's federated dataset and recipe: reloaded from ``train_spec`` (fingerprint checked) or, for a run recorded
    from another training loop, from its data reference, partition and recorded local training."""
    manifest = federation.manifest
    if manifest.get("train_spec"):
        spec_train = train_spec_from_dict(manifest["train_spec"])
        dataset = load_training_data(spec_train)
        recorded = manifest["dataset"].get("fingerprint")
        if recorded and dataset.fingerprint() != recorded:
            raise CheckpointError(f"the data reloaded for {checkpoint} differ from the data it was trained on (fingerprint mismatch)")
        return dataset, spec_train
    dataset = recorded_dataset(federation)
    private = any(e.has_guarantee for e in federation.ledger.events)
    return dataset, TrainSpec(algorithm=str(manifest["algorithm"].get("name", "custom")), dataset=str(manifest["dataset"].get("name")),
                              rounds=federation.rounds, local=LocalTrainingConfig(**manifest["config"]["local"]),
                              privacy="recorded" if private else "none",
                              algorithm_options=dict(manifest["config"].get("algorithm_options") or {}))


def checkpoint_payload(checkpoint: Path, client: int, round_: int, *, labels_known: bool = False) -> CheckpointRelease:
    """The :class:`CheckpointRelease` of the model ``client`` released in ``round_`` of ``checkpoint``.

    The update is the released model minus the global model of round ``round_ − 1`` over the trainable
    parameters. The attacker's :class:`~attacks.inversion.threat_model.ClientKnowledge` takes lr, batch
    size B and local steps E·⌈n/B⌉ from the recorded local-training config (and FedProx's μ from the run's
    recipe); it unrolls SGD on consecutive mini-batches, so momentum, per-epoch shuffling and other
    algorithm-specific terms (control variates, DP noise) are not modelled (listed in ``notes``), unless an attack
    simulates the run's own local step (:meth:`~attacks.inversion.base.InversionAttack.options_for_run`).
    """
    federation = TrainedFederation(checkpoint)
    releases = federation.client_releases(round_)
    if not releases:
        raise InvalidParameterError(f"no client trained in round {round_} of {checkpoint}")
    if client not in releases:
        raise InvalidParameterError(f"client {client} released nothing in round {round_}; clients that did: "
                                    f"{', '.join(map(str, sorted(releases)))}")
    dataset, spec_train = _training(federation, checkpoint)
    records = dataset.clients[client]
    inputs = torch.from_numpy(records.x_train.astype("float32", copy=False))
    labels = torch.from_numpy(records.y_train.astype("int64", copy=False))
    if inputs.shape[0] == 0:
        raise InvalidParameterError(f"client {client} has no training records")
    mean, std = dataset.normalization if dataset.normalization is not None else (None, None)
    spec = DataSpec(tuple(dataset.input_shape), int(dataset.num_classes), tuple(dataset.data_range), mean, std)
    model_info = federation.manifest["model"]
    before, after = federation.global_state(round_ - 1), releases[client]["state"]
    local = spec_train.local
    n = int(inputs.shape[0])
    batch = min(int(local.batch_size), n)
    steps = int(local.epochs) * math.ceil(n / batch)
    options = dict(spec_train.algorithm_options or {})
    proximal_mu = float(options.get("mu", 0.01)) if spec_train.algorithm == "fedprox" else 0.0
    knowledge = ClientKnowledge(num_examples=n, update_kind="delta", lr=float(local.lr), local_steps=steps,
                                batch_size=None if batch == n else batch, proximal_mu=proximal_mu,
                                labels=tuple(int(v) for v in labels.tolist()) if labels_known else None)
    payload = InversionPayload(model_factory=_factory(model_info), global_weights=before,
                               update=_update(model_info, before, after), data=spec, knowledge=knowledge,
                               buffer_update=_buffer_update(before, after))
    context = {"algorithm": spec_train.algorithm, "privacy": spec_train.privacy, "dataset": spec_train.dataset,
               "model": model_info["name"] or (model_info.get("architecture") or {}).get("kind"),
               "local": {"epochs": local.epochs, "batch_size": local.batch_size, "lr": local.lr, "momentum": local.momentum},
               "algorithm_options": options}
    return CheckpointRelease(payload, inputs, labels, spec, _notes(spec_train, steps, batch < n), context)


def _factory(model_info: dict[str, Any]) -> Any:
    def factory() -> torch.nn.Module:
        if not model_info.get("name"):  # a recorded architecture (nn.Sequential of torch.nn layers)
            return build_architecture(model_info)
        return build_model(model_info["name"], tuple(model_info["input_shape"]), int(model_info["num_classes"]))

    return factory


def _update(model_info: dict[str, Any], before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The released model minus the global model, over the trainable parameters."""
    trainable = [k for k in model_info.get("trainable", list(model_info["parameters"])) if k in after and k in before]
    return {k: (after[k].to(torch.float32) - before[k].to(torch.float32)) for k in trainable}


def _buffer_update(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """BatchNorm running statistics' change, which travels with the released state (privaudit.fl.engine.params.model_state).

    It is what the ig attack's ``bn_stats="update"`` prior reads (:mod:`attacks.inversion.bn_prior`). num_batches_tracked's
    change (the client's forward passes, which the prior checks) is included when the states carry it; privaudit's
    engine keeps only floating-point buffers, and the prior then records that the count is assumed.
    """
    change = {k: after[k].to(torch.float32) - before[k].to(torch.float32) for k in after
              if k in before and k.endswith((".running_mean", ".running_var"))}
    change.update({k: after[k] - before[k] for k in after if k in before and k.endswith(".num_batches_tracked")})
    return change


def _notes(spec_train: TrainSpec, steps: int, batched: bool) -> list[str]:
    """What the attacker's unrolled SGD does not model of this run."""
    local = spec_train.local
    notes = []
    if float(local.momentum) > 0:
        notes.append(f"the client used momentum {local.momentum:g}; the attacker unrolls plain SGD")
    if steps > 1 and batched:
        notes.append("the client shuffled its records each epoch; the attacker assumes one fixed order")
    if spec_train.algorithm not in PLAIN_SGD_ALGORITHMS:
        simulating = [f"the {name} attack ({cls.simulates_runs})" for name, cls in registered_attacks().items()
                      if cls.simulates_runs]
        notes.append(f"algorithm {spec_train.algorithm}: its local objective beyond plain SGD is modelled only by "
                     f"{' and '.join(simulating) or 'no attack'}")
    if spec_train.privacy != "none":
        notes.append(f"privacy mechanism {spec_train.privacy}: its noise is not modelled")
    return notes


def bn_prior_reshuffle_note(record: dict[str, Any] | None, epochs: int, batch_size: int | None) -> dict[str, Any] | None:
    """The ``bn_prior`` record of a checkpoint attack, with a caveat when the client reshuffled between local epochs.

    privaudit's engine draws a new order every epoch, so with several epochs and several mini-batches the client's
    forward passes saw batches the prior's candidate batches (one fixed order, attacks.inversion.bn_prior) do not form.
    """
    if record is None or record.get("bn_stats") != "update" or epochs < 2 or batch_size is None:
        return record
    note = (f"the client reshuffled its records in each of its {epochs} local epochs; the prior's candidate batches assume one "
            "fixed order, so its target mixes statistics of batches the candidates do not form (not exact)")
    return {**record, "exact": False, "notes": [*record.get("notes", []), note]}
