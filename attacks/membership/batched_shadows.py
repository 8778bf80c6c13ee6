"""LiRA's shadow federations trained in lockstep, every shadow's clients as lanes of one stacked run.

A shadow is a whole federation (:func:`attacks.membership.shadows.shadow_trial`): rounds of client sampling,
local training, the algorithm's privatizer and aggregation. Only local training is expensive, and in a given
training round it is the same optimiser loop for every shadow. So the shadows run *in lockstep*: each one runs
the engine's own round loop (:func:`privaudit.fl.engine.round_loop.run_federation`, nothing re-implemented) in
its own thread, with a trainer (:class:`LockstepTrainer`) that hands its round's local-training job to a
:class:`Lockstep` and waits. When every shadow has handed in its job for the round, the jobs run as **one**
stacked run (:func:`train_federations_as_lanes`): every (shadow, sampled client) pair is one lane of stacked
parameters (:mod:`privaudit.fl.engine.stacked`: ``torch.func.vmap`` over ``functional_call`` for CNNs, batched
matrix products for linear models and MLPs), driven by the engine's lane optimiser
(:func:`privaudit.fl.engine.local_training.run_lanes`).

Only one thread runs at any time (the lockstep passes a baton round-robin, shadow 0, 1, …), so torch's global
generator (model initialisation, dropout in the sequential trainer) is never used by two shadows at once and a
run is deterministic. Each lane takes its mini-batch order and dropout masks from its own shadow's seed tree —
the streams ``("shuffle", round, client)`` and ``("dropout", round, client)`` that shadow's own trainer would
use — and starts from its own shadow's global model, so a shadow trained in lanes is the shadow trained alone,
up to floating-point summation order. Measured (``tests/attacks/test_batched_shadows.py``, CPU): φ bit-identical
for the ``layers`` stacked form (logistic regression, an MLP with dropout, the small CNN ``lenet-dlg``); the test
allows 1e-5 for CNNs, since a ``vmap`` form or another device may sum batched convolutions in another order when
the number of lanes changes.

Jobs that have no stacked form (DP-SGD, FedCurv and exact minimisation solve per client; models with buffers)
are trained by each shadow's own trainer, one after the other, with the same results as without the lockstep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from privaudit.data.base import ClientData
from privaudit.executor import Executor, Trial
from privaudit.fl.engine.local_solver import LaneSolver, LocalOutcome, LocalTask, Trainer
from privaudit.fl.engine.local_training import Schedule, run_lanes
from privaudit.fl.engine.oracles import StackedOracle, lane_batches
from privaudit.fl.engine.params import State
from privaudit.fl.engine.stacked import StackedModel, build_stacked_model
from privaudit.fl.engine.trainer import ClientTrainer


@dataclass(frozen=True)
class LaneJob:
    """One federation's local training of one training round: what ``ClientTrainer.train`` was asked."""

    trainer: ClientTrainer
    global_state: State
    tasks: tuple[LocalTask, ...]
    training_round: int


def _stackable(jobs: Sequence[LaneJob]) -> bool:
    """Whether all jobs can be one stacked run: a stacked model and one plain lane solver for every task."""
    tasks = [t for job in jobs for t in job.tasks]
    if not tasks or any(job.trainer.stacked is None for job in jobs if job.tasks):
        return False
    first = tasks[0].objective
    if not isinstance(first.solver, LaneSolver):  # a client solver trains each client itself
        return False
    return all(t.objective.solver == first.solver and t.objective.prox == first.prox
               and (t.objective.linear is None) == (first.linear is None) for t in tasks)


def train_federations_as_lanes(jobs: Sequence[LaneJob]) -> tuple[list[list[LocalOutcome]], bool]:
    """The outcomes of every job (in job and task order) and whether they ran as one stacked run.

    Lane (j, i) is task i of job j: it starts from job j's global model, follows the mini-batch schedule job j's
    trainer draws for that client (:meth:`ClientTrainer.schedule`) and, for dropout, that trainer's
    ``("dropout", round, client)`` stream. Jobs without a stacked form run through their own trainers.
    """
    if not _stackable(jobs):
        return [job.trainer.train(job.global_state, list(job.tasks), job.training_round) for job in jobs], False
    lead = next(job.trainer for job in jobs if job.tasks)
    names, device = list(lead.names), lead.device  # the trainers' device: shadows of one recipe share it
    lanes = [(j, i) for j, job in enumerate(jobs) for i in range(len(job.tasks))]
    schedules = {(j, i): jobs[j].trainer.schedule(jobs[j].tasks[i], jobs[j].training_round) for j, i in lanes}
    lanes.sort(key=lambda lane: -schedules[lane].steps)  # stable: ties keep job and client order
    steps = [schedules[lane].steps for lane in lanes]
    # each lane's data on the device, uploaded once per shadow client
    batches = lane_batches([jobs[j].trainer.tensors(jobs[j].tasks[i].data, jobs[j].tasks[i].client_id) for j, i in lanes],
                           [schedules[lane] for lane in lanes])

    def stack_lanes(values: Callable[[int, int], State | None]) -> list[torch.Tensor] | None:
        states = [values(j, i) for j, i in lanes]
        return None if states[0] is None else [torch.stack([s[n] for s in states]).to(device) for n in names]

    fixed_names = [k for k in jobs[lanes[0][0]].global_state if k not in names]
    fixed = {k: torch.stack([jobs[j].global_state[k] for j, _ in lanes]).to(device) for k in fixed_names}
    generators = None
    if lead.stacked.random:
        generators = [jobs[j].trainer.seeds.torch("dropout", jobs[j].training_round, jobs[j].tasks[i].client_id) for j, i in lanes]
    oracle = StackedOracle(lead.stacked, names, fixed, batches, lead.num_classes, generators, lead.local.double_softmax)
    objective = jobs[lanes[0][0]].tasks[lanes[0][1]].objective
    result = run_lanes(
        stack_lanes(lambda j, i: jobs[j].global_state),
        steps,
        oracle,
        lead.local,
        prox=objective.prox,
        anchor=stack_lanes(lambda j, i: jobs[j].tasks[i].objective.anchor) if objective.prox else None,
        linear=stack_lanes(lambda j, i: jobs[j].tasks[i].objective.linear),
        solver=objective.solver,
    )
    outcomes: list[list[LocalOutcome | None]] = [[None] * len(job.tasks) for job in jobs]
    for column, (j, i) in enumerate(lanes):
        job, task = jobs[j], jobs[j].tasks[i]
        state = {k: v.clone() for k, v in job.global_state.items() if k not in names}
        state.update({n: p[column].to("cpu", copy=True) for n, p in zip(names, result.params, strict=True)})
        personal = None if result.personal is None else {n: p[column].to("cpu", copy=True)
                                                         for n, p in zip(names, result.personal, strict=True)}
        outcomes[j][i] = LocalOutcome(task.client_id, {k: state[k] for k in job.global_state}, steps=steps[column],
                                      epochs=task.epochs, mean_loss=float(result.loss_sum[column]) / steps[column], personal=personal)
    return [list(o) for o in outcomes], True  # type: ignore[arg-type]


class _Aborted(BaseException):
    """Raised in a lockstep thread when another one failed (its own error is the one reported)."""


class Lockstep:
    """Runs ``count`` jobs in threads, one at a time, and trains their rounds together.

    Thread ``k`` runs until it calls :meth:`train`; then the baton passes to the next thread that has not handed
    in its round yet. When all live threads have, the round's jobs run as one stacked run
    (:func:`train_federations_as_lanes`) and the threads resume in order 0, 1, … with their outcomes.
    """

    def __init__(self, count: int, on_round: Callable[[], None] | None = None) -> None:
        self.count = int(count)
        self.on_round = on_round
        # one condition per thread on a shared lock: a baton pass wakes only the thread whose turn it is (waking
        # all of them on every pass costs count² wake-ups per round, which dominated the lockstep under load)
        self._lock = threading.Lock()
        self._conds = [threading.Condition(self._lock) for _ in range(self.count)]
        self._turn = 0
        self._live = set(range(self.count))
        self._pending: dict[int, LaneJob] = {}
        self._answers: dict[int, list[LocalOutcome]] = {}
        self._failure: BaseException | None = None
        self._stacked_forms: dict[tuple, StackedModel | None] = {}
        self.rounds = 0
        self.stacked_rounds = 0
        self.training_seconds = 0.0

    # -- called from the job threads -----------------------------------------------------------------
    def train(self, lane: int, job: LaneJob) -> list[LocalOutcome]:
        with self._lock:
            if self._failure is not None:  # another thread failed: stop here rather than run a round for nothing
                raise _Aborted()
            self._pending[lane] = job
            self._advance(lane)
            self._wait(lane, lambda: self._turn == lane and lane in self._answers)
            return self._answers.pop(lane)

    def _enter(self, lane: int) -> None:
        with self._lock:
            self._wait(lane, lambda: self._turn == lane)

    def _leave(self, lane: int, failure: BaseException | None) -> None:
        with self._lock:
            self._live.discard(lane)
            if failure is not None and not isinstance(failure, _Aborted) and self._failure is None:
                self._failure = failure
            if self._failure is None:
                try:
                    self._advance(lane)
                except BaseException as exc:  # a failed stacked run: every thread stops and this is reported
                    self._failure = exc
            if self._failure is not None:
                self._wake_all()

    def _wait(self, lane: int, ready: Callable[[], bool]) -> None:
        while True:
            if self._failure is not None:
                raise _Aborted()
            if ready():
                return
            self._conds[lane].wait()

    def _wake_all(self) -> None:
        for cond in self._conds:
            cond.notify_all()

    def _advance(self, after: int) -> None:
        """Run the round if every live thread handed in its job, else give the baton to the next one."""
        if self._live and all(k in self._pending for k in self._live):
            order = sorted(self._live)
            started = time.perf_counter()
            outcomes, stacked = train_federations_as_lanes([self._pending[k] for k in order])
            self.training_seconds += time.perf_counter() - started
            self.rounds += 1
            self.stacked_rounds += int(stacked)
            self._answers.update(zip(order, outcomes, strict=True))
            self._pending.clear()
            self._turn = order[0]
            if self.on_round is not None:
                self.on_round()
        elif self._live:
            waiting = [k for k in sorted(self._live) if k not in self._pending]
            self._turn = next((k for k in waiting if k > after), waiting[0])
        if self._live:
            self._conds[self._turn].notify()

    def _stacked_model(self, model: torch.nn.Module, input_shape: tuple[int, ...]) -> StackedModel | None:
        """The stacked form, built (fx trace + lane-by-lane check) once per architecture, not once per shadow.

        The stacked run uses the lead trainer's form for every lane anyway (:func:`train_federations_as_lanes`);
        a shadow whose model differs in class, printed structure or parameter shapes gets its own.
        """
        key = (type(model).__module__, type(model).__qualname__, repr(model), tuple(input_shape),
               tuple((n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in model.named_parameters()),
               tuple((n, tuple(b.shape)) for n, b in model.named_buffers()))
        if key not in self._stacked_forms:
            self._stacked_forms[key] = build_stacked_model(model, input_shape)
        return self._stacked_forms[key]

    # -- called from the caller's thread ---------------------------------------------------------------
    def run(self, jobs: Sequence[Callable[[Callable[..., ClientTrainer]], Any]]) -> list[Any]:
        """Run ``jobs[k](make_trainer)`` in lockstep (``make_trainer`` goes to ``run_federation``); results in order."""
        if len(jobs) != self.count:
            raise ValueError(f"{len(jobs)} jobs for a lockstep of {self.count}")
        results: list[Any] = [None] * self.count

        def work(lane: int) -> None:
            failure = None
            try:
                self._enter(lane)
                results[lane] = jobs[lane](
                    lambda *args, **kwargs: LockstepTrainer(ClientTrainer(*args, stacked_model=self._stacked_model, **kwargs), self, lane)
                )
            except BaseException as exc:
                failure = exc
            finally:
                self._leave(lane, failure)

        threads = [threading.Thread(target=work, args=(k,), name=f"shadow-lane-{k}", daemon=True) for k in range(self.count)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException as exc:  # Ctrl-C: stop the threads at their next hand-in, then re-raise
            with self._lock:
                self._failure = self._failure or exc
                self._wake_all()
            raise
        if self._failure is not None:
            raise self._failure
        return results


class LockstepTrainer(Trainer):
    """A federation's trainer (:class:`~privaudit.fl.engine.local_solver.Trainer`) that trains its rounds through a
    :class:`Lockstep`; everything else is its own :class:`~privaudit.fl.engine.trainer.ClientTrainer`'s."""

    def __init__(self, inner: ClientTrainer, lockstep: Lockstep, lane: int) -> None:
        self.inner, self.lockstep, self.lane = inner, lockstep, lane
        self.model, self.names, self.local, self.seeds, self.device = inner.model, inner.names, inner.local, inner.seeds, inner.device

    def tensors(self, data: ClientData, client_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inner.tensors(data, client_id)

    def schedule(self, task: LocalTask, training_round: int) -> Schedule:
        return self.inner.schedule(task, training_round)

    def train_one(self, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        return self.inner.train_one(global_state, task, training_round)

    def share_clients(self, clients: Sequence[ClientData]) -> None:
        self.inner.share_clients(clients)

    def close(self) -> None:
        self.inner.close()

    @property
    def mode(self) -> str:
        if self.lockstep.rounds and self.lockstep.stacked_rounds == self.lockstep.rounds:
            kind = self.inner.stacked.kind if self.inner.stacked is not None else "?"
            return f"batched across shadow federations ({kind})"
        return f"{self.inner.mode} (in lockstep with other shadow federations)"

    def train(self, global_state: State, tasks: Sequence[LocalTask], training_round: int) -> list[LocalOutcome]:
        return self.lockstep.train(self.lane, LaneJob(self.inner, global_state, tuple(tasks), training_round))


class LockstepExecutor(Executor):
    """Runs trials whose function takes ``make_trainer=`` (:func:`~attacks.membership.shadows.shadow_trial`) in lockstep.

    All trials run at once, as lanes of one stacked training per round; their results come back in trial order
    when the last federation has finished (``on_round`` is called once per training round).
    """

    name = "lanes"

    def __init__(self, on_round: Callable[[], None] | None = None) -> None:
        self.on_round = on_round
        self.last: Lockstep | None = None

    def run(self, fn: Callable[..., Any], trials: Sequence[Trial]) -> Iterator[tuple[str, Any]]:
        if not trials:
            return iter(())
        lockstep = self.last = Lockstep(len(trials), self.on_round)
        jobs = [lambda make_trainer, t=t: fn(t.spec, t.seed, make_trainer=make_trainer) for t in trials]
        results = lockstep.run(jobs)
        return iter([(t.trial_id, r) for t, r in zip(trials, results, strict=True)])
