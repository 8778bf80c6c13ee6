"""One seed per run, one independent random stream per (purpose, round, client).

A federation never touches numpy's or torch's global random state. Every draw comes from a generator
derived from the run seed and a *key*: a stream name ("sampling", "shuffle", "output-noise", ...) and the
integers that say where the draw happens (training-round index, client id). Two runs with the same seed
therefore make the same draws bit for bit, and adding a new random stream never shifts an existing one.

Sampling, straggler and shuffling streams are keyed by the **training-round index** (the m-th round in which
clients train), not by the iteration number, so Upcycled-X's m-th training round (iteration 2m−1) selects the
same clients and stragglers as X's m-th round — as the Upcycled-FL code does with its list of per-round seeds
("both devices and stragglers are selected by random seed to ensure they are the same for all
algorithms", 003 §7.2).

Torch's model initialisation only knows the global generator; :func:`seeded_torch_global` runs a callable
under a forked, seeded global generator and restores the previous state afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

T = TypeVar("T")

#: Version of the key → seed derivation; stored in checkpoints so a future change is visible.
SEED_SCHEME = "privaudit.seedtree/1: SeedSequence(entropy=run_seed, spawn_key=(crc(stream), *keys))"


def _stream_id(stream: str) -> int:
    """A stable 32-bit id for a stream name (Python's ``hash`` is salted per process, so not that)."""
    return int.from_bytes(hashlib.sha256(stream.encode()).digest()[:4], "little")


@dataclass(frozen=True)
class SeedTree:
    """Derives independent generators from one run seed."""

    seed: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", int(self.seed))

    def sequence(self, stream: str, *keys: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(entropy=self.seed, spawn_key=(_stream_id(stream), *(int(k) for k in keys)))

    def numpy(self, stream: str, *keys: int) -> np.random.Generator:
        """A numpy generator for ``stream`` at ``keys``."""
        return np.random.default_rng(self.sequence(stream, *keys))

    def integer(self, stream: str, *keys: int) -> int:
        """A 63-bit seed for ``stream`` at ``keys`` (for torch generators and nested runs)."""
        return int(self.sequence(stream, *keys).generate_state(1, np.uint64)[0]) & ((1 << 63) - 1)

    def torch(self, stream: str, *keys: int):  # -> torch.Generator
        """A CPU ``torch.Generator`` for ``stream`` at ``keys``."""
        import torch

        generator = torch.Generator(device="cpu")
        generator.manual_seed(self.integer(stream, *keys))
        return generator


def seeded_torch_global(seed: int, build: Callable[[], T]) -> T:
    """Run ``build`` with torch's global CPU generator seeded to ``seed``, then restore the previous state.

    Used for model construction (``nn.Linear`` draws its initial weights from the global generator) and for
    dropout masks in the sequential trainer; nothing outside ``build`` sees the change.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        seed_global_generators(int(seed))
        return build()


def seed_global_generators(seed: int) -> None:
    """``torch.manual_seed(seed)``, without its CUDA half where CUDA is absent.

    ``torch.manual_seed`` also registers a lazy CUDA seeding call, formatting a stack trace, whenever CUDA is not
    initialised — on a CPU-only machine that costs more than the seeding itself (~0.2 ms per call; LiRA's shadows
    seed thousands of times). The CPU generator is seeded identically either way.
    """
    import torch

    if torch.cuda.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)
