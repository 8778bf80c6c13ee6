"""``privaudit attack inversion``: gradient inversion of one client's released update, scored by PSNR/SSIM.

Two modes:

* **dataset** — ``privaudit attack inversion --dataset lfw --model convnet --defense fedavg --attack ig --images 8``
  simulates clients that each release a one-example update (FedReg App. B.4's attack setting) under a defence
  (``fedsgd``, ``fedavg``, ``fedprox``, ``fedreg``, ``fedreg-mg``, ``dpsgd:<σ>``) from seeded untrained weights
  (:func:`attacks.inversion.run_inversion`); for ``dpsgd:<σ>`` the result carries the ε of that release at
  δ = 1e-5.
* **checkpoint** — ``privaudit attack inversion --checkpoint runs/fedavg --client 3 --round 5 --attack ig``
  attacks the model client 3 released in round 5 of a trained federation (written by ``privaudit train
  --save-client-updates``): the update is the released model minus the global model of round 4, the ground
  truth is the client's own records (reloaded from the checkpoint's recipe and checked against its data
  fingerprint), and the attacker's knowledge (lr, local steps = epochs × ⌈n/B⌉, batch size B) comes from the
  checkpoint's local-training config (:func:`checkpoint_payload`).

Attacks (:mod:`attacks.inversion.registry`): ``analytic`` (Phong et al. 2018; needs a fully connected first
layer), ``label`` (labels only), ``dlg`` (Zhu et al. 2019), ``ig`` (Geiping et al. 2020), ``adaptive-mg``
(simulates FedReg's modified-gradient step), ``imprint`` (Fowl et al. 2022: a malicious server prepends an imprint
block of ``--bins`` bins to the model, the clients train that model, and a batch of ``--per-update`` images is read
off the bins; dataset mode only, the result records ``server``). Output: an ``inversion`` result (``inversion.json``) that
``privaudit report`` renders, the image grid ``inversion-grid.png`` (ground truth over reconstructions), and
a table of per-image PSNR, SSIM, label correctness and the attack's status. Bad inputs are one line on stderr and exit
code 2 — among them non-finite or absurd attack settings (``--option lr=inf``, ``iterations=10**12``: the ranges of
:mod:`attacks.inversion.limits`), refused before any data loads.

The result records the attack as it ran: its whole configuration (``attack_config``, defaults included) and, per
attacked update, the label rule it used, its optimiser, client model, losses and time (``updates``). Each image carries
its attack's optimisation status (:mod:`attacks.inversion.convergence`): an attack that diverged or made no progress
is flagged in the table, the JSON and the report, and its images are left out of the PSNR/SSIM means (a note says how
many), so a broken attack never reads as a defence's effect.

``--bn-prior update|running`` (``ig`` on a model with BatchNorm, e.g. ``convnet-bn``) adds a BatchNorm-statistics
prior with the form of GradInversion's R_BN (Yin et al., CVPR 2021, §3; :mod:`attacks.inversion.bn_prior`), weighted by
``--bn-weight``. ``running`` uses GradInversion's target, the global running statistics. ``update`` uses a stronger one:
the client's batch statistics, read from its released buffers. The result's data record which statistics the prior
matched (``bn_prior``). On BatchNorm models every attack simulates the client in train mode (batch statistics).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer

from privaudit.cli.common import check_out_folder, cli_errors, fail, print_json, save_outputs
from privaudit.device import describe_device
from privaudit.errors import InvalidParameterError
from privaudit.progress import progress_bar

#: Must equal ``attacks.inversion.registry.ATTACKS`` (a test checks); kept here so validation needs no torch.
ATTACK_NAMES: tuple[str, ...] = ("analytic", "label", "dlg", "ig", "adaptive-mg", "imprint")
DEFENCE_NAMES: tuple[str, ...] = ("fedsgd", "fedavg", "fedprox", "fedreg", "fedreg-mg")
#: Which configuration field ``--iterations`` sets, per attack (``None``: the attack does not iterate).
ITERATION_FIELD: dict[str, str | None] = {"analytic": None, "label": None, "dlg": "steps", "ig": "iterations",
                                          "adaptive-mg": "iterations", "imprint": None}
DELTA = 1e-5
RESULT_FILE = "inversion.json"
GRID_FILE = "inversion-grid.png"


def _check_defence(spec: str) -> float | None:
    """Validate a defence spec without importing torch; returns σ for ``dpsgd:<σ>``."""
    name, colon, argument = spec.partition(":")
    if name == "dpsgd":
        try:
            sigma = float(argument)
        except ValueError:
            raise InvalidParameterError(f"defence {spec!r}: give DP-SGD's noise multiplier, e.g. dpsgd:1e-2") from None
        if not (sigma > 0 and math.isfinite(sigma)):
            raise InvalidParameterError(f"defence {spec!r}: the noise multiplier σ must be positive and finite")
        return sigma
    if name in DEFENCE_NAMES and not colon:
        return None
    raise InvalidParameterError(f"unknown defence {spec!r}; choose one of: {', '.join(DEFENCE_NAMES)}, dpsgd:<σ>")


def _check_device(device: str) -> str:
    """The device ``--device`` names, resolved (``auto`` → cuda or cpu; an absent GPU is one line: privaudit.device)."""
    from privaudit.device import resolve_device

    resolved = resolve_device(device)
    return str(resolved) if device.strip().lower() == "auto" else device.strip().lower()


def _check_common(attack: str, images: int | None, iterations: int | None, threads: int) -> None:
    if attack not in ATTACK_NAMES:
        raise InvalidParameterError(f"unknown attack {attack!r}; choose one of: {', '.join(ATTACK_NAMES)}")
    if images is not None and images < 1:
        raise InvalidParameterError(f"--images must be at least 1, got {images}")
    if iterations is not None:
        if iterations < 1:
            raise InvalidParameterError(f"--iterations must be at least 1, got {iterations}")
        if ITERATION_FIELD[attack] is None:
            raise InvalidParameterError(f"--iterations does not apply to the {attack} attack (it does not iterate)")
    if threads < 1:
        raise InvalidParameterError(f"--threads must be at least 1, got {threads}")


def _check_imprint(attack: str, per_update: int | None, bins: int | None, checkpoint: Path | None, images: int | None) -> None:
    """Torch-free checks of the batch and imprint options (``--per-update``, ``--bins``)."""
    if per_update is not None:
        if per_update < 1:
            raise InvalidParameterError(f"--per-update must be at least 1, got {per_update}")
        if checkpoint is not None:
            raise InvalidParameterError("--per-update applies to dataset mode; a checkpoint's release holds all of the client's records")
        count = 8 if images is None else images
        if count % per_update:
            raise InvalidParameterError(f"--images ({count}) must be a multiple of --per-update ({per_update})")
    if bins is not None:
        if attack != "imprint":
            raise InvalidParameterError(f"--bins applies to the imprint attack, not {attack}")
        if bins < 2:
            raise InvalidParameterError(f"--bins must be at least 2, got {bins}")
    if attack == "imprint" and checkpoint is not None:
        raise InvalidParameterError("the imprint attack needs a server that modified the model before the clients trained it; "
                                    "a checkpoint's releases were computed on the unmodified model (use --dataset)")


def _check_checkpoint(checkpoint: Path, client: int | None, round_: int | None) -> dict[str, Any]:
    """Torch-free checks of checkpoint mode; returns the manifest."""
    from privaudit.fl.engine.checkpoint import read_manifest

    if client is None or round_ is None:
        raise InvalidParameterError("checkpoint mode needs --client and --round (the release to attack)")
    from privaudit.fl.engine.architecture import rebuildable
    from privaudit.fl.engine.recorded_data import data_problem, is_recorded

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


def checkpoint_payload(checkpoint: Path, client: int, round_: int, *, labels_known: bool = False):  # type: ignore[no-untyped-def]
    """(payload, inputs, labels, spec, notes) for the model ``client`` released in ``round_`` of ``checkpoint``.

    The update is the released model minus the global model of round ``round_ − 1`` over the trainable
    parameters. The attacker's :class:`~attacks.inversion.threat_model.ClientKnowledge` takes lr, batch
    size B and local steps E·⌈n/B⌉ from the recorded local-training config (and FedProx's μ from the run's
    recipe); it unrolls SGD on consecutive mini-batches, so momentum, per-epoch shuffling and other
    algorithm-specific terms (control variates, DP noise) are not modelled (listed in ``notes``);
    FedReg's are, by the adaptive-mg attack (:func:`adaptive_options_from_run`).
    """
    import torch

    from attacks.inversion.threat_model import ClientKnowledge, DataSpec, InversionPayload
    from attacks.membership.target import load_training_data, train_spec_from_dict
    from privaudit.errors import CheckpointError
    from privaudit.fl.engine.checkpoint import TrainedFederation
    from privaudit.models import build_model

    federation = TrainedFederation(checkpoint)
    manifest = federation.manifest
    releases = federation.client_releases(round_)
    if not releases:
        raise InvalidParameterError(f"no client trained in round {round_} of {checkpoint}")
    if client not in releases:
        raise InvalidParameterError(f"client {client} released nothing in round {round_}; clients that did: "
                                    f"{', '.join(map(str, sorted(releases)))}")
    if manifest.get("train_spec"):
        spec_train = train_spec_from_dict(manifest["train_spec"])
        dataset = load_training_data(spec_train)
        recorded = manifest["dataset"].get("fingerprint")
        if recorded and dataset.fingerprint() != recorded:
            raise CheckpointError(f"the data reloaded for {checkpoint} differ from the data it was trained on (fingerprint mismatch)")
    else:  # recorded from another training loop: its data reference, partition and recorded local training
        from privaudit.fl.engine.config import LocalTrainingConfig
        from privaudit.fl.engine.recorded_data import recorded_dataset
        from privaudit.fl.run import TrainSpec

        dataset = recorded_dataset(federation)
        private = any(e.has_guarantee for e in federation.ledger.events)
        spec_train = TrainSpec(algorithm=str(manifest["algorithm"].get("name", "custom")), dataset=str(manifest["dataset"].get("name")),
                               rounds=federation.rounds, local=LocalTrainingConfig(**manifest["config"]["local"]),
                               privacy="recorded" if private else "none",
                               algorithm_options=dict(manifest["config"].get("algorithm_options") or {}))
    records = dataset.clients[client]
    inputs = torch.from_numpy(records.x_train.astype("float32", copy=False))
    labels = torch.from_numpy(records.y_train.astype("int64", copy=False))
    if inputs.shape[0] == 0:
        raise InvalidParameterError(f"client {client} has no training records")
    mean, std = dataset.normalization if dataset.normalization is not None else (None, None)
    spec = DataSpec(tuple(dataset.input_shape), int(dataset.num_classes), tuple(dataset.data_range), mean, std)
    model_info = manifest["model"]

    def factory() -> torch.nn.Module:
        if not model_info.get("name"):  # a recorded architecture (nn.Sequential of torch.nn layers)
            from privaudit.fl.engine.architecture import build_architecture

            return build_architecture(model_info)
        return build_model(model_info["name"], tuple(model_info["input_shape"]), int(model_info["num_classes"]))

    before = federation.global_state(round_ - 1)
    after = releases[client]["state"]
    trainable = [k for k in model_info.get("trainable", list(model_info["parameters"])) if k in after and k in before]
    update = {k: (after[k].to(torch.float32) - before[k].to(torch.float32)) for k in trainable}
    local = spec_train.local
    n = int(inputs.shape[0])
    batch = min(int(local.batch_size), n)
    steps = int(local.epochs) * math.ceil(n / batch)
    options = dict(spec_train.algorithm_options or {})
    proximal_mu = float(options.get("mu", 0.01)) if spec_train.algorithm == "fedprox" else 0.0
    knowledge = ClientKnowledge(num_examples=n, update_kind="delta", lr=float(local.lr), local_steps=steps,
                                batch_size=None if batch == n else batch, proximal_mu=proximal_mu,
                                labels=tuple(int(v) for v in labels.tolist()) if labels_known else None)
    # BatchNorm running statistics travel with the released state (privaudit.fl.engine.params.model_state): their change
    # is what the ig attack's --bn-prior update reads (attacks.inversion.bn_prior). num_batches_tracked's change (the
    # client's forward passes, which the prior checks) is included when the states carry it; privaudit's engine keeps
    # only floating-point buffers, and the prior then records that the count is assumed.
    buffer_update = {k: after[k].to(torch.float32) - before[k].to(torch.float32) for k in after
                     if k in before and k.endswith((".running_mean", ".running_var"))}
    buffer_update.update({k: after[k] - before[k] for k in after if k in before and k.endswith(".num_batches_tracked")})
    payload = InversionPayload(model_factory=factory, global_weights=before, update=update, data=spec, knowledge=knowledge,
                               buffer_update=buffer_update)
    notes = []
    if float(local.momentum) > 0:
        notes.append(f"the client used momentum {local.momentum:g}; the attacker unrolls plain SGD")
    if steps > 1 and batch < n:
        notes.append("the client shuffled its records each epoch; the attacker assumes one fixed order")
    if spec_train.algorithm not in ("fedavg", "fedsgd", "fedprox"):
        notes.append(f"algorithm {spec_train.algorithm}: its local objective beyond plain SGD is modelled only by the "
                     "adaptive-mg attack (FedReg runs)")
    if spec_train.privacy != "none":
        notes.append(f"privacy mechanism {spec_train.privacy}: its noise is not modelled")
    context = {"algorithm": spec_train.algorithm, "privacy": spec_train.privacy, "dataset": spec_train.dataset,
               "model": model_info["name"] or (model_info.get("architecture") or {}).get("kind"), "local": {"epochs": local.epochs, "batch_size": local.batch_size,
                                                      "lr": local.lr, "momentum": local.momentum},
               "algorithm_options": options}
    return payload, inputs, labels, spec, notes, context


#: FedReg's defaults when a run's recipe leaves an option out (``privaudit.papers.fedreg.specs``).
_FEDREG_DEFAULTS = {"fedreg_gamma": 0.5, "fedreg_eta_s": 0.1, "fedreg_eta_p": None, "fgsm_steps": 10, "fgsm_clamp": "data-range"}


def adaptive_options_from_run(algorithm: str, algorithm_options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The adaptive-MG attacker's FedReg settings for a checkpoint: the run's own γ, η_s, η_p, E, clamp and MG switch.

    A white-box attacker of a trained federation knows its protocol, so it simulates exactly what the clients ran.
    For a run that is not FedReg the attacker falls back to FedReg-with-MG defaults, which the returned notes say.
    """
    if algorithm not in ("fedreg", "fedreg-mg"):
        return {}, [f"algorithm {algorithm} is not FedReg: the adaptive-mg attacker simulates FedReg with MG at its defaults"]
    opts = {**_FEDREG_DEFAULTS, **{k: v for k, v in algorithm_options.items() if k in _FEDREG_DEFAULTS}}
    return {
        "gamma": float(opts["fedreg_gamma"]),
        "pseudo_step": float(opts["fedreg_eta_s"]),
        "perturb_step": None if opts["fedreg_eta_p"] is None else float(opts["fedreg_eta_p"]),
        "fgsm_steps": int(opts["fgsm_steps"]),
        "clamp_fgsm": opts["fgsm_clamp"] != "none",
        "use_modified_gradient": algorithm == "fedreg-mg",
    }, []


def _check_analytic(model: Any, shape: tuple[int, ...], num_classes: int) -> None:
    """Fail early, with the analytic attack's own message, when ``model`` (a model name, or a factory that builds the
    checkpoint's architecture) has no fully connected first layer."""
    import torch

    from attacks.inversion.analytic import first_fc_layer, probe_input_map
    from attacks.inversion.functional_model import FunctionalModel
    from privaudit.models import build_model

    def factory() -> torch.nn.Module:
        return model() if callable(model) else build_model(model, shape, num_classes)

    functional = FunctionalModel.build(factory, factory().state_dict())
    probe = torch.rand((2, *shape), generator=torch.Generator().manual_seed(0))  # two: BatchNorm in train mode needs more than one
    layer = first_fc_layer(functional, probe)
    probe_input_map(functional, layer.module, probe)


def _check_bn_prior(attack: str, bn_prior: str | None, bn_weight: float | None) -> dict[str, Any]:
    """Torch-free checks of ``--bn-prior``/``--bn-weight``; returns the ig options they set."""
    if bn_prior is None:
        if bn_weight is not None:
            raise InvalidParameterError("--bn-weight needs --bn-prior update|running")
        return {}
    source = bn_prior.strip().lower()
    if attack != "ig":
        raise InvalidParameterError(f"--bn-prior applies to the ig attack, not {attack}")
    if source not in ("update", "running"):
        raise InvalidParameterError(f"unknown --bn-prior {bn_prior!r}; choose update (the client's released BatchNorm buffers) or running")
    if bn_weight is not None and not (bn_weight > 0 and math.isfinite(bn_weight)):
        raise InvalidParameterError(f"--bn-weight must be positive and finite, got {bn_weight}")
    return {"bn_stats": source, **({} if bn_weight is None else {"bn_weight": bn_weight})}


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


def _check_bn_model(model: Any, shape: tuple[int, ...], num_classes: int) -> None:
    """One line when ``model`` (a model name, or a factory) has no BatchNorm layer for ``--bn-prior`` to use."""
    from attacks.inversion.bn_prior import has_batch_norm
    from privaudit.models import build_model

    module = model() if callable(model) else build_model(model, shape, num_classes)
    if not has_batch_norm(module):
        name = "the checkpoint's model" if callable(model) else f"model {model!r}"
        raise InvalidParameterError(f"--bn-prior needs a model with BatchNorm layers and {name} has none (e.g. --model convnet-bn)")


def _separation(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per update of a malicious-server (imprint) run: what the attacker saw and the ground truth of its bins."""
    rows = []
    for record in records:
        truth = record.get("server_ground_truth")
        settings = record["attack"].get("settings", {})
        if truth is None or "bins_with_images" not in settings:
            continue
        rows.append({"images": truth["inputs"], "bins_with_images": settings["bins_with_images"],
                     "bins_below_threshold": settings.get("bins_below_threshold"),
                     "separated_guaranteed": settings["examples_separated"], "separated_expected": settings["expected_separated"],
                     "alone_in_a_bin": truth["inputs_alone_in_a_bin"],
                     "row_at_40_db_present": truth.get("inputs_with_a_row_at_40_db"),
                     "update_kind": settings.get("threat_model", {}).get("update_kind"),
                     "approximate": "approximate" in settings, "approximate_reason": settings.get("approximate")})
        if settings["examples_separated"] is None:
            rows[-1]["separated_guaranteed_reason"] = settings.get("examples_separated_reason")
    return rows


def _separation_note(rows: list[dict[str, Any]]) -> str:
    """One line: the ground truth, what the attacker can prove (fixed bins only), and how exact the rows are."""
    alone, total = sum(r["alone_in_a_bin"] for r in rows), sum(r["images"] for r in rows)
    expected = sum(r["separated_expected"] for r in rows)
    provable = [r for r in rows if r["separated_guaranteed"] is not None]
    if len(provable) == len(rows):
        proof = f"the attacker can prove {sum(r['separated_guaranteed'] for r in rows)} from the bins it sees"
    elif provable:
        proof = (f"the attacker can prove {sum(r['separated_guaranteed'] for r in provable)} in the {len(provable)} updates "
                 "with fixed bins; not provable in the others: the bins move during local training")
    else:
        proof = "not provable from the bins: they move during local training"
    text = f"imprint: {alone} of {total} images alone in a bin of the block the server sent ({expected:.1f} expected; {proof}); "
    reasons = sorted({r["approximate_reason"] for r in rows if r["approximate"] and r["approximate_reason"]})
    if reasons:
        return text + "recovery is approximate (" + "; ".join(reasons) + ")"
    if all(r["update_kind"] == "gradient" for r in rows):
        return text + ("with a FedSGD gradient their rows are exact (the scoring's matching can still pair one with another "
                       "image), the others come back as mixed rows")
    return text + ("with a one-step parameter delta those are exact only while the encoder scale keeps the bins' float32 "
                   "change resolvable (no bin was flagged unresolvable here), the others come back as mixed rows")


def _per_image(records: list[dict[str, Any]], psnr: list[float], ssim: list[float]) -> list[dict[str, Any]]:
    """One row per attacked image: labels, PSNR, SSIM and its attack's optimisation status (attacks.inversion.convergence)."""
    rows, k = [], 0
    for record in records:
        scores = record.get("scores", {})
        attack = record["attack"]
        status, reason = attack.get("status", "closed-form"), attack.get("status_reason")
        predicted = attack.get("labels")
        paired = bool(attack.get("settings", {}).get("labels_paired", True))
        order = scores.get("order") or []
        for i, true_label in enumerate(record["true_labels"]):
            if predicted is not None and paired and i < len(order):
                guess = predicted[order[i]]
            elif predicted is not None and len(predicted) == len(record["true_labels"]) == 1:
                guess = predicted[0]  # one example, no images to match (label-only attack)
            else:
                guess = None
            rows.append({"index": k, "true_label": int(true_label), "predicted_label": guess,
                         "label_correct": None if guess is None else guess == int(true_label),
                         "psnr": psnr[k] if k < len(psnr) else None, "ssim": ssim[k] if k < len(ssim) else None,
                         "status": status, "status_reason": reason})
            k += 1
    return rows


def _attack_record(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the result records of the attack as it ran: its whole configuration (every field, defaults included) and,
    per attacked update, the label rule it used, its optimiser and client model, status, losses and time."""
    if not records:
        return {"attack_config": None, "updates": []}
    updates = []
    for record in records:
        attack = dict(record["attack"])
        settings = {k: v for k, v in attack.pop("settings", {}).items() if k not in ("config", "attack", "data")}
        updates.append({**attack, "settings": settings, "true_labels": record.get("true_labels")})
    return {"attack_config": records[0]["attack"].get("settings", {}).get("config"), "updates": updates}


def _status_note(summary: dict[str, Any], total: int) -> str | None:
    """One line when images were left out of the PSNR/SSIM means because their attack diverged or made no progress."""
    excluded = summary["images_excluded"]
    if not excluded:
        return None
    counts = ", ".join(f"{n} {status}" for status, n in sorted(excluded.items()))
    if not summary["images_summarised"]:
        return (f"every image's attack failed ({counts}): no PSNR here measures the defence; fix the attack's settings "
                "(a smaller lr, more iterations) and run it again")
    return (f"{sum(excluded.values())} of {total} images left out of the means ({counts}): their attack's optimisation failed, "
            "so their PSNR says nothing about the defence (see each image's status)")


def _print_table(data: dict[str, Any], result_path: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"privaudit attack inversion — {data['attack']} vs {data['defense']}", title_justify="left")
    for name in ("image", "true label", "predicted", "PSNR (dB)", "SSIM", "attack status"):
        table.add_column(name, justify="right")
    for row in data["per_image"]:
        psnr = row["psnr"]
        table.add_row(str(row["index"]), str(row["true_label"]), "—" if row["predicted_label"] is None else
                      f"{row['predicted_label']} {'✓' if row['label_correct'] else '✗'}",
                      "—" if psnr is None else ("∞" if math.isinf(psnr) else f"{psnr:.2f}"),
                      "—" if row["ssim"] is None else f"{row['ssim']:.3f}",
                      row["status"] if row["status"] in ("ok", "closed-form") else f"[bold red]{row['status']}[/bold red]")
    console.print(table)
    excluded = sum(data["images_excluded"].values())
    over = f" over {data['images_summarised']} of {data['images_summarised'] + excluded} images" if excluded else ""
    summary = [f"PSNR mean {data['psnr_mean']:.2f} dB{over}" if data["psnr_mean"] is not None else
               ("no PSNR: every attack failed" if excluded else "no images reconstructed"),
               f"SSIM mean {data['ssim_mean']:.3f}" if data["ssim_mean"] is not None else "",
               f"label accuracy {data['label_accuracy']:.2f}" if data["label_accuracy"] is not None else "",
               f"ε = {data['epsilon']:.3g} at δ = {DELTA:g}" if isinstance(data.get("epsilon"), float) else "",
               f"{data['seconds']:.1f} s on {data['device']}"]
    console.print(" · ".join(s for s in summary if s))
    for note in data.get("notes", []):
        console.print(f"[dim]note: {note}[/dim]")
    if result_path is not None:
        console.print(f"result: {result_path}   grid: {result_path.parent / GRID_FILE if data.get('grid') else '—'}")


def _mean(values: list[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def register(attack_app: typer.Typer) -> None:
    @attack_app.command("inversion")
    @cli_errors
    def inversion(
        dataset: str | None = typer.Option(None, "--dataset", help="Dataset mode: simulate clients on this embedded dataset (lfw, images, digits, …)."),
        model: str = typer.Option("convnet", "--model", help="Dataset mode: model name (analytic needs an FC-first one, e.g. upcycled-mlp)."),
        defense: str = typer.Option("fedavg", "--defense", "--defence", help="Dataset mode: fedsgd, fedavg, fedprox, fedreg, fedreg-mg or dpsgd:<σ>."),
        attack: str = typer.Option("ig", "--attack", help="analytic, label, dlg, ig, adaptive-mg or imprint (malicious server)."),
        images: int | None = typer.Option(None, "--images", help="Dataset mode: images to attack (default 8), --per-update in each update."),
        per_update: int | None = typer.Option(None, "--per-update", help="Dataset mode: images in each client update (default 1); "
                                              "--images must be a multiple of it."),
        bins: int | None = typer.Option(None, "--bins", help="imprint: bins of the server's imprint block (default 128)."),
        option: list[str] = typer.Option([], "--option", help="Any field of the attack's configuration as KEY=VALUE "
                                         "(repeatable), e.g. --option start=analytic for adaptive-mg; the flags above win. "
                                         "Non-finite or absurd values (lr=inf, iterations above 10^6) are refused."),
        bn_prior: str | None = typer.Option(None, "--bn-prior", help="ig: BatchNorm-statistics prior (Yin et al. 2021) from the client's "
                                            "released buffers (update) or the global running statistics (running); BatchNorm models only."),
        bn_weight: float | None = typer.Option(None, "--bn-weight", help="ig: weight α of the --bn-prior term (default 0.1)."),
        batched: bool = typer.Option(True, "--batched/--sequential", help="Dataset mode, ig: attack all images (and restarts) "
                                     "in one optimisation (default) or one image after another."),
        iterations: int | None = typer.Option(None, "--iterations", help="Optimisation iterations (ig, adaptive-mg) or L-BFGS steps (dlg)."),
        checkpoint: Path | None = typer.Option(None, "--checkpoint", help="Checkpoint mode: trained federation (privaudit train --save-client-updates)."),
        client: int | None = typer.Option(None, "--client", help="Checkpoint mode: the client whose release is attacked."),
        round_: int | None = typer.Option(None, "--round", help="Checkpoint mode: the round of that release (≥ 1)."),
        labels_known: bool = typer.Option(False, "--labels-known", help="Give the attacker the true labels."),
        seed: int = typer.Option(0, "--seed", help="Seed of image choice, model weights, DP noise and the attack."),
        device: str = typer.Option("cpu", "--device", help="cpu (default), cuda, cuda:<index> or auto (cuda if present)."),
        threads: int = typer.Option(1, "--threads", help="torch intra-op threads."),
        out: Path | None = typer.Option(None, "--out", help="Output directory: inversion.json and inversion-grid.png."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
        json_: bool = typer.Option(False, "--json", help="Print the result data as JSON instead of a table."),
    ) -> None:
        """Gradient inversion of a client's update (simulated, or from a checkpoint); writes an inversion result."""
        attack_name = attack.strip().lower()
        defense = defense.strip().lower()
        _check_common(attack_name, images, iterations, threads)
        _check_imprint(attack_name, per_update, bins, checkpoint, images)
        bn_options = _check_bn_prior(attack_name, bn_prior, bn_weight)
        if (dataset is None) == (checkpoint is None):
            raise InvalidParameterError("give exactly one of --dataset (simulated clients) or --checkpoint (a trained federation)")
        sigma = manifest = None
        if checkpoint is not None:
            if images is not None:
                raise InvalidParameterError("--images applies to dataset mode; checkpoint mode attacks all of the client's records")
            manifest = _check_checkpoint(checkpoint, client, round_)
        else:
            if client is not None or round_ is not None:
                raise InvalidParameterError("--client and --round apply to checkpoint mode (--checkpoint)")
            sigma = _check_defence(defense)
        device = _check_device(device)
        if out is not None:
            check_out_folder(out, (RESULT_FILE, GRID_FILE))  # before the attack, not after it
        import time

        import torch

        from attacks.inversion import build_attack
        from attacks.inversion.experiment import reconstruction_summary
        from attacks.inversion.figures import save_image_grid
        from attacks.inversion.registry import parse_attack_options

        torch.set_num_threads(threads)
        options: dict[str, Any] = parse_attack_options(attack_name, option)
        if iterations is not None:
            options[ITERATION_FIELD[attack_name]] = iterations  # type: ignore[index]
        if bins is not None:
            options["bins"] = bins
        build_attack(attack_name, device=device, **options)  # a bad configuration is one line before any data loads
        options.update(bn_options)
        start = time.perf_counter()
        notes: list[str] = []
        epsilon: float | None = None
        if checkpoint is not None:
            from attacks.inversion import attack_and_score

            assert client is not None and round_ is not None and manifest is not None
            payload, inputs, labels, spec, notes, context = checkpoint_payload(checkpoint, client, round_, labels_known=labels_known)
            if bn_options:
                _check_bn_model(payload.model_factory, spec.shape, spec.num_classes)
            if attack_name == "analytic":
                _check_analytic(payload.model_factory, spec.shape, spec.num_classes)
            if attack_name == "adaptive-mg":
                run_options, run_notes = adaptive_options_from_run(context["algorithm"], context["algorithm_options"])
                options = {**run_options, **options}
                if run_options:  # this attacker models the run's local objective: drop the caveat that it does not
                    notes = [n for n in notes if not n.startswith(f"algorithm {context['algorithm']}:")]
                notes = [*notes, *run_notes]
            attack_obj = build_attack(attack_name, device=device, **options)
            with progress_bar(f"{attack_name} on client {client}, round {round_}", 1, enabled=not quiet,
                              transient=True) as bar:
                scored = attack_and_score(attack_obj, [(payload, inputs, labels)], spec, seed=seed, progress=bar.set)
            records, psnr, ssim, status = scored.records, scored.psnr, scored.ssim, scored.status
            truth, recon, label_scores = scored.ground_truth, scored.reconstructions, scored.label_scores
            defense_label = f"{context['algorithm']} (privacy: {context['privacy']})"
            source = {"mode": "checkpoint", "checkpoint": str(checkpoint), "client": client, "round": round_, **context,
                      "threat_model": payload.knowledge.to_dict(), "attack_options": options}
            title = f"inversion {attack_name} on {checkpoint} client {client} round {round_}"
        else:
            from attacks.inversion import InversionExperiment, run_inversion
            from attacks.inversion.experiment import defence_epsilon, parse_defence

            assert dataset is not None
            count = 8 if images is None else images
            config = InversionExperiment(attack=attack_name, defence=defense, dataset=dataset, model=model, num_images=count,
                                         examples_per_update=1 if per_update is None else per_update, labels_known=labels_known, attack_options=options, seed=seed, device=device,
                                         batched=batched)
            if attack_name == "analytic":
                from privaudit.data import load_dataset

                info = load_dataset(dataset, seed=seed)
                _check_analytic(model, tuple(info.input_shape), int(info.num_classes))
            if bn_options:
                from privaudit.data import load_dataset

                info = load_dataset(dataset, seed=seed)
                _check_bn_model(model, tuple(info.input_shape), int(info.num_classes))
            with progress_bar(f"{attack_name} vs {defense}", count, enabled=not quiet, transient=True) as bar:
                run = run_inversion(config, progress=bar.set)
            records, psnr, ssim, status = run.updates, run.psnr, run.ssim, run.status
            truth, recon = run.ground_truth, run.reconstructions
            label_scores = [run.label_accuracy] if run.label_accuracy is not None else []
            defence_obj = parse_defence(defense)
            epsilon = defence_epsilon(defence_obj, DELTA) if sigma is not None else None
            defense_label = defense
            source = {"mode": "dataset", "dataset": dataset, "model": model, "defence": defence_obj.describe(),
                      "images": count, "batched": batched and attack_name == "ig", "examples_per_update": config.examples_per_update,
                      "server": run.server, "attack_options": options}
            separation = _separation(records)
            if separation:
                source["separation"] = separation
                notes = [*notes, _separation_note(separation)]
            title = f"inversion {attack_name} vs {defense} on {dataset} ({model})"
        if bn_options and records:  # which statistics the BatchNorm prior matched, and how (attacks.inversion.bn_prior)
            source["bn_prior"] = records[0]["attack"]["settings"].get("bn_prior")
            if checkpoint is not None:
                source["bn_prior"] = bn_prior_reshuffle_note(source["bn_prior"], int(context["local"]["epochs"]),
                                                             payload.knowledge.batch_size)
        seconds = time.perf_counter() - start
        summary = reconstruction_summary(psnr, ssim, status)  # images whose attack failed never count as the defence's effect
        note = _status_note(summary, len(psnr))
        if note:
            notes = [*notes, note]
        data = {
            "attack": attack_name, "defense": defense_label, "psnr": psnr, "ssim": ssim,
            "psnr_mean": summary["psnr_mean"], "ssim_mean": summary["ssim_mean"], "psnr_median": summary["psnr_median"],
            "images_summarised": summary["images_summarised"], "images_excluded": summary["images_excluded"], "status": status,
            "label_accuracy": _mean(label_scores), "epsilon": epsilon, "delta": DELTA if epsilon is not None else None,
            "per_image": _per_image(records, psnr, ssim), "grid": None, "device": device, "device_name": describe_device(device), "iterations": iterations,
            "seconds": seconds, "notes": notes, **source, **_attack_record(records),
        }
        saved = None
        if out is not None:
            from privaudit.report.results import make_result, write_result

            config_record = {"dataset": dataset, "model": model, "defense": defense, "attack": attack_name, "images": images,
                             "iterations": iterations, "checkpoint": None if checkpoint is None else str(checkpoint),
                             "client": client, "round": round_, "labels_known": labels_known, "seed": seed, "device": device,
                             "per_update": per_update, "bins": bins, "bn_prior": bn_prior, "bn_weight": bn_weight}

            def write(folder: Path) -> Path:
                data["grid"] = None  # set again once the grid is in this folder
                if recon is not None:
                    save_image_grid(folder / GRID_FILE, [("ground truth", truth), (f"{attack_name}\n{defense_label}", recon)],
                                    psnr=[None, psnr], title=title)
                    data["grid"] = GRID_FILE
                return write_result(folder / RESULT_FILE, make_result("inversion", title, data, config_record, seed=seed))

            # --out was checked before the attack; should writing fail now anyway, the result is kept elsewhere
            saved = save_outputs(write, out, command="attack-inversion")
        result_path = None if saved is None else saved.value
        if json_ or (saved is not None and saved.value is None):
            print_json(data | {"result": None if result_path is None else str(result_path)})
        else:
            _print_table(data, result_path)
        if saved is not None and saved.problem:
            raise fail(saved.problem)
