"""LEAF JSON loader against tiny FEMNIST- and Sent140-shaped files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privaudit.data import load_dataset
from privaudit.data.leaf import leaf
from privaudit.errors import DataUnavailableError, InvalidParameterError


def _femnist_users(n_users: int, per_user: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    users = [f"f{i:04d}" for i in range(n_users)]
    data = {u: {"x": rng.random((per_user, 784)).round(3).tolist(), "y": rng.integers(0, 62, per_user).tolist()} for u in users}
    return {"users": users, "num_samples": [per_user] * n_users, "user_data": data}


def _write(path: Path, content: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))


def test_femnist_train_test_folders_keep_leaf_split(tmp_path):
    train, test = _femnist_users(3, 8, seed=0), _femnist_users(3, 2, seed=1)
    _write(tmp_path / "data" / "train" / "all_data_0_train.json", train)
    _write(tmp_path / "data" / "test" / "all_data_0_test.json", test)
    data = leaf(tmp_path)
    assert data.num_clients == 3 and data.input_shape == (1, 28, 28)
    assert [c.num_train for c in data.clients] == [8, 8, 8]
    assert [c.num_test for c in data.clients] == [2, 2, 2]
    first = data.clients[0]
    assert np.allclose(first.x_train[0].ravel(), train["user_data"]["f0000"]["x"][0])
    assert np.array_equal(first.y_test, test["user_data"]["f0000"]["y"])
    assert data.num_classes == max(max(u["y"]) for d in (train, test) for u in d["user_data"].values()) + 1
    assert data.metadata["input_kind"] == "image"


def test_single_file_is_split_per_user_and_users_can_be_sampled(tmp_path):
    _write(tmp_path / "all.json", _femnist_users(5, 20, seed=2))
    data = leaf(tmp_path / "all.json", num_clients=3, seed=4, test_fraction=0.25, num_classes=62)
    assert data.num_clients == 3 and data.num_classes == 62
    assert all(c.num_train == 15 and c.num_test == 5 for c in data.clients)
    again = leaf(tmp_path / "all.json", num_clients=3, seed=4, test_fraction=0.25, num_classes=62)
    assert again.fingerprint() == data.fingerprint()
    with pytest.raises(InvalidParameterError, match="has 5 users"):
        leaf(tmp_path / "all.json", num_clients=6)


def _sent140(users: dict[str, list[tuple[str, int]]]) -> dict:
    data = {
        u: {"x": [["1467810369", "Mon Apr 06 22:19:45 PDT 2009", "NO_QUERY", u, text] for text, _ in rows], "y": [y for _, y in rows]}
        for u, rows in users.items()
    }
    return {"users": list(users), "num_samples": [len(r) for r in users.values()], "user_data": data}


def test_sent140_tokens_and_bag_of_words(tmp_path):
    train = _sent140({"alice": [("I love it!", 1), ("love love", 1)], "bob": [("I hate rain", 0), ("rain again", 0)]})
    test = _sent140({"alice": [("love rain", 1)], "bob": [("unseen words here", 0)]})
    _write(tmp_path / "train" / "a.json", train)
    _write(tmp_path / "test" / "a.json", test)

    tokens = load_dataset(f"leaf:{tmp_path}", seq_len=4)
    assert tokens.input_shape == (4,) and tokens.num_classes == 2
    assert tokens.metadata["input_kind"] == "token_ids"
    # vocabulary by frequency: love (3), i (2), rain (2), ... ; ids start at 2 (0 = pad, 1 = unknown)
    assert tokens.clients[0].x_train[1].tolist() == [2, 2, 0, 0]
    assert tokens.clients[1].x_test[0].tolist() == [1, 1, 1, 0]

    bow = load_dataset(f"leaf:{tmp_path}", text_encoding="bow")
    assert bow.metadata["input_kind"] == "bag_of_words"
    assert np.allclose(bow.clients[0].x_train.sum(axis=1), 1.0)


def test_missing_and_malformed_leaf_data(tmp_path):
    with pytest.raises(DataUnavailableError, match=r"train/\*\.json and test/\*\.json"):
        load_dataset(f"leaf:{tmp_path / 'absent'}")
    _write(tmp_path / "bad.json", {"something": 1})
    with pytest.raises(InvalidParameterError, match="not a LEAF JSON file"):
        leaf(tmp_path / "bad.json")
    _write(tmp_path / "shakespeare.json", {"users": ["u"], "user_data": {"u": {"x": ["to be or not to be"], "y": ["e"]}}})
    with pytest.raises(InvalidParameterError, match="not supported"):
        leaf(tmp_path / "shakespeare.json")


def test_leaf_takes_no_partition(tmp_path):
    _write(tmp_path / "all.json", _femnist_users(2, 4, seed=3))
    with pytest.raises(InvalidParameterError, match="naturally federated"):
        load_dataset(f"leaf:{tmp_path / 'all.json'}", partition="iid")
