"""A trained federation on disk: ``manifest.json`` plus safetensors files, verified on every read.

Layout::

    DIR/manifest.json                       schema, algorithm, full config, seeds, dataset (+ fingerprint,
                                            partition), privacy ledger, metrics per round, privaudit
                                            version, sha256 and size of every tensor file, and the sha256 of
                                            the manifest's own canonical JSON
    DIR/tensors/global_r0000.safetensors    the initial global model; global_rNNNN after round NNNN
    DIR/tensors/clients_rNNNN.safetensors   with ``save_client_updates``: every model a client released in
                                            round NNNN (key ``<client>/<param>``) and its other released
                                            tensors (``<client>/extras/<name>/<param>``)
    DIR/tensors/partition.safetensors       recorded federations (privaudit.interop): each client's training rows
                                            (``client/<id>``) and the ``non_members`` rows of the dataset reference
    DIR/tensors/data.safetensors            recorded federations that store their arrays (``x``, ``y``)
                                            (both read by :mod:`privaudit.fl.engine.recorded_data`)
    DIR/training.json                       written by ``privaudit train``: a ``training`` result (accuracy per
                                            round) for ``privaudit report``; not part of the checkpoint (never
                                            read or hashed here; a new run into DIR removes the old one)

The model is rebuilt from ``model.name`` (privaudit's registry) or ``model.architecture`` (a recorded ``nn.Sequential``,
or a user factory imported only when the caller trusts it: :mod:`privaudit.fl.engine.architecture`). The manifest's
JSON Schema ships as ``privaudit/schemas/federation-manifest.schema.json``.

Reading validates the schema, the manifest's own hash and, for every tensor file it opens, size and sha256
*before* parsing; corrupted, truncated or tampered files raise one :class:`~privaudit.errors.CheckpointError`.
Nothing is ever unpickled (safetensors is a JSON header plus raw buffers).

:func:`read_manifest`, :func:`read_ledger` and :func:`verify_checkpoint` import neither torch nor safetensors
(``privaudit compute-epsilon --checkpoint DIR`` starts fast); tensor loading imports them when called.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit import __version__
from privaudit.accounting.ledger import PrivacyLedger
from privaudit.errors import CheckpointError, PrivauditError
from privaudit.fl.engine.architecture import build_architecture, build_sequential, rebuildable
from privaudit.fl.engine.metrics import RoundMetrics
from privaudit.output_folder import folder_for

if TYPE_CHECKING:
    import torch

    from privaudit.fl.engine.algorithm import ClientResult
    from privaudit.fl.engine.round_loop import FederationResult, RunInfo

SCHEMA = "privaudit.federation/1"
MANIFEST = "manifest.json"
TENSOR_DIR = "tensors"
#: The ``training`` result ``privaudit train --out DIR`` writes beside the manifest (not part of the checkpoint).
TRAINING_RESULT = "training.json"
_REQUIRED = ("schema", "privaudit_version", "algorithm", "config", "model", "seeds", "dataset", "ledger", "metrics", "tensors")


def global_file(round_: int) -> str:
    return f"{TENSOR_DIR}/global_r{round_:04d}.safetensors"


def clients_file(round_: int) -> str:
    return f"{TENSOR_DIR}/clients_r{round_:04d}.safetensors"


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON without its ``manifest_sha256`` field."""
    return hashlib.sha256(_canonical({k: v for k, v in manifest.items() if k != "manifest_sha256"})).hexdigest()


def _manifest_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path if path.name == MANIFEST and not path.is_dir() else path / MANIFEST


# -- reading, torch-free ------------------------------------------------------------------------------
def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The validated manifest of the trained federation at ``path`` (its directory or its manifest.json)."""
    manifest_path = _manifest_path(path)
    try:
        raw = manifest_path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{manifest_path.parent} is not a trained federation: {MANIFEST} is missing") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read {manifest_path}: {exc.strerror or exc}") from None
    try:
        manifest = json.loads(raw.decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{manifest_path} is not valid JSON (corrupted or truncated)") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        found = manifest.get("schema") if isinstance(manifest, dict) else None
        raise CheckpointError(f"{manifest_path} is not a privaudit federation manifest (schema {found!r}, expected {SCHEMA!r})")
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise CheckpointError(f"{manifest_path} lacks field(s) {', '.join(missing)}")
    if manifest.get("manifest_sha256") != manifest_digest(manifest):
        raise CheckpointError(f"{manifest_path} was modified after it was written (its content hash does not match)")
    problem = _structure_problem(manifest)
    if problem:
        raise CheckpointError(f"{manifest_path} is malformed: {problem}")
    return manifest


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _structure_problem(manifest: Mapping[str, Any]) -> str | None:
    """What is wrong with the manifest's structure (types readers rely on), or ``None``.

    The content hash has no key, so a hand-edited manifest can carry a matching hash: readers must still
    meet one clear error, never an ``AttributeError`` deep inside.
    """
    for key in ("algorithm", "config", "model", "seeds", "dataset", "ledger", "tensors"):
        if not isinstance(manifest[key], dict):
            return f"field {key!r} must be an object"
    rounds = manifest["config"].get("rounds")
    if not _is_int(rounds) or rounds < 0:
        return f"config.rounds must be a non-negative integer, got {rounds!r}"
    model = manifest["model"]
    if model.get("name") is not None and not isinstance(model.get("name"), str):
        return "model.name must be a string or null"
    shape, classes = model.get("input_shape"), model.get("num_classes")
    if not isinstance(shape, list) or not all(_is_int(d) and d > 0 for d in shape):
        return f"model.input_shape must be a list of positive integers, got {shape!r}"
    if not _is_int(classes) or classes < 1:
        return f"model.num_classes must be a positive integer, got {classes!r}"
    if not isinstance(model.get("parameters", {}), dict) or not isinstance(model.get("trainable", []), list):
        return "model.parameters must be an object and model.trainable a list"
    for name, shape in model.get("parameters", {}).items():
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            return f"model.parameters[{name!r}] must be a shape (a list of non-negative integers), got {shape!r}"
    if not isinstance(manifest["metrics"], list) or not all(isinstance(m, dict) for m in manifest["metrics"]):
        return "field 'metrics' must be a list of objects"
    for relative, entry in manifest["tensors"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or not _is_int(entry.get("bytes")):
            return f"tensor entry {relative!r} must record its sha256 (string) and bytes (integer)"
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            return f"tensor entry {relative!r} must be a path inside the checkpoint"
    return None


def read_ledger(path: str | os.PathLike) -> PrivacyLedger:
    """The privacy ledger recorded by the trained federation at ``path`` (no torch import)."""
    manifest = read_manifest(path)
    try:
        return PrivacyLedger.from_dict(manifest["ledger"])
    except PrivauditError as exc:
        raise CheckpointError(f"the privacy ledger in {_manifest_path(path)} is malformed: {exc}") from None


def _read_verified(root: Path, relative: str, manifest: Mapping[str, Any]) -> bytes:
    entry = manifest["tensors"].get(relative)
    if entry is None:
        raise CheckpointError(f"{root} has no tensor file {relative} in its manifest")
    file = root / relative
    try:
        data = file.read_bytes()
    except OSError:
        raise CheckpointError(f"{file} is missing or unreadable") from None
    if len(data) != entry.get("bytes"):
        raise CheckpointError(f"{file} has {len(data)} bytes, the manifest records {entry.get('bytes')} (truncated or replaced)")
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise CheckpointError(f"{file} does not match its sha256 in the manifest (corrupted or tampered)")
    return data


def read_tensor_file(root: str | os.PathLike, relative: str, manifest: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of file ``relative`` (a path the manifest lists) of the checkpoint at ``root``, verified first."""
    root = Path(root)
    return _parse(_read_verified(root, relative, manifest), str(root / relative))


def verify_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Check the manifest and the size and sha256 of every tensor file; returns the manifest."""
    manifest = read_manifest(path)
    root = _manifest_path(path).parent
    for relative in manifest["tensors"]:
        _read_verified(root, relative, manifest)
    return manifest


# -- reading tensors -------------------------------------------------------------------------------
def _parse(data: bytes, origin: str) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        return load(data)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{origin} is not a readable safetensors file: {exc}") from None


Shapes = dict[str, tuple[int, ...]]


def _describe(shapes: Mapping[str, tuple[int, ...]], other: Mapping[str, tuple[int, ...]]) -> str:
    """The first difference between two name → shape maps, in words."""
    for name, shape in shapes.items():
        if name not in other:
            return f"{name!r} is not a tensor of the architecture"
        if tuple(other[name]) != tuple(shape):
            return f"{name!r} has shape {tuple(shape)}, the architecture's is {tuple(other[name])}"
    missing = [name for name in other if name not in shapes]
    return f"{missing[0]!r} is missing" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")


def architecture_shapes(model_info: Mapping[str, Any]) -> Shapes:
    """Name → shape of every tensor the named model of ``model_info`` holds (what training saved, per
    :func:`privaudit.fl.engine.params.model_state`). The model is built with torch's global generator saved and
    restored, so reading a checkpoint never changes the random stream of the caller."""
    # torch and the model zoo: only when tensors are read (read_manifest, read_ledger stay torch-free)
    import torch

    from privaudit.fl.engine.params import model_state
    from privaudit.models import build_model

    try:
        with torch.random.fork_rng(devices=[]):
            module = build_model(model_info["name"], tuple(model_info["input_shape"]), int(model_info["num_classes"]))
    except PrivauditError as exc:
        raise CheckpointError(f"the manifest's model cannot be built: {exc}") from None
    return {name: tuple(tensor.shape) for name, tensor in model_state(module).items()}


def check_shapes(tensors: Mapping[str, torch.Tensor], expected: Mapping[str, tuple[int, ...]], origin: str, *,
                 complete: bool) -> None:
    """Every tensor in ``tensors`` must be one of ``expected`` with its shape (all of them when ``complete``).

    Run before any ``load_state_dict``: a forged checkpoint whose hashes were recomputed passes the sha256
    checks, and torch would then fail with a multi-line ``RuntimeError`` (or, with ``strict=False``, load a
    model with some weights missing).
    """
    found = {name: tuple(tensor.shape) for name, tensor in tensors.items()}
    wrong = any(name not in expected or tuple(expected[name]) != shape for name, shape in found.items())
    if wrong or (complete and set(found) != set(expected)):
        raise CheckpointError(f"{origin} does not fit the model it claims to hold: {_describe(found, expected)}")


class TrainedFederation:
    """A verified checkpoint directory: manifest, ledger, metrics, and tensors loaded on demand."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.root = _manifest_path(path).parent
        self.manifest = read_manifest(path)
        self._shapes: Shapes | None = None

    @property
    def parameter_shapes(self) -> Shapes:
        """Name → shape of the model's tensors, as recorded and, for a named model, as its architecture has them.

        A manifest whose recorded shapes differ from the architecture's raises :class:`CheckpointError` (built
        once, on the first tensor read).
        """
        if self._shapes is None:
            model = self.manifest["model"]
            recorded = {name: tuple(shape) for name, shape in model.get("parameters", {}).items()}
            built = None
            if model.get("name"):
                built = architecture_shapes(model)
            elif isinstance(model.get("architecture"), dict) and model["architecture"].get("kind") == "sequential":
                built = _sequential_shapes(model)  # rebuilt from an allow-list of torch.nn layers, no code imported
            if built is not None and recorded != built:
                raise CheckpointError(f"{self.root / MANIFEST} records tensors that model {model.get('name') or 'sequential'!r} does not have: "
                                      f"{_describe(recorded, built)}")
            self._shapes = recorded
        return self._shapes

    @property
    def ledger(self) -> PrivacyLedger:
        return read_ledger(self.root)

    @property
    def rounds(self) -> int:
        return int(self.manifest["config"]["rounds"])

    @property
    def metrics(self) -> list[RoundMetrics]:
        return [RoundMetrics.from_dict(m) for m in self.manifest["metrics"]]

    def global_state(self, round_: int | None = None) -> dict[str, torch.Tensor]:
        """The global model after ``round_`` (0 = initial; default: the last round)."""
        round_ = self.rounds if round_ is None else int(round_)
        relative = global_file(round_)
        state = _parse(_read_verified(self.root, relative, self.manifest), str(self.root / relative))
        check_shapes(state, self.parameter_shapes, str(self.root / relative), complete=True)
        return state

    def client_releases(self, round_: int) -> dict[int, dict[str, Any]]:
        """``{client: {"state": {...}, "extras": {name: {...}}}}`` released in ``round_`` (needs ``save_client_updates``)."""
        relative = clients_file(round_)
        if relative not in self.manifest["tensors"]:
            if not self.manifest.get("save_client_updates"):
                raise CheckpointError(f"{self.root} was trained without --save-client-updates, so it holds no client releases")
            return {}
        flat = _parse(_read_verified(self.root, relative, self.manifest), str(self.root / relative))
        out: dict[int, dict[str, Any]] = {}
        for key, tensor in flat.items():
            client, _, rest = key.partition("/")
            if not client.isdigit() or not rest:
                raise CheckpointError(f"{self.root / relative} holds tensor {key!r}, not <client>/<name>")
            entry = out.setdefault(int(client), {"state": {}, "extras": {}})
            if rest.startswith("extras/"):
                name, _, param = rest[len("extras/") :].partition("/")
                entry["extras"].setdefault(name, {})[param] = tensor
            else:
                entry["state"][rest] = tensor
        for client, entry in sorted(out.items()):
            check_shapes(entry["state"], self.parameter_shapes, f"client {client}'s release in {self.root / relative}", complete=False)
        return out

    def build_model(self, round_: int | None = None, *, trust_factory: str | None = None):
        """The model architecture with the global weights of ``round_`` loaded.

        Named models and recorded ``nn.Sequential`` architectures are rebuilt from the manifest; a recorded user
        factory only when ``trust_factory`` names it (:mod:`privaudit.fl.engine.architecture`).
        """
        model_info = self.manifest["model"]
        problem = rebuildable(model_info, trust_factory)
        if problem:
            raise CheckpointError(f"{self.root}: {problem}" if model_info.get("architecture") else
                                  f"{self.root} was trained with a custom module; rebuild it and load global_state()")
        state = self.global_state(round_)  # verified against the recorded shapes before any module is allocated
        with _forked_rng():
            model = build_architecture(model_info, trust_factory)
        if not model_info.get("name"):  # a rebuilt custom architecture must hold exactly the recorded tensors
            # torch: only when tensors are read (read_manifest, read_ledger stay torch-free)
            from privaudit.fl.engine.params import model_state

            check_shapes(state, {k: tuple(v.shape) for k, v in model_state(model).items()}, f"{self.root}'s model", complete=True)
        model.load_state_dict(state, strict=False)
        return model


def _forked_rng():
    import torch

    return torch.random.fork_rng(devices=[])


def _sequential_shapes(model_info: Mapping[str, Any]) -> Shapes:
    # torch: only when tensors are read (read_manifest, read_ledger stay torch-free)
    import torch

    from privaudit.fl.engine.params import model_state

    with _forked_rng(), torch.device("meta"):  # shapes only: a forged layer size allocates nothing
        module = build_sequential(model_info["architecture"].get("layers"))
    return {name: tuple(tensor.shape) for name, tensor in model_state(module).items()}


# -- writing ----------------------------------------------------------------------------------------
class CheckpointWriter:
    """Round observer that writes a trained federation as it trains; the manifest comes last (atomically).

    Every file goes through the checkpoint's output folder (:func:`privaudit.output_folder.folder_for`): should a write
    fail (the disk filled after 5 of 20 rounds), the rounds written so far are copied to a temporary folder, training
    goes on and the checkpoint is completed there; :attr:`folder` says where it is (``folder.relocation``: why).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        save_client_updates: bool = False,
        overwrite: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = Path(path)
        self.save_client_updates = bool(save_client_updates)
        self.extra = dict(extra or {})
        if self.root.exists() and not self.root.is_dir():
            raise CheckpointError(f"{self.root} exists and is not a directory")
        if (self.root / MANIFEST).exists() and not overwrite:
            raise CheckpointError(f"{self.root} already holds a trained federation; choose another directory or overwrite it")
        self.tensors: dict[str, dict[str, Any]] = {}
        self.metrics: list[dict[str, Any]] = []
        self.folder = folder_for(self.root, "train")

    def prepare(self) -> None:
        """Create the directory and remove a previous run's manifest, training result and tensor files."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / MANIFEST).unlink(missing_ok=True)
            (self.root / TRAINING_RESULT).unlink(missing_ok=True)  # the previous run's; train writes a new one
            stale = self.root / TENSOR_DIR
            if stale.is_dir():
                for old in stale.glob("*.safetensors"):
                    old.unlink()
        except OSError as exc:
            raise CheckpointError(f"cannot write to {self.root}: {exc.strerror or exc}") from None

    def write_tensors(self, relative: str, tensors: Mapping[str, torch.Tensor], metadata: dict[str, str]) -> None:
        """Write one safetensors file under the checkpoint and record its sha256 and size for the manifest."""
        self._write(relative, tensors, metadata)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest`` (with every tensor file written so far) atomically, its own sha256 added last."""
        manifest = json.loads(json.dumps({**manifest, "tensors": self.tensors}, ensure_ascii=False))  # hash what a reader sees
        manifest["manifest_sha256"] = manifest_digest(manifest)
        self.folder.save(MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False))  # atomic: output_folder.write_file

    def _write(self, relative: str, tensors: Mapping[str, torch.Tensor], metadata: dict[str, str]) -> None:
        from safetensors.torch import save

        # saved from the CPU: a checkpoint written on any device loads on any other
        data = save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, metadata=metadata)
        self.folder.save(relative, data)
        self.tensors[relative] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), **metadata}

    # RoundObserver interface ----------------------------------------------------------------------
    def on_start(self, info: RunInfo) -> None:
        self.prepare()
        self.info = info
        self._write(global_file(0), info.initial_state, {"kind": "global", "round": "0"})

    def on_round_start(self, round: int, trains_clients: bool) -> None:
        pass

    def on_round_end(self, round: int, state, results: Sequence[ClientResult], metrics: RoundMetrics) -> None:
        self._write(global_file(round), state, {"kind": "global", "round": str(round)})
        if self.save_client_updates and results:
            flat = {}
            for result in results:
                for name, tensor in result.state.items():
                    flat[f"{result.client_id}/{name}"] = tensor
                for extra, values in result.extras.items():
                    for name, tensor in values.items():
                        flat[f"{result.client_id}/extras/{extra}/{name}"] = tensor
            self._write(clients_file(round), flat, {"kind": "clients", "round": str(round)})

    def on_end(self, result: FederationResult) -> None:
        info = result.info
        model = info.model
        manifest = {
            "schema": SCHEMA,
            "privaudit_version": __version__,
            "created_unix": time.time(),
            "algorithm": info.algorithm,
            "config": info.config.to_dict(),
            "model": {
                "name": info.model_name,
                "input_shape": list(info.dataset["input_shape"]),
                "num_classes": info.dataset["num_classes"],
                "parameters": {k: list(v.shape) for k, v in info.initial_state.items()},
                "trainable": [n for n, p in model.named_parameters() if p.requires_grad],
                "execution": info.execution_mode,
            },
            "seeds": info.seeds,
            "hardware": dict(info.hardware),
            "dataset": info.dataset,
            "ledger": result.ledger.to_dict(),
            "metrics": [m.to_dict() for m in result.history],
            "final_accuracy": result.final_accuracy,
            "seconds": result.seconds,
            "save_client_updates": self.save_client_updates,
            **self.extra,
        }
        self.write_manifest(manifest)
