"""Read LEAF's naturally federated JSON data (FEMNIST, Sent140) from disk; nothing is downloaded.

LEAF (Caldas et al. 2018) writes each split as JSON files of the form
``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``. Accepted paths:

* a folder with ``train/*.json`` and ``test/*.json`` (LEAF's ``data/``; its per-user train/test split is kept),
* a folder of ``*.json`` files, or one ``.json`` file (e.g. ``all_data``): each user's samples are split into
  train/test here, seeded, with ``test_fraction``.

What the samples become:

* numeric rows of 784 values (FEMNIST): images ``(1, 28, 28)``, values as stored (LEAF: [0, 1]);
  other numeric rows: feature vectors;
* rows holding strings (Sent140: ``[id, date, query, user, text]``): the last string is the tweet.
  ``text_encoding="tokens"`` (default) gives ``seq_len`` token ids (lower-cased words; 0 = padding, 1 = out of
  vocabulary; vocabulary = the ``vocab_size`` most frequent training words), stored as float32, for an
  embedding model; ``"bow"`` gives normalised bag-of-words counts over the vocabulary (for ``logreg``).
  Upcycled-FL's Sent140 inputs are sequences of length 25 (003 App. F.1) of 300-dimensional word embeddings
  (``SentimentLSTM`` of osu-srml/Upcycled-FL@4dd7400:models.py; GloVe in FedProx's Sent140 pipeline); GloVe is
  not available offline.

Shakespeare, CelebA and Reddit (string labels or image file names) are refused with a clear error.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.data.federate import split_train_test
from privaudit.errors import DataUnavailableError, InvalidParameterError

__all__ = ["leaf"]

_WORD = re.compile(r"[a-z0-9']+")
_PAD, _UNKNOWN = 0, 1


def _json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json") if p.is_file())


def _locate(path: Path) -> tuple[list[Path], list[Path] | None]:
    """(train files, test files or None when the split is to be made here)."""
    if path.is_file() and path.suffix == ".json":
        return [path], None
    for base in (path, path / "data"):
        train, test = _json_files(base / "train"), _json_files(base / "test")
        if train and test:
            return train, test
    if path.is_dir() and _json_files(path):
        return _json_files(path), None
    if path.is_dir() and _json_files(path / "all_data"):
        return _json_files(path / "all_data"), None
    raise DataUnavailableError(
        f"LEAF data not found at {path}: give a folder with train/*.json and test/*.json (LEAF's data/), "
        "a folder of *.json files, or one .json file; privaudit never downloads data"
    )


def _read_users(files: list[Path]) -> dict[str, tuple[list[Any], list[Any]]]:
    users: dict[str, tuple[list[Any], list[Any]]] = {}
    for file in files:
        try:
            content = json.loads(file.read_text())
            user_data = content["user_data"]
            for name in content.get("users", list(user_data)):
                record = user_data[name]
                xs, ys = users.setdefault(str(name), ([], []))
                xs.extend(record["x"])
                ys.extend(record["y"])
                if len(xs) != len(ys):
                    raise ValueError(f"user {name!r} has {len(xs)} samples but {len(ys)} labels")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise InvalidParameterError(f"{file} is not a LEAF JSON file (needs 'users' and 'user_data' with x and y): {exc}") from exc
    return users


def _kind(sample: Any) -> str:
    if isinstance(sample, list) and sample and all(isinstance(v, int | float) for v in sample):
        return "image" if len(sample) == 784 else "features"
    if isinstance(sample, list) and any(isinstance(v, str) for v in sample):
        return "text"
    raise InvalidParameterError(
        "unsupported LEAF sample format (Shakespeare, CelebA and Reddit are not supported): "
        "privaudit reads FEMNIST-like numeric rows and Sent140-like text rows"
    )


def _tweet(sample: list[Any]) -> list[str]:
    text = next(v for v in reversed(sample) if isinstance(v, str))
    return _WORD.findall(text.lower())


def _vocabulary(token_lists: list[list[str]], size: int) -> dict[str, int]:
    counts = Counter(word for tokens in token_lists for word in tokens)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))[:size]
    return {word: i + 2 for i, word in enumerate(ranked)}


def _encode_text(token_lists: list[list[str]], vocab: dict[str, int], encoding: str, seq_len: int) -> np.ndarray:
    if encoding == "tokens":
        out = np.full((len(token_lists), seq_len), _PAD, dtype=np.float32)
        for row, tokens in enumerate(token_lists):
            ids = [vocab.get(w, _UNKNOWN) for w in tokens[:seq_len]]
            out[row, : len(ids)] = ids
        return out
    out = np.zeros((len(token_lists), len(vocab)), dtype=np.float32)
    for row, tokens in enumerate(token_lists):
        for w in tokens:
            if w in vocab:
                out[row, vocab[w] - 2] += 1.0
        if tokens:
            out[row] /= len(tokens)
    return out


def _labels(ys: list[Any], where: str) -> np.ndarray:
    try:
        labels = np.asarray([int(v) for v in ys], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"LEAF labels in {where} are not integers (Shakespeare-style data is not supported)") from exc
    if labels.size and labels.min() < 0:
        raise InvalidParameterError(f"LEAF labels in {where} are negative")
    return labels


def leaf(
    path: str | Path,
    *,
    num_clients: int | None = None,
    seed: int = 0,
    test_fraction: float = 0.1,
    num_classes: int | None = None,
    text_encoding: str = "tokens",
    seq_len: int = 25,
    vocab_size: int | None = None,
) -> FederatedDataset:
    """LEAF users as clients (all of them, or ``num_clients`` chosen at random with ``seed``)."""
    if text_encoding not in ("tokens", "bow"):
        raise InvalidParameterError(f"text_encoding must be 'tokens' or 'bow', got {text_encoding!r}")
    path = Path(path).expanduser()
    train_files, test_files = _locate(path)
    train_users = _read_users(train_files)
    test_users = _read_users(test_files) if test_files is not None else None
    names = [u for u in train_users if train_users[u][0]]
    if not names:
        raise InvalidParameterError(f"LEAF data at {path} has no user with samples")
    rng = np.random.default_rng(seed)
    if num_clients is not None:
        if not 1 <= num_clients <= len(names):
            raise InvalidParameterError(f"LEAF data at {path} has {len(names)} users; cannot take {num_clients} clients")
        keep = np.sort(rng.choice(len(names), size=num_clients, replace=False))
        names = [names[i] for i in keep]

    kind = _kind(train_users[names[0]][0][0])
    raw: list[tuple[list[Any], np.ndarray, list[Any], np.ndarray]] = []
    for name in names:
        xs, ys = train_users[name]
        if test_users is not None:
            test_xs, test_ys = test_users.get(name, ([], []))
            raw.append((xs, _labels(ys, name), test_xs, _labels(test_ys, name)))
        else:
            labels = _labels(ys, name)
            train_idx, test_idx = split_train_test(np.arange(len(xs)), test_fraction, rng)
            raw.append(([xs[i] for i in train_idx], labels[train_idx], [xs[i] for i in test_idx], labels[test_idx]))

    metadata: dict[str, Any] = {"source": f"LEAF JSON at {path}", "partition": "natural", "leaf_users": len(names)}
    if kind == "text":
        tokenised = [([_tweet(s) for s in tr_x], [_tweet(s) for s in te_x]) for tr_x, _, te_x, _ in raw]
        size = vocab_size or (10_000 if text_encoding == "tokens" else 1_024)
        vocab = _vocabulary([t for tr, _ in tokenised for t in tr], size)
        input_shape: tuple[int, ...] = (seq_len if text_encoding == "tokens" else len(vocab),)

        def encode(token_lists: list[list[str]]) -> np.ndarray:
            return _encode_text(token_lists, vocab, text_encoding, seq_len).reshape(-1, *input_shape)

        arrays = [(encode(tr), y_tr, encode(te), y_te) for (tr, te), (_, y_tr, _, y_te) in zip(tokenised, raw, strict=True)]
        metadata |= {"input_kind": "token_ids" if text_encoding == "tokens" else "bag_of_words", "vocab_size": len(vocab) + 2}
    else:
        input_shape = (1, 28, 28) if kind == "image" else (len(train_users[names[0]][0][0]),)

        def to_array(rows: list[Any]) -> np.ndarray:
            try:
                return np.asarray(rows, dtype=np.float32).reshape(-1, *input_shape)
            except ValueError as exc:
                raise InvalidParameterError(f"LEAF samples at {path} are not all {input_shape} numeric rows") from exc

        arrays = [(to_array(tr_x), y_tr, to_array(te_x), y_te) for tr_x, y_tr, te_x, y_te in raw]
        metadata["input_kind"] = kind

    observed = int(max(max(y_tr.max(initial=0), y_te.max(initial=0)) for _, y_tr, _, y_te in arrays)) + 1
    classes = observed if num_classes is None else int(num_classes)
    if classes < observed:
        raise InvalidParameterError(f"num_classes={classes} but the LEAF labels go up to {observed - 1}")
    clients = [ClientData(*a) for a in arrays]
    values = np.concatenate([np.concatenate([c.x_train.ravel(), c.x_test.ravel()]) for c in clients])
    data_range = (0.0, 1.0) if kind == "image" else (float(values.min()), float(values.max()))
    return FederatedDataset(
        name=f"leaf:{path}",
        clients=clients,
        num_classes=max(classes, 2),
        input_shape=input_shape,
        data_range=data_range,
        metadata=metadata,
    )
