"""FedReg's Table 4 analogue: final accuracy (with ε) joined with the PSNR the inversion experiments measured.

Xu, Hong, Huang, Jiang, *Acceleration of Federated Learning with Alleviated Forgetting in Local Training*, ICLR 2022,
Table 4 compares the accuracy of FedReg+MG and of FedAvg + DP-SGD at *similar PSNR* (§4.5), not at matched ε:
:func:`table4` pairs each method's accuracy with the strongest attack's PSNR against it, per dataset and model, and
:func:`psnr_claim_audit` reads the claims audit's verdict on that comparison (``fedreg-mg-vs-dpsgd-psnr``). Used by
the FedReg evidence run (:mod:`privaudit.papers.fedreg.evidence`) and its page (:mod:`privaudit.papers.fedreg.pages`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.report.results import Result

#: The method name of FedAvg with local DP-SGD in the FedReg evidence's records.
DP_METHOD = "fedavg+dp-sgd"
#: FedReg's claim audited as stated: FedReg+MG protects like DP-SGD at similar PSNR.
PSNR_CLAIM = "fedreg-mg-vs-dpsgd-psnr"


def _mean(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    if isinstance(value, Sequence):
        numbers = [float(v) for v in value if isinstance(v, int | float)]
        return sum(numbers) / len(numbers) if numbers else None
    return None


def _inversion_records(inversion: Any) -> list[dict[str, Any]]:
    """Flatten the accepted inversion JSON shapes into records with a defence name."""
    if isinstance(inversion, Mapping):
        for key in ("records", "runs", "defences", "defenses", "results", "rows"):
            if isinstance(inversion.get(key), list):
                return _inversion_records(inversion[key])
        config = inversion.get("config")
        if isinstance(config, Mapping) and "defence" in config:
            return [{**inversion, "defence": config["defence"]}]
        if "defence" in inversion or "method" in inversion:
            return [dict(inversion)]
        records = []
        for name, value in inversion.items():
            if isinstance(value, Mapping):
                records.append({"defence": name, **value})
            elif isinstance(value, int | float):
                records.append({"defence": name, "psnr": value})
        return records
    if isinstance(inversion, list):
        out = []
        for item in inversion:
            out.extend(_inversion_records(item) if isinstance(item, Mapping) else [])
        return out
    return []


def _defence_key(record: Mapping[str, Any]) -> tuple[str, float | None] | None:
    """(method, σ) of an inversion record: ``FedAvg`` → fedavg, ``FedReg+MG`` → fedreg-mg, ``dpsgd:σ`` / ``FedAvg+DP-SGD σ=…`` → DP."""
    name = record.get("defence") or record.get("method")
    if name is None:
        return None
    name = str(name).strip().lower().replace(" ", "")
    sigma = _mean(record.get("sigma", record.get("noise_multiplier")))
    if name.startswith(("dpsgd", "dp-sgd", DP_METHOD)):
        for separator in (":", "σ="):
            _, found, tail = name.partition(separator)
            if found and tail:
                sigma = float(tail)
                break
        return DP_METHOD, sigma
    return name.replace("+mg", "-mg"), None


def same_sigma(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)


def table4(accuracy_json: Any, inversion_json: Any) -> dict[str, Any]:
    """The FedReg paper's Table 4 analogue: accuracy, ε and attack PSNR per method, and the DP-SGD run at matched PSNR.

    ``accuracy_json``: the ``accuracy`` records of a ``fedreg-evidence`` result (``{method, sigma, epsilon, delta,
    accuracy}``), or a path to a JSON list of them. ``inversion_json``: PSNR per defence, or a path: a list of
    records, a dict holding such a list under ``records``/``runs``/``defences``/``results``/``rows`` (the
    ``data`` of an ``inversion-evidence`` result), a dict defence → record or number, or one inversion run
    (``config.defence``). A record names its defence by ``defence`` or ``method`` (``fedavg``, ``fedreg``,
    ``fedreg-mg`` / ``FedReg+MG``, ``dpsgd:<σ>`` / ``FedAvg+DP-SGD σ=<σ>``, or ``sigma``), its PSNR by
    ``psnr_mean``, ``psnr`` (number or list) or ``psnr_median``, and optionally its ``dataset``, ``model`` and ``attack``.

    Records are grouped by (dataset, model); within a group a defence's PSNR is that of its *strongest* attack
    (the highest PSNR, the privacy-relevant number). Returns ``{"groups": [{"dataset", "model", "rows": [{method,
    sigma, epsilon, delta, accuracy, psnr, attack}], "matched": {"fedreg-mg": row, "dp-sgd": row} | None}]}`` —
    ``matched`` pairs FedReg+MG with the DP-SGD row whose PSNR is closest to its own (the paper's "similar PSNR").
    """
    if isinstance(accuracy_json, str | Path):
        accuracy_json = json.loads(Path(accuracy_json).read_text())
    if isinstance(inversion_json, str | Path):
        inversion_json = json.loads(Path(inversion_json).read_text())
    grouped: dict[tuple[Any, Any], list[tuple[tuple[str, float | None], float, Any]]] = {}
    for record in _inversion_records(inversion_json):
        key = _defence_key(record)
        value = _mean(record.get("psnr_mean", record.get("psnr", record.get("psnr_median"))))
        if key is not None and value is not None:
            grouped.setdefault((record.get("dataset"), record.get("model")), []).append((key, value, record.get("attack")))
    if not grouped:
        raise InvalidParameterError("the inversion results hold no PSNR per defence (expected records with defence and psnr_mean/psnr)")
    groups = []
    for (dataset, model), psnr in grouped.items():
        rows = []
        for record in accuracy_json:
            method, sigma = str(record["method"]), record.get("sigma")
            found = [(v, attack) for (m, s), v, attack in psnr if m == method and same_sigma(s, sigma)]
            best = max(found, key=lambda item: item[0]) if found else (None, None)
            rows.append({**{k: record.get(k) for k in ("method", "sigma", "epsilon", "delta", "accuracy")},
                         "psnr": best[0], "attack": best[1]})
        matched = None
        mg = next((r for r in rows if r["method"] == "fedreg-mg" and r["psnr"] is not None), None)
        dp = [r for r in rows if r["method"] == DP_METHOD and r["psnr"] is not None]
        if mg is not None and dp:
            matched = {"fedreg-mg": mg, "dp-sgd": min(dp, key=lambda r: abs(r["psnr"] - mg["psnr"]))}
        groups.append({"dataset": dataset, "model": model, "rows": rows, "matched": matched})
    return {"groups": groups}


def psnr_claim_audit(results: Sequence[Result]) -> dict[str, Any] | None:
    """FedReg's claim audited as stated (``fedreg-mg-vs-dpsgd-psnr``) among a claims-audit report's results.

    Returns ``{"verdict", "basis", "readings": [{reading, verdict, images, attack, effective_psnr_mean}], "facts":
    [{reading, fact, reason}]}``, or ``None`` when the audit holds no result for that claim. The paper states no ε:
    its claim is a PSNR comparison with DP-SGD, and MG's "no DP guarantee (ε = ∞)" is a fact, not a refuted ε.
    """
    for result in results:
        data = result.data
        if result.kind != "claim-audit" or data.get("claim_id") != PSNR_CLAIM:
            continue
        readings, facts = [], []
        for r in data.get("readings") or []:
            if not isinstance(r, dict):
                continue
            details = r.get("details") or {}
            if r.get("role") == "fact":
                basis = details.get("decision") or {}
                facts.append({"reading": r.get("reading"), "fact": basis.get("fact"), "reason": r.get("reason")})
            else:
                readings.append({"reading": r.get("reading"), "verdict": r.get("verdict"), "images": details.get("images"),
                                 "attack": details.get("attack"), "effective_psnr_mean": details.get("effective_psnr_mean") or {}})
        return {"verdict": data.get("verdict"), "basis": data.get("verdict_basis"), "readings": readings, "facts": facts}
    return None
