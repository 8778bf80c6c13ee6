"""How often ``privaudit check`` flags seeded-bug federations (power) and correct ones (false flags): reports/check-bugs.md.

Each configuration is trained and recorded ``--runs`` times with seeds 0, 1, …, then checked at α = ``--alpha``
(``privaudit check RUN --no-mark``, the library call :func:`privaudit.check.run_check`):

* the seeded bugs of ``examples/check_loops.py`` (a plain PyTorch DP-FedAvg loop recorded with
  :class:`~privaudit.interop.FederationRecorder`) and of ``examples/check_flower.py`` (Flower strategies and mods,
  recorded by the audit tap), and the local-DP loop (``run_local_loop``) with one seed for every release — the rate at
  which ``check`` flags them is its power at the example's sizes;
* correct implementations — the textbook loop, the local-DP loop with fresh noise, Flower's server-side and
  client-side fixed- and adaptive-clipping wrappers, privaudit's own central DP (``privaudit train --privacy cdp --sampling poisson --save-client-updates``) and an opacus
  run (``make_private`` on digits, recorded with ``record_opacus_run``) — the rate at which it flags them is its
  false-flag rate, which must stay at or below α.

Rates come with 95 % Clopper–Pearson intervals. The table names the check that caught each bug (the check that failed
most often), the median of that check's p-value (or log₁₀ p where it underflows) and the median certified ε lower
bound where one follows. Usage::

    python benchmarks/check_bugs.py --runs 100 --workers 2 --out reports/check-bugs.md      # the committed report
    python benchmarks/check_bugs.py --runs 100 --false-flag-runs 300 --workers 2 \
        --only "privaudit:privaudit train --privacy cdp" --only "loop:textbook DP-FedAvg" \
        --out reports/check-bugs-false-flags.md                                            # more runs where it matters
    python benchmarks/check_bugs.py --runs 3 --only loop:sigma-squared                     # a quick look

``--out X.md`` also writes the rates as JSON (``X.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import shlex
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
from check_loops import LoopSizes, run_local_loop, run_loop  # noqa: E402

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


def _large_seed(seed: int) -> int:
    """A fixed seed outside the searched seed space (≥ 10⁶), so that only the repeats can find the shared noise."""
    return 1_000_003 + 7919 * seed


def configurations() -> list[tuple[str, str, bool, object]]:
    """(family, name, seeded bug?, train(out, seed) → path) for every configuration."""
    out: list[tuple[str, str, bool, object]] = []
    loop, flower = LoopSizes(), FlowerSizes()
    for bug in LOOP_BUGS:
        out.append(("loop", bug, True, lambda p, s, b=bug: run_loop(p, bug=b, seed=s, sizes=loop)))
    out.append(("loop", "same-seed (local DP: one seed for every client's release)", True,
                lambda p, s: run_local_loop(p, seed=s, noise_seed=_large_seed(s), sizes=loop)))
    for bug in FLOWER_BUGS:
        out.append(("flower", bug, True, lambda p, s, b=bug: run_flower(p, bug=b, seed=s, sizes=flower)))
    out.append(("loop", "textbook DP-FedAvg", False, lambda p, s: run_loop(p, seed=s, sizes=loop)))
    out.append(("flower", "Flower server-side fixed clipping", False,
                lambda p, s: run_flower(p, variant="server-side", seed=s, sizes=flower)))
    out.append(("flower", "Flower client-side fixed clipping", False,
                lambda p, s: run_flower(p, variant="client-side", seed=s, sizes=flower)))
    out.append(("flower", "Flower server-side adaptive clipping", False,
                lambda p, s: run_flower(p, variant="server-side-adaptive", seed=s, sizes=flower)))
    out.append(("flower", "Flower client-side adaptive clipping", False,
                lambda p, s: run_flower(p, variant="client-side-adaptive", seed=s, sizes=flower)))
    out.append(("loop", "local DP, fresh noise per release", False, lambda p, s: run_local_loop(p, seed=s, sizes=loop)))
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
        f"Generated by `{command}` in {seconds / 60:.1f} min (CPU, one torch thread per process). Each configuration was trained, "
        f"recorded and checked with seeds 0, 1, … ({runs} seeded bug runs each; the correct implementations' counts are in "
        f"their table) at family-wise α = {alpha:g} "
        "(`privaudit check RUN --no-mark`; α shared by Bonferroni among the statistical checks that ran, exact checks "
        "spend none: `privaudit/check/run.py`). Rates with 95 % Clopper–Pearson intervals.",
        "",
        "Sizes (the examples' defaults): 10 clients × 100 digits, 6 rounds, a 64-16-10 MLP (1,210 parameters), clip "
        "C = 0.05, σ = 0.7; the loop samples clients Poisson at q = 0.5 and divides by q·N = 5, Flower samples 5 of 10 "
        "nodes (`examples/check_loops.py`, `examples/check_flower.py`); privaudit's own run is the same shape "
        "(`privaudit train --privacy cdp --sampling poisson` with its default digits model, upcycled-mlp); opacus is one client "
        "(600 digits, one epoch of Poisson batches at q = 0.1, σ = 1.1). Flower's adaptive wrappers start at C = 0.05 with "
        "σ = 0.7 and a clipped-count std σ_b = 2 (`COUNT_STDDEV`). The local-DP loop (`run_local_loop`) has 4 clients "
        "× 3 rounds, each client clipping its update to C and adding N(0, (2σC)²I) itself, declared as record-level "
        "`GaussianRelease(..., sensitivity=2C)`; its same-seed bug re-seeds every release's generator with one seed "
        "≥ 10⁶ (outside the searched seed space, so only the repeats can catch it).",
        "",
    ]
    if any(r.bug for r in rows):
        lines += ["## Seeded bugs (power)", "",
                  "| where | bug | flagged | 95 % interval | check that caught it | median p (that check) | median certified ε ≥ |",
                  "|---|---|---:|---|---|---:|---|"]
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
        "them so, so the declaration cannot be Poisson. The opacus row runs the accounting check only (exact, no α): an "
        "opacus run records neither client releases nor its batches, and `check` lists what the other checks needed — "
        "its 0 false flags say that the exact check does not misfire, not that the statistical ones hold their level. "
        "The local-DP rows run the randomness check on the clients' own releases (conservative p-values), and the "
        "accounting check. Flower's four wrappers draw the same noise for the same seed (Flower's `np.random`, seeded "
        "from it), so their false flags fall on the same seeds: four rows, about one measurement. A false-flag interval "
        "that contains α is what a check holding its level gives; only many more runs could show a rate below α.",
        "",
    ]
    return "\n".join(lines)


def _one(task: tuple[int, int, float, str]) -> tuple[int, int, Outcome, float]:
    """Train configuration ``index`` with ``seed`` into a scratch folder, check it, delete it (a worker's job)."""
    index, seed, alpha, scratch = task
    _family, _name, _bug, train = configurations()[index]
    path = Path(scratch) / f"{index}-{seed}"
    started = time.perf_counter()
    try:
        train(path, seed)  # type: ignore[operator]
        found = outcome(path, alpha)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return index, seed, found, time.perf_counter() - started


def _worker_setup() -> None:
    import warnings

    torch.set_num_threads(1)
    quiet_flower()
    warnings.filterwarnings("ignore")


def to_json(rows: list[Row], alpha: float, runs: int, command: str) -> dict:
    """The measured rates, per configuration (``reports/check-bugs.json``)."""
    out = []
    for row in rows:
        flagged = sum(o.flagged for o in row.outcomes)
        low, high = interval(flagged, len(row.outcomes))
        caught = Counter(name for o in row.outcomes for name in o.failed)
        out.append({"family": row.family, "name": row.name, "seeded_bug": row.bug, "runs": len(row.outcomes),
                    "flagged": flagged, "rate": flagged / max(len(row.outcomes), 1), "interval_95": [low, high],
                    "failed_checks": dict(caught), "ran_checks": dict(Counter(n for o in row.outcomes for n in o.ran)),
                    "median_p": {c: _p_text(row, c) for c in caught}, "median_bound": _bound_text(row),
                    "seconds": row.seconds})
    return {"command": command, "alpha": alpha, "runs": runs, "rows": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="seeded runs per configuration (seeds 0..runs−1)")
    parser.add_argument("--false-flag-runs", type=int, default=None,
                        help="seeded runs per correct implementation (default: --runs): a false-flag rate near α needs more")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--only", action="append", default=[], help="family:name (repeatable), e.g. loop:same-seed")
    parser.add_argument("--workers", type=int, default=1, help="processes (each trains and checks whole runs)")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown report here (e.g. reports/check-bugs.md) "
                                                               "and the rates as JSON next to it (.json)")
    args = parser.parse_args(argv)
    _worker_setup()
    started = time.time()
    configs = configurations()
    chosen = [i for i, (family, name, _, _) in enumerate(configs) if not args.only or f"{family}:{name}" in args.only]
    rows = {i: Row(configs[i][0], configs[i][1], configs[i][2]) for i in chosen}
    scratch = Path(tempfile.mkdtemp(prefix="check-bugs-"))
    correct_runs = args.runs if args.false_flag_runs is None else args.false_flag_runs
    tasks = [(i, seed, args.alpha, str(scratch)) for i in chosen
             for seed in range(args.runs if configs[i][2] else correct_runs)]
    try:
        if args.workers > 1:
            import multiprocessing

            with multiprocessing.get_context("spawn").Pool(args.workers, initializer=_worker_setup) as pool:
                results = list(pool.imap(_one, tasks, chunksize=4))
        else:
            results = [_one(task) for task in tasks]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for index, _seed, found, seconds in sorted(results, key=lambda r: (r[0], r[1])):
        rows[index].outcomes.append(found)
        rows[index].seconds += seconds
    for row in rows.values():
        flagged = sum(o.flagged for o in row.outcomes)
        print(f"{row.family:9s} {row.name[:44]:44s} flagged {flagged:3d}/{len(row.outcomes)}  ({row.seconds:.0f} s)", flush=True)
    command = "python benchmarks/check_bugs.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    ordered = [rows[i] for i in chosen]
    text = render(ordered, args.alpha, args.runs, command.strip(), time.time() - started)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(to_json(ordered, args.alpha, args.runs, command.strip()),
                                                            indent=1, ensure_ascii=False) + "\n")
        print(f"written: {args.out} and {args.out.with_suffix('.json')}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
