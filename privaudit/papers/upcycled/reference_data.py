"""The Upcycled-FL reference repository's own synthetic data files, as a :class:`~privaudit.data.base.FederatedDataset`.

The reference code (osu-srml/Upcycled-FL@4dd7400:utils.py, ``get_dataset``) reads, for ``--dataset NAME``::

    data/NAME/data/train/mytrain.pt         a TensorDataset (features float64 N×20, labels float64 N)
    data/NAME/data/train/user_groups.json   client id → indices into mytrain.pt
    data/NAME/data/test/mytest.pt           the pooled test set every round evaluates on
    data/NAME/data/test/user_groups.json    client id → indices into mytest.pt (each client's own test split)

The files ship in the repository (``synthetic_iid``, ``synthetic_0_0``, ``synthetic_0.5_0.5``, ``synthetic_1_1``)
and load with torch 2.13. Loading here uses ``torch.load(weights_only=True)`` with only ``TensorDataset`` allowed as a
pickled class, so a file holding anything else is refused instead of executed. Client ``k`` gets the training rows
``train/user_groups.json[k]`` and the test rows ``test/user_groups.json[k]``; the pooled test set is the whole of
``mytest.pt``, as the reference's ``test_agent`` evaluates. Inputs become float32 (the reference casts each batch
with ``dtype=torch.float``) and labels int64.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError

#: The synthetic data sets the reference repository ships.
REFERENCE_DATASETS = ("synthetic_iid", "synthetic_0_0", "synthetic_0.5_0.5", "synthetic_1_1")


def _tensors(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import torch
    from torch.utils.data import TensorDataset

    try:
        with torch.serialization.safe_globals([TensorDataset]):
            loaded = torch.load(path, weights_only=True)
    except FileNotFoundError:
        raise InvalidParameterError(f"no reference data file {path}") from None
    except Exception as error:  # an unpickling refusal or a corrupt file: one line, not a traceback
        raise InvalidParameterError(f"{path} is not a reference TensorDataset file: {str(error).splitlines()[0]}") from None
    if not isinstance(loaded, TensorDataset) or len(loaded.tensors) != 2:
        raise InvalidParameterError(f"{path} must hold a TensorDataset of (features, labels)")
    features, labels = (t.detach().cpu().numpy() for t in loaded.tensors)
    if features.ndim != 2 or labels.ndim != 1 or len(features) != len(labels):
        raise InvalidParameterError(f"{path}: expected N×d features and N labels, got {features.shape} and {labels.shape}")
    if not np.all(np.isfinite(features)) or not np.all(labels == np.round(labels)) or labels.min(initial=0) < 0:
        raise InvalidParameterError(f"{path}: features must be finite and labels non-negative integers")
    return features, labels.astype(np.int64)


def _groups(path: Path, size: int) -> dict[int, list[int]]:
    """The reference's user-group file (client id → record indices, osu-srml/Upcycled-FL@4dd7400:data/<name>/), checked
    against the dataset's ``size``."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidParameterError(f"no reference user-group file {path}") from None
    except json.JSONDecodeError as error:
        raise InvalidParameterError(f"{path} is not JSON: {error}") from None
    groups: dict[int, list[int]] = {}
    for key, value in raw.items():
        indices = [int(i) for i in value]
        if any(i < 0 or i >= size for i in indices):
            raise InvalidParameterError(f"{path}: client {key} has an index outside 0..{size - 1}")
        groups[int(key)] = indices
    if sorted(groups) != list(range(len(groups))):
        raise InvalidParameterError(f"{path}: client ids must be 0..{len(groups) - 1}")
    return groups


def load_reference_synthetic(repository: str | Path, name: str = "synthetic_iid") -> FederatedDataset:
    """The reference repository's data set ``name`` (one of :data:`REFERENCE_DATASETS`) from the checkout at
    ``repository``, with the reference's clients, their training and test rows, and its pooled test set."""
    if name not in REFERENCE_DATASETS:
        raise InvalidParameterError(f"unknown reference data set {name!r}; use one of {', '.join(REFERENCE_DATASETS)}")
    root = Path(repository) / "data" / name / "data"
    x_train, y_train = _tensors(root / "train" / "mytrain.pt")
    x_test, y_test = _tensors(root / "test" / "mytest.pt")
    train_groups = _groups(root / "train" / "user_groups.json", len(y_train))
    test_groups = _groups(root / "test" / "user_groups.json", len(y_test))
    if len(train_groups) != len(test_groups):
        raise InvalidParameterError(f"{name}: {len(train_groups)} clients in train/user_groups.json but {len(test_groups)} in test/")
    clients = [ClientData(x_train[train_groups[k]], y_train[train_groups[k]], x_test[test_groups[k]], y_test[test_groups[k]])
               for k in range(len(train_groups))]
    num_classes = int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
    everything = np.concatenate([x_train, x_test])
    return FederatedDataset(
        name=f"upcycled-reference:{name}",
        clients=clients,
        num_classes=num_classes,
        input_shape=(int(x_train.shape[1]),),
        test=(x_test.astype(np.float32), y_test),
        data_range=(float(everything.min()), float(everything.max())),
        metadata={"source": f"osu-srml/Upcycled-FL@4dd7400:data/{name}", "partition": "natural", "input_kind": "features"},
    )
