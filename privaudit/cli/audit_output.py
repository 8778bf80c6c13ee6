"""``privaudit audit`` once its request is made: each mode run and printed (tables, or the result data as JSON).

Claim and suite audits run inside their output folder (should the disk fill, trials and results move to a temporary
folder together, :mod:`privaudit.output_folder`); checkpoint audits write a ``claim-audit`` result; a scores audit
writes ``scores-audit.json`` when given ``--out``. Imported when the command runs; torch only for the modes that train.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from privaudit.audit import runner
from privaudit.audit.claims import list_claims
from privaudit.audit.requests import SCORES_RESULT_FILE, AuditRequest, run_scores_audit
from privaudit.audit.scores_audit import scores_audit_table
from privaudit.audit.summary import audit_table, reasons, registry_table
from privaudit.audit.workflows import checkpoint_one_run, client_canaries, gradient_canaries
from privaudit.cli.common import fail, json_safe, print_json, relocation_problem
from privaudit.device import training_device
from privaudit.output_folder import opened
from privaudit.report import results  # through the module: tests replace its writer


def run(request: AuditRequest, *, json_output: bool) -> None:
    """Run the request's mode and print its outcome."""
    if request.mode == "list":
        statuses = list_claims()
        if json_output:
            print_json([s.to_dict() for s in statuses])
        else:
            _console().print(registry_table(statuses))
    elif request.mode == "scores":
        _scores(request, json_output)
    elif request.mode == "checkpoint":
        with training_device(request.device):
            chosen = (_client_canaries if request.client_canaries is not None
                      else _gradient_canaries if request.white_box else _one_run)
            chosen(request, json_output)
    else:
        _claims(request, json_output)


def _console() -> Console:
    console = Console()
    if not console.is_terminal:  # files and pipes: wide enough for the tables, no wrapped ids
        console = Console(width=180)
    return console


def _claims(request: AuditRequest, json_output: bool) -> None:
    """Registered claims: one (``--claim``) or a suite's, each with its readings, bounds and verdict."""
    settings, out = request.settings(), request.out
    # --out is the audit's output folder: should the disk fill, its trials and results move to a temporary folder
    with training_device(request.device), opened(out, "audit") as folder:
        audits = ([runner.run_claim(request.claim, settings)] if request.mode == "claim"
                  else runner.run_suite(request.suite, settings).audits)
    if json_output:
        print_json({"audits": [a.data() for a in audits]})
    else:
        console = _console()
        console.print(audit_table(audits, width=console.width))  # fitted: no verdict word or number is cut
        for line in reasons(audits):
            console.print(line, highlight=False, markup=False)
        for audit in audits:
            if audit.path is not None:
                console.print(f"written: {audit.path}", highlight=False, markup=False)
    problem = relocation_problem(folder, what="audit")
    if problem:
        raise fail(problem)


def _scores(request: AuditRequest, json_output: bool) -> None:
    """``--scores FILE``: every route on the user's scores, valid ones at α/k each, the others with the reason."""
    result = run_scores_audit(request)
    target = None if request.out is None else request.target(SCORES_RESULT_FILE)
    if target is not None:
        target.write_text(json.dumps(json_safe(result), indent=1, ensure_ascii=False) + "\n")
    if json_output:
        print_json(result)
        if result["swap_warning"] is not None:  # stdout holds the JSON; the one-line warning goes beside it
            print(f"warning: {result['swap_warning']['message']}", file=sys.stderr)
        return
    console = _console()
    console.print(scores_audit_table(result))
    for line in result["summary"]:
        console.print(line, highlight=False, markup=False)
    if target is not None:
        console.print(f"written: {target}", highlight=False, markup=False)


def _write_checkpoint_audit(request: AuditRequest, name: str, audit: Any, options: Any) -> Path:
    """A checkpoint audit's ``claim-audit`` result, ``<out>/<name>``."""
    title = f"{audit.claim_id}: {audit.verdict.verdict.value}"
    config = {"checkpoint": str(request.checkpoint), **options.to_dict()}
    return results.write_result(request.target(name), results.make_result("claim-audit", title, audit.data(), config,
                                                                          seed=request.seed))


def _run_checkpoint_audit(request: AuditRequest, json_output: bool, run: Any, options: Any,
                          result_file: str) -> tuple[Any, Path] | None:
    """Run a checkpoint audit on ``request.threads`` torch threads and write its result: ``(result, path)``, or None
    when ``--json`` printed it."""
    import torch

    torch.set_num_threads(request.threads)
    result = run(request.checkpoint, options, progress=request.progress)
    written = _write_checkpoint_audit(request, result_file, result, options)
    if json_output:
        print_json(result.data())
        return None
    return result, written


def _bounds_table(title: str, bounds: Any) -> Table:
    table = Table(title=title)
    for name in ("estimator", "ε lower bound", "α", "ceiling", "power (optimal attack, 2× claim)"):
        table.add_column(name)
    for b in bounds:
        table.add_row(b.estimator, f"{b.epsilon_lb:.4g}", f"{b.significance:.3g}", f"{b.ceiling:.4g}",
                      "—" if b.power is None else f"≥ {b.power.lower:.2f}")
    return table


def _one_run(request: AuditRequest, json_output: bool) -> None:
    """``--checkpoint DIR --one-run --canaries m``: input canaries, one re-training, black-box scores."""
    done = _run_checkpoint_audit(request, json_output, checkpoint_one_run.run_one_run_audit,
                                 request.one_run_options(), checkpoint_one_run.RESULT_FILE)
    if done is None:
        return
    (result, written), console = done, _console()
    console.print(_bounds_table(f"one-run audit of {request.checkpoint}", result.bounds))
    console.print(f"claimed (ε, δ) = ({result.claimed_epsilon:.4g}, {result.delta:g}); {result.inserted} of {result.canaries} "
                  f"canaries inserted", highlight=False, markup=False)
    console.print(f"verdict: {result.verdict.verdict.value} — {result.verdict.reason}", highlight=False, markup=False)
    console.print(f"written: {written}", highlight=False, markup=False)


def _gradient_canaries(request: AuditRequest, json_output: bool) -> None:
    """``--checkpoint DIR --gradient-canaries K``: white-box gradient canaries, every round's release observed."""
    checkpoint, options = request.checkpoint, request.gradient_canary_options()
    done = _run_checkpoint_audit(request, json_output, gradient_canaries.run_gradient_canary_audit, options,
                                 gradient_canaries.RESULT_FILE)
    if done is None:
        return
    (result, written), console = done, _console()
    details = result.details
    table = Table(title=f"gradient-canary audit of {checkpoint} ({options.view} view, white-box, every round)")
    for name in ("estimator", "ε lower bound", "μ lower bound", "α", "ceiling", "power (optimal attack, 2× claim)",
                 "valid here"):
        table.add_column(name)
    for b in result.bounds:
        valid = b.details.get("valid", True)
        table.add_row(b.estimator, f"{b.epsilon_lb:.4g}", ("—" if b.details.get("mu_lb") is None else f"{b.details['mu_lb']:.4g}"), f"{b.significance:.3g}",
                      f"{b.ceiling:.4g}", "—" if b.power is None else f"≥ {b.power.lower:.2f}",
                      "yes" if valid else "no (not used for the verdict)")
    console.print(table)

    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False)

    say(f"claimed (ε, δ) = ({result.claimed_epsilon:.4g}, {result.delta:g}) from {details['claim_source']}")
    say(f"{result.canaries} canaries of norm C = {result.magnitude:.4g} ({details['magnitude']['source']}) on client "
        f"{details['canary_client']}, {len(details['complete_rounds'])} of {details['training_rounds']} training rounds "
        f"audited, d = {details['dimension']}")
    target = details.get("mechanism_mu")
    if target:
        say(f"the privatizer's own μ for this canary: {target['per_round']:.4g} per round, {target['composed']:.4g} composed "
            f"→ ε = {target['epsilon']:.4g} (what unlimited canaries would find)")
    say(f"composition: {result.composition.statement}")
    if details.get("rounds_clipped"):
        say(f"clipping bound in iteration(s) {details['rounds_clipped']}: a round's canaries are coupled, so only the one-run "
            "bound (no independence needed) decides")
    say(f"threat model: {gradient_canaries.THREAT_MODEL}")
    say(f"verdict: {result.verdict.verdict.value} — {result.verdict.reason}")
    say(f"seconds: {result.seconds:.1f}")
    say(f"written: {written}")


def _client_canaries(request: AuditRequest, json_output: bool) -> None:
    """``--checkpoint DIR --client-canaries m``: white-box canary clients, every global model observed."""
    done = _run_checkpoint_audit(request, json_output, client_canaries.run_client_canary_audit,
                                 request.client_canary_options(), client_canaries.RESULT_FILE)
    if done is None:
        return
    (result, written), console = done, _console()
    details = result.details
    how = "re-trained with them" if result.source == "re-run" else "recorded by the run's loop"
    console.print(_bounds_table(f"canary-client audit of {request.checkpoint} ({result.canaries} canary clients, {how})",
                                result.bounds))

    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False)

    say(f"claimed (ε, δ) = ({result.claimed_epsilon:.4g}, {result.delta:g}) from {details['claim_source']}; "
        f"{result.inserted} of {result.canaries} canary clients inserted, d = {details['dimension']}")
    mu = details.get("mechanism_mu")
    if mu:
        say(f"the mechanism's own μ = {mu['composed']:.4g} → ε = {mu['epsilon']:.4g} (what unlimited canaries would find)")
    say(f"threat model: {client_canaries.THREAT_MODEL}")
    say(f"verdict: {result.verdict.verdict.value} — {result.verdict.reason}")
    say(f"seconds: {result.seconds:.1f}")
    say(f"written: {written}")
