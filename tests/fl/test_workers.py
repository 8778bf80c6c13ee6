"""CPU worker processes (``workers=N``): same local models as one process, pool lifecycle, refusals."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from privaudit.data import load_dataset
from privaudit.errors import InvalidParameterError
from privaudit.executor import WorkerPool, threads_per_worker
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree, seeded_torch_global
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.fl.run import TrainSpec, build_algorithm, run_training


def _cnn() -> nn.Module:
    return seeded_torch_global(0, lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                                        nn.Flatten(), nn.Linear(4 * 4 * 4, 10)))


@pytest.fixture(autouse=True)
def _one_thread_everywhere(monkeypatch):
    """Bit for bit needs the same torch thread count in every process: one here and in each worker (the default on a
    2-core machine with 2 workers; pinned so the tests hold on bigger machines too)."""
    import privaudit.executor

    monkeypatch.setattr(privaudit.executor, "threads_per_worker", lambda workers, cores=None: 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _cnn_run(execution: str, workers: int):
    dataset = load_dataset("digits", num_clients=4, seed=0)
    spec = TrainSpec(algorithm="fedavg", dataset="digits", rounds=2)
    config = FederationConfig(rounds=2, local=LocalTrainingConfig(epochs=1, batch_size=64), execution=execution, seed=3)
    return run_federation(dataset, _cnn(), build_algorithm(spec), config, progress=False, workers=workers)


def _same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_sequential_cnn_clients_in_two_workers_are_one_worker_bit_for_bit():
    one = _cnn_run("sequential", 1)
    two = _cnn_run("sequential", 2)
    assert two.info.execution_mode == "sequential on 2 worker processes" and two.info.hardware["workers"] == 2
    assert _same(one.state, two.state)
    assert [m.test_accuracy for m in one.history] == [m.test_accuracy for m in two.history]


def test_the_main_process_trains_one_group_and_client_data_travel_once(monkeypatch):
    sent: list[list] = []
    local_groups: list[int] = []
    original = WorkerPool.map_alongside

    def spy(self, fn, items, local):
        sent.append([task for item in items for task in item[1]])

        def counted():
            result = local()
            local_groups.append(len(result))
            return result

        return original(self, fn, items, counted)

    monkeypatch.setattr(WorkerPool, "map_alongside", spy)
    one = _cnn_run("sequential", 1)
    two = _cnn_run("sequential", 2)
    assert _same(one.state, two.state)
    assert len(sent) == 2 and local_groups == [2, 2]  # 4 clients: 2 in this process, 2 in the one worker, per round
    assert all(task.data is None for task in sent[0] + sent[1])  # the data went with the pool, not with the rounds


def test_clients_sampled_after_the_first_round_do_not_travel_with_each_round(monkeypatch):
    sent: list = []
    original = WorkerPool.map_alongside

    def spy(self, fn, items, local):
        sent.extend(task for item in items for task in item[1])
        return original(self, fn, items, local)

    monkeypatch.setattr(WorkerPool, "map_alongside", spy)
    spec = TrainSpec(algorithm="fedavg", dataset="digits", rounds=3, num_clients=6, clients_per_round=0.5, seed=1,
                     local=LocalTrainingConfig(epochs=1, batch_size=64), execution="sequential", workers=2)
    run_training(spec, progress=False)
    assert len({task.client_id for task in sent}) > 1 and all(task.data is None for task in sent)


def test_stacked_convolutional_lanes_split_over_workers_agree_with_one_process():
    one = _cnn_run("batched", 1)
    two = _cnn_run("batched", 2)
    assert one.info.execution_mode == "batched (layers)"
    assert two.info.execution_mode == "batched (layers) on 2 worker processes"
    for k in one.state:  # each lane's operations do not depend on its group; rounding may (BLAS blocking)
        torch.testing.assert_close(two.state[k], one.state[k], rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # two spawned pools under DP-SGD: ~10 s quiet, more on a loaded machine
def test_dpsgd_clients_in_two_workers_are_one_worker_bit_for_bit():
    def spec(workers: int) -> TrainSpec:
        return TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=2, num_clients=4, privacy="dp-sgd",
                         privacy_options={"clip": 1.0, "noise": 1.0}, local=LocalTrainingConfig(epochs=1, batch_size=16),
                         workers=workers)

    one, two = run_training(spec(1), progress=False), run_training(spec(2), progress=False)
    assert "2 worker processes" in two.info.execution_mode
    assert _same(one.state, two.state)
    assert [e.to_dict() for e in one.ledger.events] == [e.to_dict() for e in two.ledger.events]


def test_dense_stacked_models_stay_batched_in_the_main_process():
    spec = TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=1, num_clients=4, workers=2,
                     local=LocalTrainingConfig(epochs=1))
    result = run_training(spec, progress=False)
    assert result.info.execution_mode == "batched (layers)"  # no pool was started for logistic regression


def test_workers_are_checked():
    model = _cnn()
    with pytest.raises(InvalidParameterError, match="at least 1"):
        ClientTrainer(model, (1, 8, 8), 10, LocalTrainingConfig(), "auto", SeedTree(0), workers=0)
    with pytest.raises(InvalidParameterError, match="workers"):
        run_training(TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=1, workers=0), progress=False)
    with pytest.raises(InvalidParameterError, match="workers \\(3\\) exceed the federation's 2 clients"):
        run_training(TrainSpec(algorithm="fedavg", dataset="digits", num_clients=2, rounds=1, workers=3), progress=False)
    assert threads_per_worker(2, cores=2) == 1 and threads_per_worker(3, cores=16) == 5 and threads_per_worker(4, cores=2) == 1


def _context(payload):
    return payload * 10


def _add(context, item):
    if item < 0:
        raise InvalidParameterError(f"negative item {item}")
    return context + item


def test_worker_pool_keeps_item_order_and_stops_on_a_failed_job():
    pool = WorkerPool(2, _context, 4)
    try:
        assert pool.map(_add, [3, 1, 2, 0]) == [43, 41, 42, 40]
        assert pool.map(_add, [5]) == [45]  # the same workers, context built once
        with pytest.raises(InvalidParameterError, match="negative item"):
            pool.map(_add, [1, -1, 2])
        with pytest.raises(InvalidParameterError, match="closed"):
            pool.map(_add, [1])
    finally:
        pool.close()


def test_batch_norm_on_a_one_value_batch_is_one_error_not_a_torch_traceback():
    spec = TrainSpec(algorithm="fedavg", dataset="digits", model="convnet-bn", rounds=1, num_clients=2,
                     local=LocalTrainingConfig(epochs=1, batch_size=1))
    with pytest.raises(InvalidParameterError, match="more than one value per channel"):
        run_training(spec, progress=False)


def test_a_script_without_the_main_guard_fails_in_one_error_instead_of_hanging(tmp_path):
    """Spawned workers re-import the main module; one that dies while starting used to leave the parent blocked
    writing a large start-up payload into the spawn pipe, forever."""
    import subprocess
    import sys

    script = tmp_path / "no_guard.py"
    script.write_text(
        "from privaudit.fl.engine.config import LocalTrainingConfig\n"
        "from privaudit.fl.run import TrainSpec, run_training\n"
        "spec = TrainSpec(algorithm='fedavg', dataset='digits', rounds=1, num_clients=4, model='lenet-dlg',\n"
        "                 local=LocalTrainingConfig(epochs=1, batch_size=64), execution='sequential', workers=2)\n"
        "run_training(spec, progress=False)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "InvalidParameterError" in done.stderr and "__main__" in done.stderr


def test_the_worker_pool_stops_and_its_payload_file_goes_when_the_federation_ends(monkeypatch):
    pools = []
    original = WorkerPool.__init__

    def remember(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pools.append(self)

    monkeypatch.setattr(WorkerPool, "__init__", remember)
    _cnn_run("sequential", 2)
    import os

    assert len(pools) == 1 and pools[0]._pool is None  # closed: an audit's many federations leave no processes behind
    assert not os.path.exists(pools[0]._payload_path)
    import signal

    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # SIGTERM raised Terminated while the pool lived, no longer


# -- SIGTERM: the pool cleans up whenever it arrives ---------------------------------------------------------------
REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
MARK_ENV = "PRIVAUDIT_TEST_MARK"

#: ``python -c TRAIN_DRIVER WHERE train ...``: privaudit's CLI whose main process, once the pool exists, stops to wait for
#: SIGTERM either between two rounds (``between-rounds``: completing the round, no job running) or while the workers
#: train (``during-a-round``: in its own share of the round's clients); it touches $PRIVAUDIT_TEST_MARK first.
TRAIN_DRIVER = """
import os, sys, time
from pathlib import Path
import privaudit.fl.engine.round_loop as round_loop
import privaudit.fl.engine.trainer as trainer
where = sys.argv.pop(1)

def wait_here(original):
    def waiting(*args, **kwargs):
        Path(os.environ["PRIVAUDIT_TEST_MARK"]).touch()
        time.sleep(120)
        return original(*args, **kwargs)
    return waiting

if where == "between-rounds":
    round_loop.Federation.complete_round = wait_here(round_loop.Federation.complete_round)
else:
    trainer._train_group = wait_here(trainer._train_group)
from privaudit.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("where", ["between-rounds", pytest.param("during-a-round", marks=pytest.mark.slow)])
def test_sigterm_to_train_with_workers_exits_143_and_leaves_no_semaphore_file_or_process(tmp_path, where):
    """``train --workers 2`` stopped by SIGTERM: exit code 143, one line, no "leaked semaphore" warning from the resource
    tracker, no pool payload file (``privaudit-pool-*.pickle`` in the temporary folder) and no worker left running.
    Between rounds the default handler used to kill the process on the spot and leak all three."""
    import os
    import signal
    import subprocess
    import sys
    import time

    temporary, mark = tmp_path / "tmp", tmp_path / "mark"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary), MARK_ENV: str(mark), "PYTHONWARNINGS": "always"}
    args = ["train", "--algorithm", "fedavg", "--dataset", "digits", "--num-clients", "4", "--model", "convnet",
            "--execution", "sequential", "--local-epochs", "1", "--batch-size", "64", "--rounds", "3", "--workers", "2",
            "--threads", "1", "--quiet"]
    with (tmp_path / "stderr").open("w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", TRAIN_DRIVER, where, *args], cwd=REPO, env=env,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 600  # a hang guard (generous under load)
            while not (mark.exists() and list(temporary.glob("privaudit-pool-*.pickle"))):
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr").read_text()
                time.sleep(0.05)
            workers = _children(process.pid)
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
    time.sleep(1.0)  # the resource tracker reports leaked semaphores when its pipe closes
    err = (tmp_path / "stderr").read_text()
    assert code == 143 and [line for line in err.splitlines() if line.strip()] == ["error: terminated (SIGTERM)"], err
    assert "leaked semaphore" not in err and "Traceback" not in err
    assert not list(temporary.glob("privaudit-pool-*")), "the pool's payload file outlived the command"
    assert workers and not [pid for pid in workers if _running(pid)], "pool workers outlived the command"


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux /proc), the pool's workers and multiprocessing's resource tracker."""
    from pathlib import Path

    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


def _running(pid: int) -> bool:
    from pathlib import Path

    try:
        state = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state


def _half_a_result(context, item):
    """Write the start of a result message into the pool's result pipe, say so, and wait to be terminated: a worker
    killed while it sends a large result leaves the parent's reader exactly there."""
    import gc
    import os
    import struct
    import time
    from multiprocessing.queues import SimpleQueue
    from pathlib import Path

    (queue,) = [o for o in gc.get_objects() if isinstance(o, SimpleQueue)]  # the worker's result queue
    os.write(queue._writer.fileno(), struct.pack("!i", 1_000_000) + b"x" * 16)  # 16 of the 1,000,000 bytes announced
    Path(os.environ[MARK_ENV]).touch()
    time.sleep(120)


POOL_DRIVER = """
import os, sys, threading, time
from pathlib import Path
from privaudit.errors import Terminated
from privaudit.executor import WorkerPool
from tests.fl.test_workers import _context, _half_a_result

def local():
    while not Path(os.environ["PRIVAUDIT_TEST_MARK"]).exists():
        time.sleep(0.05)
    raise Terminated("terminated (SIGTERM)")

pool = WorkerPool(1, _context, 1)
try:
    pool.map_alongside(_half_a_result, [0], local)
except Terminated:
    print("threads left:", sorted(t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()))
"""


def test_a_worker_stopped_mid_result_does_not_hang_the_process_at_exit(tmp_path):
    """The pool's manager thread used to wait for ever for the rest of a result a terminated worker had begun to send,
    and the interpreter hung at exit joining it (a SIGTERM'd ``train`` that never ended)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, MARK_ENV: str(tmp_path / "mark"), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", POOL_DRIVER], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "threads left: []", done.stdout
    assert not list(tmp_path.glob("privaudit-pool-*"))
