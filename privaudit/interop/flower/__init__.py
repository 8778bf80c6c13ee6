"""Flower (``pip install 'privaudit[flower]'``, flwr 1.42, message API): audit any Flower app, or run privaudit's algorithms in Flower.

* :mod:`~privaudit.interop.flower.tap` — :class:`AuditTap`, a strategy wrapper that records any Flower strategy's run
  (global models, the sampled clients' updates when asked, the privacy events of Flower's fixed- and adaptive-clipping
  DP wrappers, :mod:`~privaudit.interop.flower.adaptive` for the latter)
  into a privaudit checkpoint through :class:`~privaudit.interop.recorder.FederationRecorder`, and :func:`tap_mod`,
  the client mod that tells it which partition a reply came from;
* :mod:`~privaudit.interop.flower.hosted` — privaudit's algorithms and privatizers as a Flower strategy
  (:class:`HostedStrategy`) and a ClientApp (:func:`hosted_client_app`); :func:`run_spec_in_flower` runs a
  :class:`~privaudit.fl.run.TrainSpec` in Flower's simulation engine, with the same seeds as
  :func:`~privaudit.fl.run.run_training`;
* :mod:`~privaudit.interop.flower.canary` — :class:`CanaryMod`, update-space canaries inserted by a client mod, and
  :func:`run_flower_canary_audit`, the one-run audit (Steinke, Nasr & Jagielski 2023) of a Flower app re-run with the
  mod added;
* :mod:`~privaudit.interop.flower.canary_clients` — :class:`FlowerCanaryClients`, canary clients (Andrew et al.
  2024) appended to the replies before Flower's DP wrapper clips and noises them, scored by
  ``privaudit audit --checkpoint RUN --client-canaries m``;
* :mod:`~privaudit.interop.flower.simulation` — :class:`FlowerApp` and :func:`run_simulation`, Flower's simulation
  engine (Ray) with privaudit's defaults.

Scale-out is Flower's own (its Ray simulation engine, ``flwr run`` on a deployment); privaudit adds no scheduler.
Flower's anonymous telemetry is switched off unless ``FLWR_TELEMETRY_ENABLED`` is set (privaudit makes no network
call of its own).
"""

from __future__ import annotations

import os

from privaudit.errors import InvalidParameterError

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

try:
    import flwr  # noqa: F401
except ImportError:  # pragma: no cover - exercised only where the extra is missing
    raise InvalidParameterError("the Flower adapter needs Flower: pip install 'privaudit[flower]'") from None

#: public name → the submodule that defines it (imported on first use, so importing the package stays cheap)
_EXPORTS = {
    "AuditTap": "tap", "flower_dp_settings": "tap", "tap_mod": "tap",
    "CanaryMod": "canary", "FlowerCanaryOptions": "canary", "run_flower_canary_audit": "canary",
    "FlowerCanaryClients": "canary_clients",
    "HostedStrategy": "hosted", "hosted_client_app": "hosted", "run_spec_in_flower": "hosted",
    "FlowerApp": "simulation", "run_simulation": "simulation",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "AuditTap",
    "CanaryMod",
    "FlowerApp",
    "FlowerCanaryClients",
    "FlowerCanaryOptions",
    "HostedStrategy",
    "flower_dp_settings",
    "hosted_client_app",
    "run_flower_canary_audit",
    "run_simulation",
    "run_spec_in_flower",
    "tap_mod",
]
