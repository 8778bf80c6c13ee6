"""``privaudit compute-epsilon``: ε for a mechanism, a paper's closed form, a schedule file or a trained federation.

With ``--checkpoint DIR --delta D --out FILE.json`` it also writes a ``ledger`` result (per-client ε); with
``--curve`` an ``epsilon-curve`` result instead (ε after each round per accountant, :mod:`privaudit.report.producers`).

The command maps its flags to an :class:`~privaudit.accounting.epsilon_request.EpsilonRequest` (which checks them) and
runs it (:mod:`privaudit.cli.epsilon_output`). The closed forms' own flags (``--rounds``, ``--form``, …) come from the
registered papers' closed forms (:func:`privaudit.accounting.closed_form.closed_forms`), so a paper adds its bound
and its flags by declaring them. Module-level imports are light on purpose (typer and the torch-free mechanism table);
the accountants are imported when the command runs, and nothing here imports torch.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

from privaudit.accounting.closed_form import ClosedFormSpec, closed_forms
from privaudit.accounting.epsilon_mechanisms import EFFECTIVE_MULTIPLIER, mechanism_specs
from privaudit.cli.common import cli_errors, command_signature, fail, option

#: The flags every mechanism shares or the generic ones take; a closed form's parameter of one of these names reuses it.
SHARED = ("noise_multiplier", "sample_rate", "steps", "delta", "epsilon", "sampling", "tensors", "scale", "sensitivity")
_ANNOTATIONS = {"count": int | None, "choice": str | None}


def _forms_taking(name: str) -> list[ClosedFormSpec]:
    return [form for form in closed_forms().values() if any(p.name == name for p in form.parameters)]


def _leading_parameters() -> list[inspect.Parameter]:
    forms = [spec for spec in closed_forms().values() if spec.gives == "epsilon"]
    claimed = ", ".join(form.name for form in forms if "epsilon" in form.required) or "a closed form"
    return [
        option("mechanism", str | None, None, "--mechanism", "-m", help=f"One of: {', '.join(mechanism_specs())}."),
        option("noise_multiplier", float | None, None, "--noise-multiplier", help="Noise std / sensitivity (σ)."),
        option("sample_rate", float | None, None, "--sample-rate", help="Sampling rate q in (0, 1]."),
        option("steps", int | None, None, "--steps", help="Number of releases (steps)."),
        option("delta", float | None, None, "--delta", help="Target δ in (0, 1)."),
        option("epsilon", float | None, None, "--epsilon",
               help=f"Target ε (--calibrate), claimed ε ({claimed}) or ε per release (pure-dp)."),
        option("calibrate", bool, False, "--calibrate", help="Print the smallest noise multiplier meeting --epsilon at --delta."),
        option("accountant", str, "auto", "--accountant", "-a",
               help="auto (ctd → prv → pld → rdp), ctd, rdp, prv, pld, gdp, pure, or all."),
        option("vdi", float | None, None, "--vdi", help="Discretisation interval h of the ctd and pld accountants (default: "
                                                         "ctd adapts h to the loss spread, pld 1e-4)."),
        option("eps_error", float | None, None, "--eps-error",
               help="ε error bound of the prv accountant (default: 0.5 % of ε, at least 1e-3)."),
        option("work_limit", float, 30.0, "--work-limit",
               help="Work units (1e9 operations of privaudit's cost model each; about 1 s of a quiet core) the accountants "
                    "may use for one ε (auto's chain and a calibration share them), counted before they run: beyond it an "
                    "accountant declines and auto falls back. The same on every machine, so one command gives one answer."),
        option("time_limit", float | None, None, "--time-limit", hidden=True, help="Replaced by --work-limit."),
        option("neighbouring", str, "add-remove", "--neighbouring",
               help="add-remove or replace-one (doubles Gaussian/Laplace sensitivity)."),
        option("sampling", str | None, None, "--sampling", help="poisson (default) or fixed-size (a batch of q·n drawn "
                                                                 "without replacement; either --neighbouring)."),
        option("tensors", int | None, None, "--tensors", help="Noise added per tensor to L separately clipped tensors: "
                                                              f"effective σ/√L ({EFFECTIVE_MULTIPLIER})."),
        option("scale", float | None, None, "--scale", help="Laplace noise scale b."),
        option("sensitivity", str | None, None, "--sensitivity", help=_sensitivity_help()),
    ]


def _sensitivity_help() -> str:
    models = [f"{'|'.join(p.choices)} ({form.name})" for form in _forms_taking("sensitivity")
              for p in form.parameters if p.name == "sensitivity" and p.choices]
    return "A number (gaussian, laplace)" + "".join(f" or {model}" for model in models) + "."


def _closed_form_parameters() -> list[inspect.Parameter]:
    """One flag per closed-form parameter that no generic mechanism shares, in the registry's order."""
    seen: dict[str, inspect.Parameter] = {}
    for form in closed_forms().values():
        for parameter in form.parameters:
            if form.gives != "epsilon" or parameter.name in SHARED or parameter.name in seen:
                continue
            owners = ", ".join(f.name for f in _forms_taking(parameter.name) if f.gives == "epsilon")
            seen[parameter.name] = option(parameter.name, _ANNOTATIONS.get(parameter.kind, float | None), None,
                                          "--" + parameter.name.replace("_", "-"),
                                          help=f"{owners}: {parameter.help or parameter.kind}")
    return list(seen.values())


def _trailing_parameters() -> list[inspect.Parameter]:
    return [
        option("schedule", Path | None, None, "--schedule", help="JSON file with a heterogeneous composition."),
        option("checkpoint", Path | None, None, "--checkpoint", help="A trained federation: per-client ε from its ledger."),
        option("json_output", bool, False, "--json", help="Print one JSON object."),
        option("out", Path | None, None, "--out",
               help="With --checkpoint: also write a result file for `privaudit report` — a 'ledger' result (per-client ε "
                    "vs budget), or with --curve an 'epsilon-curve' result, e.g. --out audits/ledger.json."),
        option("curve", bool, False, "--curve",
               help="With --checkpoint: ε after each round of the client with the largest final ε, per accountant (auto: "
                    "rdp at every round, prv and pld where supported; a named --accountant: that one only)."),
        option("curve_points", int | None, None, "--curve-points",
               help="With --curve: at most this many rounds (default 10, evenly spaced, last included) at which the slow "
                    "accountants are evaluated (pld; prv unless the releases are plain Gaussian, where it is exact); rdp "
                    "covers every round."),
    ]


def register(app: typer.Typer) -> None:
    leading, own = _leading_parameters(), _closed_form_parameters()
    mechanism_flags = [p.name for p in leading if p.name in SHARED and p.name not in ("delta", "epsilon")] + [p.name for p in own]

    def compute_epsilon(**flags: Any) -> None:
        """Compute ε (or calibrate noise) for a mechanism, a paper's closed form, a schedule or a trained federation.

        With --checkpoint DIR --delta D, --out FILE.json writes a 'ledger' result (per-client ε vs budget) and
        --curve --out FILE.json an 'epsilon-curve' result (ε after each round per accountant) for `privaudit report`.
        """
        if flags["time_limit"] is not None:
            raise fail("--time-limit was replaced by --work-limit (work units counted before an accountant runs, so the "
                       "answer no longer depends on the machine's load; 30 by default)")
        # the accounting stack (scipy, ~0.3 s) loads when the command runs, not at every CLI start
        from privaudit.accounting.epsilon_request import AccountingLimits, CheckpointOutput, EpsilonRequest
        from privaudit.cli.epsilon_output import run

        limits = AccountingLimits(vdi=flags["vdi"], eps_error=flags["eps_error"], work_limit=flags["work_limit"])
        request = EpsilonRequest(
            mechanism=flags["mechanism"], schedule=flags["schedule"], checkpoint=flags["checkpoint"], delta=flags["delta"],
            epsilon=flags["epsilon"], calibrate=flags["calibrate"], accountant=flags["accountant"],
            neighbouring=flags["neighbouring"], parameters={name: flags[name] for name in mechanism_flags}, limits=limits,
            output=CheckpointOutput(flags["out"], flags["curve"], flags["curve_points"]))
        run(request, flags["json_output"])

    command_signature(compute_epsilon, [*leading, *own, *_trailing_parameters()])
    app.command("compute-epsilon")(cli_errors(compute_epsilon))
