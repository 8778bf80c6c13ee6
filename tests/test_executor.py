"""The trial executor: same seeds give the same results in-process and in a process pool; resumable."""

import json
import os

import numpy as np
import pytest

from privaudit.device import DEVICE_ENV, training_device
from privaudit.errors import InvalidParameterError
from privaudit.executor import (
    TRIALS_FILE,
    InProcessExecutor,
    ProcessExecutor,
    make_executor,
    make_trials,
    read_finished,
    run_trials,
    trial_seed,
)


def noisy_score(spec, seed):
    """A stand-in trial: a seeded draw whose value depends on the spec and the seed only."""
    rng = np.random.default_rng(seed)
    return {"score": float(rng.normal(spec["mean"], 1.0)), "in": bool(spec["in"])}


CALLS = []


def counting_trial(spec, seed):
    CALLS.append(spec["i"])
    return spec["i"] * 10


def test_seeds_are_distinct_and_stable():
    seeds = [trial_seed(7, i) for i in range(1000)]
    assert len(set(seeds)) == 1000
    assert trial_seed(7, 3) == trial_seed(7, 3) != trial_seed(8, 3)


def test_process_pool_matches_in_process():
    trials = make_trials(({"mean": float(i % 3), "in": i % 2 == 0} for i in range(12)), base_seed=42)
    local = run_trials(noisy_score, trials, executor=InProcessExecutor(), progress=False)
    pooled = run_trials(noisy_score, trials, executor=ProcessExecutor(workers=2), progress=False)
    assert local == pooled


def torch_threads(spec, seed):
    import torch

    return torch.get_num_threads()


@pytest.mark.slow
def test_pool_workers_give_torch_one_thread(monkeypatch):
    """Workers do not import torch up front (trials without torch start fast), yet a trial that imports it gets 1 thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # what the workers inherit; their initializer must override it
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    trials = make_trials(({} for _ in range(4)), base_seed=0)
    assert run_trials(torch_threads, trials, executor=ProcessExecutor(workers=2), progress=False) == [1, 1, 1, 1]


def test_resume_skips_finished_trials(tmp_path):
    trials = make_trials(({"i": i} for i in range(6)), base_seed=0)
    CALLS.clear()
    first = run_trials(counting_trial, trials[:4], out_dir=tmp_path, progress=False)
    assert CALLS == [0, 1, 2, 3] and first == [0, 10, 20, 30]
    # a half-written line (killed mid-write) is ignored and recomputed
    with (tmp_path / TRIALS_FILE).open("a") as fh:
        fh.write('{"trial_id": "trial-00004", "res')
    CALLS.clear()
    again = run_trials(counting_trial, trials, out_dir=tmp_path, progress=False)
    assert CALLS == [4, 5] and again == [0, 10, 20, 30, 40, 50]
    records = read_finished(tmp_path)
    assert len(records) == 6
    lines = (tmp_path / TRIALS_FILE).read_text().splitlines()
    assert json.loads(lines[-1])["trial_id"] == "trial-00005"


def test_bad_executor_and_duplicate_ids():
    with pytest.raises(InvalidParameterError, match="unknown executor"):
        make_executor("quantum")
    trials = make_trials([{"i": 0}], base_seed=0)
    with pytest.raises(InvalidParameterError, match="unique"):
        run_trials(counting_trial, trials + trials, progress=False)


def test_ray_executor_is_optional():
    try:
        import ray  # noqa: F401
    except ImportError:
        with pytest.raises(InvalidParameterError, match="privaudit\\[ray\\]"):
            make_executor("ray")
    else:  # pragma: no cover - only where Ray is installed
        trials = make_trials(({"mean": 0.0, "in": True} for _ in range(4)), base_seed=1)
        assert run_trials(noisy_score, trials, executor=make_executor("ray", workers=2), progress=False) == run_trials(
            noisy_score, trials, progress=False)
        with training_device("cpu"):  # Ray's workers see the audit's --device (they do not inherit the environment)
            seen = run_trials(device_seen, make_trials([{}], base_seed=0), executor=make_executor("ray"), progress=False)
        assert seen == ["cpu"]


def device_seen(spec, seed):
    return os.environ.get(DEVICE_ENV)


def test_a_trial_runs_with_the_callers_device_and_leaves_the_environment_as_it_was(monkeypatch):
    from privaudit.executor import Trial, _call_on_device

    monkeypatch.setenv(DEVICE_ENV, "before")
    trial = Trial("t", {}, 0)
    assert _call_on_device(device_seen, trial, "cuda:1") == ("t", "cuda:1")
    assert _call_on_device(device_seen, trial, None) == ("t", None)
    assert os.environ[DEVICE_ENV] == "before"
