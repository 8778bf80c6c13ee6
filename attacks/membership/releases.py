"""Per-round releases of a trained federation, from a checkpoint or from an in-memory recording.

White-box scoring needs what the server saw: the global model after every iteration (the released
aggregates) and, for the client-level threat model, every client's released model. Both sources expose the
same small interface, :class:`FederationReleases`; states come back in the model's own key order (the
order in which privatizers draw their noise), whatever order the storage uses.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.checkpoint import TrainedFederation
from privaudit.fl.engine.params import State


class FederationReleases:
    """Global models per iteration and client releases per training iteration."""

    #: iterations 1..rounds; ``global_state(0)`` is the initial model
    rounds: int
    #: iterations in which clients trained (and released models)
    trained_rounds: tuple[int, ...]
    #: the model state's key order
    keys: tuple[str, ...]
    source: str

    def global_state(self, round_: int) -> State:
        raise NotImplementedError

    def client_releases(self, round_: int) -> dict[int, State]:
        """Client id → released model in iteration ``round_`` (empty for rounds that train no client)."""
        raise NotImplementedError

    def privacy(self) -> dict[str, Any] | None:
        """The privatizer's description (``{"mechanism": ..., clip, sigma, ...}``), if the run had one."""
        return None

    def _ordered(self, state: dict) -> State:
        missing = [k for k in self.keys if k not in state]
        if missing:
            raise CheckpointError(f"{self.source}: a stored state lacks {', '.join(missing)}")
        return {k: state[k] for k in self.keys}


def find_privacy(description: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``privacy`` entry of an algorithm description, searched through its wrappers."""
    while isinstance(description, dict):
        if isinstance(description.get("privacy"), dict):
            return description["privacy"]
        description = description.get("wraps")
    return None


class CheckpointReleases(FederationReleases):
    """Releases stored in a checkpoint directory (client releases need ``--save-client-updates``)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.federation = TrainedFederation(path)
        manifest = self.federation.manifest
        self.rounds = self.federation.rounds
        self.trained_rounds = tuple(int(m["round"]) for m in manifest["metrics"] if m.get("trained"))
        self.keys = tuple(manifest["model"]["parameters"])
        self.source = f"checkpoint {self.federation.root}"
        self.has_client_releases = bool(manifest.get("save_client_updates"))

    def global_state(self, round_: int) -> State:
        return self._ordered(self.federation.global_state(round_))

    def client_releases(self, round_: int) -> dict[int, State]:
        if not self.has_client_releases:
            raise CheckpointError(
                f"{self.federation.root} holds no client releases: this attack needs a checkpoint trained with --save-client-updates"
            )
        return {cid: self._ordered(entry["state"]) for cid, entry in self.federation.client_releases(round_).items()}

    def privacy(self) -> dict[str, Any] | None:
        return find_privacy(self.federation.manifest.get("algorithm"))


class RecordedReleases(FederationReleases):
    """Releases kept in memory by a :class:`~privaudit.fl.engine.recording.ReleaseRecorder`."""

    def __init__(self, recorder) -> None:
        if recorder.info is None:
            raise InvalidParameterError("the release recorder has not observed a run yet")
        self.recorder = recorder
        self.rounds = len(recorder.global_states) - 1
        self.trained_rounds = tuple(recorder.trained_rounds)
        self.keys = tuple(recorder.info.initial_state)
        self.source = f"recorded run {recorder.info.algorithm.get('name', '?')}"

    def global_state(self, round_: int) -> State:
        if not 0 <= round_ <= self.rounds:
            raise InvalidParameterError(f"iteration {round_} is outside 0..{self.rounds}")
        return self._ordered(self.recorder.global_states[round_])

    def client_releases(self, round_: int) -> dict[int, State]:
        if not self.recorder.keep_clients:
            raise InvalidParameterError("this run was recorded without client releases (ReleaseRecorder(client_releases=True))")
        return {cid: self._ordered(s) for cid, s in self.recorder.client_states.get(int(round_), {}).items()}

    def privacy(self) -> dict[str, Any] | None:
        return find_privacy(self.recorder.info.algorithm)


def releases_of(source: Any) -> FederationReleases:
    """A :class:`FederationReleases` view of a checkpoint path, a ``ReleaseRecorder`` or an existing view."""
    if isinstance(source, FederationReleases):
        return source
    if isinstance(source, str | os.PathLike):
        return CheckpointReleases(source)
    if hasattr(source, "global_states") and hasattr(source, "trained_rounds"):
        return RecordedReleases(source)
    raise InvalidParameterError(f"cannot read releases from {type(source).__name__}; give a checkpoint path or a ReleaseRecorder")


def select_rounds(releases: FederationReleases, rounds: Sequence[int] | None) -> tuple[int, ...]:
    """``rounds`` checked against the training iterations (default: all of them)."""
    if rounds is None:
        return releases.trained_rounds
    chosen = tuple(int(r) for r in rounds)
    bad = [r for r in chosen if r not in releases.trained_rounds]
    if bad:
        raise InvalidParameterError(f"iteration(s) {bad} trained no client in {releases.source}")
    return chosen
