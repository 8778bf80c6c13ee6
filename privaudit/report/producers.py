"""Result files made from a trained federation: ``training``, ``ledger`` and ``epsilon-curve`` (torch-free).

* :func:`training_result` — the run's test accuracy (and loss) at every evaluated round, read from the
  checkpoint manifest's per-round metrics; ``privaudit train --out DIR`` writes it as ``DIR/training.json``.
* :func:`ledger_result` — per-client ε at δ from the checkpoint's privacy ledger
  (:meth:`~privaudit.accounting.ledger.PrivacyLedger.summary`), what ``compute-epsilon --checkpoint --json``
  prints, plus the run's rounds; ``compute-epsilon --checkpoint DIR --delta D --out FILE``.
* :func:`epsilon_curve_result` — ε after each round of the client whose final ε is largest, under each
  accountant that can answer (:meth:`~privaudit.accounting.ledger.PrivacyLedger.epsilon_by_round`);
  ``compute-epsilon --checkpoint DIR --delta D --curve --out FILE``.

Only :mod:`privaudit.accounting` is imported (never torch), so these run as fast as the CLI starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.errors import InvalidParameterError, NumericalFailure, UnsupportedMechanismError
from privaudit.report.results import Result, make_result

#: Accountants a curve uses when none is named: RDP (vectorised, every round) and the numerical ones.
CURVE_ACCOUNTANTS = ("rdp", "prv", "pld")
#: prv (when not exact) and pld cost 0.5–1 s per evaluation; they are evaluated at this many rounds at most.
DEFAULT_CURVE_POINTS = 10


def _run_config(manifest: Mapping[str, Any], checkpoint: str | Path | None) -> dict[str, Any]:
    """The exact inputs of the run: its train spec (or federation config) and the checkpoint it lives in."""
    config: dict[str, Any] = {"checkpoint": None if checkpoint is None else str(checkpoint)}
    spec = manifest.get("train_spec")
    config["run"] = spec if isinstance(spec, dict) else manifest.get("config", {})
    return config


def _seed(manifest: Mapping[str, Any]) -> int | None:
    seeds = manifest.get("seeds")
    seed = seeds.get("seed") if isinstance(seeds, dict) else None
    return seed if isinstance(seed, int) else None


def _run_name(algorithm: str | None, checkpoint: str | Path | None) -> str:
    """``algorithm · run-directory`` so that two runs of one algorithm (e.g. two calibrations) stay apart."""
    parts = [p for p in (algorithm, Path(checkpoint).name if checkpoint is not None else None) if p]
    return " · ".join(dict.fromkeys(parts)) or "ledger"


def _algorithm(manifest: Mapping[str, Any]) -> str:
    algorithm = manifest.get("algorithm")
    if isinstance(algorithm, dict):
        return str(algorithm.get("name", "unknown"))
    return str(algorithm or "unknown")


def _total_rounds(manifest: Mapping[str, Any] | None, ledger: PrivacyLedger | None = None) -> int:
    config = (manifest or {}).get("config")
    if isinstance(config, dict) and isinstance(config.get("rounds"), int):
        return int(config["rounds"])
    return max(ledger.event_rounds(), default=0) if ledger is not None else 0


# ------------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------------
def training_data(manifest: Mapping[str, Any], label: str | None = None) -> dict[str, Any]:
    """Test accuracy/loss of the global model at every evaluated round (rounds whose ``test_accuracy`` is set).

    ``rounds``, ``accuracy``, ``loss``, ``train_loss`` and ``train_accuracy`` are aligned lists (loss entries may be
    ``None``; ``train_accuracy`` — the global model's on the pooled training data — only with ``--eval-train-loss``);
    ``final_accuracy`` is the manifest's (the last evaluation), ``total_rounds`` the loop's length.
    """
    metrics = [m for m in manifest.get("metrics") or [] if isinstance(m, dict)]
    evaluated = [m for m in metrics if m.get("test_accuracy") is not None]
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    algorithm = _algorithm(manifest)
    return {
        "algorithm": algorithm,
        "label": label or algorithm,
        "dataset": dataset.get("name"),
        "model": (manifest.get("model") or {}).get("name") if isinstance(manifest.get("model"), dict) else None,
        "rounds": [int(m["round"]) for m in evaluated],
        "accuracy": [float(m["test_accuracy"]) for m in evaluated],
        "loss": [m.get("test_loss") for m in evaluated],
        "train_loss": [m.get("train_loss") for m in evaluated],
        "train_accuracy": [m.get("global_train_accuracy") for m in evaluated],
        "final_accuracy": manifest.get("final_accuracy"),
        "total_rounds": _total_rounds(manifest),
        "training_rounds": sum(1 for m in metrics if m.get("trained")),
        "privacy_events": len(((manifest.get("ledger") or {}).get("events")) or []),
    }


def training_result(manifest: Mapping[str, Any], checkpoint: str | Path | None = None) -> Result:
    """A ``training`` result for the run described by ``manifest`` (labelled by algorithm and checkpoint name)."""
    label = _algorithm(manifest) + (f" · {Path(checkpoint).name}" if checkpoint is not None else "")
    data = training_data(manifest, label)
    title = f"Training: {data['algorithm']} on {data['dataset']} ({data['total_rounds']} rounds)"
    return make_result("training", title, data, _run_config(manifest, checkpoint), seed=_seed(manifest))


# ------------------------------------------------------------------------------------------------
# ledger
# ------------------------------------------------------------------------------------------------
def ledger_data(ledger: PrivacyLedger, delta: float, accountant: str = "auto",
                manifest: Mapping[str, Any] | None = None, reported: Sequence[Any] | None = None) -> dict[str, Any]:
    """Per-client ε at ``delta`` (``PrivacyLedger.summary``: max over clients is the federation's guarantee).

    Adds the run's ``rounds`` and ``steps`` (releases) in total, the ids of clients over budget or whose ε
    rests on failed assumptions, and the ε the training framework itself reported (the manifest's
    ``reported_epsilon``), each classified against the recorded releases (:mod:`privaudit.accounting.reported`;
    ``reported``: entries already classified, e.g. by the command that prints them).
    """
    summary = ledger.summary(delta, accountant=accountant)
    data = summary.to_dict()
    if reported is None:
        raw = (manifest or {}).get("reported_epsilon") or []
        if raw:
            # the assessment loads every accountant (scipy, prv-accountant): only for runs that report their own ε
            from privaudit.accounting.reported import assess_all

            reported = assess_all(raw if isinstance(raw, list) else [], ledger, accountant)
    if reported:
        data["reported_epsilon"] = list(reported)
    data.update({
        "algorithm": _algorithm(manifest) if manifest is not None else None,
        "rounds": _total_rounds(manifest, ledger),
        "steps": sum(e.count for e in ledger.events),
        "clients": len(summary.per_client),
        "over_budget": [cid for cid, c in summary.per_client.items() if c.over_budget],
        "invalid": [cid for cid, c in summary.per_client.items() if not c.valid],
        "neighbouring": ledger.neighbouring.value,
        "no_events": not ledger.events,
    })
    return data


def ledger_result(ledger: PrivacyLedger, delta: float, accountant: str = "auto",
                  manifest: Mapping[str, Any] | None = None, checkpoint: str | Path | None = None,
                  reported: Sequence[Any] | None = None) -> Result:
    """A ``ledger`` result: :func:`ledger_data` with the run's config and the query (δ, accountant)."""
    data = ledger_data(ledger, delta, accountant, manifest, reported)
    config = {**_run_config(manifest or {}, checkpoint), "delta": delta, "accountant": accountant}
    return make_result("ledger", f"Per-client ε: {_run_name(data['algorithm'], checkpoint)}", data, config,
                       seed=_seed(manifest or {}))


# ------------------------------------------------------------------------------------------------
# ε vs rounds
# ------------------------------------------------------------------------------------------------
def _thin(rounds: Sequence[int], points: int) -> list[int]:
    """At most ``points`` rounds, evenly spaced over ``rounds``, always including the last."""
    if len(rounds) <= points:
        return list(rounds)
    picks = {round(i * (len(rounds) - 1) / (points - 1)) for i in range(points)}
    return [rounds[i] for i in sorted(picks)]


def _is_exact_for(name: str, ledger: PrivacyLedger, client: str, last_round: int) -> bool:
    """prv answers a composition of plain Gaussian releases in closed form (μ-GDP), so it is cheap at every round."""
    if name != "prv":
        return False
    from privaudit.accounting.gaussian import plain_gaussian_mu  # loads scipy: not at import

    return plain_gaussian_mu(ledger.composition_through(client, last_round)) is not None


def epsilon_curve_data(ledger: PrivacyLedger, delta: float, accountants: Sequence[str] = CURVE_ACCOUNTANTS,
                       rounds: Sequence[int] | None = None, client: str | None = None,
                       max_points: int = DEFAULT_CURVE_POINTS) -> dict[str, Any]:
    """ε after each round, per accountant, of one client (default: the one with the largest final ε).

    The client is picked by the first of ``accountants`` that supports every client's composition (its
    final per-client ε, :meth:`PrivacyLedger.summary`). Each accountant then answers every round prefix
    (:meth:`PrivacyLedger.epsilon_by_round`); prv (unless the composition is plain Gaussian, where it is
    exact) and pld are evaluated at no more than ``max_points`` evenly spaced rounds, ``None`` elsewhere,
    and ``evaluated_rounds`` says where. An accountant that cannot answer is listed under ``unavailable``.
    """
    if max_points < 2:
        raise InvalidParameterError(f"the curve needs at least 2 points per accountant, got {max_points}")
    if not ledger.events:
        raise InvalidParameterError("the ledger records no privacy events: there is no ε curve to draw (no DP claim)")
    names = list(dict.fromkeys(str(a).strip().lower() for a in accountants))
    if rounds is None:
        rounds = sorted(set(range(1, max(ledger.event_rounds()) + 1)) | set(ledger.event_rounds()))
    rounds = sorted({int(r) for r in rounds})
    selected_by = None
    if client is None:
        client, selected_by = _largest_final_client(ledger, names, delta, rounds[-1])
    client = str(client)
    if client not in ledger.clients():
        raise InvalidParameterError(f"client {client!r} has no events or budget in this ledger")
    curves = _client_curves(ledger, names, client, delta, rounds, max_points)
    series = curves["epsilon"]
    final = {name: next((v for v in reversed(vals) if v is not None), None) for name, vals in series.items()}
    return {
        "rounds": rounds,
        "epsilon": series,
        "delta": delta,
        "client": client,
        "selected_by": selected_by or "given",
        "selection": (f"client {client}: largest final ε under {selected_by}" if selected_by else f"client {client} (given)"),
        "final_epsilon": final,
        "evaluated_rounds": curves["evaluated_rounds"],
        "unavailable": curves["unavailable"],
        "notes": curves["notes"],
        "clients": len(ledger.clients()),
        "neighbouring": ledger.neighbouring.value,
    }


def _largest_final_client(ledger: PrivacyLedger, names: Sequence[str], delta: float, last_round: int) -> tuple[str, str]:
    """(the client with the largest final ε, the accountant that decided it): the first of ``names`` that supports
    every client's composition."""
    # the accountants load scipy and prv-accountant: imported when a curve is drawn, not with the report
    from privaudit.accounting.accountants import get_accountant

    for name in names:
        acct = get_accountant(name)
        reasons = {acct.unsupported_reason(ledger.composition_through(c, last_round)) for c in ledger.clients()}
        if reasons == {None}:
            try:
                finals = {cid: c.epsilon for cid, c in ledger.summary(delta, accountant=name).per_client.items()}
            except (NumericalFailure, UnsupportedMechanismError):
                continue
            return max(finals, key=lambda cid: finals[cid]), name
    raise InvalidParameterError(f"none of the accountants {', '.join(names)} can account for every client of this ledger")


def _client_curves(ledger: PrivacyLedger, names: Sequence[str], client: str, delta: float, rounds: list[int],
                   max_points: int) -> dict[str, Any]:
    """``client``'s ε per round under each accountant (``epsilon``, ``evaluated_rounds``), the accountants that could
    not answer (``unavailable``) and ``notes``; one clear error when none could."""
    # the accountants load scipy and prv-accountant: imported when a curve is drawn, not with the report
    from privaudit.accounting.accountants import get_accountant

    series: dict[str, list[float | None]] = {}
    evaluated: dict[str, list[int]] = {}
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    for name in names:
        acct = get_accountant(name)
        reason = acct.unsupported_reason(ledger.composition_through(client, rounds[-1]))
        if reason is not None:
            unavailable[name] = f"unsupported: {reason}"
            continue
        cheap = name in ("rdp", "gdp", "pure") or _is_exact_for(name, ledger, client, rounds[-1])
        at = list(rounds) if cheap else _thin(rounds, max_points)
        try:
            values = dict(zip(at, ledger.epsilon_by_round(client, delta, at, accountant=name), strict=True))
        except (NumericalFailure, UnsupportedMechanismError) as exc:
            unavailable[name] = f"failed: {exc}"
            continue
        series[name] = [values.get(r) for r in rounds]
        evaluated[name] = at
        if len(at) < len(rounds):
            notes.append(f"{name} is evaluated at {len(at)} of {len(rounds)} rounds (evenly spaced, last included): "
                         f"each evaluation costs a discretisation/convolution; rdp covers every round")
        if acct.approximate:
            notes.append(f"{name} is an approximation, not a certified bound")
    if not series:
        raise InvalidParameterError("no accountant could answer for this client: " +
                                    "; ".join(f"{k}: {v}" for k, v in unavailable.items()))
    return {"epsilon": series, "evaluated_rounds": evaluated, "unavailable": unavailable, "notes": notes}


def epsilon_curve_result(ledger: PrivacyLedger, delta: float, accountants: Sequence[str] = CURVE_ACCOUNTANTS,
                         manifest: Mapping[str, Any] | None = None, checkpoint: str | Path | None = None,
                         max_points: int = DEFAULT_CURVE_POINTS) -> Result:
    """An ``epsilon-curve`` result (:func:`epsilon_curve_data`) over the run's rounds."""
    total = _total_rounds(manifest, ledger)
    rounds = sorted(set(range(1, total + 1)) | set(ledger.event_rounds())) if total else None
    data = epsilon_curve_data(ledger, delta, accountants, rounds=rounds, max_points=max_points)
    name = _run_name(_algorithm(manifest) if manifest is not None else None, checkpoint)
    config = {**_run_config(manifest or {}, checkpoint), "delta": delta, "accountants": list(accountants),
              "max_points": max_points}
    title = f"ε vs rounds: {name}, client {data['client']}"
    return make_result("epsilon-curve", title, data, config, seed=_seed(manifest or {}))

