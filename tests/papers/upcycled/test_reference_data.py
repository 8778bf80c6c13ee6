"""The Upcycled-FL reference repository's data files as privaudit data (a small stand-in written in the same format)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from privaudit.errors import InvalidParameterError
from privaudit.papers.upcycled.readme_run import run_readme
from privaudit.papers.upcycled.reference_data import load_reference_synthetic


def _readme_main():
    """``benchmarks/upcycled_readme_run.py``'s ``main`` (the script that runs the README grid)."""
    import importlib
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[3] / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("upcycled_readme_run").main


def _write(root, name: str = "synthetic_iid", clients: int = 3, seed: int = 0):
    """The layout of osu-srml/Upcycled-FL@4dd7400:data/<name>/data: float64 TensorDatasets and user-group JSON files."""
    rng = np.random.default_rng(seed)
    sizes, test_sizes = [12 + 5 * k for k in range(clients)], [4 + k for k in range(clients)]
    base = root / "data" / name / "data"
    for part, counts, file in (("train", sizes, "mytrain.pt"), ("test", test_sizes, "mytest.pt")):
        (base / part).mkdir(parents=True)
        total = sum(counts)
        x = torch.from_numpy(rng.normal(size=(total, 20)))
        y = torch.from_numpy((rng.random(total) < 0.5).astype(np.float64))
        torch.save(TensorDataset(x, y), base / part / file)
        order = rng.permutation(total).tolist()
        groups, start = {}, 0
        for k, n in enumerate(counts):
            groups[str(k)] = sorted(order[start:start + n])
            start += n
        (base / part / "user_groups.json").write_text(json.dumps(groups))
    return sizes, test_sizes


def test_reference_files_become_the_reference_clients_and_pooled_test_set(tmp_path):
    sizes, test_sizes = _write(tmp_path)
    data = load_reference_synthetic(tmp_path, "synthetic_iid")
    assert list(data.client_sizes) == sizes and [c.num_test for c in data.clients] == test_sizes
    assert data.num_classes == 2 and data.input_shape == (20,)
    raw = torch.load(tmp_path / "data/synthetic_iid/data/test/mytest.pt", weights_only=False)
    assert np.array_equal(data.test[0], raw.tensors[0].numpy().astype(np.float32))  # the whole test file, in its order
    groups = json.loads((tmp_path / "data/synthetic_iid/data/train/user_groups.json").read_text())
    train = torch.load(tmp_path / "data/synthetic_iid/data/train/mytrain.pt", weights_only=False)
    assert np.array_equal(data.clients[1].x_train, train.tensors[0].numpy()[groups["1"]].astype(np.float32))
    assert data.clients[1].y_train.dtype == np.int64


def test_bad_reference_data_is_one_typed_error(tmp_path):
    with pytest.raises(InvalidParameterError, match="unknown reference data set"):
        load_reference_synthetic(tmp_path, "mnist")
    with pytest.raises(InvalidParameterError, match="no reference data file"):
        load_reference_synthetic(tmp_path, "synthetic_1_1")
    _write(tmp_path)
    torch.save({"x": torch.zeros(3)}, tmp_path / "data/synthetic_iid/data/test/mytest.pt")
    with pytest.raises(InvalidParameterError, match="TensorDataset"):
        load_reference_synthetic(tmp_path, "synthetic_iid")


def test_the_readme_run_trains_on_the_reference_files(tmp_path, capsys):
    _write(tmp_path)
    run = run_readme(0, reference_data=str(tmp_path), rounds=2)
    assert 0.0 <= run.test_accuracy <= 1.0 and 0 < run.noise_weight < 1
    with pytest.raises(SystemExit) as stop:
        _readme_main()(["--reference-data", str(tmp_path / "missing"), "--seeds", "0"])
    assert stop.value.code == 2
    assert "no reference data file" in capsys.readouterr().err
