"""``privaudit check``: what a run declares against what it recorded, or a mechanism probed in isolation.

::

    privaudit check runs/mine                              # every check; marks failed events invalid in the checkpoint
    privaudit check runs/mine --json                       # the check result as JSON (privaudit/schemas/check.schema.json)
    privaudit check runs/mine --out audits/check.json      # also a 'check' result for `privaudit report`
    privaudit check --probe mypkg.dp:aggregate --clip 1 --noise-multiplier 1   # a privatizer on crafted inputs

Exit code 0 when every check that ran passed, 1 when one failed, 2 on bad input. The command maps its flags to one
typed request (:class:`~privaudit.check.run.CheckRequest` / :class:`~privaudit.check.probe.ProbeRequest`) and calls
one library function.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from privaudit.cli.common import cli_errors, print_json
from privaudit.errors import InvalidParameterError
from privaudit.request_checks import check_out_folder

if TYPE_CHECKING:
    from privaudit.check.probe import ProbeRequest
    from privaudit.check.run import CheckRequest


def register(app: typer.Typer) -> None:
    @app.command("check")
    @cli_errors
    def check(
        run: Path | None = typer.Argument(None, help="A trained federation (checkpoint directory: privaudit train, the "
                                                      "recorder, opacus, Flower's audit tap)."),
        alpha: float = typer.Option(0.05, "--alpha", help="Family-wise level of the whole check (shared among the "
                                                            "statistical checks that run, Bonferroni)."),
        delta: float = typer.Option(1e-5, "--delta", help="δ of the certified ε lower bound and of the ledger's ε."),
        claimed_epsilon: float | None = typer.Option(None, "--claimed-epsilon", help="Compare the certified bound with "
                                                     "this ε (default: the ε the ledger states)."),
        clip: float | None = typer.Option(None, "--clip", help="The clip C, where the run does not declare it "
                                                             "(or to override it)."),
        divisor: str | None = typer.Option(None, "--divisor", help="What the clipped sum is divided by: expected "
                                                                    "(q·N), realised (the updates that arrived) or a number."),
        clipped_at: str | None = typer.Option(None, "--clipped-at", help="client or server: where the updates are "
                                                                         "clipped (recorder runs do not say; default server)."),
        seed_space: int = typer.Option(10_000, "--seed-space", help="Seeds 0..S−1 of torch's and numpy's generators "
                                                                    "searched for the noise (0: no search)."),
        only: list[str] = typer.Option([], "--only", help="Run only these checks (repeatable): clipping, noise, "
                                                          "randomness, sampling, accounting."),
        mark: bool = typer.Option(True, "--mark/--no-mark", help="Write failed checks into the checkpoint's ledger "
                                                                  "(events marked invalid), so compute-epsilon states no "
                                                                  "guarantee."),
        json_output: bool = typer.Option(False, "--json", help="Print the check result as one JSON object."),
        out: Path | None = typer.Option(None, "--out", help="Also write a 'check' result file for `privaudit report`."),
        probe: str | None = typer.Option(None, "--probe", help="Probe a privatizer package.module:function (updates "
                                                               "(n, d) → aggregate (d,)) instead of a run."),
        probe_flower: str | None = typer.Option(None, "--probe-flower", help="Probe a Flower strategy: "
                                                "package.module:factory returning it (it must train every node)."),
        noise_multiplier: float | None = typer.Option(None, "--noise-multiplier", help="Probe: declared z (noise std on "
                                                                                       "the sum / C)."),
        clients: int = typer.Option(10, "--clients", help="Probe: base clients K (each input has K + 1 updates)."),
        dimension: int = typer.Option(64, "--dimension", help="Probe: dimension d of the updates."),
        trials: int = typer.Option(1000, "--trials", help="Probe: calls on each of the two neighbouring inputs."),
        seed: int = typer.Option(0, "--seed", help="Probe: seed of the crafted inputs."),
    ) -> None:
        """Check what a run declares against what it recorded (clipping, noise, randomness, sampling, accounting)."""
        probing = probe is not None or probe_flower is not None
        if (run is None) == (not probing) or (probe is not None and probe_flower is not None):
            raise InvalidParameterError("check needs exactly one of RUN (a checkpoint directory), --probe FUNCTION or "
                                        "--probe-flower FACTORY")
        if out is not None:
            check_out_folder(out.parent)
        output = Output(json_output, out)
        if probing:
            from privaudit.check.probe import ProbeRequest, probe_divisor, probe_target

            if clip is None or noise_multiplier is None:
                raise InvalidParameterError("a probe needs the declared mechanism: --clip C and --noise-multiplier z")
            function, label = probe_target(probe, probe_flower)
            code = _probe(ProbeRequest(function, clip=clip, noise_multiplier=noise_multiplier, clients=clients,
                                       dimension=dimension, trials=trials, divisor=probe_divisor(divisor), alpha=alpha,
                                       delta=delta, seed=seed, label=label), output)
        else:
            from privaudit.check.run import CheckRequest

            code = _run(CheckRequest(run, alpha=alpha, delta=delta, claimed_epsilon=claimed_epsilon, clip=clip,  # type: ignore[arg-type]
                                     divisor=divisor, clipped_at=clipped_at, seeds=seed_space, only=tuple(only),
                                     mark=mark), output)
        raise typer.Exit(code)


@dataclass(frozen=True)
class Output:
    """Where the command's result goes: one JSON object on stdout (``json``) instead of the table, and a result file
    for ``privaudit report`` (``out``)."""

    json: bool = False
    out: Path | None = None


def _run(request: CheckRequest, output: Output) -> int:
    from privaudit.check.run import run_check

    report = run_check(request)
    data = report.to_dict()
    if output.out is not None:
        _write(output.out, f"privaudit check {report.run}", data, request)
    if output.json:
        print_json(data)
    else:
        _print(report, output.out)
    return report.exit_code


def _probe(request: ProbeRequest, output: Output) -> int:
    from privaudit.check.probe import run_probe
    from privaudit.check.run import CHECK_SCHEMA

    result = run_probe(request)
    data = {"schema": CHECK_SCHEMA, "run": None, "probe": request.label, "alpha": request.alpha, "delta": request.delta,
            "outcome": result.status.value, "checks": [result.to_dict()]}
    if output.out is not None:
        _write(output.out, f"privaudit check --probe {request.label}", data, request)
    if output.json:
        print_json(data)
    else:
        from rich.console import Console

        console = Console()
        console.print(f"probe of {request.label}: {result.status.value} — {result.reason}", highlight=False, markup=False)
        for test in result.tests:
            mark = "✗" if test.rejected else "✓"
            p = "exact" if test.p_value is None else f"p = {test.p_value:.3g}"
            console.print(f"  {mark} {test.name} ({p}, level {test.level:.3g}): {test.detail}", highlight=False, markup=False)
    return 1 if result.failed else 0


def _print(report, out: Path | None) -> None:
    from rich.console import Console

    from privaudit.check.summary import check_table, reading_lines

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    table = check_table(report, console.width)
    if table is not None:
        console.print(table)
    else:
        for result in report.results:
            console.print(f"{result.name}: {result.status.value} — {result.reason}", highlight=False, markup=False)
    for line in reading_lines(report):
        console.print(line, highlight=False, markup=False)
    if out is not None:
        console.print(f"written: {out}", highlight=False, markup=False)


def _write(out: Path, title: str, data: dict, request: CheckRequest | ProbeRequest) -> None:
    from dataclasses import asdict

    from privaudit.report.results import make_result, write_result

    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(request).items() if not callable(v)}
    config = {k: v for k, v in config.items() if isinstance(v, str | int | float | bool | list | tuple | type(None))}
    write_result(out, make_result("check", title, data, config))
