"""The Upcycled-FL reference code's clock-seeded randomness, emulated reproducibly (audit point U5).

What the reference does (osu-srml/Upcycled-FL@4dd7400:server/avg.py, ``run`` / ``train_one_round``, and
client/avg.py, ``update_weights`` / ``private``). A training round seeds numpy's and torch's global generators
with the round's seed, draws the clients' order (``np.random.choice(N, m, replace=False)``) and then runs the
clients **one after another**, each in full:

1. ``torch.rand(1) < straggler``; a straggler then draws ``int(torch.rand(1)·E)`` until it is ≥ 1;
2. its local epochs over ``DataLoader(shuffle=True)``: each pass draws two int64 seeds from the global generator
   (the loader iterator's base seed, then ``RandomSampler``'s) and shuffles with ``randperm`` under the second;
3. output perturbation (``private``): clip, ``t = time.time()``,
   ``torch.random.manual_seed(int((t − int(t))·1000))``, then ``torch.normal(0, σ², shape)`` per tensor.

So every release is seeded with the milliseconds of the clock at the moment that client finished training, and
— because ``manual_seed`` reseeds the *global* generator — the next client's straggler draw and shuffles are a
function of that same millisecond seed (drawn after the noise). Only the round's first client draws from the
round's seed. Objective perturbation reseeds the same way at the start of ``update_weights``, before step 1, so
there a client's own straggler draw and shuffles follow its noise.

The reference's clients read the clock about 35 ms apart (each trains between two reads), so in one round
the 30 clients get effectively independent milliseconds. privaudit trains a round's clients at once and then
privatizes them in one loop, where a real clock gives many of them the same millisecond. This module replaces
the clock by a simulated one: :class:`ReferenceClock` gives each client of a round a reading ``start + Σ gaps``
in the reference's processing order, the start uniform within a second and each gap a log-normal time with mean
``mean_gap_ms`` (35 ms) — all drawn from the run's seed tree, so a run is reproducible. :func:`coupled_draws`
then draws what the reference's global generator draws after a ``manual_seed(ms)``, bit for bit on CPU (torch's
``DataLoader`` with ``num_workers=0``). The published code puts its tensors on ``'cuda'`` (``--gpu`` defaults to 0),
where the noise and the straggler test come from the CUDA generator instead; there too every draw of the next
client is a function of the same millisecond seed, which is the coupling modelled here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.local_training import Schedule, schedule_from_orders
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.privacy.noise import clock_ms_seed, gaussian_noise

#: The reference's clients read the clock about this many milliseconds apart (each trains between two reads).
MEAN_GAP_MS = 35.0
#: σ of the log-normal gap: the spread of the clients' training times around the mean.
GAP_SPREAD = 0.5


@dataclass(frozen=True)
class RoundClock:
    """One training round's clock reads: the clients in the reference's processing order and their ms seeds."""

    order: tuple[int, ...]
    readings: tuple[float, ...]  # seconds, within the simulated clock
    seeds: tuple[int, ...]  # clock_ms_seed of each reading, aligned with ``order``

    def seed_of(self, client_id: int) -> int:
        return self.seeds[self.order.index(client_id)]


@dataclass(frozen=True)
class ReferenceClock:
    """A simulated clock read once per client of a round, in the reference's processing order (module docstring)."""

    seeds: SeedTree
    mean_gap_ms: float = MEAN_GAP_MS
    spread: float = GAP_SPREAD

    def __post_init__(self) -> None:
        if not self.mean_gap_ms > 0 or not self.spread >= 0:
            raise InvalidParameterError(f"the simulated clock needs a positive mean gap and a spread ≥ 0, got {self.mean_gap_ms}, {self.spread}")

    def round(self, training_round: int, sampled: Sequence[int]) -> RoundClock:
        """The clock reads of training round ``training_round`` for the clients ``sampled``."""
        rng = self.seeds.numpy("reference-clock", training_round)
        order = tuple(int(c) for c in rng.permutation(np.asarray(sampled, dtype=np.int64)))
        start = rng.uniform(0.0, 1.0)
        mu = np.log(self.mean_gap_ms / 1000.0) - self.spread**2 / 2  # log-normal with mean mean_gap_ms
        gaps = rng.lognormal(mu, self.spread, size=len(order))
        readings = tuple(float(t) for t in start + np.cumsum(gaps))
        return RoundClock(order, readings, tuple(clock_ms_seed(t) for t in readings))


def _randint64(generator: torch.Generator) -> int:
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def shuffled_epochs(num_examples: int, epochs: int, batch_size: int, generator: torch.Generator) -> Schedule:
    """``epochs`` passes of ``DataLoader(range(n), batch_size, shuffle=True)`` drawing from ``generator`` as the
    global generator: per pass the iterator's base seed, then the sampler's seed, then ``randperm`` under it."""
    def next_order() -> np.ndarray:
        _randint64(generator)  # _BaseDataLoaderIter's base seed (unused with num_workers=0)
        sampler = torch.Generator().manual_seed(_randint64(generator))
        return torch.randperm(num_examples, generator=sampler).numpy()

    return schedule_from_orders(num_examples, epochs, batch_size, next_order)


def reference_epochs(epochs: int, straggler: float, generator: torch.Generator) -> int:
    """``update_weights``'s straggler draw: E, or ``int(rand·E)`` redrawn until ≥ 1 with probability ``straggler``."""
    if float(torch.rand(1, generator=generator)) < straggler:
        early = int(torch.rand(1, generator=generator) * epochs)
        while early == 0:
            early = int(torch.rand(1, generator=generator) * epochs)
        return early
    return epochs


def coupled_draws(generator: torch.Generator, *, num_examples: int, epochs: int, batch_size: int,
                  straggler: float) -> tuple[int, Schedule]:
    """What a client draws from the global generator ``generator`` at the start of its update: its local epochs,
    then its mini-batch order (module docstring, steps 1–2)."""
    ran = reference_epochs(epochs, straggler, generator)
    return ran, shuffled_epochs(num_examples, ran, batch_size, generator)


def after_output_noise(seed: int, like: Mapping[str, torch.Tensor], std: float) -> torch.Generator:
    """The global generator as the reference leaves it after a release seeded with ``seed``: ``manual_seed(seed)``
    then one ``normal(0, std, shape)`` per tensor of ``like`` (the draws :func:`~privaudit.fl.privacy.noise.gaussian_noise`
    makes)."""
    generator = torch.Generator().manual_seed(int(seed))
    gaussian_noise(like, std, generator)
    return generator


def objective_noise_draws(like: Mapping[str, torch.Tensor], alpha: float, *, feature_len: int | None) -> Callable[[], object]:
    """The global-generator draws of one objective-perturbation noise, in order: the reference law's
    (``feature_len`` given: ``rand(shape)`` per tensor, then ``Gamma(feature_len, α).sample()``, as client/avg.py and
    :func:`~privaudit.fl.privacy.noise.objective_noise_reference`) or the paper law's (``feature_len=None``: a Gamma(d, α)
    radius, then ``randn(d)`` in float64, as :func:`~privaudit.fl.privacy.noise.objective_noise_paper`)."""

    def draw() -> object:
        if feature_len is not None:
            directions = [torch.rand(v.shape) for v in like.values()]
            return directions, torch.distributions.gamma.Gamma(float(feature_len), float(alpha)).sample()
        d = sum(v.numel() for v in like.values())
        gamma = torch.distributions.Gamma(torch.tensor(float(d), dtype=torch.float64), torch.tensor(float(alpha), dtype=torch.float64))
        return gamma.sample(), torch.randn(d, dtype=torch.float64)

    return draw


def after_global_draw(seed: int, draw: Callable[[], object]) -> torch.Generator:
    """The global generator after ``manual_seed(seed)`` and ``draw()`` (which draws from torch's global generator, as
    the objective-perturbation noise does), captured without touching the caller's global state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        draw()
        generator = torch.Generator()
        generator.set_state(torch.random.get_rng_state())
    return generator
