"""Build and run a training recipe with canary wrappers between Upcycled-FL and the privatizer.

``make_algorithm`` builds ``Upcycled(Privatizer(X))``; canaries must enter after local training and *before*
the privatizer, so that they are clipped and noised like a real update: :func:`with_canaries` returns
``Upcycled(Canary_n(…Canary_1(Privatizer(X))))`` (or without ``Upcycled`` for a plain X).
:func:`run_spec_on_dataset` trains a :class:`~privaudit.fl.run.TrainSpec` on a dataset built in memory
(canary-augmented data, a LiRA shadow half) instead of the one its name loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.algorithm import Algorithm
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.privacy.registry import privatize
from privaudit.fl.run import TrainSpec, build_algorithm
from privaudit.models import default_model_for

Wrap = Callable[[Algorithm], Algorithm]


def with_canaries(spec: TrainSpec, wrappers: Sequence[Wrap]) -> Algorithm:
    """The algorithm of ``spec`` (with its privacy mechanism) with ``wrappers`` applied around the privatizer.

    Each wrapper is a callable ``inner -> wrapped``, e.g. ``lambda a: GradientCanaryInsertion(a, canaries)``;
    the first one is innermost.
    """
    def privatize_then_wrap(algorithm: Algorithm) -> Algorithm:
        wrapped = privatize(algorithm, spec.privacy or "none", spec.privacy_options)
        for wrap in wrappers:
            wrapped = wrap(wrapped)
        return wrapped

    return make_algorithm(spec.algorithm, spec.algorithm_options, privatizer=privatize_then_wrap)


def run_spec_on_dataset(
    spec: TrainSpec,
    dataset,
    *,
    algorithm: Algorithm | None = None,
    seed: int | None = None,
    eval_every: int | None = None,
    observers: Sequence = (),
    progress: bool = False,
    make_trainer: Callable | None = None,
):
    """Train ``spec``'s federation on an already built ``dataset`` (canary-augmented, a shadow half, ...).

    ``algorithm`` defaults to the spec's own (with its privacy mechanism); ``seed`` and ``eval_every`` override
    the spec's; ``make_trainer`` goes to :func:`~privaudit.fl.engine.round_loop.run_federation`. Returns the
    :class:`~privaudit.fl.engine.round_loop.FederationResult`.
    """
    overrides = {}
    if seed is not None:
        overrides["seed"] = int(seed)
    if eval_every is not None:
        overrides["eval_every"] = int(eval_every)
    spec = replace(spec, **overrides)
    config = spec.federation_config()
    chosen = algorithm if algorithm is not None else build_algorithm(spec)
    model = spec.model or default_model_for(dataset)
    return run_federation(dataset, model, chosen, config, observers=list(observers), progress=progress, make_trainer=make_trainer)
