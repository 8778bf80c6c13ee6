"""Accounting benchmark: privaudit's accountants next to opacus and dp-accounting, measured in one run.

Prints markdown tables and writes them to ``reports/bench/accounting.md``:

1. the DP-SGD grid σ ∈ {0.8, 1, 2} × q ∈ {0.01, 0.1, 1} × T ∈ {100, 1000, 10000}, δ = 1e-5: ε and median time
   for privaudit rdp / privaudit default (auto: prv → pld → rdp) vs opacus RDP / PRV and dp-accounting RDP / PLD;
2. targets checked on that grid: privaudit rdp at least as fast as opacus RDP on every row; privaudit's
   default answer within 1 % of dp-accounting PLD wherever PLD finishes, and an answer on every row;
3. cold start of ``privaudit compute-epsilon`` vs ``python -c "import numpy, scipy.stats"``;
4. heterogeneous schedule (1000 steps, σ from 0.8 to 2.0, q = 0.01) and per-client ε of 1000 clients with
   distinct noise: privaudit rdp vs the peers.

Every peer call runs in its own subprocess with a timeout (some take minutes or exhaust memory); the timed
part is "build the accountant + compute ε" after imports; privaudit's caches are cleared before each repeat.

Usage: ``python benchmarks/bench_accounting.py [--quick] [--full] [--timeout 120]``
(``--quick``: a 6-row subset; ``--full``: also PLD and prv-accountant on the heterogeneous schedule, ~10 min).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
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


# ------------------------------------------------------------------------------------------------
# one timed computation per library (run inside a worker process)
# ------------------------------------------------------------------------------------------------
def _privaudit(name: str, schedule: list[tuple[float, float, int]]) -> float:
    from privaudit.accounting import Composition, Gaussian, SubsampledGaussian
    from privaudit.accounting.accountants import get_accountant
    from privaudit.accounting.rdp import clear_cache

    clear_cache()
    comp = Composition([(Gaussian(s) if q >= 1 else SubsampledGaussian(s, q), t) for s, q, t in schedule])
    return get_accountant(name).epsilon(comp, DELTA).epsilon


def _privaudit_clients(sigmas: list[float]) -> float:
    from privaudit.accounting import SubsampledGaussian
    from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
    from privaudit.accounting.rdp import clear_cache

    clear_cache()
    ledger = PrivacyLedger()
    for i, s in enumerate(sigmas):
        ledger.record(PrivacyEvent(i, 1, SubsampledGaussian(s, 0.01), count=100))
    return ledger.summary(DELTA, accountant="rdp").max_epsilon


def _opacus(kind: str, schedule: list[tuple[float, float, int]]) -> float:
    from opacus.accountants import PRVAccountant, RDPAccountant

    acct = RDPAccountant() if kind == "rdp" else PRVAccountant()
    acct.history = [(s, q, t) for s, q, t in schedule]
    return float(acct.get_epsilon(delta=DELTA))


def _dp_accounting(kind: str, schedule: list[tuple[float, float, int]]) -> float:
    import dp_accounting
    from dp_accounting.pld import PLDAccountant
    from dp_accounting.rdp import RdpAccountant

    acct = RdpAccountant() if kind == "rdp" else PLDAccountant()
    for s, q, t in schedule:
        event = dp_accounting.GaussianDpEvent(s) if q >= 1 else dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s))
        acct.compose(event, t)
    return float(acct.get_epsilon(DELTA))


def _prv_accountant(schedule: list[tuple[float, float, int]]) -> float:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    prvs = [PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=s) for s, q, _ in schedule]
    counts = [t for *_, t in schedule]
    acct = PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=0.1, delta_error=DELTA / 1000)
    return float(acct.compute_epsilon(delta=DELTA, num_self_compositions=counts)[1])


CALLS = {
    "privaudit rdp": lambda sch: _privaudit("rdp", sch),
    "privaudit default": lambda sch: _privaudit("auto", sch),
    "opacus RDP": lambda sch: _opacus("rdp", sch),
    "opacus PRV": lambda sch: _opacus("prv", sch),
    "dp_acc RDP": lambda sch: _dp_accounting("rdp", sch),
    "dp_acc PLD": lambda sch: _dp_accounting("pld", sch),
    "prv_acc (0.1)": _prv_accountant,
    "privaudit clients": _privaudit_clients,
}
IMPORTS = {
    "privaudit": "import privaudit.accounting.accountants",
    "opacus": "import opacus.accountants",
    "dp_acc": "import dp_accounting, dp_accounting.pld, dp_accounting.rdp",
    "prv_acc": "import prv_accountant",
}


def _worker(label: str, arg, repeats: int, queue) -> None:
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
        queue.put(("ok", value, statistics.median(times)))
    except MemoryError:
        queue.put(("fail", "MemoryError", None))
    except Exception as exc:
        queue.put(("fail", f"{type(exc).__name__}: {str(exc)[:60]}", None))


def timed(label: str, arg, repeats: int, timeout: float):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(label, arg, repeats, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return None, None, f"timeout > {timeout:g} s"
    if queue.empty():
        return None, None, f"crashed (exit {proc.exitcode})"
    status, value, seconds = queue.get()
    return (value, seconds, None) if status == "ok" else (None, None, value)


def fmt_eps(v):
    return "—" if v is None else (f"{v:.4g}" if v < 1000 else f"{v:.1f}")


def fmt_t(t):
    return "—" if t is None else (f"{t * 1000:.1f} ms" if t < 1 else f"{t:.2f} s")


# ------------------------------------------------------------------------------------------------
def bench_grid(rows, timeout: float) -> tuple[list[str], dict]:
    labels = ["privaudit rdp", "privaudit default", "opacus RDP", "opacus PRV", "dp_acc RDP", "dp_acc PLD"]
    lines = ["| σ | q | T | " + " | ".join(labels) + " |", "|---|---|---|" + "---|" * len(labels)]
    checks = {"rdp_not_slower": [], "default_within_1pct": [], "default_answered": []}
    for sigma, q, steps in rows:
        cells, res = [], {}
        for label in labels:
            value, seconds, error = timed(label, [(sigma, q, steps)], repeats=5, timeout=timeout)
            res[label] = (value, seconds)
            cells.append(f"FAIL ({error})" if error else f"{fmt_eps(value)} ({fmt_t(seconds)})")
        lines.append(f"| {sigma} | {q} | {steps} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
        ours_t, opacus_t = res["privaudit rdp"][1], res["opacus RDP"][1]
        checks["rdp_not_slower"].append(ours_t is not None and (opacus_t is None or ours_t <= opacus_t))
        default, pld = res["privaudit default"][0], res["dp_acc PLD"][0]
        checks["default_answered"].append(default is not None)
        if pld is not None and default is not None:
            checks["default_within_1pct"].append(abs(default - pld) <= 0.01 * pld)
    return lines, checks


def bench_cold_start(repeats: int = 5) -> list[str]:
    exe = [sys.executable, "-m", "privaudit"]
    commands = {
        "python -c 'import numpy, scipy.stats'": [sys.executable, "-c", "import numpy, scipy.stats"],
        "privaudit compute-epsilon --help": [*exe, "compute-epsilon", "--help"],
        "privaudit compute-epsilon gaussian (exact)": [*exe, "compute-epsilon", "--mechanism", "gaussian", "--noise-multiplier", "6.37",
                                                       "--steps", "150", "--delta", "1e-3", "--json"],
        "privaudit compute-epsilon DP-SGD --accountant rdp": [*exe, "compute-epsilon", "--mechanism", "subsampled-gaussian",
                                                             "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1000",
                                                             "--delta", "1e-5", "--json", "--accountant", "rdp"],
        "privaudit compute-epsilon DP-SGD (default: prv)": [*exe, "compute-epsilon", "--mechanism", "subsampled-gaussian",
                                                           "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1000",
                                                           "--delta", "1e-5", "--json"],
    }
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(repeats):  # interleaved, so load changes hit every command alike
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, cwd=ROOT)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["python -c 'import numpy, scipy.stats'"])
    lines = ["| command | median wall time | ratio to numpy+scipy.stats import |", "|---|---|---|"]
    for name, ts in times.items():
        med = statistics.median(ts)
        lines.append(f"| `{name}` | {med:.2f} s | {med / base:.2f}× |")
    return lines


def bench_heterogeneous(timeout: float, full: bool) -> list[str]:
    import numpy as np

    sigmas = [float(s) for s in np.linspace(0.8, 2.0, 1000)]
    schedule = [(s, 0.01, 1) for s in sigmas]
    labels = ["privaudit rdp", "opacus RDP", "dp_acc RDP"] + (["dp_acc PLD", "prv_acc (0.1)", "privaudit default"] if full else [])
    lines = ["| workload | accountant | ε | time |", "|---|---|---|---|"]
    for label in labels:
        value, seconds, error = timed(label, schedule, repeats=3, timeout=timeout if not full else 900)
        lines.append(f"| 1000 steps, distinct σ | {label} | {fmt_eps(value) if not error else 'FAIL'} | {error if error else fmt_t(seconds)} |")
        print(lines[-1], flush=True)
    value, seconds, error = timed("privaudit clients", sigmas, repeats=3, timeout=timeout)
    lines.append(f"| 1000 clients × 100 steps, distinct σ (max ε) | privaudit rdp ledger | {fmt_eps(value)} | {error if error else fmt_t(seconds)} |")
    # the same per-client work with opacus: one RDPAccountant per client
    value2, seconds2, error2 = timed("opacus RDP", [(sigmas[0], 0.01, 100)], repeats=3, timeout=timeout)
    if not error2:
        lines.append(f"| 1000 clients × 100 steps (opacus: 1000 × one client, extrapolated) | opacus RDP | {fmt_eps(value2)} (client 0) | ≈ {fmt_t(1000 * seconds2)} |")
    print("\n".join(lines[-2:]), flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 representative grid rows instead of 27")
    parser.add_argument("--full", action="store_true", help="also run the slow peers on the heterogeneous schedule")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per peer call")
    args = parser.parse_args()

    out = ["# Accounting benchmark", "", f"δ = {DELTA:g}; median wall time of build-and-compute after imports, each library in its own process.",
           f"Machine: {mp.cpu_count()} cores; Python {sys.version.split()[0]}.", ""]
    print("== DP-SGD grid", flush=True)
    grid_lines, checks = bench_grid(QUICK if args.quick else GRID, args.timeout)
    out += ["## DP-SGD grid: ε (time)", "", *grid_lines, ""]
    n = len(checks["default_answered"])
    out += [
        "## Targets on the grid",
        "",
        f"- privaudit rdp at least as fast as opacus RDP: {sum(checks['rdp_not_slower'])}/{n} rows",
        f"- privaudit default within 1 % of dp-accounting PLD: {sum(checks['default_within_1pct'])}/{len(checks['default_within_1pct'])} rows where PLD finished",
        f"- privaudit default answered: {sum(checks['default_answered'])}/{n} rows",
        "",
    ]
    print("== cold start", flush=True)
    out += ["## Cold start", "", *bench_cold_start(), ""]
    print("\n".join(out[-8:]), flush=True)
    print("== heterogeneous", flush=True)
    out += ["## Heterogeneous schedules and per-client ledgers", "", *bench_heterogeneous(args.timeout, args.full), ""]
    target = ROOT / "reports" / "bench" / "accounting.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(out) + "\n")
    print("\n".join(out))
    print(f"\nwritten to {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
