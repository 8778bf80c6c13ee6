"""``privaudit attack membership`` once its request is made: the attack run inside its output folder, the
``membership-attack`` result and raw scores written to ``--out`` (kept in a temporary folder should the write fail),
and the summary (or the result's data as JSON) printed.

Imported when the command runs (torch).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from attacks.membership import run as membership_run
from attacks.membership.request import MembershipRequest, run_request
from privaudit.cli.common import fail, print_json, save_outputs
from privaudit.output_folder import opened


def run(request: MembershipRequest, *, quiet: bool, json_output: bool) -> None:
    """Run the attack, write its result (with ``--out``) and print it; a write that failed is one error line after."""
    out = request.out
    # --out is the command's output folder: LiRA's shadow trials (--out/shadows) and the result move together, once,
    # to a temporary folder if the disk fills (privaudit.output_folder)
    with opened(out, "attack-membership") if out is not None else contextlib.nullcontext():
        outcome = run_request(request, progress=not quiet)
        saved = None
        if out is not None:  # checked before the attack; should writing fail now anyway, the result is kept elsewhere
            title = f"membership attack {request.attack} on {request.checkpoint}"
            saved = save_outputs(lambda folder: membership_run.write_membership_attack(
                folder, outcome.scores, title=title, config=outcome.config, seed=request.seed, intervals=outcome.intervals)[0],
                out, command="attack-membership")
    result_path = None if saved is None else saved.value
    data = membership_run.membership_attack_data(outcome.scores, scores_file=None if result_path is None else "membership-scores.npz",
                                                 intervals=outcome.intervals)
    if json_output or (saved is not None and saved.value is None):
        print_json({k: v for k, v in data.items() if k != "roc"} | {"result": None if result_path is None else str(result_path)})
    else:
        _print_summary(data, result_path)
    if saved is not None and saved.problem:
        raise fail(saved.problem)


def _with_interval(value: float, interval: dict[str, Any] | None) -> str:
    return f"{value:.4f}" if not interval else f"{value:.4f}  [{interval['low']:.4f}, {interval['high']:.4f}] (95% BCa)"


def _print_summary(data: dict[str, Any], out: Path | None) -> None:
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
