"""The data of a federation trained outside privaudit, as its checkpoint references it, loaded back for attacks.

A recorded checkpoint (:mod:`privaudit.interop.recorder`) has no training recipe to re-run; its manifest's
``dataset`` section says instead where the records are found again and which records each client held:

* ``dataset["reference"]``: ``{"kind": "packaged", "name": "digits"}`` — a dataset shipped inside an installed
  package that privaudit loads (:data:`PACKAGED_POOLS`; its *pool* is the loader's inputs followed by its official
  test inputs, if any); ``{"kind": "stored", "file": "tensors/data.safetensors"}`` — the user's own arrays
  ``x`` (float32) and ``y`` (int64) stored inside the checkpoint; or ``{"kind": "external", "description": ...}``
  — neither, so attacks that need the records refuse;
* ``dataset["partition"]["file"]``: a safetensors file with one int64 index vector per client
  (``client/<id>``, ids 0..K−1) — the pool rows that client trained on (the *members*) — and ``non_members``,
  pool rows no client trained on;
* ``dataset["fingerprint"]``: sha256 of the pool (:func:`pool_fingerprint`), checked on every load.

:func:`recorded_dataset` turns these into the :class:`~privaudit.data.base.FederatedDataset` the attacks take:
client k's training split is its partition, clients have no local test split, and the pooled test set is the
non-members (:func:`attacks.membership.examples.dataset_pool` then labels them as such).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.data import embedded
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.checkpoint import read_tensor_file

if TYPE_CHECKING:
    from privaudit.fl.engine.checkpoint import TrainedFederation

DATA_FILE = "tensors/data.safetensors"
PARTITION_FILE = "tensors/partition.safetensors"


def _packaged_loaders() -> dict[str, Callable[[], Any]]:
    return {"digits": embedded.digits, "mnist5k": embedded.mnist5k, "lfw": embedded.lfw, "images": embedded.images}


#: Names of the packaged datasets a recorded checkpoint may reference (loaded by :func:`packaged_pool`).
PACKAGED_POOLS: tuple[str, ...] = ("digits", "mnist5k", "lfw", "images")


def packaged_pool(name: str) -> tuple[np.ndarray, np.ndarray, int, tuple[float, float]]:
    """(x, y, num_classes, data_range) of packaged dataset ``name``: its inputs, then its official test inputs."""
    loaders = _packaged_loaders()
    if name not in loaders:
        raise InvalidParameterError(f"unknown packaged dataset {name!r}; choose one of: {', '.join(PACKAGED_POOLS)}")
    pooled = loaders[name]()
    xs, ys = [pooled.x], [pooled.y]
    if pooled.x_test is not None and pooled.y_test is not None:
        xs.append(pooled.x_test)
        ys.append(pooled.y_test)
    x = np.ascontiguousarray(np.concatenate(xs), dtype=np.float32)
    y = np.ascontiguousarray(np.concatenate(ys), dtype=np.int64)
    return x, y, int(pooled.num_classes), tuple(float(v) for v in pooled.data_range)  # type: ignore[return-value]


def pool_fingerprint(x: np.ndarray, y: np.ndarray) -> str:
    """sha256 over the pool's inputs (float32) and labels (int64), shapes included."""
    digest = hashlib.sha256()
    for array in (np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(y, dtype=np.int64)):
        digest.update(str(array.shape).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def is_recorded(manifest: Mapping[str, Any]) -> bool:
    """Whether the manifest's dataset is a recorded reference (not a ``train_spec`` to reload)."""
    dataset = manifest.get("dataset")
    return isinstance(dataset, dict) and isinstance(dataset.get("reference"), dict)


def data_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why the records of a recorded checkpoint cannot be loaded (one line), or ``None``."""
    if not is_recorded(manifest):
        return "the checkpoint records no dataset reference"
    kind = manifest["dataset"]["reference"].get("kind")
    if kind == "external":
        description = manifest["dataset"]["reference"].get("description") or "data outside the checkpoint"
        return (f"the checkpoint's data ({description}) were neither a packaged dataset nor stored in it, so its members "
                "are unknown here; record with DatasetReference.packaged(...) or DatasetReference.from_arrays(..., store=True)")
    if kind not in ("packaged", "stored"):
        return f"unknown dataset reference kind {kind!r}"
    if not isinstance(manifest["dataset"].get("partition"), dict):
        return "the checkpoint records no partition of its data"
    return None


def recorded_dataset(federation: TrainedFederation) -> FederatedDataset:
    """The records of a recorded federation with their partition, checked against the recorded fingerprint."""
    manifest = federation.manifest
    problem = data_problem(manifest)
    if problem:
        raise CheckpointError(f"{federation.root}: {problem}")
    info = manifest["dataset"]
    reference = info["reference"]
    if reference["kind"] == "packaged":
        x, y, _, data_range = packaged_pool(str(reference.get("name")))
    else:
        stored = read_tensor_file(federation.root, reference.get("file", DATA_FILE), manifest)
        if set(stored) != {"x", "y"}:
            raise CheckpointError(f"{federation.root}: the stored data must hold tensors 'x' and 'y', found {sorted(stored)}")
        x, y = stored["x"].numpy().astype(np.float32), stored["y"].numpy().astype(np.int64)
        data_range = tuple(float(v) for v in info.get("data_range", (float(x.min()), float(x.max()))))
    if len(x) != len(y):
        raise CheckpointError(f"{federation.root}: the data hold {len(x)} inputs and {len(y)} labels")
    if info.get("fingerprint") and pool_fingerprint(x, y) != info["fingerprint"]:
        raise CheckpointError(f"the data found for {federation.root} differ from the data it was trained on (fingerprint mismatch)")
    parts = read_tensor_file(federation.root, info["partition"].get("file", PARTITION_FILE), manifest)
    clients = sorted(int(k.partition("/")[2]) for k in parts if k.startswith("client/") and k.partition("/")[2].isdigit())
    if clients != list(range(len(clients))) or not clients:
        raise CheckpointError(f"{federation.root}: the partition must name clients 0..K−1, found {clients[:5]}")
    n = len(y)

    def rows(key: str) -> np.ndarray:
        index = parts[key].numpy().astype(np.int64).reshape(-1)
        if index.size and (index.min() < 0 or index.max() >= n):
            raise CheckpointError(f"{federation.root}: partition entry {key!r} indexes outside the {n} records")
        return index

    empty_x, empty_y = x[:0], y[:0]
    member_rows = [rows(f"client/{k}") for k in clients]
    held_out = rows("non_members") if "non_members" in parts else np.zeros(0, dtype=np.int64)
    listed = np.concatenate([*member_rows, held_out])
    if len(np.unique(listed)) != len(listed):  # the recorder refuses this; a hand-made partition must not slip through
        raise CheckpointError(f"{federation.root}: a record is in two clients' partitions, or in a partition and among the non-members")
    client_data = [ClientData(x[r], y[r], empty_x, empty_y) for r in member_rows]
    test = (x[held_out], y[held_out]) if held_out.size else None
    return FederatedDataset(name=str(info.get("name", "recorded")), clients=client_data, num_classes=int(manifest["model"]["num_classes"]),
                            input_shape=tuple(manifest["model"]["input_shape"]), test=test,
                            data_range=data_range, metadata={"recorded": True})  # type: ignore[arg-type]
