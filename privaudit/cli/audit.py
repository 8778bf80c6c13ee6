"""``privaudit audit``: check a paper's privacy claim — accounting, attacks, ε lower bounds, a verdict.

::

    privaudit audit --list                                                             # the claims registry
    privaudit audit --claim upcycled-thm6.2-fig3 --trials 1000 --executor process --out audits/up
    privaudit audit --suite default --out reports/default
    privaudit audit --checkpoint runs/priv --canaries 500 --one-run --out audits/one
    privaudit audit --checkpoint runs/priv --gradient-canaries 200 --canary-view client --out audits/gc
    privaudit audit --scores my_scores.json --mechanism any --design fixed --claimed-epsilon 8 --json

Each claim audit writes ``<out>/<claim_id>.json`` (a ``claim-audit`` result that ``privaudit report`` renders)
and its trials to ``<out>/trials/`` (a re-run with the same arguments resumes them), then prints a summary
table. Module-level imports are light (typer only); the audit stack is imported inside the command.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privaudit.cli.common import cli_errors, fail, print_json, relocation_problem
from privaudit.errors import InvalidParameterError
from privaudit.output_folder import opened

DEFAULT_OUT = Path("reports/audits")


def _console():
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # files and pipes: wide enough for the tables, no wrapped ids
        console = Console(width=180)
    return console


def _print_audits(audits, pending=()) -> None:
    from privaudit.audit.summary import audit_table, reasons

    console = _console()
    console.print(audit_table(audits, pending, width=console.width))  # fitted: no verdict word or number is cut
    for line in reasons(audits, pending):
        console.print(line, highlight=False, markup=False)
    for audit in audits:
        if audit.path is not None:
            console.print(f"written: {audit.path}", highlight=False, markup=False)


def _one_mode(list_: bool, claim: str | None, suite: str | None, checkpoint: Path | None, scores: Path | None) -> str:
    chosen = [name for name, on in (("--list", list_), ("--claim", claim is not None), ("--suite", suite is not None),
                                    ("--checkpoint", checkpoint is not None), ("--scores", scores is not None)) if on]
    if len(chosen) != 1:
        raise InvalidParameterError("audit needs exactly one of --list, --claim ID, --suite NAME, --checkpoint DIR or "
                                    "--scores FILE"
                                    + (f" (got {', '.join(chosen)})" if chosen else ""))
    return chosen[0]


def register(app: typer.Typer) -> None:
    @app.command("audit")
    @cli_errors
    def audit(
        list_: bool = typer.Option(False, "--list", help="List the claims registry (id, paper, claim, ready|pending + reason)."),
        claim: str | None = typer.Option(None, "--claim", help="Audit one registered claim (see --list)."),
        suite: str | None = typer.Option(None, "--suite", help="Audit every claim of a named suite (e.g. 'default')."),
        checkpoint: Path | None = typer.Option(None, "--checkpoint", help="A trained federation (privaudit train --out DIR)."),
        scores: Path | None = typer.Option(
            None, "--scores",
            help='Audit attack scores computed elsewhere: JSON {"in": [...], "out": [...]} or .npz with arrays in, out '
                 "(larger = member)."),
        mechanism: str = typer.Option(
            "any", "--mechanism",
            help="With --scores: the audited mechanism's family: any (default; only routes valid for every mechanism), "
                 "gaussian (Gaussian noise, no subsampling) or pure (ε-DP)."),
        design: str = typer.Option(
            "fixed", "--design",
            help="With --scores: how the scores came about: fixed (default; fixed in/out counts, 'in' chosen at random), "
                 "bernoulli (one run, each canary in w.p. ½) or trials (independent runs per score)."),
        optimal_attack: bool = typer.Option(
            False, "--optimal-attack",
            help="With --scores --mechanism gaussian: declare the attack optimal (its score a strictly increasing "
                 "function of the privacy loss of a worst-case pair of neighbours). An assumption the scores cannot "
                 "check, recorded in the result; only then can a claim come out 'consistent' from the attack, when an "
                 "optimal attack at 2x the claim would be refuted with probability >= 0.8 at these sample sizes."),
        one_run: bool = typer.Option(False, "--one-run", help="With --checkpoint: re-train once with canaries and bound ε in one run."),
        canaries: int | None = typer.Option(None, "--canaries", help="With --one-run: number of input canaries (each inserted w.p. ½)."),
        canary_kind: str | None = typer.Option(None, "--canary-kind", help="With --one-run: mislabelled (default) or ood."),
        gradient_canaries: int | None = typer.Option(
            None, "--gradient-canaries",
            help="With --checkpoint: re-train once with K white-box gradient canaries (each in w.p. ½ every round) and "
                 "bound ε per round and composed."),
        canary_view: str | None = typer.Option(
            None, "--canary-view", help="With --gradient-canaries: client (the canary client's releases; default) or aggregate."),
        canary_magnitude: float | None = typer.Option(
            None, "--canary-magnitude", help="With --gradient-canaries: canary norm C (default: the ledger's sensitivity Δ)."),
        canary_client: int | None = typer.Option(
            None, "--canary-client", help="With --gradient-canaries: the client that carries the canaries (default 0)."),
        delta: float = typer.Option(1e-5, "--delta", help="With --checkpoint or --scores: δ of the audited claim."),
        claimed_epsilon: float | None = typer.Option(
            None, "--claimed-epsilon", help="With --checkpoint (default: the ledger's) or --scores: the ε to audit."),
        trials: int | None = typer.Option(None, "--trials", help="Trials per reading (default: the claim's or the suite's)."),
        executor: str = typer.Option("in-process", "--executor", help="in-process, process (a local pool) or ray."),
        workers: int | None = typer.Option(None, "--workers", help="Workers of the process pool or Ray."),
        address: str | None = typer.Option(None, "--address", help="Ray cluster address (e.g. auto)."),
        alpha: float = typer.Option(0.05, "--alpha", help="Significance per reading, split equally over its estimators."),
        power_trials: int = typer.Option(
            200, "--power-trials",
            help="Most simulations behind each power figure (an optimal attack at 2x the claim; it stops early once "
                 "the answer is clear)."),
        seed: int = typer.Option(0, "--seed", help="Audit seed (every trial's seed derives from it)."),
        out: Path | None = typer.Option(
            None, "--out", help=f"Output folder for result files and trials (default {DEFAULT_OUT}; --scores writes only when given)."),
        threads: int = typer.Option(1, "--threads", help="torch threads for in-process trials (tiny models: 1 is fastest)."),
        device: str = typer.Option("cpu", "--device", help="Where the federations the audit trains (its trials, canary re-runs) train: "
                                   "cpu (default), cuda, cuda:<index> or auto; process-pool workers inherit it."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
        json_output: bool = typer.Option(False, "--json", help="Print the result data as JSON instead of tables."),
    ) -> None:
        """Audit a paper's privacy claim: accountant ε, attack ε lower bounds with ceiling and power, verdict."""
        flags = dict(locals())
        mode = _one_mode(list_, claim, suite, checkpoint, scores)
        from privaudit.device import resolve_device, training_device

        if resolve_device(device).type != "cpu" and mode in ("--scores", "--list"):  # an absent device: one line here
            raise InvalidParameterError(f"--device applies to audits that train federations, not to {mode}")
        scores_only = [name for name, on in (("--mechanism", mechanism != "any"), ("--design", design != "fixed"),
                                             ("--optimal-attack", optimal_attack)) if on]
        if mode != "--scores" and scores_only:
            raise InvalidParameterError(f"the option(s) {', '.join(scores_only)} apply to --scores audits only (claims and "
                                        "checkpoints derive them from the mechanism they audit)")
        if mode == "--scores":
            if trials is not None:
                raise InvalidParameterError("--trials does not apply to --scores (the scores are given)")
            _scores(flags)
            return
        out = flags["out"] = DEFAULT_OUT if out is None else out
        if trials is not None and trials < 1:
            raise InvalidParameterError(f"--trials must be a positive integer, got {trials}")
        if threads < 1:
            raise InvalidParameterError(f"--threads must be at least 1, got {threads}")
        checkpoint_only = [name for name, on in (
            ("--one-run", one_run), ("--canaries", canaries is not None), ("--gradient-canaries", gradient_canaries is not None),
            ("--canary-view", canary_view is not None), ("--canary-magnitude", canary_magnitude is not None),
            ("--canary-client", canary_client is not None)) if on]
        if mode != "--checkpoint" and checkpoint_only:  # --scores returned above; its own options are checked there
            raise InvalidParameterError(f"the option(s) {', '.join(checkpoint_only)} apply to --checkpoint audits only")
        if mode == "--list":
            from privaudit.audit.claims import list_claims
            from privaudit.audit.summary import registry_table

            statuses = list_claims()
            if json_output:
                print_json([s.to_dict() for s in statuses])
            else:
                _console().print(registry_table(statuses))
            return
        if mode == "--checkpoint":
            if gradient_canaries is not None or canary_view is not None or canary_magnitude is not None or canary_client is not None:
                if canary_kind is not None:
                    raise InvalidParameterError("--canary-kind chooses input canaries for --one-run; gradient canaries are "
                                                "random orthonormal directions")
                with training_device(device):
                    _gradient_canaries(flags)
                return
            with training_device(device):
                _checkpoint(flags)
            return
        from privaudit.audit.runner import AuditSettings, check_executor, run_claim, run_suite

        check_executor(executor)
        _check_writable(Path(out) / f"{claim or suite}.json")  # before the trials, not after them
        settings = AuditSettings(trials=trials, significance=alpha, seed=seed, executor=executor, workers=workers,
                                 address=address, out=out, power_trials=power_trials, progress=not quiet, torch_threads=threads)
        # --out is the audit's output folder: should the disk fill, its trials and results move to a temporary folder
        with training_device(device), opened(out, "audit") as folder:
            if mode == "--claim":
                audits, pending = [run_claim(claim, settings)], []
            else:
                result = run_suite(suite, settings)
                audits, pending = result.audits, result.pending
        if json_output:
            print_json({"audits": [a.data() for a in audits], "pending": [{"claim_id": c, "reason": r} for c, r in pending]})
        else:
            _print_audits(audits, pending)
        problem = relocation_problem(folder, what="audit")
        if problem:
            raise fail(problem)


def _scores(flags: dict) -> None:
    """``--scores FILE``: every route on the user's scores, valid ones at α/k each, the others with the reason."""
    path, mechanism, design, delta, alpha = flags["scores"], flags["mechanism"], flags["design"], flags["delta"], flags["alpha"]
    claimed_epsilon, power_trials, seed, out = flags["claimed_epsilon"], flags["power_trials"], flags["seed"], flags["out"]
    json_output = flags["json_output"]
    from privaudit.audit.score_files import read_scores
    from privaudit.stats.assumptions import design_of, mechanism_family

    family, provenance = mechanism_family(mechanism), design_of(design)
    if flags["optimal_attack"] and claimed_epsilon is None:
        raise InvalidParameterError("--optimal-attack declares what an attack's silence means for a claim: give "
                                    "--claimed-epsilon too")
    if claimed_epsilon is not None and not (claimed_epsilon >= 0 and claimed_epsilon < float("inf")):
        raise InvalidParameterError(f"--claimed-epsilon must be a finite number ≥ 0, got {claimed_epsilon}")
    if power_trials < 1:
        raise InvalidParameterError(f"--power-trials must be a positive integer, got {power_trials}")
    target = None
    if out is not None:  # checked before any work: a bad --out never costs the audit
        target = out / "scores-audit.json"
        _check_writable(target)
    observed = read_scores(path)
    from privaudit.audit.scores_audit import audit_score_file

    result = audit_score_file(observed, mechanism=family, design=provenance, delta=delta, significance=alpha,
                              claimed_epsilon=claimed_epsilon, power_trials=power_trials, seed=seed, source=str(path),
                              attack_optimal=flags["optimal_attack"], progress=not flags["quiet"])
    if target is not None:
        import json

        from privaudit.cli.common import json_safe

        target.write_text(json.dumps(json_safe(result), indent=1, ensure_ascii=False) + "\n")
    if json_output:
        print_json(result)
        if result["swap_warning"] is not None:  # stdout holds the JSON; the one-line warning goes beside it
            import sys

            print(f"warning: {result['swap_warning']['message']}", file=sys.stderr)
        return
    from privaudit.audit.scores_audit import scores_audit_table

    console = _console()
    console.print(scores_audit_table(result))
    for line in result["summary"]:
        console.print(line, highlight=False, markup=False)
    if target is not None:
        console.print(f"written: {target}", highlight=False, markup=False)


def _check_writable(target: Path) -> None:
    """One clear error now, rather than a traceback after the work, when ``target`` cannot be written."""
    folder = target.parent
    if folder.exists() and not folder.is_dir():
        raise InvalidParameterError(f"--out {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".privaudit-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InvalidParameterError(f"--out {folder} is not writable ({exc.strerror or exc})") from None


def _write_checkpoint_audit(out, name: str, audit, config: dict, seed: int):
    """Write a checkpoint audit's ``claim-audit`` result to ``<out>/<name>`` (``None`` without ``--out``)."""
    if out is None:
        return None
    from privaudit.report.results import make_result, write_result

    title = f"{audit.claim_id}: {audit.verdict.verdict.value}"
    return write_result(Path(out) / name, make_result("claim-audit", title, audit.data(), config, seed=seed))


def _checkpoint(flags: dict) -> None:
    """``--checkpoint DIR --one-run --canaries m``: input canaries, one re-training, black-box scores."""
    checkpoint, canaries, canary_kind, seed = flags["checkpoint"], flags["canaries"], flags["canary_kind"], flags["seed"]
    one_run, trials, json_output, out = flags["one_run"], flags["trials"], flags["json_output"], flags["out"]
    if not one_run:
        raise InvalidParameterError("a checkpoint is audited in one run: add --one-run (input canaries, black-box) or "
                                    "--gradient-canaries K (white-box, every round); multi-run audits use --claim")
    if canaries is None:
        raise InvalidParameterError("--one-run needs --canaries m (the number of canaries, e.g. 500)")
    if trials is not None:
        raise InvalidParameterError("--trials does not apply to a one-run audit (it trains once)")
    import torch

    from privaudit.audit.workflows.checkpoint_one_run import RESULT_FILE, OneRunOptions, run_one_run_audit

    options = OneRunOptions(canaries, delta=flags["delta"], significance=flags["alpha"],
                            claimed_epsilon=flags["claimed_epsilon"], canary_kind=canary_kind or "mislabelled", seed=seed,
                            power_trials=flags["power_trials"])
    _check_writable(Path(out) / RESULT_FILE)  # before the training, not after it
    torch.set_num_threads(flags["threads"])
    result = run_one_run_audit(checkpoint, options, progress=not flags["quiet"])
    written = _write_checkpoint_audit(out, RESULT_FILE, result, {"checkpoint": str(checkpoint), **options.to_dict()}, seed)
    if json_output:
        print_json(result.data())
        return
    console = _console()
    from rich.table import Table

    table = Table(title=f"one-run audit of {checkpoint}")
    for name in ("estimator", "ε lower bound", "α", "ceiling", "power (optimal attack, 2× claim)"):
        table.add_column(name)
    for b in result.bounds:
        table.add_row(b.estimator, f"{b.epsilon_lb:.4g}", f"{b.significance:.3g}", f"{b.ceiling:.4g}",
                      "—" if b.power is None else f"≥ {b.power.lower:.2f}")
    console.print(table)
    console.print(f"claimed (ε, δ) = ({result.claimed_epsilon:.4g}, {result.delta:g}); {result.inserted} of {result.canaries} "
                  f"canaries inserted", highlight=False, markup=False)
    console.print(f"verdict: {result.verdict.verdict.value} — {result.verdict.reason}", highlight=False, markup=False)
    if written is not None:
        console.print(f"written: {written}", highlight=False, markup=False)


def _gradient_canaries(flags: dict) -> None:
    """``--checkpoint DIR --gradient-canaries K``: white-box gradient canaries, every round's release observed."""
    checkpoint, gradient_canaries, seed, out = flags["checkpoint"], flags["gradient_canaries"], flags["seed"], flags["out"]
    canary_view, canary_magnitude, canary_client = flags["canary_view"], flags["canary_magnitude"], flags["canary_client"]
    one_run, canaries, trials, json_output = flags["one_run"], flags["canaries"], flags["trials"], flags["json_output"]
    from privaudit.audit.workflows.gradient_canaries import VIEWS

    if gradient_canaries is None:
        raise InvalidParameterError("--canary-view, --canary-magnitude and --canary-client need --gradient-canaries K")
    if one_run:
        raise InvalidParameterError("--one-run and --gradient-canaries are mutually exclusive: choose input canaries in one "
                                    "run (--one-run --canaries m) or white-box gradient canaries (--gradient-canaries K)")
    if canaries is not None:
        raise InvalidParameterError("--canaries counts the input canaries of --one-run; give the number of gradient canaries "
                                    "with --gradient-canaries K alone")
    if trials is not None:
        raise InvalidParameterError("--trials does not apply to a gradient-canary audit (it trains once)")
    if gradient_canaries < 2:
        raise InvalidParameterError(f"--gradient-canaries needs at least 2 canaries, got {gradient_canaries}")
    view = "client" if canary_view is None else canary_view
    if view not in VIEWS:
        raise InvalidParameterError(f"unknown --canary-view {view!r}; use client or aggregate")
    if canary_magnitude is not None and not canary_magnitude > 0:
        raise InvalidParameterError(f"--canary-magnitude must be a positive number, got {canary_magnitude}")
    if canary_client is not None and canary_client < 0:
        raise InvalidParameterError(f"--canary-client must be a client id ≥ 0, got {canary_client}")
    import torch

    from privaudit.audit.workflows.gradient_canaries import (
        RESULT_FILE,
        THREAT_MODEL,
        GradientCanaryOptions,
        run_gradient_canary_audit,
    )

    options = GradientCanaryOptions(gradient_canaries, delta=flags["delta"], significance=flags["alpha"],
                                    claimed_epsilon=flags["claimed_epsilon"], view=view, magnitude=canary_magnitude,
                                    client=0 if canary_client is None else canary_client, seed=seed,
                                    power_trials=flags["power_trials"])
    _check_writable(Path(out) / RESULT_FILE)  # before the training, not after it
    torch.set_num_threads(flags["threads"])
    result = run_gradient_canary_audit(checkpoint, options, progress=not flags["quiet"])
    written = _write_checkpoint_audit(out, RESULT_FILE, result, {"checkpoint": str(checkpoint), **options.to_dict()}, seed)
    if json_output:
        print_json(result.data())
        return
    console = _console()
    from rich.table import Table

    details = result.details
    table = Table(title=f"gradient-canary audit of {checkpoint} ({view} view, white-box, every round)")
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
    say(f"threat model: {THREAT_MODEL}")
    say(f"verdict: {result.verdict.verdict.value} — {result.verdict.reason}")
    say(f"seconds: {result.seconds:.1f}")
    if written is not None:
        say(f"written: {written}")
