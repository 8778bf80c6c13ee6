"""What an inversion result records of each attacked image and update, and the notes that qualify its means.

Rows per image (labels, PSNR, SSIM, the attack's optimisation status from :mod:`attacks.inversion.convergence`), the
attack as it ran (its whole configuration and, per update, its label rule, optimiser, status, losses and time), the
note when failed attacks were left out of the means, and for a malicious-server (imprint, Fowl et al. 2022) run what
the attacker saw of its bins against the ground truth.
"""

from __future__ import annotations

from typing import Any


def per_image(records: list[dict[str, Any]], psnr: list[float], ssim: list[float]) -> list[dict[str, Any]]:
    """One row per attacked image: labels, PSNR, SSIM and its attack's optimisation status (attacks.inversion.convergence)."""
    rows, k = [], 0
    for record in records:
        scores = record.get("scores", {})
        attack = record["attack"]
        status, reason = attack.get("status", "closed-form"), attack.get("status_reason")
        predicted = attack.get("labels")
        paired = bool(attack.get("settings", {}).get("labels_paired", True))
        order = scores.get("order") or []
        for i, true_label in enumerate(record["true_labels"]):
            if predicted is not None and paired and i < len(order):
                guess = predicted[order[i]]
            elif predicted is not None and len(predicted) == len(record["true_labels"]) == 1:
                guess = predicted[0]  # one example, no images to match (label-only attack)
            else:
                guess = None
            rows.append({"index": k, "true_label": int(true_label), "predicted_label": guess,
                         "label_correct": None if guess is None else guess == int(true_label),
                         "psnr": psnr[k] if k < len(psnr) else None, "ssim": ssim[k] if k < len(ssim) else None,
                         "status": status, "status_reason": reason})
            k += 1
    return rows


def attack_record(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the result records of the attack as it ran: its whole configuration (every field, defaults included) and,
    per attacked update, the label rule it used, its optimiser and client model, status, losses and time."""
    if not records:
        return {"attack_config": None, "updates": []}
    updates = []
    for record in records:
        attack = dict(record["attack"])
        settings = {k: v for k, v in attack.pop("settings", {}).items() if k not in ("config", "attack", "data")}
        updates.append({**attack, "settings": settings, "true_labels": record.get("true_labels")})
    return {"attack_config": records[0]["attack"].get("settings", {}).get("config"), "updates": updates}


def status_note(summary: dict[str, Any], total: int) -> str | None:
    """One line when images were left out of the PSNR/SSIM means because their attack diverged or made no progress."""
    excluded = summary["images_excluded"]
    if not excluded:
        return None
    counts = ", ".join(f"{n} {status}" for status, n in sorted(excluded.items()))
    if not summary["images_summarised"]:
        return (f"every image's attack failed ({counts}): no PSNR here measures the defence; fix the attack's settings "
                "(a smaller lr, more iterations) and run it again")
    return (f"{sum(excluded.values())} of {total} images left out of the means ({counts}): their attack's optimisation failed, "
            "so their PSNR says nothing about the defence (see each image's status)")


def mean(values: list[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def separation(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per update of a malicious-server (imprint) run: what the attacker saw and the ground truth of its bins."""
    rows = []
    for record in records:
        truth = record.get("server_ground_truth")
        settings = record["attack"].get("settings", {})
        if truth is None or "bins_with_images" not in settings:
            continue
        rows.append({"images": truth["inputs"], "bins_with_images": settings["bins_with_images"],
                     "bins_below_threshold": settings.get("bins_below_threshold"),
                     "separated_guaranteed": settings["examples_separated"], "separated_expected": settings["expected_separated"],
                     "alone_in_a_bin": truth["inputs_alone_in_a_bin"],
                     "row_at_40_db_present": truth.get("inputs_with_a_row_at_40_db"),
                     "update_kind": settings.get("threat_model", {}).get("update_kind"),
                     "approximate": "approximate" in settings, "approximate_reason": settings.get("approximate")})
        if settings["examples_separated"] is None:
            rows[-1]["separated_guaranteed_reason"] = settings.get("examples_separated_reason")
    return rows


def separation_note(rows: list[dict[str, Any]]) -> str:
    """One line: the ground truth, what the attacker can prove (fixed bins only), and how exact the rows are."""
    alone, total = sum(r["alone_in_a_bin"] for r in rows), sum(r["images"] for r in rows)
    expected = sum(r["separated_expected"] for r in rows)
    provable = [r for r in rows if r["separated_guaranteed"] is not None]
    if len(provable) == len(rows):
        proof = f"the attacker can prove {sum(r['separated_guaranteed'] for r in rows)} from the bins it sees"
    elif provable:
        proof = (f"the attacker can prove {sum(r['separated_guaranteed'] for r in provable)} in the {len(provable)} updates "
                 "with fixed bins; not provable in the others: the bins move during local training")
    else:
        proof = "not provable from the bins: they move during local training"
    text = f"imprint: {alone} of {total} images alone in a bin of the block the server sent ({expected:.1f} expected; {proof}); "
    reasons = sorted({r["approximate_reason"] for r in rows if r["approximate"] and r["approximate_reason"]})
    if reasons:
        return text + "recovery is approximate (" + "; ".join(reasons) + ")"
    if all(r["update_kind"] == "gradient" for r in rows):
        return text + ("with a FedSGD gradient their rows are exact (the scoring's matching can still pair one with another "
                       "image), the others come back as mixed rows")
    return text + ("with a one-step parameter delta those are exact only while the encoder scale keeps the bins' float32 "
                   "change resolvable (no bin was flagged unresolvable here), the others come back as mixed rows")
