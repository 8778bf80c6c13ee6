"""``privaudit compute-epsilon`` once its request is made: the answer, printed — ε per accountant, a calibrated σ,
per-client ε of a checkpoint's ledger (a ``ledger`` result with ``--out``) or ε per round (``epsilon-curve``).

Imported when the command runs (the accounting stack loads scipy); nothing here imports torch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from privaudit.accounting.epsilon_request import (
    EpsilonAnswer,
    EpsilonRequest,
    LedgerAnswer,
    answer,
    ledger_answer,
)
from privaudit.accounting.reported import CERTIFIED, REFUTED, describe_assessment
from privaudit.cli.common import fail, print_json
from privaudit.fl.engine.checkpoint import read_ledger, read_manifest
from privaudit.report import results  # through the module: tests replace its writer
from privaudit.report.producers import (
    CURVE_ACCOUNTANTS,
    DEFAULT_CURVE_POINTS,
    epsilon_curve_result,
    ledger_result,
)
from privaudit.report.results import Result


def run(request: EpsilonRequest, json_output: bool) -> None:
    """Answer ``request`` within its accounting limits and print the answer (JSON with ``json_output``)."""
    with request.limits.applied():
        if request.checkpoint is None:
            print_answer(answer(request), json_output)
        elif request.output.curve:
            _curve(request, json_output)
        else:
            _ledger(request, json_output)


def _write(out: Path, result: Result) -> Path:
    try:
        return results.write_result(out, result)
    except OSError as exc:
        raise fail(f"cannot write --out {out}: {exc.strerror or exc}") from None


def _curve(request: EpsilonRequest, json_output: bool) -> None:
    """ε after each round of the client with the largest final ε, per accountant (auto: rdp, prv and pld)."""
    checkpoint, delta, points = request.checkpoint, request.delta, request.output.curve_points
    accountants = CURVE_ACCOUNTANTS if request.accountant_name in ("auto", "default") else (request.accountant_name,)
    manifest = read_manifest(checkpoint)
    result = epsilon_curve_result(read_ledger(checkpoint), delta, accountants, manifest=manifest, checkpoint=checkpoint,
                                  max_points=DEFAULT_CURVE_POINTS if points is None else points)
    written = None if request.output.out is None else _write(request.output.out, result)
    if json_output:
        print_json(result.data)
    else:
        print_curve(result.data, delta, written)


def _ledger(request: EpsilonRequest, json_output: bool) -> None:
    """Per-client ε from the checkpoint's ledger (and the training framework's reported ε, assessed)."""
    checkpoint, delta, acct = request.checkpoint, request.delta, request.accountant_name
    ledger = read_ledger(checkpoint)
    manifest = read_manifest(checkpoint)
    accounted = ledger_answer(ledger, delta, acct, manifest.get("reported_epsilon"))
    out = request.output.out
    written = None if out is None else _write(out, ledger_result(ledger, delta, acct, manifest=manifest, checkpoint=checkpoint,
                                                                 reported=accounted.reported or None))
    if json_output:
        print_json(accounted.data)
    else:
        print_ledger(accounted, delta, written)


def fmt(value: Any) -> str:
    """One ε: an interval as ``upper  [lower, upper]``, ∞ as no DP guarantee."""
    if isinstance(value, dict):
        return f"{value['upper']:.6g}  [{value['lower']:.6g}, {value['upper']:.6g}]"
    if isinstance(value, float):
        return "∞ (no DP guarantee)" if math.isinf(value) else f"{value:.6g}"
    if value == "inf":
        return "∞ (no DP guarantee)"
    return str(value)


def print_report(data: dict[str, Any], title: str) -> None:
    """ε by each accountant (and the closed form), then the composition, disagreements, assumptions and notes."""
    console = Console()
    table = Table(title=escape(title), title_justify="left")
    table.add_column("accountant")
    table.add_column("ε (upper)  [interval]", justify="right")
    table.add_column("")
    for name, value in data["epsilon"].items():
        mark = "← answer" if name == data.get("accountant") else ""
        if name in data.get("approximate", []):
            mark = "approximate, not a bound"
        if name == "closed_form":
            mark = "the paper's closed form / claim"
        table.add_row(name, fmt(value), mark)
    for name, why in data.get("unavailable", {}).items():
        table.add_row(name, "—", escape(why))
    console.print(table)
    if data.get("composition"):
        console.print(f"[dim]composition:[/dim] {escape(data['composition'])}")
    for line in data.get("disagreements", []):
        console.print(f"[bold red]disagreement:[/bold red] {escape(line)}")
    for line in data.get("assumptions", []):
        style = "red" if line.startswith("FAILED") else "dim"
        console.print(f"[{style}]assumption:[/{style}] {escape(line)}")
    for line in data.get("notes", []):
        console.print(f"[dim]note:[/dim] {escape(line)}")


def print_calibration(data: dict[str, Any]) -> None:
    """The calibrated σ and ε at that σ by each accountant that answered."""
    console = Console()
    console.print(f"noise multiplier σ = [bold]{data['noise_multiplier']:.6g}[/bold]  (smallest σ meeting ε ≤ "
                  f"{data['target_epsilon']:g} at δ = {data['delta']:g}, {data['accountant']})")
    for name, value in data["epsilon_at_noise"].items():
        console.print(f"  ε at σ by {name}: {fmt(value)}")
    for note in data["notes"]:
        console.print(f"[dim]note:[/dim] {escape(note)}")


def print_answer(answered: EpsilonAnswer, json_output: bool) -> None:
    """An answer as JSON or as its table."""
    if json_output:
        print_json(answered.data)
    elif answered.calibration:
        print_calibration(answered.data)
    else:
        print_report(answered.data, answered.title)


def print_curve(data: dict[str, Any], delta: float, written: Path | None) -> None:
    """ε after each evaluated round, one column per accountant."""
    console = Console()
    table = Table(title=f"ε after each round at δ = {delta:g} ({escape(data['selection'])})", title_justify="left")
    table.add_column("round", justify="right")
    for name in data["epsilon"]:
        table.add_column(name, justify="right")
    for i, r in enumerate(data["rounds"]):
        table.add_row(str(r), *("—" if vals[i] is None else fmt(vals[i]) for vals in data["epsilon"].values()))
    console.print(table)
    for name, why in data["unavailable"].items():
        console.print(f"[dim]{name} did not answer:[/dim] {escape(why)}")
    for line in data["notes"]:
        console.print(f"[dim]note:[/dim] {escape(line)}")
    if written is not None:
        console.print(f"epsilon-curve result: {escape(str(written))}", soft_wrap=True)  # a path is never wrapped


def print_ledger(accounted: LedgerAnswer, delta: float, written: Path | None) -> None:
    """Per-client ε, the guarantee, why a client's accounting is invalid, the framework's reported ε and the assumptions."""
    summary, data = accounted.summary, accounted.data
    console = Console()
    table = Table(title=f"per-client ε at δ = {delta:g} ({summary.accountant})", title_justify="left")
    for col in ("client", "ε", "budget", "rounds", "steps", "valid"):
        table.add_column(col, justify="right" if col not in ("client", "valid") else "left")
    for cid, c in summary.per_client.items():
        eps = "[red]∞ (no DP guarantee)[/red]" if math.isinf(c.epsilon) else fmt(c.epsilon)
        table.add_row(cid, eps, "—" if c.budget is None else f"{c.budget:g}", str(c.rounds), str(c.steps),
                      "yes" if c.valid else "[red]no[/red]")
    console.print(table)
    if data["guarantee"] == "none":
        console.print(f"[bold red]max ε = inf — {escape(data['statement'])}[/bold red]")
        if not accounted.claims_nothing:
            console.print("[red]those clients' releases add no calibrated noise (see the assumptions)[/red]")
    elif data["guarantee"] == "invalid":
        console.print(f"[bold red]{escape(data['statement'])}[/bold red]")
    else:
        console.print(f"max ε = {fmt(summary.max_epsilon)}   mean ε = {fmt(summary.mean_epsilon)}   (the federation's guarantee is the max)")
    _print_failures(console, summary)
    _print_reported(console, accounted.reported)
    assumptions = sorted({a for c in summary.per_client.values() for a in c.assumptions})
    for line in assumptions[:5]:
        console.print(f"[dim]assumption:[/dim] {escape(line)}")
    if len(assumptions) > 5:
        console.print(f"[dim](+{len(assumptions) - 5} more client-specific assumptions; see --json)[/dim]")
    if written is not None:
        console.print(f"ledger result: {escape(str(written))}", soft_wrap=True)  # a path is never wrapped


def _print_failures(console: Console, summary: Any) -> None:
    failures = [(cid, reason, rounds) for cid, c in summary.per_client.items() for reason, rounds in c.failures]
    for cid, reason, rounds in failures[:8]:
        console.print(f"[red]invalid for client {escape(cid)} ({_rounds(rounds)}):[/red] {escape(reason)}")
    if len(failures) > 8:
        console.print(f"[red](+{len(failures) - 8} more reasons: per_client.*.failures in --json)[/red]")


def _print_reported(console: Console, reported: list[Any]) -> None:
    for claim in reported:
        if isinstance(claim, dict):
            status = (claim.get("assessment") or {}).get("status")
            style = "green" if status == CERTIFIED else "bold red" if status == REFUTED else "yellow"
            console.print(f"[{style}]reported by[/{style}] {escape(describe_assessment(claim))}")


def _rounds(rounds: tuple[int, ...]) -> str:
    if len(rounds) == 1:
        return f"round {rounds[0]}"
    if list(rounds) == list(range(rounds[0], rounds[-1] + 1)):
        return f"rounds {rounds[0]}–{rounds[-1]}"
    return "rounds " + ", ".join(str(r) for r in rounds[:6]) + (", …" if len(rounds) > 6 else "")
