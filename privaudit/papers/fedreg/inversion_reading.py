"""The sentences and rows of the inversion evidence page (:func:`privaudit.papers.fedreg.pages.inversion_page`).

FedReg audit points R1, R2, R4, R5 (listed in the README; FedReg, 002 §4.5 and App. B.4's one-example updates): every
sentence is computed from the measured records of an ``inversion-evidence`` result and the update anatomy
(:mod:`privaudit.papers.fedreg.update_anatomy`) — what FedReg's regulariser (eq. 10) and MG (eq. 12) each do under
the naive and the adaptive attacks, and whether an adaptive attack inverts plain FedReg at all; no fixed conclusions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def image_mean(values: Sequence[float]) -> float | None:
    """The mean, ``inf`` if any value is infinite (exact recovery), ``None`` for no values."""
    finite = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    return float(sum(values) / len(values)) if len(finite) == len(values) else float("inf")


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def fmt_epsilon(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:.3g}"


def _attack(record: dict[str, Any]) -> str:
    """The attack's short name (``analytic``, ``ig``, ``adaptive``) from its label (``ig (naive)``, …)."""
    return str(record["attack"]).split(" ")[0]


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else ''}{value:.1f}"


def _range(values: Sequence[float], digits: int = 3) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}g}" if f"{low:.{digits}g}" == f"{high:.{digits}g}" else f"{low:.{digits}g}–{high:.{digits}g}"


def _landscape_sentence(landscape: Sequence[dict[str, Any]]) -> str:
    """The matching objective the adaptive attack descends on plain FedReg, against FedAvg's (update anatomy)."""

    def values(model: str, key: str) -> list[float]:
        return [v for entry in landscape for v in (entry[model][key] if isinstance(entry[model][key], list)
                                                    else [entry[model][key]])]

    def mean_abs(model: str, key: str) -> float:
        found = values(model, key)
        return sum(abs(v) for v in found) / len(found) if found else float("nan")

    near, random_start = values("fedreg", "loss"), values("fedreg", "loss_random_start")
    psnrs = [v for entry in landscape for v in (entry["noisy_psnr"] if isinstance(entry["noisy_psnr"], list)
                                                 else [entry["noisy_psnr"]])]
    below = sum(r < max(near) for r in random_start)
    text = (f"The objective the adaptive attack descends on plain FedReg (1 − cos) ranges over {_range(near)} at the true "
            f"image plus noise ({_range(psnrs)} dB) and over {_range(random_start)} at random starts (FedAvg's: "
            f"{_range(values('fedavg', 'loss'))} vs {_range(values('fedavg', 'loss_random_start'))})")
    text += (f" — {below} of {len(random_start)} random start(s) score below the worst near-truth point, so the loss "
             "does not lead to the image" if below else "")
    fedreg_ratio = mean_abs("fedreg", "difference") / mean_abs("fedreg", "autograd")
    fedavg_ratio = mean_abs("fedavg", "difference") / mean_abs("fedavg", "autograd")
    text += (f"; along random unit directions its difference quotient (h = 0.01) is {fedreg_ratio:.0f}× the autograd "
             f"derivative in magnitude (FedAvg: {fedavg_ratio:.0f}×), i.e. the loss changes mostly by jumps (LeakyReLU units "
             "changing sign between the weights at which the simulated step takes gradients), which gradients do not see.")
    return text


#: PSNR from which an attack counts as inverting an update (issue 16's bar for the adaptive attack on plain FedReg).
INVERTS_DB = 20.0


def variant_description(options: dict[str, Any]) -> str:
    """How an adaptive variant runs, from its recorded attack options."""
    parts = []
    if options.get("start") == "analytic":
        parts.append("started at the closed-form first-layer recovery from the same update, refined through the exact "
                     "FedReg simulation")
    if options.get("smooth_temperature"):
        tau = float(options["smooth_temperature"])
        parts.append(f"continuation: the simulation's (Leaky)ReLU replaced by a softplus-smoothed one whose temperature "
                     f"falls from {tau:g} to {tau * 1e-3:g} over the first {float(options.get('smooth_fraction', 0.5)):.0%} "
                     "of the iterations, exact after")
    parts.append(f"signed Adam lr {options.get('lr', 0.1):g}, TV {options.get('tv_weight', 1e-4):g}"
                 + (", the iterate with the lowest exact matching loss returned" if options.get("keep_best_iterate") else ""))
    return "; ".join(parts)


def _strong_sentences(mine: list[dict[str, Any]], psnr: Any) -> list[str]:
    """Plain FedReg against FedReg+MG under each adaptive variant that tries to invert plain FedReg (records with a
    ``variant``): what MG adds, stated only from the measured rows, and whether the attack inverts plain FedReg."""
    parts: list[str] = []
    for variant in dict.fromkeys(r["variant"] for r in mine if r.get("variant")):
        for known in (True, False):
            label = variant + (" (labels known)" if known else "")
            plain = next((r for r in mine if r["attack"] == label and r["defence"] == "FedReg"), None)
            mg = next((r for r in mine if r["attack"] == label and r["defence"] == "FedReg+MG"), None)
            if not (plain and mg):
                continue
            p_psnr, m_psnr = psnr(plain), psnr(mg)
            per = lambda r: " / ".join(fmt(v) for v in r["psnr"])  # noqa: E731
            inverted = sum(v >= INVERTS_DB for v in plain["psnr"])
            text = (f"**{label}** on `{plain['model']}` ({variant_description(plain.get('attack_options') or {})}; "
                    f"{plain['images']} image(s), {plain.get('iterations')} iterations): plain FedReg {fmt(p_psnr)} dB "
                    f"({per(plain)}), FedReg+MG {fmt(m_psnr)} dB ({per(mg)})")
            labels_wrong = _wrong_label_shares(plain, mg)
            if labels_wrong:
                text += f"; share of right iDLG labels: {', '.join(labels_wrong)}"
            if inverted == len(plain["psnr"]):
                text += (f". It inverts plain FedReg (every image ≥ {INVERTS_DB:.0f} dB), so the rows measure what MG adds "
                         f"against this attack: {_mg_verdict(plain, mg)}.")
            else:
                losses = [v for v in plain.get("matching_loss") or [] if isinstance(v, (int, float))]
                text += (f". It does not invert plain FedReg ({inverted}/{len(plain['psnr'])} image(s) ≥ {INVERTS_DB:.0f} dB"
                         + (f"; final 1 − cos {_range(losses)} against 0 at the true image" if losses else "")
                         + "), so the difference between the rows "
                         f"({_signed((m_psnr or 0) - (p_psnr or 0))} dB) is no measure of MG's protection.")
            parts.append(text)
    return parts


def _mg_pairs(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(plain FedReg, FedReg+MG) record pairs of the same adaptive attack, dataset and model."""
    pairs = []
    for plain in (r for r in records if r["defence"] == "FedReg" and _attack(r).startswith("adaptive")):
        mg = next((r for r in records if r["defence"] == "FedReg+MG" and r["attack"] == plain["attack"]
                   and r["dataset"] == plain["dataset"] and r.get("model") == plain.get("model")), None)
        if mg is not None:
            pairs.append((plain, mg))
    return pairs


def _inverted(record: dict[str, Any]) -> int:
    return sum(v >= INVERTS_DB for v in record["psnr"])


def _mg_verdict(plain: dict[str, Any], mg: dict[str, Any]) -> str:
    """What MG adds against one attack, from the measured pair: only where the attack inverts plain FedReg."""
    delta = _signed((image_mean(mg["psnr"]) or 0) - (image_mean(plain["psnr"]) or 0))
    if _inverted(plain) < len(plain["psnr"]):
        return f"not measured: the attack fails on plain FedReg (Δ {delta} dB)"
    stopped = len(mg["psnr"]) - _inverted(mg)
    if not stopped:
        return f"no protection: FedReg+MG is inverted too (Δ {delta} dB)"
    return f"stops the attack on {stopped}/{len(mg['psnr'])} image(s) (Δ {delta} dB)"


def mg_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    """One row per dataset × adaptive attack × label mode: plain FedReg against FedReg+MG under the same attack, with
    how many images each is inverted on (≥ :data:`INVERTS_DB`) and what MG adds — only where the attack inverts plain
    FedReg on every image is the difference MG's."""
    return [[plain["dataset"], plain["attack"], str(plain.get("model", "—")),
             f"{fmt(image_mean(plain['psnr']))} ({' / '.join(fmt(v) for v in plain['psnr'])})",
             f"{fmt(image_mean(mg['psnr']))} ({' / '.join(fmt(v) for v in mg['psnr'])})",
             f"{_inverted(plain)}/{len(plain['psnr'])}", f"{_inverted(mg)}/{len(mg['psnr'])}", _mg_verdict(plain, mg)]
            for plain, mg in _mg_pairs(records)]


def mg_summary(records: list[dict[str, Any]]) -> list[str]:
    """Per model: whether any adaptive attack inverts plain FedReg on every image, and what MG then adds."""
    lines = []
    for model in dict.fromkeys(str(p.get("model")) for p, _ in _mg_pairs(records)):
        pairs = [(p, m) for p, m in _mg_pairs(records) if str(p.get("model")) == model]
        winning = [(p, m) for p, m in pairs if _inverted(p) == len(p["psnr"])]
        best = max(pairs, key=lambda pm: image_mean(pm[0]["psnr"]) or 0.0)[0]
        if not winning:
            lines.append(f"On `{model}` no adaptive attack tried inverts plain FedReg: the best reaches {fmt(image_mean(best['psnr']))} dB "
                         f"(“{best['attack']}”, {best['dataset']}; {' / '.join(fmt(v) for v in best['psnr'])}) against "
                         f"{INVERTS_DB:.0f} dB, although the attacker's model of the client is exact. What MG adds on "
                         f"`{model}` is therefore not measured here.")
            continue
        stopped = sum(len(m["psnr"]) - _inverted(m) for _, m in winning)
        total = sum(len(m["psnr"]) for _, m in winning)
        low = min(v for p, _ in winning for v in p["psnr"])
        mg_low = min(v for _, m in winning for v in m["psnr"])
        attacks = sorted({p["attack"] for p, _ in winning})
        lines.append(f"On `{model}` {' and '.join(f'“{a}”' for a in attacks)} invert{'s' if len(attacks) == 1 else ''} "
                     "plain FedReg on every image "
                     f"({', '.join(sorted({p['dataset'] for p, _ in winning}))}; lowest {fmt(low)} dB). Under the same "
                     f"attack FedReg+MG is inverted to ≥ {INVERTS_DB:.0f} dB on {total - stopped}/{total} attacked image(s), "
                     f"counted over the table's rows (lowest {fmt(mg_low)} dB): "
                     + ("MG adds no protection against it." if not stopped else
                        f"MG stops it on {stopped}/{total} ("
                        + ", ".join(f"{m['dataset']} “{m['attack']}” {len(m['psnr']) - _inverted(m)}/{len(m['psnr'])}"
                                    for _, m in winning if _inverted(m) < len(m["psnr"])) + ")."))
    return lines


def fedreg_sentences(mine: list[dict[str, Any]], anatomy: dict[str, dict[str, Any]], psnr: Any,
                      ig_fedavg: dict[str, Any] | None, ig_model: str = "convnet",
                      fc_model: str = "upcycled-mlp") -> list[str]:
    """What FedReg's regulariser and MG each do, from the measured rows and the update anatomy (no fixed conclusions).

    Separates the two effects the defences stack: plain FedReg (regulariser, eq. 10) against FedAvg, and FedReg+MG
    (eq. 12 on top) against plain FedReg, under the same attack on the same images.
    """
    parts: list[str] = []

    def row(defence: str, label: str, model: str = ig_model) -> dict[str, Any] | None:
        return next((r for r in mine if r["defence"] == defence and r["attack"] == label
                     and r.get("model", ig_model) == model), None)

    strong = _strong_sentences(mine, psnr)

    plain_anat, mg_anat = anatomy.get("FedReg"), anatomy.get("FedReg+MG")
    if plain_anat and mg_anat:
        exact = max(abs(v) for a in (plain_anat, mg_anat) for v in a["simulation_one_minus_cos"])
        parts.append(f"The adaptive attacker's simulation of the client, run on the true example and label, reproduces "
                     f"the released update (1 − cos ≤ {exact:.1e} for FedReg and FedReg+MG): its client model is exact. "
                     f"FedReg's regulariser alone (no MG) leaves ‖u‖/‖Δ_SGD‖ = {_range(plain_anat['norm_ratio_to_sgd'], 2)} "
                     f"of the plain SGD step (1 − cos(u, Δ_SGD) = {_range(plain_anat['one_minus_cos_to_sgd'], 2)}): eq. (10) "
                     "subtracts the update's component along the pseudo-data gradient, which for one example and one step "
                     f"is nearly parallel to the data gradient; with MG, ‖u‖/‖Δ_SGD‖ = {_range(mg_anat['norm_ratio_to_sgd'], 2)}.")
    if plain_anat and plain_anat.get("landscape"):
        parts.append(_landscape_sentence(plain_anat["landscape"]))
    naive_plain, naive_mg = row("FedReg", "ig (naive)"), row("FedReg+MG", "ig (naive)")
    if naive_plain and naive_mg and ig_fedavg:
        a, b, c = psnr(ig_fedavg), psnr(naive_plain), psnr(naive_mg)
        parts.append(f"Naive IG (assumes FedAvg): FedAvg {fmt(a)} dB, plain FedReg {fmt(b)} dB, FedReg+MG {fmt(c)} dB — "
                     f"FedAvg → plain FedReg (the regulariser): {_signed((b or 0) - (a or 0))} dB, plain FedReg → FedReg+MG "
                     f"(MG): {_signed((c or 0) - (b or 0))} dB.")
    if plain_anat and mg_anat:
        for label, anat in (("plain FedReg", plain_anat), ("FedReg+MG", mg_anat)):
            released, sgd = anat["idlg_correct_released"], anat["idlg_correct_sgd"]
            parts.append(f"iDLG reads the true label from the {label} update for {sum(released)}/{len(released)} "
                         f"image(s) (from the plain SGD step: {sum(sgd)}/{len(sgd)})"
                         + (": the regulariser's subtraction of w_s·g_s already changes the logit-bias update's sign "
                            "pattern, so wrong labels there are FedReg's, not MG's." if label == "plain FedReg"
                            and sum(released) < sum(sgd) else "."))
    for known, what in ((True, "Given the true labels"), (False, "With labels inferred by iDLG")):
        suffix = " (labels known)" if known else ""
        plain, mg = row("FedReg", "adaptive" + suffix), row("FedReg+MG", "adaptive" + suffix)
        if not (plain and mg):
            continue
        p_psnr, m_psnr = psnr(plain), psnr(mg)
        losses = [v for v in plain.get("matching_loss") or [] if isinstance(v, (int, float))]
        sentence = (f"{what}, the same adaptive attack on `{ig_model}` ({'exact client model, ' if known else ''}{plain['images']} image(s)) reaches "
                    f"{fmt(p_psnr)} dB on plain FedReg and {fmt(m_psnr)} dB on FedReg+MG: MG's measured effect under this "
                    f"attack is {'+' if (m_psnr or 0) >= (p_psnr or 0) else ''}{(m_psnr or 0) - (p_psnr or 0):.1f} dB.")
        wrong = _wrong_label_shares(plain, mg)
        if wrong:
            sentence += f" Share of right iDLG labels: {', '.join(wrong)}."
        labels_wrong = plain.get("label_accuracy") is not None and plain["label_accuracy"] < 1
        if p_psnr is not None and p_psnr < 20 and labels_wrong:
            sentence += " With wrong labels the attacker's client model is not exact, so this row says nothing about MG."
        elif p_psnr is not None and p_psnr < 20:
            sentence += (" The attack does not invert plain FedReg" + (f" (final 1 − cos {_range(losses)} against 0 at "
                         "the true image)" if losses else "") + ", although its model of the client is exact: it fails by "
                         "optimisation, so neither row bounds FedReg's leakage and the difference is no measure of MG's "
                         "protection.")
        parts.append(sentence)
    plain, mg = row("FedReg", "adaptive (labels known)", fc_model), row("FedReg+MG", "adaptive (labels known)", fc_model)
    if plain and mg:
        p_psnr, m_psnr = psnr(plain), psnr(mg)
        parts.append(f"On the FC-first `{fc_model}`, whose first layer's update holds the input, the same adaptive attack "
                     f"(labels known) reaches {fmt(p_psnr)} dB on plain FedReg ({' / '.join(fmt(v) for v in plain['psnr'])}) "
                     f"and {fmt(m_psnr)} dB on FedReg+MG ({' / '.join(fmt(v) for v in mg['psnr'])}): "
                     + (f"MG's measured effect there is {_signed((m_psnr or 0) - (p_psnr or 0))} dB."
                        if _inverted(plain) == len(plain["psnr"]) else
                        f"from random starts it does not invert plain FedReg on every image (≥ {INVERTS_DB:.0f} dB: "
                        f"{_inverted(plain)}/{len(plain['psnr'])}), so the difference "
                        f"({_signed((m_psnr or 0) - (p_psnr or 0))} dB) is no measure of MG."))
    return parts + strong


def reading(records: list[dict[str, Any]], names: dict[str, str],
             anatomy_records: Sequence[dict[str, Any]] = (), ig_model: str = "convnet",
             fc_model: str = "upcycled-mlp") -> list[str]:
    """Sentences computed from the measured numbers (no fixed conclusions)."""
    lines = []
    for ds in dict.fromkeys(r["dataset"] for r in records):
        mine = [r for r in records if r["dataset"] == ds]
        anatomy = {a["dataset"]: {} for a in anatomy_records}
        for a in anatomy_records:
            anatomy[a["dataset"]][a["defence_label"]] = a

        def get(defence: str, attack: str, mine: list[dict[str, Any]] = mine) -> dict[str, Any] | None:
            return next((r for r in mine if r["defence"] == defence and r["attack"] == attack), None)

        def psnr(record: dict[str, Any], first: int | None = None) -> float | None:
            return image_mean(record["psnr"][:first] if first is not None else record["psnr"])

        ig_fedavg, an_fedavg = get("FedAvg", "ig"), get("FedAvg", "analytic")
        parts = [f"**{names[ds]}.**"]
        if an_fedavg and ig_fedavg:
            parts.append(f"Without a defence the analytic attack reaches {fmt(psnr(an_fedavg))} dB and IG "
                         f"{fmt(psnr(ig_fedavg))} dB (SSIM {fmt(image_mean(ig_fedavg['ssim']), 2)}).")
        dp = [r for r in mine if r["sigma"] is not None and _attack(r) == "ig"]
        if dp and ig_fedavg:
            base = psnr(ig_fedavg) or 0.0
            kept = [r for r in dp if (psnr(r) or 0.0) >= base - 3.0]
            parts.append("IG PSNR under DP-SGD: " + ", ".join(
                f"σ = {r['sigma']:g} (ε = {fmt_epsilon(r['epsilon'])}) → {fmt(psnr(r))} dB" for r in dp) + ".")
            if kept:
                worst = max(kept, key=lambda r: r["sigma"] or 0.0)
                parts.append(f"Up to σ = {worst['sigma']:g} (ε = {fmt_epsilon(worst['epsilon'])}) IG stays within 3 dB of "
                             "the undefended update.")
            else:
                parts.append("Every σ tried costs IG more than 3 dB against the undefended update, including the "
                             "smallest one, whose ε is astronomically large — PSNR protection is not evidence of DP (R2).")
        dp_analytic = [r for r in mine if r["sigma"] is not None and _attack(r) == "analytic"]
        if dp_analytic:
            parts.append("Analytic PSNR under DP-SGD: " + ", ".join(
                f"σ = {r['sigma']:g} → {fmt(psnr(r))} dB" for r in dp_analytic) + ".")
        parts += fedreg_sentences(mine, anatomy.get(ds, {}), psnr, ig_fedavg, ig_model, fc_model)
        an_mg = get("FedReg+MG", "analytic")
        if an_mg:
            an_reg = get("FedReg", "analytic")
            parts.append(f"The analytic attack on the FC-first model gets {fmt(psnr(an_mg))} dB from a FedReg+MG "
                         f"update and {fmt(psnr(an_reg)) if an_reg else '—'} dB from plain FedReg.")
        lines.append(" ".join(parts))
    return lines


def cost_note(records: list[dict[str, Any]], ig_model: str) -> str:
    """' (N× the time per image of IG on the same model in this run)', measured from the records' seconds."""

    def per_image(rows: list[dict[str, Any]]) -> float:
        return sum(r["seconds"] for r in rows) / max(1, sum(r["images"] for r in rows))

    ig = [r for r in records if _attack(r) == "ig" and r.get("model") == ig_model]
    adaptive = [r for r in records if _attack(r) == "adaptive" and r.get("model") == ig_model]
    if not ig or not adaptive or per_image(ig) <= 0:
        return ""
    return f" ({per_image(adaptive) / per_image(ig):.0f}× the time per image of IG on `{ig_model}` in this run)"


def record_row(r: dict[str, Any]) -> list[str]:
    return [r["dataset"], r["defence"], "—" if r["sigma"] is None else f"{r['sigma']:g}", fmt_epsilon(r["epsilon"]), r["attack"],
            r["model"], str(r["images"]), fmt(image_mean(r["psnr"])), " / ".join(fmt(v) for v in r["psnr"]), fmt(image_mean(r["ssim"]), 3),
            " / ".join(fmt(v, 3) for v in r["ssim"]), fmt(r["label_accuracy"], 2), f"{r['seconds']:.1f}"]


def _wrong_label_shares(*rows: dict) -> list[str]:
    """``"<defence> <share>"`` for each row whose iDLG labels were not all right."""
    return [f"{r['defence']} {fmt(r['label_accuracy'], 2)}" for r in rows
            if r.get("label_accuracy") is not None and r["label_accuracy"] < 1]
