"""Accounting benchmark: privaudit's accountants next to opacus, dp-accounting and prv-accountant, in one run.

Prints markdown tables and writes them to ``reports/bench/accounting.md``:

1. **Many distinct mechanisms** — 1000 steps whose σ runs from 0.8 to 2.0 (q = 0.01, every step distinct), and the
   same with 100 000 steps: ε and time of privaudit's default (ctd), rdp vs opacus RDP / PRV, dp-accounting RDP /
   PLD and prv-accountant; dp-accounting's PLD (pessimistic, vdi 1e-4) is the reference ("PLD truth").
2. **Calibration** — σ for ε ∈ {1, 3, 8} at q = 0.01, T = 1000, δ = 1e-5: privaudit (default) vs opacus
   ``get_noise_multiplier`` (rdp, prv) and dp-accounting ``calibrate_dp_mechanism`` + PLD; every σ is re-checked
   with dp-accounting's PLD, and compared with the PLD optimum σ* (bisection on dp-accounting's PLD, rtol 2e-4).
3. **Cold start** of ``privaudit compute-epsilon`` vs ``python -c "import numpy, scipy.stats"`` (goal ≤ 1.2×).
4. **Former stalls** — low noise, loose and tiny calibration targets: time and peak memory (ru_maxrss of the
   worker process, imports included) of privaudit's default next to opacus PRV and dp-accounting PLD.
5. **DP-SGD grid** (σ × q × T, δ = 1e-5): ε and median time; ``--quick`` runs 6 representative rows.
6. **Fixed-size batches without replacement** (``fixed``) — σ = 1, q = 0.01, T = 1000 and σ = 0.8, q = 0.1, T = 1000
   under both relations: privaudit's rdp (what ``auto`` answered before ctd had these pairs), ctd (now the
   default), privaudit's pld (dp-accounting's pieces with the same pairs), dp-accounting's own RDP of
   ``SampledWithoutReplacementDpEvent`` and, for contrast, Poisson sampling at the same q.

Every call runs in its own spawned process with a timeout; the timed part is "build the accountant + compute"
after imports; privaudit's caches are cleared before each repeat.

Usage: ``python benchmarks/bench_accounting.py [--quick] [--timeout 120]``; one section alone, spliced into the
existing report in place of its old version: ``python benchmarks/bench_accounting.py --only fixed --splice``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DELTA = 1e-5
GRID = [(s, q, t) for s in (0.8, 1.0, 2.0) for q in (0.01, 0.1, 1.0) for t in (100, 1000, 10000)]
QUICK = [(0.8, 0.01, 100), (1.0, 0.01, 1000), (2.0, 0.1, 10000), (0.8, 0.1, 1000), (1.0, 1.0, 1000), (0.8, 1.0, 10000)]
CAL_Q, CAL_T, CAL_TARGETS = 0.01, 1000, (1.0, 3.0, 8.0)
FIXED_TITLE = "## Fixed-size batches without replacement: tight pairs (ctd) vs RDP"


def _distinct(n: int) -> list[tuple[float, float, int]]:
    import numpy as np

    return [(float(s), 0.01, 1) for s in np.linspace(0.8, 2.0, n)]


# ------------------------------------------------------------------------------------------------
# one timed computation per library (run inside a worker process)
# ------------------------------------------------------------------------------------------------
def _privaudit(name: str, schedule) -> float:
    from privaudit.accounting import Composition, Gaussian, SubsampledGaussian
    from privaudit.accounting.accountants import get_accountant
    from privaudit.accounting.rdp import clear_cache

    clear_cache()
    comp = Composition([(Gaussian(s) if q >= 1 else SubsampledGaussian(s, q), t) for s, q, t in schedule])
    res = get_accountant(name).epsilon(comp, DELTA)
    return res.epsilon, res.accountant


def _privaudit_calibrate(target: float):
    from privaudit.accounting import Composition, SubsampledGaussian
    from privaudit.accounting.calibrate import calibrate_noise
    from privaudit.accounting.rdp import clear_cache

    clear_cache()
    cal = calibrate_noise(lambda s: Composition.of(SubsampledGaussian(s, CAL_Q), CAL_T), target, DELTA)
    return cal.noise_multiplier, cal.accountant


def _privaudit_calibrate_args(args):
    """(q, T, target): privaudit's default calibration (for the former-stall rows)."""
    from privaudit.accounting import Composition, SubsampledGaussian
    from privaudit.accounting.calibrate import calibrate_noise

    q, steps, target = args
    cal = calibrate_noise(lambda s: Composition.of(SubsampledGaussian(s, q), steps), target, DELTA)
    return cal.noise_multiplier, cal.accountant


def _opacus(kind: str, schedule):
    from opacus.accountants import PRVAccountant, RDPAccountant

    acct = RDPAccountant() if kind == "rdp" else PRVAccountant()
    acct.history = [(s, q, t) for s, q, t in schedule]
    return float(acct.get_epsilon(delta=DELTA)), kind


def _opacus_calibrate(kind: str, args):
    from opacus.accountants.utils import get_noise_multiplier

    q, steps, target = args
    return float(get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q, steps=steps,
                                      accountant=kind)), kind


def _dp_event(schedule):
    import dp_accounting

    events = []
    for s, q, t in schedule:
        event = dp_accounting.GaussianDpEvent(s) if q >= 1 else dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s))
        events.append(dp_accounting.SelfComposedDpEvent(event, t) if t > 1 else event)
    return dp_accounting.ComposedDpEvent(events) if len(events) > 1 else events[0]


def _dp_accounting(kind: str, schedule):
    from dp_accounting.pld import PLDAccountant
    from dp_accounting.rdp import RdpAccountant

    acct = RdpAccountant() if kind == "rdp" else PLDAccountant()
    acct.compose(_dp_event(schedule))
    return float(acct.get_epsilon(DELTA)), kind


def _dp_calibrate(args):
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    q, steps, target = args
    sigma = dp_accounting.calibrate_dp_mechanism(
        PLDAccountant, lambda s: dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), steps),
        target, DELTA, dp_accounting.LowerEndpointAndGuess(0.3, 1.0), tol=1e-3)
    return float(sigma), "pld"


def _pld_epsilon(args):
    """dp-accounting's pessimistic PLD (vdi 1e-4) at (σ, q, T): the re-check of a calibrated σ."""
    sigma, q, steps = args
    return _dp_accounting("pld", [(sigma, q, steps)])


def _prv_accountant(schedule):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    prvs = [PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=s) for s, q, _ in schedule]
    counts = [t for *_, t in schedule]
    acct = PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=0.1, delta_error=DELTA / 1000)
    return float(acct.compute_epsilon(delta=DELTA, num_self_compositions=counts)[2]), "upper"


FIXED = [(1.0, 0.01, 1000), (0.8, 0.1, 1000)]
FIXED_N = 60_000  # dataset size for dp-accounting's SampledWithoutReplacementDpEvent (q·n records per batch)


def _privaudit_sampled(args):
    """(accountant, σ, q, T, relation, sampling): privaudit on one subsampled-Gaussian composition."""
    from privaudit.accounting import Composition, SubsampledGaussian
    from privaudit.accounting.accountants import get_accountant
    from privaudit.accounting.rdp import clear_cache

    name, sigma, q, steps, relation, sampling = args
    clear_cache()
    res = get_accountant(name).epsilon(Composition.of(SubsampledGaussian(sigma, q, sampling), steps, relation), DELTA)
    return res.epsilon, res.accountant


def _dp_accounting_wor_rdp(args):
    """dp-accounting's RDP of SampledWithoutReplacementDpEvent (its base Gaussian has sensitivity 1, #378)."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    sigma, q, steps = args
    event = dp_accounting.SampledWithoutReplacementDpEvent(FIXED_N, round(q * FIXED_N), dp_accounting.GaussianDpEvent(sigma))
    acct = RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    acct.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return float(acct.get_epsilon(DELTA)), "rdp"


def _dp_attained(args):
    """A lower bound on the fixed-size truth: D = {x, x', …, x'} vs D' = {x', …, x'} attains
    ((1 − q)·N(0, σ²) + q·N(2, σ²), N(0, σ²)) at every step; dp-accounting's *optimistic* PLD of it (both directions)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    sigma, q, steps = args
    pld = pld_lib.from_gaussian_mechanism(sigma / 2, sampling_prob=q, pessimistic_estimate=False, use_connect_dots=False,
                                          value_discretization_interval=1e-4)
    return float(pld.self_compose(steps).get_epsilon_for_delta(DELTA)), "optimistic"


CALLS = {
    "privaudit default": lambda a: _privaudit("auto", a),
    "privaudit ctd": lambda a: _privaudit("ctd", a),
    "privaudit rdp": lambda a: _privaudit("rdp", a),
    "opacus RDP": lambda a: _opacus("rdp", a),
    "opacus PRV": lambda a: _opacus("prv", a),
    "dp_acc RDP": lambda a: _dp_accounting("rdp", a),
    "dp_acc PLD": lambda a: _dp_accounting("pld", a),
    "prv_acc (0.1)": _prv_accountant,
    "privaudit calibrate": _privaudit_calibrate,
    "privaudit calibrate args": _privaudit_calibrate_args,
    "opacus calibrate rdp": lambda a: _opacus_calibrate("rdp", a),
    "opacus calibrate prv": lambda a: _opacus_calibrate("prv", a),
    "dp_acc calibrate PLD": _dp_calibrate,
    "dp_acc PLD at": _pld_epsilon,
    "privaudit sampled": _privaudit_sampled,
    "dp_acc RDP w/o replacement": _dp_accounting_wor_rdp,
    "dp_acc attained": _dp_attained,
}
IMPORTS = {
    "privaudit": "import privaudit.accounting.accountants, privaudit.accounting.calibrate",
    "opacus": "import opacus.accountants, opacus.accountants.utils",
    "dp_acc": "import dp_accounting, dp_accounting.pld, dp_accounting.rdp",
    "prv_acc": "import prv_accountant",
}


def _worker(label: str, arg, repeats: int, queue) -> None:
    import resource

    warnings.simplefilter("ignore")
    try:
        for key, stmt in IMPORTS.items():
            if label.startswith(key):
                exec(stmt)
        times, value = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            value = CALLS[label](arg)
            times.append(time.perf_counter() - t0)
            if times[-1] > 1.0:
                break
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        queue.put(("ok", value, statistics.median(times), peak))
    except MemoryError:
        queue.put(("fail", "MemoryError", None, None))
    except Exception as exc:
        queue.put(("fail", f"{type(exc).__name__}: {' '.join(str(exc).split())[:90]}", None, None))


def timed(label: str, arg, repeats: int, timeout: float):
    """(value, seconds, peak bytes, error) of one call in a fresh process."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(label, arg, repeats, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return None, None, None, f"timeout > {timeout:g} s"
    if queue.empty():
        return None, None, None, f"crashed (exit {proc.exitcode})"
    status, value, seconds, peak = queue.get()
    return (value, seconds, peak, None) if status == "ok" else (None, None, None, value)


def fmt_eps(v):
    if v is None:
        return "—"
    v = v[0] if isinstance(v, tuple) else v
    return f"{v:.4g}" if v < 1000 else f"{v:.1f}"


def fmt_t(t):
    return "—" if t is None else (f"{t * 1000:.1f} ms" if t < 1 else f"{t:.2f} s")


def fmt_mem(b):
    return "—" if b is None else f"{b / 1e6:.0f} MB"


def _say(lines: list[str]) -> None:
    print("\n".join(lines), flush=True)


# ------------------------------------------------------------------------------------------------
def bench_distinct(timeout: float, reference_timeout: float) -> list[str]:
    lines = ["| workload | accountant | ε | vs dp_acc PLD | time |", "|---|---|---|---|---|"]
    schedule = _distinct(1000)
    results = {}
    for label in ("dp_acc PLD", "privaudit default", "privaudit rdp", "opacus RDP", "opacus PRV", "dp_acc RDP", "prv_acc (0.1)"):
        value, seconds, _, error = timed(label, schedule, repeats=3, timeout=reference_timeout if label == "dp_acc PLD" else timeout)
        results[label] = value[0] if value else None
        ref = results.get("dp_acc PLD")
        rel = "" if value is None or ref is None else f"{100 * (value[0] / ref - 1):+.2f} %"
        who = f" ({value[1]})" if value and label.startswith("privaudit") else ""
        lines.append(f"| 1000 steps, distinct σ | {label}{who} | {fmt_eps(value) if not error else 'FAIL'} | {rel} | {error or fmt_t(seconds)} |")
        _say(lines[-1:])
    big = _distinct(100_000)
    for label in ("privaudit default", "privaudit rdp"):
        value, seconds, _, error = timed(label, big, repeats=1, timeout=timeout)
        who = f" ({value[1]})" if value else ""
        lines.append(f"| 100 000 steps, distinct σ | {label}{who} | {fmt_eps(value) if not error else 'FAIL'} | | {error or fmt_t(seconds)} |")
        _say(lines[-1:])
    lines.append("| 100 000 steps, distinct σ | opacus / dp_acc / prv_acc | not run (each distinct step costs them 0.01–0.1 s: "
                 "≥ 1000 s extrapolated from the 1000-step row) | | |")
    return lines


def _sigma_star(q: float, steps: int, target: float, start: float, timeout: float) -> tuple[float | None, int]:
    """The PLD optimum: bisection on dp-accounting's PLD ε(σ) (vdi 1e-4) to relative 2e-4 around ``start``."""
    lo, hi = start * 0.97, start * 1.03
    evals = 0

    def eps(s):
        nonlocal evals
        evals += 1
        value, _, _, error = timed("dp_acc PLD at", (s, q, steps), 1, timeout)
        if error:
            raise RuntimeError(error)
        return value[0]

    try:
        while eps(lo) <= target:
            lo *= 0.97
        while eps(hi) > target:
            hi *= 1.03
        while hi / lo - 1 > 2e-4:
            mid = (lo * hi) ** 0.5
            if eps(mid) <= target:
                hi = mid
            else:
                lo = mid
    except RuntimeError:
        return None, evals
    return hi, evals


def bench_calibration(timeout: float) -> list[str]:
    lines = [f"q = {CAL_Q}, T = {CAL_T}, δ = {DELTA:g}. σ* = smallest σ with dp-accounting PLD ε ≤ target (bisection, rtol 2e-4); "
             "'PLD ε at σ' re-checks each answer with dp-accounting's pessimistic PLD (vdi 1e-4).", "",
             "| target ε | method | σ | σ / σ* | PLD ε at σ | time |", "|---|---|---|---|---|---|"]
    for target in CAL_TARGETS:
        ours, ours_t, _, ours_err = timed("privaudit calibrate", target, 1, timeout)
        star, _ = _sigma_star(CAL_Q, CAL_T, target, ours[0] if ours else 1.0, timeout)
        rows = [("privaudit default", ours, ours_t, ours_err)]
        for label in ("opacus calibrate rdp", "opacus calibrate prv", "dp_acc calibrate PLD"):
            value, seconds, _, error = timed(label, (CAL_Q, CAL_T, target), 1, timeout)
            rows.append((label.replace(" calibrate", " get_noise_multiplier" if "opacus" in label else " calibrate_dp_mechanism +"),
                         value, seconds, error))
        for name, value, seconds, error in rows:
            if error:
                lines.append(f"| {target:g} | {name} | FAIL ({error}) | | | |")
                continue
            sigma = value[0]
            check, _, _, _ = timed("dp_acc PLD at", (sigma, CAL_Q, CAL_T), 1, timeout)
            ratio = "—" if star is None else f"{sigma / star:.4f}"
            flag = "" if check is None or check[0] <= target * (1 + 1e-9) else " ⚠️ misses the target"
            lines.append(f"| {target:g} | {name}{f' ({value[1]})' if name.startswith('privaudit') else ''} | {sigma:.5g} | {ratio} | "
                         f"{'—' if check is None else f'{check[0]:.4f}'}{flag} | {fmt_t(seconds)} |")
            _say(lines[-1:])
    return lines


def bench_cold_start(repeats: int = 5) -> list[str]:
    exe = [sys.executable, "-m", "privaudit"]
    base_name = "python -c 'import numpy, scipy.stats'"
    commands = {
        base_name: [sys.executable, "-c", "import numpy, scipy.stats"],
        "privaudit compute-epsilon --help": [*exe, "compute-epsilon", "--help"],
        "privaudit compute-epsilon gaussian (exact)": [*exe, "compute-epsilon", "--mechanism", "gaussian", "--noise-multiplier", "6.37",
                                                       "--steps", "150", "--delta", "1e-3", "--json"],
        "privaudit compute-epsilon DP-SGD --accountant rdp": [*exe, "compute-epsilon", "--mechanism", "subsampled-gaussian",
                                                             "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1000",
                                                             "--delta", "1e-5", "--json", "--accountant", "rdp"],
        "privaudit compute-epsilon DP-SGD (default)": [*exe, "compute-epsilon", "--mechanism", "subsampled-gaussian",
                                                      "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1000",
                                                      "--delta", "1e-5", "--json"],
        "privaudit compute-epsilon DP-SGD --accountant prv": [*exe, "compute-epsilon", "--mechanism", "subsampled-gaussian",
                                                            "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1000",
                                                            "--delta", "1e-5", "--json", "--accountant", "prv"],
    }
    walls: dict[str, list[float]] = {k: [] for k in commands}
    cpus: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(repeats):  # interleaved, so load changes hit every command alike
        for name, cmd in commands.items():
            before = os.times()
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, cwd=ROOT)
            walls[name].append(time.perf_counter() - t0)
            after = os.times()
            cpus[name].append((after.children_user - before.children_user) + (after.children_system - before.children_system))
    base_wall, base_cpu = statistics.median(walls[base_name]), statistics.median(cpus[base_name])
    lines = ["| command | median wall | ratio | median CPU | ratio |", "|---|---|---|---|---|"]
    for name in commands:
        w, c = statistics.median(walls[name]), statistics.median(cpus[name])
        lines.append(f"| `{name}` | {w:.2f} s | {w / base_wall:.2f}× | {c:.2f} s | {c / base_cpu:.2f}× |")
    return lines


STALLS = [
    ("ε: σ = 0.01, q = 0.5, T = 1000", "eps", [(0.01, 0.5, 1000)]),
    ("ε: σ = 0.05, q = 0.01, T = 1000", "eps", [(0.05, 0.01, 1000)]),
    ("ε: σ = 1e4, q = 0.5, T = 10 (tiny ε)", "eps", [(1e4, 0.5, 10)]),
    ("calibrate ε = 1e4 (q = 0.5, T = 1000)", "cal", (0.5, 1000, 1e4)),
    ("calibrate ε = 1e6 (q = 0.5, T = 1000)", "cal", (0.5, 1000, 1e6)),
    ("calibrate ε = 1e-4 (q = 0.01, T = 1)", "cal", (0.01, 1, 1e-4)),
]


def bench_stalls(timeout: float) -> list[str]:
    lines = [f"Each cell: answer, time, peak memory of the worker (imports included); peers get {timeout:g} s.", "",
             "| input | privaudit default | opacus PRV | dp_acc PLD |", "|---|---|---|---|"]
    for name, kind, arg in STALLS:
        cells = []
        labels = ("privaudit default", "opacus PRV", "dp_acc PLD") if kind == "eps" else \
            ("privaudit calibrate args", "opacus calibrate prv", "dp_acc calibrate PLD")
        for label in labels:
            value, seconds, peak, error = timed(label, arg, 1, timeout)
            if error:
                cells.append(f"FAIL ({error})")
            else:
                what = f"σ = {value[0]:.4g}" if kind == "cal" else f"ε = {fmt_eps(value)}"
                who = f" [{value[1]}]" if label.startswith("privaudit") else ""
                cells.append(f"{what}{who}, {fmt_t(seconds)}, {fmt_mem(peak)}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        _say(lines[-1:])
    return lines


def bench_grid(rows, timeout: float) -> tuple[list[str], dict]:
    labels = ["privaudit rdp", "privaudit default", "opacus RDP", "opacus PRV", "dp_acc RDP", "dp_acc PLD"]
    lines = ["| σ | q | T | " + " | ".join(labels) + " |", "|---|---|---|" + "---|" * len(labels)]
    checks = {"rdp_not_slower": [], "default_within": [], "default_answered": []}
    for sigma, q, steps in rows:
        cells, res = [], {}
        for label in labels:
            value, seconds, _, error = timed(label, [(sigma, q, steps)], repeats=5, timeout=timeout)
            res[label] = (value[0] if value else None, seconds)
            cells.append(f"FAIL ({error})" if error else f"{fmt_eps(value)} ({fmt_t(seconds)})")
        lines.append(f"| {sigma} | {q} | {steps} | " + " | ".join(cells) + " |")
        _say(lines[-1:])
        ours_t, opacus_t = res["privaudit rdp"][1], res["opacus RDP"][1]
        checks["rdp_not_slower"].append(ours_t is not None and (opacus_t is None or ours_t <= opacus_t))
        default, pld = res["privaudit default"][0], res["dp_acc PLD"][0]
        checks["default_answered"].append(default is not None)
        if pld is not None and default is not None:
            checks["default_within"].append((default - pld) / pld)
    return lines, checks


def bench_fixed(timeout: float) -> list[str]:
    lines = ["A batch of b = q·n records drawn uniformly without replacement, n fixed. Pairs (privaudit.accounting.pairs): "
             "replace-one — the symmetrisation of ((1 − q)·N(0, σ²) + q·N(2, σ²), N(0, σ²)); add/remove (b fixed, so an "
             "added record displaces another) — that pair in both directions, i.e. the Poisson add/remove pair at σ/2. "
             "Before this section existed `auto` answered replace-one with rdp (Wang, Balle & Kasiviswanathan 2019) "
             "and refused add/remove (every accountant did); rdp now answers add/remove with Mironov et al.'s RDP at σ/2.", "",
             "| σ | q | T | relation | method | ε | vs ctd | time |", "|---|---|---|---|---|---|---|---|"]
    for sigma, q, steps in FIXED:
        for relation in ("replace_one", "add_remove"):
            rel = relation.replace("_", "-")
            rdp_label = "privaudit rdp (what auto answered before)" if relation == "replace_one" else \
                "privaudit rdp (before: refused; now MTZ at σ/2)"
            rows = [("privaudit default (now)", "privaudit sampled", ("auto", sigma, q, steps, relation, "fixed_size")),
                    (rdp_label, "privaudit sampled", ("rdp", sigma, q, steps, relation, "fixed_size")),
                    ("privaudit pld (dp-accounting's pieces, same pairs)", "privaudit sampled", ("pld", sigma, q, steps, relation, "fixed_size"))]
            if relation == "replace_one":
                rows.append(("dp_acc RDP of SampledWithoutReplacementDpEvent (base sensitivity 1, #378: not a bound for clipped sums)",
                             "dp_acc RDP w/o replacement", (sigma, q, steps)))
            rows.append(("lower bound: what fixed datasets attain (dp_acc optimistic PLD of the pair at σ/2)", "dp_acc attained",
                         (sigma, q, steps)))
            rows.append((f"Poisson at the same q, {rel} (privaudit default)", "privaudit sampled", ("auto", sigma, q, steps, relation, "poisson")))
            ours = None
            for name, label, arg in rows:
                value, seconds, _, error = timed(label, arg, repeats=3, timeout=timeout)
                if ours is None:
                    ours = value[0] if value else float("nan")
                    rel_text = ""
                else:
                    rel_text = "" if value is None else f"{100 * (value[0] / ours - 1):+.2f} %"
                who = f" [{value[1]}]" if value and label.startswith("privaudit") else ""
                lines.append(f"| {sigma} | {q} | {steps} | {rel} | {name}{who} | "
                             f"{fmt_eps(value) if not error else 'FAIL'} | {rel_text} | {error or fmt_t(seconds)} |")
                _say(lines[-1:])
    return lines


def splice(path: Path, new_sections: list[tuple[str, list[str]]]) -> str:
    """The report at ``path`` with each ``## title`` section replaced by its new lines (appended if absent)."""
    text = path.read_text() if path.exists() else "# Accounting benchmark\n"
    lines = text.rstrip("\n").split("\n")
    for title, body in new_sections:
        block = [title, "", *body, ""]
        try:
            start = lines.index(title)
        except ValueError:
            lines += ["", *block] if lines and lines[-1] else block
            continue
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = block
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 representative grid rows instead of 27")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per peer call")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: distinct,calibration,cold,stalls,grid,fixed")
    parser.add_argument("--only", default="", help="comma-separated sections to run (all others skipped)")
    parser.add_argument("--splice", action="store_true",
                        help="replace only the sections that ran in the existing report (keeping the rest)")
    parser.add_argument("--reference-timeout", type=float, default=900.0, help="seconds for dp-accounting's PLD reference runs")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "accounting.md", help="markdown file to write")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if args.only:
        skip |= {"distinct", "calibration", "cold", "stalls", "grid", "fixed"} - set(args.only.split(","))

    import numpy
    import scipy

    versions = []
    for module in ("opacus", "dp_accounting", "prv_accountant"):
        try:
            from importlib.metadata import version

            versions.append(f"{module} {version(module.replace('_', '-'))}")
        except Exception:  # pragma: no cover - reporting only
            versions.append(f"{module} (not installed)")
    out = ["# Accounting benchmark", "",
           f"δ = {DELTA:g}. Machine: {mp.cpu_count()} cores ({platform.processor() or platform.machine()}), shared with other jobs "
           f"while this ran; Python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}, {', '.join(versions)}.",
           f"Command: `python benchmarks/bench_accounting.py{' --quick' if args.quick else ''}"
           f"{f' --skip {args.skip}' if args.skip else ''}` ({time.strftime('%Y-%m-%d')}).", ""]
    def grid_section() -> list[str]:
        grid_lines, checks = bench_grid(QUICK if args.quick else GRID, args.timeout)
        n = len(checks["default_answered"])
        within = checks["default_within"]
        return [*grid_lines, "",
                f"- privaudit rdp at least as fast as opacus RDP: {sum(checks['rdp_not_slower'])}/{n} rows",
                f"- privaudit default answered: {sum(checks['default_answered'])}/{n} rows",
                (f"- privaudit default vs dp-accounting PLD where PLD finished ({len(within)} rows): "
                 f"from {100 * min(within):+.3f} % to {100 * max(within):+.3f} %" if within else "- no PLD reference finished")]

    sections = [
        ("distinct", "## Many distinct mechanisms (per-step noise schedules)", lambda: bench_distinct(args.timeout, args.reference_timeout)),
        ("calibration", "## Calibration: σ for a target ε", lambda: bench_calibration(args.timeout)),
        ("cold", "## Cold start (whole process)", bench_cold_start),
        ("stalls", "## Former stalls: low noise, loose and tiny targets", lambda: bench_stalls(min(args.timeout, 60.0))),
        ("grid", "## DP-SGD grid: ε (time)", grid_section),
        ("fixed", FIXED_TITLE, lambda: bench_fixed(args.timeout)),
    ]
    ran: list[tuple[str, list[str]]] = []
    for key, title, run in sections:
        if key in skip:
            continue
        print(f"== {title}", flush=True)
        body = run()
        ran.append((title, body))
        out += [title, "", *body, ""]
    target = args.out
    target.parent.mkdir(parents=True, exist_ok=True)
    if args.splice:  # keep the rest of the report; say when and how the spliced sections were measured
        command = f"python benchmarks/bench_accounting.py --only {','.join(k for k, *_ in sections if k not in skip)} --splice"
        stamp = f"Measured {time.strftime('%Y-%m-%d')} with `{command}` (machine as above)."
        target.write_text(splice(target, [(title, [*body, "", stamp]) for title, body in ran]))
    else:
        target.write_text("\n".join(out) + "\n")
    print("\n".join(out))
    print(f"\nwritten to {target}")


if __name__ == "__main__":
    main()
