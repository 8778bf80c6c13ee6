"""One executor for many independent trials: in-process, a local process pool, or Ray.

Audits train many federations (with and without canaries, shadow models). A *trial* is a picklable
module-level function applied to a JSON-able spec; its result must be JSON-able too. Three guarantees:

* **Same seeds, same results on every executor.** A trial receives its own seed, derived from the audit
  seed and the trial's index (``numpy.random.SeedSequence``), never from worker identity or timing.
* **Resumable.** :func:`run_trials` appends each finished trial as one JSON line to ``<out>/trials.jsonl``
  (flushed and fsynced) and, when re-run, skips the trial ids already there. A half-written last line
  (the process was killed mid-write) is ignored and recomputed. A journal that cannot be written (a full disk)
  moves with the finished trials to a temporary folder and the run goes on (:mod:`privaudit.output_folder`).
* **Progress.** A progress bar (:mod:`privaudit.progress`, on stderr) counts finished trials; results come back
  in trial order.
* **Interruptible.** A process pool stops at once on Ctrl-C, SIGTERM or a failed trial: pending trials are
  cancelled, workers terminated and reaped (no orphaned workers, no leaked semaphores); what finished stays in
  ``trials.jsonl`` for the re-run.

Ray is optional (``pip install privaudit[ray]``); asking for it without it installed is one clear error.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.device import DEVICE_ENV, cpu_cores, default_device
from privaudit.errors import InvalidParameterError, Terminated
from privaudit.output_folder import OutputFolder, folder_for
from privaudit.progress import progress_bar

EXECUTORS = ("in-process", "process", "ray")
TRIALS_FILE = "trials.jsonl"

TrialFn = Callable[[dict[str, Any], int], Any]


def trial_seed(base_seed: int, index: int) -> int:
    """A 63-bit seed for trial ``index`` of an audit seeded with ``base_seed`` (independent streams)."""
    state = np.random.SeedSequence([int(base_seed), int(index)]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


@dataclass(frozen=True)
class Trial:
    """One unit of work: ``fn(spec, seed)``; ``trial_id`` keys resumption."""

    trial_id: str
    spec: dict[str, Any]
    seed: int


def _call(fn: TrialFn, trial: Trial) -> tuple[str, Any]:
    return trial.trial_id, fn(trial.spec, trial.seed)


def _call_on_device(fn: TrialFn, trial: Trial, device: str | None) -> tuple[str, Any]:
    """:func:`_call` with the caller's training device (:func:`privaudit.device.training_device`) in effect."""
    previous = os.environ.pop(DEVICE_ENV, None)
    if device is not None:
        os.environ[DEVICE_ENV] = device
    try:
        return _call(fn, trial)
    finally:
        os.environ.pop(DEVICE_ENV, None)
        if previous is not None:
            os.environ[DEVICE_ENV] = previous


class Executor:
    """Runs trials and yields ``(trial_id, result)`` as they finish (in any order)."""

    name = "executor"

    def run(self, fn: TrialFn, trials: Sequence[Trial]) -> Iterator[tuple[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release workers (no-op for in-process)."""


class InProcessExecutor(Executor):
    name = "in-process"

    def run(self, fn: TrialFn, trials: Sequence[Trial]) -> Iterator[tuple[str, Any]]:
        for trial in trials:
            yield _call(fn, trial)


class ProcessExecutor(Executor):
    """A local process pool (``spawn``: workers import privaudit fresh, no inherited torch threads)."""

    name = "process"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and (isinstance(workers, bool) or int(workers) < 1):
            raise InvalidParameterError(f"workers must be at least 1 (or None: one per core), got {workers!r}")
        self.workers = int(workers) if workers is not None else max(1, os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: TrialFn, trials: Sequence[Trial]) -> Iterator[tuple[str, Any]]:
        """Trials in a pool that stops at once, workers and all, when the run ends early.

        An early end is a failed trial, Ctrl-C, SIGTERM (turned into :class:`Terminated` while the pool runs) or
        a caller that stops iterating: pending trials are cancelled and running ones terminated, so neither
        waits for the remaining trials nor leaves workers or semaphores behind. Finished trials are the
        caller's (:func:`run_trials` has them in ``trials.jsonl``).
        """
        import multiprocessing as mp

        self._pool = pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                                initializer=_init_worker)
        complete = False
        try:
            with _sigterm_raises_terminated():
                pending = {pool.submit(_call, fn, t) for t in trials}
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            complete = True
        finally:
            self._pool = None
            if complete:
                pool.shutdown(wait=True)
            else:
                _stop_now(pool)

    def close(self) -> None:
        """Stop a pool that is still running (the caller gave up on :meth:`run` part-way)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            _stop_now(pool)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated("terminated (SIGTERM)")


def _take_sigterm() -> Callable[[], None] | None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (where the default would kill the process on the
    spot, leaving a pool's workers, semaphores and files behind); returns the function that puts the default back.

    A handler someone else installed, or a pool started from another thread, is left alone (``None``).
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def give_back() -> None:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _raise_terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, _raise_terminated)
    return give_back


@contextmanager
def _sigterm_raises_terminated() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (:func:`_take_sigterm`)."""
    give_back = _take_sigterm()
    try:
        yield
    finally:
        if give_back is not None:
            give_back()


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started, terminate the workers (they may be mid-trial), reap them and the pool's thread.

    A worker terminated while it wrote a result leaves half a message in the result pipe, and the pool's manager
    thread blocked for ever reading the rest: this process holds the pipe's other write end, so no end of file comes,
    and the interpreter then hangs at exit joining that thread. Closing this process's write end once the workers are
    gone ends the read (the thread sees a broken pool and exits). CPython's ``concurrent.futures.process`` internals
    (``_processes``, ``_result_queue``, ``_executor_manager_thread``), read defensively.
    """
    workers = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    results = getattr(pool, "_result_queue", None)
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(timeout=10)
    writer = getattr(results, "_writer", None)
    if writer is not None:
        with contextlib.suppress(OSError):
            writer.close()
    if manager is not None and manager is not threading.current_thread():
        manager.join(timeout=10)


def _init_worker() -> None:
    """A worker leaves Ctrl-C to the parent (which stops the pool), so it prints no traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_threads()


def _limit_threads() -> None:
    """One BLAS/torch thread per worker process, so a pool of N workers uses N cores, not N².

    A spawned worker has not imported torch yet: the environment variables set here give the torch a trial imports
    later one thread (torch reads ``OMP_NUM_THREADS`` when it starts), so trials that never touch torch do not pay
    for importing it.
    """
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


#: A worker's context, built once per process by :class:`WorkerPool`'s ``setup`` (e.g. a federation's trainer).
_WORKER_CONTEXT: Any = None


def _init_pool_worker(threads: int, setup: Callable[[Any], Any], payload_path: str) -> None:
    """Start a :class:`WorkerPool` worker: ``threads`` torch threads, Ctrl-C left to the parent, context built once."""
    import pickle

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    global _WORKER_CONTEXT
    with open(payload_path, "rb") as file:  # our own objects, pickled by the parent into its private temporary file
        _WORKER_CONTEXT = setup(pickle.load(file))


def _remove_file(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _release_pool_resources(path: str | None, give_back: Callable[[], None] | None) -> None:
    """A :class:`WorkerPool`'s own leftovers: its payload file, and SIGTERM's default handler."""
    if path is not None:
        _remove_file(path)
    if give_back is not None:
        give_back()


def _call_in_context(fn: Callable[[Any, Any], Any], item: Any) -> Any:
    return fn(_WORKER_CONTEXT, item)


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """torch threads for each of ``workers`` processes sharing ``cores`` cores: ``max(1, cores // workers)``."""
    return max(1, int(cores or cpu_cores()) // max(1, int(workers)))


class WorkerPool:
    """A persistent local process pool whose workers each hold a context built once from a payload.

    Where :class:`ProcessExecutor` runs independent trials, this pool serves a loop that hands out many small jobs
    over the same heavy context: a federation's round trains its clients with ``map(fn, items)`` →
    ``[fn(context, item) for item in items]`` (results in item order), where ``context = setup(payload)`` was built
    once in every worker (the federation's model and trainer). Workers are spawned (no inherited torch threads), run
    ``threads`` torch threads each (default ``cores // workers``) and stop at once, reaped, on a failed job, Ctrl-C or
    SIGTERM, as :class:`ProcessExecutor`'s do. ``setup``, ``fn`` and the items must be picklable module-level objects.

    SIGTERM raises :class:`Terminated` for the pool's whole life, not only while jobs run (between a federation's
    rounds, say): the default handler would kill this process on the spot and leave the workers' semaphores
    ("leaked semaphore objects") and the payload file behind. The caller unwinds and closes the pool; the CLI exits
    with 143. The default handler is back once the pool is closed.
    """

    def __init__(self, workers: int, setup: Callable[[Any], Any], payload: Any, *, threads: int | None = None) -> None:
        import multiprocessing as mp
        import pickle

        self.workers = int(workers)
        if self.workers < 1:
            raise InvalidParameterError(f"workers must be at least 1, got {workers}")
        self.threads = int(threads) if threads is not None else threads_per_worker(self.workers)
        give_back, path = _take_sigterm(), None
        try:
            # The payload (a model, every client's data) goes through a private temporary file, not the spawn pipe:
            # CPython writes a worker's start-up arguments into a pipe whose read end it keeps open until the write
            # ends, so a worker that dies while starting (a script without the ``__main__`` guard) leaves a payload
            # larger than the pipe's buffer blocked forever instead of failing.
            handle, path = tempfile.mkstemp(prefix="privaudit-pool-", suffix=".pickle")
            with os.fdopen(handle, "wb") as file:
                pickle.dump(payload, file, protocol=pickle.HIGHEST_PROTOCOL)
            pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                       initializer=_init_pool_worker, initargs=(self.threads, setup, path))
        except BaseException:  # SIGTERM, or a payload that does not pickle: nothing is left behind
            _release_pool_resources(path, give_back)
            raise
        self._payload_path: str = path
        self._pool: ProcessPoolExecutor | None = pool
        # the payload file and SIGTERM's default go back at close, on failure, and at the latest at exit
        self._payload_cleanup = weakref.finalize(self, _release_pool_resources, path, give_back)

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any]) -> list[Any]:
        """``[fn(context, item) for item in items]`` computed by the workers, in item order."""
        return self.map_alongside(fn, items, None)[0]

    def map_alongside(self, fn: Callable[[Any, Any], Any], items: Sequence[Any],
                      local: Callable[[], Any] | None) -> tuple[list[Any], Any]:
        """:meth:`map`, with the calling process computing ``local()`` while the workers compute the items.

        Returns the items' results (in item order) and ``local()``'s value (``None`` without ``local``). If either
        side fails, the pool is stopped at once and the error raised, as in :meth:`map`.
        """
        pool = self._pool
        if pool is None:
            raise InvalidParameterError("the worker pool is closed")
        done = False
        try:
            with _sigterm_raises_terminated():
                futures = [pool.submit(_call_in_context, fn, item) for item in items]
                mine = local() if local is not None else None
                results = [future.result() for future in futures]
            done = True
            return results, mine
        except BrokenProcessPool:
            raise InvalidParameterError(
                "a worker process stopped while starting or running; in a script, start the run under "
                "`if __name__ == \"__main__\":` (workers are spawned and re-import the main module), or use workers=1"
            ) from None
        finally:
            if not done:
                self._pool = None
                _stop_now(pool)
                self._remove_payload()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self._remove_payload()

    def _remove_payload(self) -> None:
        self._payload_cleanup()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RayExecutor(Executor):
    """Ray tasks (``address="auto"`` joins a running cluster; ``None`` starts a local one)."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InvalidParameterError("the ray executor needs Ray: pip install 'privaudit[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "ignore_reinit_error": True, "include_dashboard": False}
            if address is None and workers:
                kwargs["num_cpus"] = int(workers)
            ray.init(**{k: v for k, v in kwargs.items() if v is not None})

    def run(self, fn: TrialFn, trials: Sequence[Trial]) -> Iterator[tuple[str, Any]]:
        ray = self._ray
        remote = ray.remote(_call_on_device)
        device = default_device()  # Ray's workers do not inherit this process's environment: each task takes it along
        pending = [remote.remote(fn, t, device) for t in trials]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])


def make_executor(name: str, *, workers: int | None = None, address: str | None = None) -> Executor:
    """``in-process`` (default), ``process`` (local pool) or ``ray``."""
    key = str(name).strip().lower()
    if key in ("in-process", "inprocess", "local"):
        return InProcessExecutor()
    if key in ("process", "processes", "pool"):
        return ProcessExecutor(workers)
    if key == "ray":
        return RayExecutor(address=address, workers=workers)
    raise InvalidParameterError(f"unknown executor {name!r}; choose one of: {', '.join(EXECUTORS)}")


def read_finished(out_dir: str | Path) -> dict[str, Any]:
    """Results already in ``<out_dir>/trials.jsonl`` (a truncated last line is ignored)."""
    path = Path(out_dir) / TRIALS_FILE
    finished: dict[str, Any] = {}
    if not path.exists():
        return finished
    with path.open() as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # killed mid-write: recompute that trial
            if isinstance(record, dict) and "trial_id" in record:
                finished[str(record["trial_id"])] = record.get("result")
    return finished


def _terminate_partial_line(folder: OutputFolder) -> None:
    """If the journal ends mid-line (a killed write), end that line so the next record starts cleanly."""
    path = folder.file(TRIALS_FILE)
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            last = fh.read(1)
        if last != b"\n":
            folder.append(TRIALS_FILE, "\n")


def _append(folder: OutputFolder, trial_id: str, result: Any) -> None:
    """One finished trial, one fsynced line; a failed write moves the journal (and its folder) to a temporary
    folder instead of losing the trials (:mod:`privaudit.output_folder`)."""
    folder.append(TRIALS_FILE, json.dumps({"trial_id": trial_id, "result": result}, allow_nan=False) + "\n")


def make_trials(specs: Iterable[dict[str, Any]], base_seed: int, prefix: str = "trial") -> list[Trial]:
    """Trials ``<prefix>-0000 …`` with seeds :func:`trial_seed` (base_seed, index)."""
    return [Trial(f"{prefix}-{i:05d}", dict(spec), trial_seed(base_seed, i)) for i, spec in enumerate(specs)]


def run_trials(
    fn: TrialFn,
    trials: Sequence[Trial],
    out_dir: str | Path | None = None,
    executor: Executor | None = None,
    *,
    progress: bool = True,
    label: str = "trials",
) -> list[Any]:
    """Run ``trials`` (skipping those already recorded in ``out_dir``) and return results in trial order."""
    if len({t.trial_id for t in trials}) != len(trials):
        raise InvalidParameterError("trial ids must be unique")
    executor = executor or InProcessExecutor()
    results: dict[str, Any] = {}
    folder = None
    if out_dir is not None:
        folder = folder_for(out_dir, "trials")  # the command's output folder when it opened one
        finished = read_finished(folder.file(TRIALS_FILE).parent)
        _terminate_partial_line(folder)
        results.update({t.trial_id: finished[t.trial_id] for t in trials if t.trial_id in finished})
    todo = [t for t in trials if t.trial_id not in results]
    try:
        with progress_bar(label, total=len(trials), completed=len(trials) - len(todo), enabled=progress) as bar:
            for trial_id, result in executor.run(fn, todo):
                results[trial_id] = result
                if folder is not None:
                    _append(folder, trial_id, result)
                bar.advance()
    finally:
        executor.close()
    return [results[t.trial_id] for t in trials]

