"""``privaudit compute-epsilon``: ε for a mechanism, a paper's closed form, a schedule file or a trained federation.

With ``--checkpoint DIR --delta D --out FILE.json`` it also writes a ``ledger`` result (per-client ε); with
``--curve`` an ``epsilon-curve`` result instead (ε after each round per accountant, :mod:`privaudit.report.producers`).

Module-level imports are light on purpose (typer only): the accounting stack is imported inside the
command, and nothing here imports torch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import typer

from privaudit.cli.common import check_out_folder, cli_errors, fail, print_json

MECHANISMS = ("gaussian", "subsampled-gaussian", "laplace", "pure-dp", "upcycled-output", "upcycled-objective", "pfa-reference")

# Flags each mechanism requires / accepts (typer option names without dashes, as the function's parameters).
_COMMON = {"delta", "accountant", "neighbouring", "json_output", "vdi", "eps_error", "work_limit"}
_REQUIRED: dict[str, set[str]] = {
    "gaussian": {"noise_multiplier", "steps", "delta"},
    "subsampled-gaussian": {"noise_multiplier", "sample_rate", "steps", "delta"},
    "laplace": {"scale", "steps", "delta"},
    "pure-dp": {"epsilon", "steps", "delta"},
    "upcycled-output": {"rounds", "noise", "clip", "dataset_size", "delta"},
    "upcycled-objective": {"rounds", "alpha", "mu", "u1", "u2", "dataset_size"},
    "pfa-reference": {"epsilon", "sample_rate", "steps", "delta"},
}
_OPTIONAL: dict[str, set[str]] = {
    "gaussian": {"sensitivity", "tensors"},
    "subsampled-gaussian": {"sampling", "tensors"},
    "laplace": {"sensitivity"},
    "pure-dp": set(),
    "upcycled-output": {"form", "noise_std", "sensitivity"},
    "upcycled-objective": {"terms"},
    "pfa-reference": set(),
}
_CALIBRATABLE = {"gaussian", "subsampled-gaussian"}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-").replace("json-output", "json")


def _check_flags(mechanism: str, given: dict[str, Any], calibrate: bool) -> None:
    required = set(_REQUIRED[mechanism])
    allowed = required | _OPTIONAL[mechanism] | _COMMON
    if calibrate:
        if mechanism not in _CALIBRATABLE:
            raise fail(f"--calibrate works with --mechanism gaussian or subsampled-gaussian, not {mechanism}")
        required = (required - {"noise_multiplier"}) | {"epsilon"}
        allowed = (allowed - {"noise_multiplier"}) | {"epsilon"}
    present = {k for k, v in given.items() if v is not None and v is not False}
    extra = sorted(present - allowed - {"mechanism", "calibrate"})
    if extra:
        raise fail(f"{', '.join(_flag(e) for e in extra)} does not apply to --mechanism {mechanism}"
                   + (" with --calibrate" if calibrate else ""))
    missing = sorted(required - present)
    if missing:
        raise fail(f"--mechanism {mechanism} needs {', '.join(_flag(m) for m in missing)}")


def _positive(name: str, value: float | None) -> float:
    if value is None or not value > 0 or math.isnan(value) or math.isinf(value):
        raise fail(f"{_flag(name)} must be a positive number, got {value}")
    return float(value)


def _steps(name: str, value: int | None) -> int:
    if value is None or value < 1:
        raise fail(f"{_flag(name)} must be a positive integer, got {value}")
    return int(value)


def _sensitivity_number(value: str | None) -> float:
    if value is None:
        return 1.0
    try:
        number = float(value)
    except ValueError:
        raise fail(f"--sensitivity must be a positive number for this mechanism, got {value!r}") from None
    return _positive("sensitivity", number)


def _build(mechanism: str, p: dict[str, Any]):
    """(composition, closed_form, inputs) for a mechanism request (flags already checked)."""
    from privaudit.accounting import closed_form as cf
    from privaudit.accounting.mechanisms import (
        Composition,
        Gaussian,
        Laplace,
        PureDP,
        Sampling,
        SubsampledGaussian,
    )

    rel = p["neighbouring"]
    if mechanism in ("gaussian", "subsampled-gaussian"):
        sigma = _positive("noise_multiplier", p["noise_multiplier"])
        steps = _steps("steps", p["steps"])
        tensors = p["tensors"]
        if tensors is not None and tensors < 1:
            raise fail(f"--tensors must be a positive integer, got {tensors}")
        z = sigma if tensors is None else cf.per_tensor_effective_multiplier(sigma, tensors).value
        if mechanism == "gaussian":
            mech = Gaussian(z, _sensitivity_number(p["sensitivity"]))
        else:
            q = p["sample_rate"]
            if q is None or not 0 < q <= 1:
                raise fail(f"--sample-rate must lie in (0, 1], got {q}")
            mech = SubsampledGaussian(z, q, p["sampling"] or Sampling.POISSON)
        inputs: dict[str, Any] = {}
        if tensors is not None:
            per_tensor = cf.per_tensor_effective_multiplier(sigma, tensors)
            inputs = {"effective_noise_multiplier": per_tensor.value, "assumptions": list(per_tensor.assumptions)}
        return Composition.of(mech, steps, rel), None, inputs
    if mechanism == "laplace":
        mech = Laplace(_positive("scale", p["scale"]), _sensitivity_number(p["sensitivity"]))
        return Composition.of(mech, _steps("steps", p["steps"]), rel), None, {}
    if mechanism == "pure-dp":
        eps = p["epsilon"]
        if eps is None or eps < 0:
            raise fail(f"--epsilon must be non-negative, got {eps}")
        return Composition.of(PureDP(eps), _steps("steps", p["steps"]), rel), None, {}
    if mechanism == "upcycled-output":
        closed = cf.upcycled_output_perturbation(
            _steps("rounds", p["rounds"]), _positive("noise", p["noise"]), _positive("clip", p["clip"]),
            _positive("dataset_size", p["dataset_size"]), p["delta"], form=p["form"] or "printed",
            noise_std=p["noise_std"] or "sigma", sensitivity=p["sensitivity"] or "paper")
        return Composition(closed.composition.entries, rel), closed, {}
    if mechanism == "upcycled-objective":
        closed = cf.upcycled_objective_perturbation(
            _steps("rounds", p["rounds"]), _positive("alpha", p["alpha"]), p["mu"], _positive("u1", p["u1"]),
            p["u2"], _positive("dataset_size", p["dataset_size"]), terms=p["terms"] or "rounds")
        comp = None if closed.composition is None else Composition(closed.composition.entries, rel)
        return comp, closed, {}
    if mechanism == "pfa-reference":
        q = p["sample_rate"]
        if q is None or not 0 < q <= 1:
            raise fail(f"--sample-rate must lie in (0, 1], got {q}")
        closed = cf.pfa_reference(q, _steps("steps", p["steps"]), p["delta"], _positive("epsilon", p["epsilon"]))
        return Composition(closed.composition.entries, rel), closed, {"noise_multiplier": closed.details["noise_multiplier"]}
    raise fail(f"unknown mechanism {mechanism!r}")  # pragma: no cover - validated earlier


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return f"{value['upper']:.6g}  [{value['lower']:.6g}, {value['upper']:.6g}]"
    if isinstance(value, float):
        return "∞ (no DP guarantee)" if math.isinf(value) else f"{value:.6g}"
    if value == "inf":
        return "∞ (no DP guarantee)"
    return str(value)


def _print_report(data: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

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
        table.add_row(name, _fmt(value), mark)
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


def _write_result(out: Path, result) -> Path:
    from privaudit.report.results import write_result

    try:
        return write_result(out, result)
    except OSError as exc:
        raise fail(f"cannot write --out {out}: {exc.strerror or exc}") from None


def _curve_accountants(accountant: str) -> tuple[str, ...]:
    from privaudit.report.producers import CURVE_ACCOUNTANTS

    return CURVE_ACCOUNTANTS if accountant in ("auto", "default") else (accountant,)


def _run_curve(checkpoint: Path, delta: float, accountant: str, json_output: bool, out: Path | None, points: int) -> None:
    from privaudit.fl.engine.checkpoint import read_ledger, read_manifest
    from privaudit.report.producers import epsilon_curve_result

    manifest = read_manifest(checkpoint)
    result = epsilon_curve_result(read_ledger(checkpoint), delta, _curve_accountants(accountant), manifest=manifest,
                                  checkpoint=checkpoint, max_points=points)
    written = None if out is None else _write_result(out, result)
    data = result.data
    if json_output:
        print_json(data)
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    table = Table(title=f"ε after each round at δ = {delta:g} ({escape(data['selection'])})", title_justify="left")
    table.add_column("round", justify="right")
    for name in data["epsilon"]:
        table.add_column(name, justify="right")
    for i, r in enumerate(data["rounds"]):
        table.add_row(str(r), *("—" if vals[i] is None else _fmt(vals[i]) for vals in data["epsilon"].values()))
    console.print(table)
    for name, why in data["unavailable"].items():
        console.print(f"[dim]{name} did not answer:[/dim] {escape(why)}")
    for line in data["notes"]:
        console.print(f"[dim]note:[/dim] {escape(line)}")
    if written is not None:
        console.print(f"epsilon-curve result: {escape(str(written))}", soft_wrap=True)  # a path is never wrapped


def _run_checkpoint(checkpoint: Path, delta: float | None, accountant: str, json_output: bool,
                    out: Path | None = None, curve: bool = False, curve_points: int = 10) -> None:
    from privaudit.accounting.ledger import PrivacyLedger

    if delta is None:
        raise fail("--checkpoint needs --delta")
    if accountant == "all":
        raise fail("--accountant all is not available with --checkpoint; name one accountant")
    if out is not None and out.is_dir():
        raise fail(f"--out {out} is a directory; give a file name, e.g. {out / ('epsilon-curve.json' if curve else 'ledger.json')}")
    if out is not None:  # before the ledger is read and accounted, like every command's --out
        check_out_folder(out.parent, (out.name,))
    if curve_points < 2:
        raise fail(f"--curve-points must be at least 2, got {curve_points}")
    try:
        from privaudit.fl.engine.checkpoint import read_ledger, read_manifest
    except ImportError:  # pragma: no cover - the federation package ships with privaudit
        raise fail("this installation cannot read checkpoints (privaudit.fl.engine.checkpoint is missing)") from None
    if curve:
        _run_curve(checkpoint, delta, accountant, json_output, out, curve_points)
        return
    from privaudit.accounting.base import NO_GUARANTEE

    ledger: PrivacyLedger = read_ledger(checkpoint)
    summary = ledger.summary(delta, accountant=accountant)
    data = summary.to_dict()
    claims_nothing = not ledger.events and not ledger.budgets
    if claims_nothing:  # a run that recorded no privacy event at all (checkpoints of non-private runs before events existed)
        data.update({"max_epsilon": math.inf, "mean_epsilon": math.inf, "guarantee": "none",
                     "statement": f"{NO_GUARANTEE}: the run records no privacy events (no DP claim)"})
    manifest = read_manifest(checkpoint)
    reported = manifest.get("reported_epsilon") or []  # what the training framework itself claimed
    if reported:
        from privaudit.accounting.reported import assess_all

        data["reported_epsilon"] = reported = assess_all(reported if isinstance(reported, list) else [], ledger, accountant)
    written = None
    if out is not None:
        from privaudit.report.producers import ledger_result

        written = _write_result(out, ledger_result(ledger, delta, accountant, manifest=manifest, checkpoint=checkpoint,
                                                   reported=reported or None))
    if json_output:
        print_json(data)
        return
    _print_checkpoint(summary, data, reported, claims_nothing, delta, written)


def _print_checkpoint(summary, data: dict[str, Any], reported: list, claims_nothing: bool, delta: float,
                      written: Path | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from privaudit.accounting.reported import CERTIFIED, REFUTED, describe_assessment

    console = Console()
    table = Table(title=f"per-client ε at δ = {delta:g} ({summary.accountant})", title_justify="left")
    for col in ("client", "ε", "budget", "rounds", "steps", "valid"):
        table.add_column(col, justify="right" if col not in ("client", "valid") else "left")
    for cid, c in summary.per_client.items():
        eps = "[red]∞ (no DP guarantee)[/red]" if math.isinf(c.epsilon) else _fmt(c.epsilon)
        table.add_row(cid, eps, "—" if c.budget is None else f"{c.budget:g}", str(c.rounds), str(c.steps),
                      "yes" if c.valid else "[red]no[/red]")
    console.print(table)
    if data["guarantee"] == "none":
        console.print(f"[bold red]max ε = inf — {escape(data['statement'])}[/bold red]")
        if not claims_nothing:
            console.print("[red]those clients' releases add no calibrated noise (see the assumptions)[/red]")
    elif data["guarantee"] == "invalid":
        console.print(f"[bold red]{escape(data['statement'])}[/bold red]")
    else:
        console.print(f"max ε = {_fmt(summary.max_epsilon)}   mean ε = {_fmt(summary.mean_epsilon)}   (the federation's guarantee is the max)")
    failures = [(cid, reason, rounds) for cid, c in summary.per_client.items() for reason, rounds in c.failures]
    for cid, reason, rounds in failures[:8]:
        console.print(f"[red]invalid for client {escape(cid)} ({_rounds(rounds)}):[/red] {escape(reason)}")
    if len(failures) > 8:
        console.print(f"[red](+{len(failures) - 8} more reasons: per_client.*.failures in --json)[/red]")
    for claim in reported:
        if isinstance(claim, dict):
            status = (claim.get("assessment") or {}).get("status")
            style = "green" if status == CERTIFIED else "bold red" if status == REFUTED else "yellow"
            console.print(f"[{style}]reported by[/{style}] {escape(describe_assessment(claim))}")
    assumptions = sorted({a for c in summary.per_client.values() for a in c.assumptions})
    for line in assumptions[:5]:
        console.print(f"[dim]assumption:[/dim] {escape(line)}")
    if len(assumptions) > 5:
        console.print(f"[dim](+{len(assumptions) - 5} more client-specific assumptions; see --json)[/dim]")
    if written is not None:
        console.print(f"ledger result: {escape(str(written))}", soft_wrap=True)  # a path is never wrapped


def _rounds(rounds: tuple[int, ...]) -> str:
    if len(rounds) == 1:
        return f"round {rounds[0]}"
    if list(rounds) == list(range(rounds[0], rounds[-1] + 1)):
        return f"rounds {rounds[0]}–{rounds[-1]}"
    return "rounds " + ", ".join(str(r) for r in rounds[:6]) + (", …" if len(rounds) > 6 else "")


def register(app: typer.Typer) -> None:
    @app.command("compute-epsilon")
    @cli_errors
    def compute_epsilon(
        mechanism: str | None = typer.Option(None, "--mechanism", "-m", help=f"One of: {', '.join(MECHANISMS)}."),
        noise_multiplier: float | None = typer.Option(None, "--noise-multiplier", help="Noise std / sensitivity (σ)."),
        sample_rate: float | None = typer.Option(None, "--sample-rate", help="Sampling rate q in (0, 1]."),
        steps: int | None = typer.Option(None, "--steps", help="Number of releases (steps)."),
        delta: float | None = typer.Option(None, "--delta", help="Target δ in (0, 1)."),
        epsilon: float | None = typer.Option(None, "--epsilon", help="Target ε (--calibrate), claimed ε (pfa-reference) or ε per release (pure-dp)."),
        calibrate: bool = typer.Option(False, "--calibrate", help="Print the smallest noise multiplier meeting --epsilon at --delta."),
        accountant: str = typer.Option("auto", "--accountant", "-a", help="auto (ctd → prv → pld → rdp), ctd, rdp, prv, pld, gdp, pure, or all."),
        vdi: float | None = typer.Option(None, "--vdi", help="Discretisation interval h of the ctd and pld accountants (default: ctd adapts h to the loss spread, pld 1e-4)."),
        eps_error: float | None = typer.Option(None, "--eps-error", help="ε error bound of the prv accountant (default: 0.5 % of ε, at least 1e-3)."),
        work_limit: float = typer.Option(
            30.0, "--work-limit", help="Work units (1e9 operations of privaudit's cost model each; about 1 s of a quiet core) "
                                      "the accountants may use for one ε (auto's chain and a calibration share them), counted "
                                      "before they run: beyond it an accountant declines and auto falls back. The same on every "
                                      "machine, so one command gives one answer."),
        time_limit: float | None = typer.Option(None, "--time-limit", hidden=True, help="Replaced by --work-limit."),
        neighbouring: str = typer.Option("add-remove", "--neighbouring", help="add-remove or replace-one (doubles Gaussian/Laplace sensitivity)."),
        sampling: str | None = typer.Option(None, "--sampling", help="poisson (default) or fixed-size (a batch of q·n drawn without replacement; either --neighbouring)."),
        tensors: int | None = typer.Option(None, "--tensors", help="Noise added per tensor to L separately clipped tensors: effective σ/√L (PrivateFL CDP)."),
        scale: float | None = typer.Option(None, "--scale", help="Laplace noise scale b."),
        sensitivity: str | None = typer.Option(None, "--sensitivity", help="A number (gaussian, laplace) or paper|replace-one|clipped-model (upcycled-output)."),
        rounds: int | None = typer.Option(None, "--rounds", help="Upcycled-FL: perturbed (odd) rounds M."),
        noise: float | None = typer.Option(None, "--noise", help="Upcycled-FL output perturbation: σ."),
        clip: float | None = typer.Option(None, "--clip", help="Upcycled-FL output perturbation: clip norm τ."),
        dataset_size: float | None = typer.Option(None, "--dataset-size", help="Upcycled-FL: the client's dataset size |D|."),
        form: str | None = typer.Option(
            None, "--form", help="draft (default; alias printed: the ICLR draft's Thm 5.2 form, which reproduces 1.40 / 1.59) "
                                 "or tmlr (alias corrected: the TMLR paper's Thm 6.2 form, r + 2√(r·ln 1/δ))."),
        noise_std: str | None = typer.Option(None, "--noise-std", help="sigma (paper, default) or sigma-squared (reference code)."),
        alpha: float | None = typer.Option(None, "--alpha", help="Upcycled-FL objective perturbation: α."),
        mu: float | None = typer.Option(None, "--mu", help="Upcycled-FL objective perturbation: proximal μ."),
        u1: float | None = typer.Option(None, "--u1", help="Bound on ‖∇F̂‖."),
        u2: float | None = typer.Option(None, "--u2", help="Bound on |F̂''|."),
        terms: str | None = typer.Option(None, "--terms", help="rounds (M terms, default) or printed (M+1 terms)."),
        schedule: Path | None = typer.Option(None, "--schedule", help="JSON file with a heterogeneous composition."),
        checkpoint: Path | None = typer.Option(None, "--checkpoint", help="A trained federation: per-client ε from its ledger."),
        json_output: bool = typer.Option(False, "--json", help="Print one JSON object."),
        out: Path | None = typer.Option(None, "--out", help="With --checkpoint: also write a result file for `privaudit report` — a 'ledger' result (per-client ε vs budget), or with --curve an 'epsilon-curve' result, e.g. --out audits/ledger.json."),
        curve: bool = typer.Option(False, "--curve", help="With --checkpoint: ε after each round of the client with the largest final ε, per accountant (auto: rdp at every round, prv and pld where supported; a named --accountant: that one only)."),
        curve_points: int | None = typer.Option(None, "--curve-points", help="With --curve: at most this many rounds (default 10, evenly spaced, last included) at which the slow accountants are evaluated (pld; prv unless the releases are plain Gaussian, where it is exact); rdp covers every round."),
    ) -> None:
        """Compute ε (or calibrate noise) for a mechanism, a paper's closed form, a schedule or a trained federation.

        With --checkpoint DIR --delta D, --out FILE.json writes a 'ledger' result (per-client ε vs budget) and
        --curve --out FILE.json an 'epsilon-curve' result (ε after each round per accountant) for `privaudit report`.
        """
        given = dict(locals())
        from privaudit.accounting.accountants import accountant_options
        from privaudit.accounting.limits import set_default_limits

        if time_limit is not None:
            raise fail("--time-limit was replaced by --work-limit (work units counted before an accountant runs, so the "
                       "answer no longer depends on the machine's load; 30 by default)")
        for flag, value in (("vdi", vdi), ("eps_error", eps_error), ("work_limit", work_limit)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise fail(f"{_flag(flag)} must be a positive number, got {value}")
        for key in ("vdi", "eps_error", "work_limit", "time_limit"):
            given.pop(key)
        previous = set_default_limits(work=work_limit)
        try:
            # extreme inputs (σ → 0) overflow intermediate arrays on purpose: the accountants check their results
            # (an overflowed estimate is refused, an infinite ε reported as such), so numpy's warnings are noise here
            with accountant_options(value_discretization_interval=vdi, eps_error=eps_error), np.errstate(all="ignore"):
                _compute_epsilon(given)
        finally:
            set_default_limits(previous.work, previous.memory_bytes)


def _check_sources(given: dict[str, Any]) -> str:
    """Exactly one input (--mechanism, --schedule or --checkpoint), checkpoint-only flags only with --checkpoint,
    and the shared flags in range; returns the accountant name."""
    from privaudit.accounting.accountants import accountant_names

    if given["checkpoint"] is None:
        needs = [flag for flag, used in (("--out", given["out"] is not None), ("--curve", given["curve"]),
                                         ("--curve-points", given["curve_points"] is not None)) if used]
        if needs:
            raise fail(f"{', '.join(needs)} writes a ledger or ε-curve result from a trained federation and needs --checkpoint DIR")
    sources = [n for n, k in (("--mechanism", "mechanism"), ("--schedule", "schedule"), ("--checkpoint", "checkpoint"))
               if given[k] is not None]
    if len(sources) != 1:
        raise fail("give exactly one of --mechanism, --schedule or --checkpoint" + (f" (got {', '.join(sources)})" if sources else ""))
    acct = given["accountant"].strip().lower()
    if acct not in [*accountant_names(), "all", "default"]:
        raise fail(f"unknown accountant {given['accountant']!r}; choose one of: {', '.join([*accountant_names(), 'all'])}")
    delta, epsilon = given["delta"], given["epsilon"]
    if delta is not None and not 0 < delta < 1:
        raise fail(f"--delta must lie in (0, 1), got {delta}")
    if epsilon is not None and (epsilon < 0 or math.isnan(epsilon)):
        raise fail(f"--epsilon must be non-negative, got {epsilon}")
    return acct


def _compute_epsilon(given: dict[str, Any]) -> None:
    """``compute-epsilon`` after its limits are set: ``given`` holds every flag by its parameter name."""
    from privaudit.accounting.mechanisms import Neighbouring, Sampling

    acct = _check_sources(given)
    checkpoint, schedule, delta = given["checkpoint"], given["schedule"], given["delta"]
    json_output, neighbouring = given["json_output"], given["neighbouring"]
    checkpoint_only = {key: given.pop(key) for key in ("out", "curve", "curve_points")}  # checked by _check_sources
    rel = Neighbouring.parse(neighbouring)  # the enums are parsed here, once; everything below uses them by value
    given["neighbouring"] = rel
    if given["sampling"] is not None:
        given["sampling"] = Sampling.parse(given["sampling"])
    mechanism_flags = {k: v for k, v in given.items() if k not in ("schedule", "checkpoint", "accountant", "json_output", "neighbouring", "delta")}

    if checkpoint is not None or schedule is not None:
        extra = sorted(k for k, v in mechanism_flags.items() if v is not None and v is not False and k != "mechanism")
        if extra:
            raise fail(f"{', '.join(_flag(e) for e in extra)} does not apply to --{'checkpoint' if checkpoint else 'schedule'}")
    if checkpoint is not None:
        from privaudit.report.producers import DEFAULT_CURVE_POINTS

        points = checkpoint_only["curve_points"]
        _run_checkpoint(checkpoint, delta, acct, json_output, checkpoint_only["out"], checkpoint_only["curve"],
                        DEFAULT_CURVE_POINTS if points is None else points)
        return

    from privaudit.accounting.query import epsilon_report

    if schedule is not None:
        from privaudit.accounting.schedule import load_schedule

        if delta is None:
            raise fail("--schedule needs --delta")
        composition = load_schedule(schedule)
        if rel is not Neighbouring.ADD_REMOVE:
            composition = type(composition)(composition.entries, rel)
        report = epsilon_report(composition, delta, acct, inputs={"schedule": str(schedule)})
        _emit(report.to_dict(), json_output, f"ε at δ = {delta:g} for {schedule}")
        return

    mechanism, calibrate = given["mechanism"], given["calibrate"]
    mech = mechanism.strip().lower()
    if mech not in MECHANISMS:
        raise fail(f"unknown mechanism {mechanism!r}; choose one of: {', '.join(MECHANISMS)}")
    _check_flags(mech, {k: v for k, v in given.items() if k not in ("accountant", "neighbouring", "json_output")}, calibrate)
    inputs = {k: (v.value if hasattr(v, "value") else v) for k, v in given.items()
              if v is not None and v is not False and k not in ("json_output", "schedule", "checkpoint")}
    if calibrate:
        _run_calibration(mech, given, acct, json_output, inputs)
        return
    composition, closed, extra_inputs = _build(mech, given)
    extra_assumptions = extra_inputs.pop("assumptions", [])
    inputs.update(extra_inputs)
    report = epsilon_report(composition, delta, acct, inputs=inputs, closed_form=closed)
    report.extra_assumptions.extend(extra_assumptions)
    title = f"ε at δ = {delta:g}" if delta is not None else "ε (pure DP, δ = 0)"
    _emit(report.to_dict(), json_output, f"{title} — {mech}")


def _emit(data: dict[str, Any], json_output: bool, title: str) -> None:
    if json_output:
        print_json(data)
    else:
        _print_report(data, title)


def _run_calibration(mech: str, p: dict[str, Any], acct: str, json_output: bool, inputs: dict[str, Any]) -> None:
    from privaudit.accounting.calibrate import calibrate_noise
    from privaudit.accounting.mechanisms import Composition, Gaussian, Sampling, SubsampledGaussian

    if acct == "all":
        raise fail("--calibrate needs one accountant (or auto), not all")
    if acct == "gdp":
        raise fail("the gdp accountant is an approximation and is never used for calibration")
    target = _positive("epsilon", p["epsilon"])
    steps = _steps("steps", p["steps"])
    rel = p["neighbouring"]
    tensors = p["tensors"]
    if tensors is not None and tensors < 1:
        raise fail(f"--tensors must be a positive integer, got {tensors}")
    root_l = 1.0 if tensors is None else math.sqrt(tensors)
    if mech == "gaussian":
        sens = _sensitivity_number(p["sensitivity"])

        def make(sigma: float) -> Composition:
            return Composition.of(Gaussian(sigma / root_l, sens), steps, rel)
    else:
        q = p["sample_rate"]
        if q is None or not 0 < q <= 1:
            raise fail(f"--sample-rate must lie in (0, 1], got {q}")
        samp = p["sampling"] or Sampling.POISSON

        def make(sigma: float) -> Composition:
            return Composition.of(SubsampledGaussian(sigma / root_l, q, samp), steps, rel)

    cal = calibrate_noise(make, target, p["delta"], accountant=acct)
    from privaudit.accounting.accountants import get_accountant

    at_noise = {cal.accountant: cal.epsilon_at_noise.json_value()}
    rdp = get_accountant("rdp")
    if cal.accountant != "rdp" and rdp.supports(make(cal.noise_multiplier)):
        at_noise["rdp"] = rdp.epsilon(make(cal.noise_multiplier), p["delta"]).epsilon
    data = {
        "inputs": inputs,
        "noise_multiplier": cal.noise_multiplier,
        "accountant": cal.accountant,
        "target_epsilon": target,
        "delta": p["delta"],
        "epsilon_at_noise": at_noise,
        "notes": list(cal.notes) + ([f"per-tensor clipping: the effective multiplier is σ/√{tensors} = {cal.noise_multiplier / root_l:.6g}"] if tensors else []),
    }
    if json_output:
        print_json(data)
        return
    from rich.console import Console

    console = Console()
    console.print(f"noise multiplier σ = [bold]{cal.noise_multiplier:.6g}[/bold]  (smallest σ meeting ε ≤ {target:g} at δ = {p['delta']:g}, {cal.accountant})")
    for name, value in at_noise.items():
        console.print(f"  ε at σ by {name}: {_fmt(value)}")
    from rich.markup import escape

    for note in data["notes"]:
        console.print(f"[dim]note:[/dim] {escape(note)}")
