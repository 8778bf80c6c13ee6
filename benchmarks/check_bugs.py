"""How often ``privaudit check`` flags seeded-bug federations (power) and correct ones (false flags): reports/check-bugs.md.

Each configuration is trained and recorded ``--runs`` times with seeds 0, 1, …, then checked at α = ``--alpha``
(``privaudit check RUN --no-mark``, the library call :func:`privaudit.check.run_check`):

* the seeded bugs of ``examples/check_loops.py`` (a plain PyTorch DP-FedAvg loop recorded with
  :class:`~privaudit.interop.FederationRecorder`) and of ``examples/check_flower.py`` (Flower strategies and mods,
  recorded by the audit tap) — the rate at which ``check`` flags them is its power at the example's sizes;
* correct implementations — the textbook loop, Flower's server-side and client-side fixed-clipping wrappers,
  privaudit's own central DP (``privaudit train --privacy cdp --sampling poisson --save-client-updates``) and an opacus
  run (``make_private`` on digits, recorded with ``record_opacus_run``) — the rate at which it flags them is its
  false-flag rate, which must stay at or below α.

Rates come with 95 % Clopper–Pearson intervals. The table names the check that caught each bug (the check that failed
most often), the median of that check's p-value (or log₁₀ p where it underflows) and the median certified ε lower
bound where one follows. Usage::

    python benchmarks/check_bugs.py --runs 100 --out reports/check-bugs.md      # the committed report
    python benchmarks/check_bugs.py --runs 3 --only loop:sigma-squared          # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from check_flower import BUGS as FLOWER_BUGS  # noqa: E402
from check_flower import FlowerSizes, quiet_flower, run_flower  # noqa: E402
from check_loops import BUGS as LOOP_BUGS  # noqa: E402
from check_loops import LoopSizes, run_loop  # noqa: E402

from privaudit.check import CheckRequest, run_check  # noqa: E402


@dataclass
class Outcome:
    """What ``check`` said about one run."""

    flagged: bool
    failed: tuple[str, ...]
    p_values: dict[str, float]
    log10_p: dict[str, float]
    bound: float | None
    refuted: bool
    ran: tuple[str, ...]


@dataclass
class Row:
    family: str
    name: str
    bug: bool
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0


def _privaudit_cdp(out: Path, seed: int) -> Path:
    from privaudit.cli.app import main

    args = ["train", "--algorithm", "fedavg", "--privacy", "cdp", "--clip", "0.05", "--noise", "0.7", "--rounds", "6",
            "--dataset", "digits", "--num-clients", "10", "--clients-per-round", "0.5", "--sampling", "poisson",
            "--local-epochs", "1", "--lr", "0.1", "--quiet", "--save-client-updates", "--overwrite", "--seed", str(seed),
            "--out", str(out)]
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    if code != 0:
        raise RuntimeError(f"privaudit train failed with exit code {code}")
    return out


def _opacus(out: Path, seed: int) -> Path:
    import opacus
    from torch import nn

    from privaudit.interop import DatasetReference
    from privaudit.interop.opacus import record_opacus_run

    torch.manual_seed(seed)
    order = np.random.default_rng(seed).permutation(1797)
    data = DatasetReference.packaged("digits", partition={0: order[:600]}, non_members=order[600:900])
    x, y = (torch.from_numpy(a) for a in data.client_data(0))
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=60)
    engine = opacus.PrivacyEngine(accountant="rdp")
    model, optimiser, loader = engine.make_private(module=model, optimizer=optimiser, data_loader=loader,
                                                   noise_multiplier=1.1, max_grad_norm=1.0)
    for xb, yb in loader:
        if len(yb):
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimiser.step()
    with contextlib.redirect_stdout(io.StringIO()):
        return record_opacus_run(out, model=model, dataset=data, engine=engine, optimizer=optimiser, delta=1e-5,
                                 seed=seed, overwrite=True)


def configurations() -> list[tuple[str, str, bool, object]]:
    """(family, name, seeded bug?, train(out, seed) → path) for every configuration."""
    out: list[tuple[str, str, bool, object]] = []
    loop, flower = LoopSizes(), FlowerSizes()
    for bug in LOOP_BUGS:
        out.append(("loop", bug, True, lambda p, s, b=bug: run_loop(p, bug=b, seed=s, sizes=loop)))
    for bug in FLOWER_BUGS:
        out.append(("flower", bug, True, lambda p, s, b=bug: run_flower(p, bug=b, seed=s, sizes=flower)))
    out.append(("loop", "textbook DP-FedAvg", False, lambda p, s: run_loop(p, seed=s, sizes=loop)))
    out.append(("flower", "Flower server-side fixed clipping", False,
                lambda p, s: run_flower(p, variant="server-side", seed=s, sizes=flower)))
    out.append(("flower", "Flower client-side fixed clipping", False,
                lambda p, s: run_flower(p, variant="client-side", seed=s, sizes=flower)))
    out.append(("privaudit", "privaudit train --privacy cdp", False, _privaudit_cdp))
    out.append(("opacus", "opacus make_private (recorded)", False, _opacus))
    return out


def outcome(path: Path, alpha: float) -> Outcome:
    report = run_check(CheckRequest(path, alpha=alpha, summary=False, mark=False))
    p_values, log10_p = {}, {}
    for r in report.failed:
        p_values[r.name] = math.nan if r.p_value is None else float(r.p_value)
        strengths = [t.strength for t in r.tests if t.rejected]
        log10_p[r.name] = -max(strengths) if strengths else math.nan
    bounds = [r.bound for r in report.results if r.bound is not None]
    best = max(bounds, key=lambda b: b.epsilon, default=None)
    return Outcome(bool(report.failed), tuple(r.name for r in report.failed), p_values, log10_p,
                   None if best is None else best.epsilon, any(b.refutes for b in bounds), tuple(r.name for r in report.ran))


def interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson interval of k successes in n trials."""
    a = 1 - confidence
    low = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return low, high


def _p_text(row: Row, check: str) -> str:
    logs = [o.log10_p[check] for o in row.outcomes if check in o.log10_p and math.isfinite(o.log10_p[check])]
    ps = [o.p_values[check] for o in row.outcomes if check in o.p_values and not math.isnan(o.p_values[check])]
    if not logs and not ps:
        return "exact"
    if ps and statistics.median(ps) > 0:
        return f"{statistics.median(ps):.2g}"
    return f"10^{statistics.median(logs):.0f}" if logs else "< 1e-300"


def _bound_text(row: Row) -> str:
    values = [o.bound for o in row.outcomes if o.bound is not None]
    if not values:
        return "—"
    median = statistics.median(values)
    refuted = sum(o.refuted for o in row.outcomes)
    return f"{'∞' if math.isinf(median) else f'{median:.3g}'} (refutes in {refuted}/{len(row.outcomes)})"


def render(rows: list[Row], alpha: float, runs: int, command: str, seconds: float) -> str:
    lines = [
        "# privaudit check: seeded-bug federations and correct ones",
        "",
        f"Generated by `{command}` in {seconds / 60:.1f} min (CPU, one torch thread). Each configuration was trained, "
        f"recorded and checked {runs} times (seeds 0..{runs - 1}) at family-wise α = {alpha:g} "
        "(`privaudit check RUN --no-mark`; α shared by Bonferroni among the statistical checks that ran, exact checks "
        "spend none: `privaudit/check/run.py`). Rates with 95 % Clopper–Pearson intervals.",
        "",
        "Sizes (the examples' defaults): 10 clients × 100 digits, 6 rounds, a 64-16-10 MLP (1,210 parameters), clip "
        "C = 0.05, σ = 0.7; the loop samples clients Poisson at q = 0.5 and divides by q·N = 5, Flower samples 5 of 10 "
        "nodes (`examples/check_loops.py`, `examples/check_flower.py`); privaudit's own run is the same shape "
        "(`privaudit train --privacy cdp --sampling poisson` with its default digits model, upcycled-mlp); opacus is one client "
        "(600 digits, one epoch of Poisson batches at q = 0.1, σ = 1.1).",
        "",
        "## Seeded bugs (power)",
        "",
        "| where | bug | flagged | 95 % interval | check that caught it | median p (that check) | median certified ε ≥ |",
        "|---|---|---:|---|---|---:|---|",
    ]
    for row in (r for r in rows if r.bug):
        flagged = sum(o.flagged for o in row.outcomes)
        low, high = interval(flagged, len(row.outcomes))
        caught = Counter(name for o in row.outcomes for name in o.failed)
        check = caught.most_common(1)[0][0] if caught else "—"
        others = ", ".join(f"{n} {c}" for n, c in caught.most_common()[1:])
        lines.append(f"| {row.family} | {row.name} | {flagged}/{len(row.outcomes)} | [{low:.3f}, {high:.3f}] | {check}"
                     f"{f' (also: {others})' if others else ''} | {_p_text(row, check) if caught else '—'} | "
                     f"{_bound_text(row)} |")
    lines += ["", "## Correct implementations (false flags)", "",
              "| where | implementation | flagged | 95 % interval | checks that ran | failed checks |",
              "|---|---|---:|---|---|---|"]
    for row in (r for r in rows if not r.bug):
        flagged = sum(o.flagged for o in row.outcomes)
        low, high = interval(flagged, len(row.outcomes))
        ran = Counter(name for o in row.outcomes for name in o.ran)
        failed = Counter(name for o in row.outcomes for name in o.failed)
        lines.append(f"| {row.family} | {row.name} | {flagged}/{len(row.outcomes)} | [{low:.3f}, {high:.3f}] | "
                     f"{', '.join(sorted(ran)) or '—'} | {', '.join(f'{n} {c}' for n, c in failed.most_common()) or '—'} |")
    lines += [
        "",
        "`fixed-size-as-poisson` has no Flower row: Flower always samples a fixed number of nodes and the tap records "
        "them so, so the declaration cannot be Poisson. The opacus row runs the accounting check only: an opacus run "
        "records neither client releases nor its batches, and `check` lists what the other checks needed.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--only", action="append", default=[], help="family:name (repeatable), e.g. loop:same-seed")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown report here (e.g. reports/check-bugs.md)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    quiet_flower()
    import warnings

    warnings.filterwarnings("ignore")
    started = time.time()
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="check-bugs-"))
    try:
        for family, name, bug, train in configurations():
            if args.only and f"{family}:{name}" not in args.only:
                continue
            row = Row(family, name, bug)
            t = time.time()
            for seed in range(args.runs):
                path = scratch / f"{family}-{abs(hash(name)) % 10_000}-{seed}"
                train(path, seed)  # type: ignore[operator]
                row.outcomes.append(outcome(path, args.alpha))
                shutil.rmtree(path, ignore_errors=True)
            row.seconds = time.time() - t
            flagged = sum(o.flagged for o in row.outcomes)
            print(f"{family:9s} {name:36s} flagged {flagged:3d}/{len(row.outcomes)}  ({row.seconds:.0f} s)", flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    command = "python benchmarks/check_bugs.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(rows, args.alpha, args.runs, command.strip(), time.time() - started)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"written: {args.out}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
