"""``privaudit attack``: attacks on trained federations, one sub-command per attack family.

``privaudit attack membership --checkpoint runs/priv --attack lira --shadows 16 --out audits/lira`` runs a
record-level membership-inference attack (:mod:`attacks.membership`) and writes a ``membership-attack``
result (ROC, AUC, TPR at 0.1 % / 1 % FPR) with the raw scores in a sidecar ``.npz``.

Structure: :data:`attack_app` is the ``attack`` sub-app; the membership command is defined here, and other
families register on the same sub-app from the modules in :data:`SUBCOMMAND_MODULES` (each exposing
``register(attack_app)``). Module-level imports stay light: torch and the attacks load inside the commands.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from pathlib import Path
from typing import Any

import typer

from privaudit.cli.common import check_out_folder, check_workers, cli_errors, fail, print_json, save_outputs
from privaudit.errors import InvalidParameterError
from privaudit.output_folder import opened

#: Modules that add further ``privaudit attack <family>`` sub-commands via ``register(attack_app)``.
SUBCOMMAND_MODULES: tuple[str, ...] = ("privaudit.cli.attack_inversion",)

MEMBERSHIP_ATTACKS = ("loss", "confidence", "entropy", "modified-entropy", "lira")
#: The files ``--out`` receives (``attacks.membership.run``); LiRA keeps its shadow trials in ``--out``/shadows.
OUT_FILES = ("membership-attack.json", "membership-scores.npz")
EXECUTORS = ("in-process", "process", "ray")
THREAT_MODELS = ("final-model", "client-releases")

attack_app = typer.Typer(
    name="attack",
    help="Attack a trained federation: membership inference, gradient inversion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@attack_app.callback()
def _attack_group() -> None:
    """Attack a trained federation."""


def _check_inputs(checkpoint: Path, attack: str, shadows: int, executor: str, threat_model: str, max_examples: int | None,
                  threads: int, out: Path | None = None, trust_factory: str | None = None, workers: int | None = None) -> None:
    """Cheap checks before anything is loaded, ``--out`` included; each failure is one line and exit code 2."""
    if attack not in MEMBERSHIP_ATTACKS:
        raise InvalidParameterError(f"unknown membership attack {attack!r}; choose one of: {', '.join(MEMBERSHIP_ATTACKS)}")
    if threat_model not in THREAT_MODELS:
        raise InvalidParameterError(f"unknown threat model {threat_model!r}; use {' or '.join(THREAT_MODELS)}")
    if executor not in EXECUTORS:
        raise InvalidParameterError(f"unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise InvalidParameterError("the ray executor needs Ray, which is not installed: pip install 'privaudit[ray]'")
    if attack == "lira" and shadows < 2:
        raise InvalidParameterError(f"LiRA needs at least 2 shadow models (--shadows), got {shadows}")
    if attack == "lira" and threat_model != "final-model":
        raise InvalidParameterError("LiRA is implemented for the final-model threat model only")
    if max_examples is not None and max_examples < 1:
        raise InvalidParameterError(f"--max-examples must be at least 1, got {max_examples}")
    if threads < 1:
        raise InvalidParameterError(f"--threads must be at least 1, got {threads}")
    check_workers(workers, local=executor != "ray")  # as audit and train: ≥ 1; a local pool no larger than the CPU cores
    if out is not None:
        check_out_folder(out, OUT_FILES)
        if (out / "shadows").is_file():
            raise InvalidParameterError(f"--out {out}: {out / 'shadows'} is a file; LiRA keeps its shadow trials in that folder")

    from privaudit.fl.engine.architecture import rebuildable
    from privaudit.fl.engine.checkpoint import read_manifest
    from privaudit.fl.engine.recorded_data import data_problem, is_recorded

    manifest = read_manifest(checkpoint)  # a missing or tampered checkpoint fails here, torch-free
    described = manifest["model"].get("architecture")
    if trust_factory is not None and (described.get("factory") if isinstance(described, dict) else None) != trust_factory:
        raise InvalidParameterError(f"--trust-factory {trust_factory}: {checkpoint} is not built by that factory")
    if not manifest["model"].get("name"):
        problem = rebuildable(manifest["model"], trust_factory) if manifest["model"].get("architecture") else "it was trained with a custom module"
        if problem:
            raise InvalidParameterError(f"{checkpoint}: {problem}; the attack rebuilds the model from the checkpoint")
    if not manifest.get("train_spec"):
        if attack == "lira":
            raise InvalidParameterError(f"{checkpoint} records no training recipe (train_spec): LiRA retrains its federation, which only "
                                        "checkpoints of privaudit train allow; use a threshold attack (--attack loss)")
        if not is_recorded(manifest):
            raise InvalidParameterError(f"{checkpoint} records no training recipe (train_spec), so its members are unknown; train it with privaudit train")
        problem = data_problem(manifest)
        if problem:
            raise InvalidParameterError(f"{checkpoint}: {problem}")
    if threat_model == "client-releases" and not manifest.get("save_client_updates"):
        raise InvalidParameterError(
            f"{checkpoint} holds no client releases: the client-releases threat model needs a checkpoint trained with --save-client-updates"
        )


BOOTSTRAP_RESAMPLES = 1000


def _bootstrap_intervals(scores, seed: int) -> dict[str, Any] | None:
    """95% BCa bootstrap intervals (seeded, stratified) for AUC and TPR at 0.1% / 1% FPR; None with < 2 scores a side."""
    from privaudit.stats.metrics import attack_metrics

    if scores.n_in < 2 or scores.n_out < 2:
        return None
    metrics = attack_metrics(scores.in_scores, scores.out_scores, n_resamples=BOOTSTRAP_RESAMPLES, seed=seed)
    tprs = {format(f, "g"): interval.to_dict() for f, interval in zip((0.001, 0.01), metrics.tpr_at_fpr, strict=True)}
    return {"auc": metrics.auc.to_dict(), "tpr_at_fpr": tprs}


def _with_interval(value: float, interval: dict[str, Any] | None) -> str:
    return f"{value:.4f}" if not interval else f"{value:.4f}  [{interval['low']:.4f}, {interval['high']:.4f}] (95% BCa)"


def _print_summary(data: dict[str, Any], out: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"privaudit attack membership — {data['attack']}", show_header=False, title_justify="left")
    table.add_column("quantity", style="bold")
    table.add_column("value")
    rows = [
        ("threat model", str(data.get("threat_model"))),
        ("members / non-members", f"{data['n_in']} / {data['n_out']}"),
    ]
    intervals = data.get("intervals") or {}
    rows += [
        ("AUC", _with_interval(data["auc"], intervals.get("auc"))),
        ("TPR at 0.1% FPR", _with_interval(data["tpr_at_fpr"]["0.001"], (intervals.get("tpr_at_fpr") or {}).get("0.001"))),
        ("TPR at 1% FPR", _with_interval(data["tpr_at_fpr"]["0.01"], (intervals.get("tpr_at_fpr") or {}).get("0.01"))),
    ]
    meta = data.get("meta", {})
    for key in ("mode", "variance_used", "shadow_accuracy_mean", "shadow_training", "seconds"):
        if meta.get(key) is not None:
            value = meta[key]
            rows.append((key.replace("_", " "), f"{value:.4g}" if isinstance(value, float) else str(value)))
    if out is not None:
        rows.append(("result", str(out)))
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)
    Console().print("[dim]Scores are larger for members; ε lower bounds from them: privaudit audit.[/dim]")


@attack_app.command("membership")
@cli_errors
def membership(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Trained federation directory (privaudit train --out)."),
    attack: str = typer.Option("loss", "--attack", help="loss, confidence, entropy, modified-entropy or lira."),
    shadows: int = typer.Option(16, "--shadows", help="LiRA: number of shadow federations (≥ 2)."),
    mode: str = typer.Option("online", "--mode", help="LiRA: online (IN and OUT Gaussians) or offline (OUT only)."),
    variance: str = typer.Option("auto", "--variance", help="LiRA: auto, per-example or fixed (best with few shadows)."),
    executor: str = typer.Option("in-process", "--executor", help="Where LiRA's shadows train: in-process, process or ray."),
    shadow_batch: bool = typer.Option(True, "--shadow-batch/--no-shadow-batch", help="LiRA, in-process: train all shadows "
                                      "as lanes of one stacked run per round (default) or one federation after another."),
    workers: int | None = typer.Option(None, "--workers", help="Process-pool / Ray workers (default: all cores)."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address, e.g. auto."),
    threat_model: str = typer.Option("final-model", "--threat-model", help="final-model, or client-releases (needs --save-client-updates)."),
    round_: int | None = typer.Option(None, "--round", help="Attack the global model of this round (default: the last)."),
    max_examples: int | None = typer.Option(None, "--max-examples", help="At most this many members and non-members (seeded)."),
    seed: int = typer.Option(0, "--seed", help="Seed of example subsampling, shadow halves and shadow training."),
    out: Path | None = typer.Option(None, "--out", help="Output directory: membership-attack.json, membership-scores.npz, shadow trials."),
    threads: int = typer.Option(1, "--threads", help="torch intra-op threads."),
    device: str = typer.Option("cpu", "--device", help="LiRA: where the shadow federations train: cpu (default), cuda, cuda:<index> or auto."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    json_: bool = typer.Option(False, "--json", help="Print the result data as JSON instead of a table."),
    trust_factory: str | None = typer.Option(None, "--trust-factory", help="Import this model factory (package.module:function) that a recorded checkpoint names; runs that code."),
) -> None:
    """Membership inference on a trained federation's records; writes a membership-attack result."""
    attack = attack.strip().lower()
    _check_inputs(checkpoint, attack, shadows, executor, threat_model, max_examples, threads, out, trust_factory, workers)
    from privaudit.device import device_record, resolve_device

    resolved = resolve_device(device)  # an absent device is one line, before any work
    if attack != "lira" and resolved.type != "cpu":
        raise InvalidParameterError(f"--device applies to LiRA's shadow training; the {attack} attack scores the target on the CPU")
    import torch

    from attacks.membership.releases import CheckpointReleases
    from attacks.membership.run import membership_attack_data, run_membership_attack, write_membership_attack
    from attacks.membership.target import TargetModel

    torch.set_num_threads(threads)
    options: dict[str, Any] = {}
    if attack == "lira":
        options = {"shadows": shadows, "mode": mode, "variance": variance, "executor": executor, "workers": workers,
                   "address": address, "seed": seed, "progress": not quiet, "shadow_batch": shadow_batch,
                   "out_dir": None if out is None else str(out / "shadows")}
        import dataclasses

        from attacks.membership.lira_attack import LiRAConfig

        if any(f.name == "device" for f in dataclasses.fields(LiRAConfig)):
            options["device"] = str(resolved)
        elif resolved.type != "cpu":
            raise InvalidParameterError(f"LiRA's shadows train on the CPU only in this version; --device {device} is not supported")
    target = TargetModel.from_checkpoint(checkpoint, round_, trust_factory=trust_factory)
    releases = CheckpointReleases(checkpoint) if threat_model == "client-releases" else None
    # --out is the command's output folder: LiRA's shadow trials (--out/shadows) and the result move together, once,
    # to a temporary folder if the disk fills (privaudit.output_folder)
    with opened(out, "attack-membership") if out is not None else contextlib.nullcontext():
        scores = run_membership_attack(target, attack, options=options, threat_model=threat_model, releases=releases,
                                       max_examples=max_examples, seed=seed)
        config = {"checkpoint": str(checkpoint), "attack": attack, "threat_model": threat_model, "round": round_,
                  "max_examples": max_examples, "seed": seed, **device_record(resolved),
                  **({"lira": {k: v for k, v in options.items() if k != "progress"}} if options else {})}
        intervals = _bootstrap_intervals(scores, seed)
        saved = None
        if out is not None:  # checked before the attack; should writing fail now anyway, the result is kept elsewhere
            title = f"membership attack {attack} on {checkpoint}"
            saved = save_outputs(lambda folder: write_membership_attack(folder, scores, title=title, config=config, seed=seed,
                                                                        intervals=intervals)[0],
                                 out, command="attack-membership")
    result_path = None if saved is None else saved.value
    data = membership_attack_data(scores, scores_file=None if result_path is None else "membership-scores.npz", intervals=intervals)
    if json_ or (saved is not None and saved.value is None):
        print_json({k: v for k, v in data.items() if k != "roc"} | {"result": None if result_path is None else str(result_path)})
    else:
        _print_summary(data, result_path)
    if saved is not None and saved.problem:
        raise fail(saved.problem)


def register(app: typer.Typer) -> None:
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(attack_app)
    app.add_typer(attack_app, name="attack")
