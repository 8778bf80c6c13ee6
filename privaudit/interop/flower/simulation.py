"""Flower's simulation engine with privaudit's defaults, and :class:`FlowerApp`: a ServerApp, a ClientApp and a size.

:func:`run_simulation` calls ``flwr.simulation.run_simulation`` (Flower's Ray backend on this machine: every client is
a Ray actor, nothing goes over a network) with one CPU per client actor, as many actors as cores, no dashboard and
Flower's log lowered to errors unless ``quiet=False``. On a Ray cluster or a Flower deployment, run the same
apps with ``flwr run`` (README, "Flower"); nothing here is needed there.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from privaudit.errors import InvalidParameterError


def default_backend_config(num_supernodes: int) -> dict[str, Any]:
    """One CPU per client actor, at most as many actors as cores, no dashboard, Ray's own log at error level."""
    cpus = max(1, min(os.cpu_count() or 1, int(num_supernodes)))
    return {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": cpus, "include_dashboard": False, "logging_level": "error", "log_to_driver": False}}


@contextmanager
def _quiet_flower(quiet: bool):
    """Flower's log (every round, every sampled node) lowered to errors for the duration."""
    if not quiet:
        yield
        return
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.ERROR)  # also Flower's notice that run_simulation is deprecated in favour of `flwr run`
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Ray will no longer override accelerator.*", category=FutureWarning)
            yield
    finally:
        logger.setLevel(level)


def run_simulation(server_app, client_app, num_supernodes: int, *, backend_config: Mapping[str, Any] | None = None,
                   quiet: bool = True) -> None:
    """Run ``server_app`` against ``num_supernodes`` simulated nodes running ``client_app`` (Flower's Ray backend).

    An exception in the ServerApp is raised here; a ClientApp's exception reaches the strategy as an error reply.
    """
    from flwr.simulation import run_simulation as flower_run_simulation

    if isinstance(num_supernodes, bool) or not isinstance(num_supernodes, int) or num_supernodes < 1:
        raise InvalidParameterError(f"a Flower simulation needs at least one node, got {num_supernodes!r}")
    config = dict(backend_config) if backend_config is not None else default_backend_config(num_supernodes)
    with _quiet_flower(quiet):
        flower_run_simulation(server_app=server_app, client_app=client_app, num_supernodes=num_supernodes,
                              backend_config=config)


@dataclass
class FlowerApp:
    """A Flower app as Flower's simulation runs it: its ServerApp, its ClientApp and the number of nodes.

    ``tap`` is the :class:`~privaudit.interop.flower.tap.AuditTap` the ServerApp records through, when it has one
    (the canary audit reads its checkpoint and its DP settings).
    """

    server_app: Any
    client_app: Any
    num_supernodes: int
    backend_config: Mapping[str, Any] | None = None
    tap: Any = None

    def run(self, *, quiet: bool = True) -> None:
        run_simulation(self.server_app, self.client_app, self.num_supernodes, backend_config=self.backend_config, quiet=quiet)
