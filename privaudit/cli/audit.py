"""``privaudit audit``: check a paper's privacy claim — accounting, attacks, ε lower bounds, a verdict.

::

    privaudit audit --list                                                             # the claims registry
    privaudit audit --claim upcycled-thm6.2-fig3 --trials 1000 --executor process --out audits/up
    privaudit audit --suite default --out reports/default
    privaudit audit --checkpoint runs/priv --canaries 500 --one-run --out audits/one
    privaudit audit --checkpoint runs/priv --gradient-canaries 200 --canary-view client --out audits/gc
    privaudit audit --checkpoint runs/cdp --client-canaries 10000 --out audits/cc
    privaudit audit --scores my_scores.json --mechanism any --design fixed --claimed-epsilon 8 --json

Each claim audit writes ``<out>/<claim_id>.json`` (a ``claim-audit`` result that ``privaudit report`` renders)
and its trials to ``<out>/trials/`` (a re-run with the same arguments resumes them), then prints a summary
table. The flags map to an :class:`~privaudit.audit.requests.AuditRequest` (checked before any work), run and printed
by :mod:`privaudit.cli.audit_output`. Module-level imports are light (typer only); the audit stack is imported inside
the command.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privaudit.cli.common import cli_errors


def register(app: typer.Typer) -> None:
    @app.command("audit")
    @cli_errors
    def audit(
        list_: bool = typer.Option(False, "--list", help="List the claims registry (id, paper, claim, stated and chosen numbers)."),
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
        client_canaries: int | None = typer.Option(
            None, "--client-canaries",
            help="With --checkpoint: m white-box canary clients (each a client whose update is a random direction at the "
                 "clip norm, in w.p. ½, sampled like any client), scored on every global model: a privaudit run is "
                 "re-trained with them; a recorded run scores the canaries its loop added (LoopCanaries)."),
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
            None, "--out", help="Output folder for result files and trials (default reports/audits; --scores writes only when given)."),
        threads: int = typer.Option(1, "--threads", help="torch threads for in-process trials (tiny models: 1 is fastest)."),
        device: str = typer.Option("cpu", "--device", help="Where the federations the audit trains (its trials, canary re-runs) train: "
                                   "cpu (default), cuda, cuda:<index> or auto; process-pool workers inherit it."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
        json_output: bool = typer.Option(False, "--json", help="Print the result data as JSON instead of tables."),
    ) -> None:
        """Audit a paper's privacy claim: accountant ε, attack ε lower bounds with ceiling and power, verdict."""
        # the audit stack (scipy, ~0.8 s) loads when the command runs, not at every CLI start
        from privaudit.audit.requests import AuditRequest
        from privaudit.cli.audit_output import run

        request = AuditRequest(
            list_claims=list_, claim=claim, suite=suite, checkpoint=checkpoint, scores=scores, mechanism=mechanism,
            design=design, optimal_attack=optimal_attack, one_run=one_run, canaries=canaries, canary_kind=canary_kind,
            gradient_canaries=gradient_canaries, canary_view=canary_view, canary_magnitude=canary_magnitude,
            canary_client=canary_client, client_canaries=client_canaries, delta=delta, claimed_epsilon=claimed_epsilon, trials=trials, executor=executor,
            workers=workers, address=address, alpha=alpha, power_trials=power_trials, seed=seed, out=out, threads=threads,
            device=device, progress=not quiet)
        run(request, json_output=json_output)
