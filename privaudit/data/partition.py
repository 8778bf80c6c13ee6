"""Partitioners: split one pooled labelled dataset into clients' index lists.

Every partitioner takes the labels (or the sample count), the number of clients and a
``numpy.random.Generator``, and returns one sorted ``int64`` index array per client. Indices are disjoint;
all partitioners but ``classes`` with the paper's uniform class choice cover every sample.

Partition strings (:func:`parse_partition`, used by ``load_dataset(..., partition=...)``)::

    iid                         uniform random split into near-equal sizes
    shards:<s>                  FedAvg / PFA label shards: sort by label, cut into s·K shards, s per client
    classes:<N>                 PrivateFL, as the paper states: N classes per client chosen uniformly at
                                random, class c shared among its holders in proportion to p ~ U(0.4, 0.6)
    classes:<N>:equal           PrivateFL, as its reference code does: classes balanced over clients,
                                equal shares
    classes:<N>:<shares>:<choice>   shares ∈ {paper, equal}, choice ∈ {uniform, balanced}
    dirichlet:<α>               label skew: each class split over clients by Dirichlet(α·1)
    powerlaw[:<a>]              iid labels, client sizes ∝ Pareto(a) + 1 draws (default a = 1.5)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.errors import InvalidParameterError

__all__ = [
    "PARTITION_GRAMMAR",
    "PartitionSpec",
    "classes_per_client",
    "dirichlet",
    "iid",
    "label_shards",
    "parse_partition",
    "partition_indices",
    "powerlaw",
]

PARTITION_GRAMMAR = (
    "iid | shards:<s> | classes:<N>[:paper|equal[:uniform|balanced]] | dirichlet:<α> | powerlaw[:<a>]"
)


def _check_clients(num_clients: int, num_samples: int) -> None:
    if num_clients < 1:
        raise InvalidParameterError(f"the number of clients must be ≥ 1, got {num_clients}")
    if num_clients > num_samples:
        raise InvalidParameterError(f"cannot give {num_clients} clients at least one sample each from {num_samples} samples")


def _sorted(parts: list[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def _split_by_weights(members: np.ndarray, weights: np.ndarray, min_each: int) -> list[np.ndarray]:
    """Cut ``members`` into consecutive pieces, piece i of size ≈ min_each + w_i/Σw · (n − min_each·len(w)).

    Cumulative rounding keeps the sizes within one sample of the ideal shares and their sum exactly n.
    """
    spare = len(members) - min_each * len(weights)
    cumulative = np.round(np.cumsum(weights) / np.sum(weights) * spare).astype(np.int64)
    sizes = np.diff(cumulative, prepend=0) + min_each
    return np.split(members, np.cumsum(sizes)[:-1])


def iid(num_samples: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniformly random disjoint split into near-equal parts (sizes differ by at most one)."""
    _check_clients(num_clients, num_samples)
    return _sorted(np.array_split(rng.permutation(num_samples), num_clients))


def label_shards(labels: np.ndarray, num_clients: int, shards_per_client: int, rng: np.random.Generator) -> list[np.ndarray]:
    """FedAvg's pathological non-IID split (McMahan et al. 2017) as PFA uses it (Emory-AIMS/PFA@72b3f89, ``--noniid``).

    Samples are sorted by label (random order within a label), cut into ``shards_per_client · K`` shards of
    near-equal size, and every client receives ``shards_per_client`` shards drawn at random without
    replacement. A client therefore sees at most ``shards_per_client`` labels plus boundary effects.
    """
    labels = np.asarray(labels)
    num_shards = num_clients * shards_per_client
    if shards_per_client < 1:
        raise InvalidParameterError(f"shards per client must be ≥ 1, got {shards_per_client}")
    _check_clients(num_clients, len(labels))
    if num_shards > len(labels):
        raise InvalidParameterError(
            f"{num_clients} clients × {shards_per_client} shards = {num_shards} shards is more than the {len(labels)} samples"
        )
    shuffled = rng.permutation(len(labels))
    by_label = shuffled[np.argsort(labels[shuffled], kind="stable")]
    shards = np.array_split(by_label, num_shards)
    order = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return _sorted([np.concatenate([shards[s] for s in row]) for row in order])


def _choose_classes_uniform(num_clients: int, per_client: int, num_classes: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [np.sort(rng.choice(num_classes, size=per_client, replace=False)) for _ in range(num_clients)]


def _choose_classes_balanced(num_clients: int, per_client: int, num_classes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Spread N·K class slots evenly over the classes; each client takes the N classes with most slots left.

    PrivateFL's ``gen_classes_per_node`` (BHui97/PrivateFL@f686b6f:datasets.py) does this when N·K is a multiple of C; here the
    slots differ by at most one otherwise. Ties are broken at random. Taking the N fullest classes keeps
    "slots left in any class ≤ clients left", so every client gets N distinct classes.
    """
    total = num_clients * per_client
    slots = np.full(num_classes, total // num_classes)
    slots[rng.permutation(num_classes)[: total % num_classes]] += 1
    chosen = []
    for _ in range(num_clients):
        tie_break = rng.random(num_classes)
        picks = np.lexsort((tie_break, -slots))[:per_client]
        slots[picks] -= 1
        chosen.append(np.sort(picks))
    return chosen


def classes_per_client(
    labels: np.ndarray,
    num_clients: int,
    per_client: int,
    rng: np.random.Generator,
    *,
    shares: str = "paper",
    class_choice: str | None = None,
    num_classes: int | None = None,
) -> list[np.ndarray]:
    """PrivateFL's "N classes per client" split (001 §5 Experimental Setup; BHui97/PrivateFL@f686b6f:datasets.py).

    ``shares="paper"``: client k draws p_{k,c} ~ U(0.4, 0.6) for each of its classes and receives the
    fraction p_{k,c} / Σ_{k' holds c} p_{k',c} of class c's samples, as the paper states.
    ``shares="equal"``: every holder of class c receives an equal share, as the reference code does (the
    paper's random p is not implemented there). ``class_choice`` defaults to ``"uniform"`` for the paper
    (each client picks N distinct classes uniformly at random; a class nobody picks is left unused) and to
    ``"balanced"`` for the reference code (classes spread evenly over clients).
    """
    labels = np.asarray(labels)
    if shares not in ("paper", "equal"):
        raise InvalidParameterError(f"class shares must be 'paper' or 'equal', got {shares!r}")
    choice = class_choice or ("uniform" if shares == "paper" else "balanced")
    if choice not in ("uniform", "balanced"):
        raise InvalidParameterError(f"class choice must be 'uniform' or 'balanced', got {choice!r}")
    num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
    _check_clients(num_clients, len(labels))
    if not 1 <= per_client <= num_classes:
        raise InvalidParameterError(f"cannot give each client {per_client} classes: the dataset has {num_classes} classes")
    chooser = _choose_classes_uniform if choice == "uniform" else _choose_classes_balanced
    chosen = chooser(num_clients, per_client, num_classes, rng)

    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c in range(num_classes):
        holders = [k for k in range(num_clients) if c in chosen[k]]
        if not holders:
            continue
        members = rng.permutation(np.flatnonzero(labels == c))
        if len(members) < len(holders):
            raise InvalidParameterError(
                f"class {c} has {len(members)} samples but {len(holders)} clients need at least one each; "
                "use fewer clients or fewer classes per client"
            )
        weights = rng.uniform(0.4, 0.6, size=len(holders)) if shares == "paper" else np.ones(len(holders))
        for holder, piece in zip(holders, _split_by_weights(members, weights, min_each=1), strict=True):
            parts[holder].append(piece)
    return _sorted([np.concatenate(p) for p in parts])


def dirichlet(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
    *,
    min_size: int = 2,
    max_draws: int = 100,
) -> list[np.ndarray]:
    """Dirichlet label skew (Hsu, Qi & Brown 2019): class c is split over clients by q_c ~ Dir(α·1_K).

    Small α concentrates each class on few clients (strong skew); large α approaches iid. The whole draw
    is repeated until every client holds at least ``min_size`` samples (at most ``max_draws`` times).
    """
    labels = np.asarray(labels)
    if not (np.isfinite(alpha) and alpha > 0):
        raise InvalidParameterError(f"the Dirichlet concentration α must be > 0, got {alpha}")
    _check_clients(num_clients, len(labels))
    if num_clients * min_size > len(labels):
        raise InvalidParameterError(f"{len(labels)} samples cannot give {num_clients} clients {min_size} samples each")
    classes = np.unique(labels)
    for _ in range(max_draws):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        for c in classes:
            members = rng.permutation(np.flatnonzero(labels == c))
            proportions = rng.dirichlet(np.full(num_clients, float(alpha)))
            for k, piece in enumerate(_split_by_weights(members, proportions, min_each=0)):
                parts[k].append(piece)
        result = [np.concatenate(p) for p in parts]
        if min(len(p) for p in result) >= min_size:
            return _sorted(result)
    raise InvalidParameterError(
        f"Dirichlet({alpha:g}) left a client with fewer than {min_size} samples in {max_draws} draws; "
        "use a larger α or fewer clients"
    )


def powerlaw(num_samples: int, num_clients: int, rng: np.random.Generator, *, exponent: float = 1.5, min_size: int = 2) -> list[np.ndarray]:
    """Client sizes following a power law, samples assigned uniformly at random (labels iid).

    Size weights are Pareto(a) + 1 draws (density ∝ s^−(a+1) on s ≥ 1), as in LEAF/FedProx-style
    "power-law" client sizes; every client gets ``min_size`` samples and the rest is split in proportion
    to the weights (largest-remainder rounding).
    """
    if not (np.isfinite(exponent) and exponent > 0):
        raise InvalidParameterError(f"the power-law exponent must be > 0, got {exponent}")
    _check_clients(num_clients, num_samples)
    if num_clients * min_size > num_samples:
        raise InvalidParameterError(f"{num_samples} samples cannot give {num_clients} clients {min_size} samples each")
    weights = rng.pareto(exponent, size=num_clients) + 1.0
    spare = num_samples - num_clients * min_size
    ideal = weights / weights.sum() * spare
    extra = np.floor(ideal).astype(np.int64)
    extra[np.argsort(extra - ideal)[: spare - extra.sum()]] += 1
    sizes = extra + min_size
    order = rng.permutation(num_samples)
    return _sorted(np.split(order, np.cumsum(sizes)[:-1]))


# --------------------------------------------------------------------------- partition strings


@dataclass(frozen=True)
class PartitionSpec:
    """A parsed partition string: the scheme and its parameters."""

    scheme: str
    shards_per_client: int = 0
    classes_per_client: int = 0
    shares: str = "paper"
    class_choice: str | None = None
    alpha: float = 0.0
    exponent: float = 1.5

    def __str__(self) -> str:
        if self.scheme == "shards":
            return f"shards:{self.shards_per_client}"
        if self.scheme == "classes":
            text = f"classes:{self.classes_per_client}:{self.shares}"
            return text + (f":{self.class_choice}" if self.class_choice else "")
        if self.scheme == "dirichlet":
            return f"dirichlet:{self.alpha:g}"
        if self.scheme == "powerlaw":
            return f"powerlaw:{self.exponent:g}"
        return self.scheme


def _bad(text: str, why: str) -> InvalidParameterError:
    return InvalidParameterError(f"bad partition {text!r}: {why}; the grammar is {PARTITION_GRAMMAR}")


def _positive_int(text: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _bad(text, f"{value!r} is not an integer") from None
    if number < 1:
        raise _bad(text, f"{value!r} must be ≥ 1")
    return number


def _positive_float(text: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _bad(text, f"{value!r} is not a number") from None
    if not (np.isfinite(number) and number > 0):
        raise _bad(text, f"{value!r} must be a positive number")
    return number


def parse_partition(text: str) -> PartitionSpec:
    """Parse a partition string (grammar in the module docstring and :data:`PARTITION_GRAMMAR`)."""
    scheme, *args = text.strip().split(":")
    if scheme == "iid" and not args:
        return PartitionSpec("iid")
    if scheme == "shards" and len(args) == 1:
        return PartitionSpec("shards", shards_per_client=_positive_int(text, args[0]))
    if scheme == "classes" and 1 <= len(args) <= 3:
        shares = args[1] if len(args) >= 2 else "paper"
        choice = args[2] if len(args) == 3 else None
        if shares not in ("paper", "equal"):
            raise _bad(text, f"class shares must be 'paper' or 'equal', not {shares!r}")
        if choice is not None and choice not in ("uniform", "balanced"):
            raise _bad(text, f"class choice must be 'uniform' or 'balanced', not {choice!r}")
        return PartitionSpec("classes", classes_per_client=_positive_int(text, args[0]), shares=shares, class_choice=choice)
    if scheme == "dirichlet" and len(args) == 1:
        return PartitionSpec("dirichlet", alpha=_positive_float(text, args[0]))
    if scheme == "powerlaw" and len(args) <= 1:
        return PartitionSpec("powerlaw", exponent=_positive_float(text, args[0]) if args else 1.5)
    raise _bad(text, "unknown scheme or wrong number of parameters")


def partition_indices(
    spec: PartitionSpec | str, labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, num_classes: int | None = None
) -> list[np.ndarray]:
    """Apply a partition (parsed or as a string) to ``labels``; one sorted index array per client."""
    spec = parse_partition(spec) if isinstance(spec, str) else spec
    labels = np.asarray(labels)
    if spec.scheme == "iid":
        return iid(len(labels), num_clients, rng)
    if spec.scheme == "shards":
        return label_shards(labels, num_clients, spec.shards_per_client, rng)
    if spec.scheme == "classes":
        return classes_per_client(
            labels, num_clients, spec.classes_per_client, rng,
            shares=spec.shares, class_choice=spec.class_choice, num_classes=num_classes,
        )
    if spec.scheme == "dirichlet":
        return dirichlet(labels, num_clients, spec.alpha, rng)
    if spec.scheme == "powerlaw":
        return powerlaw(len(labels), num_clients, rng, exponent=spec.exponent)
    raise InvalidParameterError(f"unknown partition scheme {spec.scheme!r}; the grammar is {PARTITION_GRAMMAR}")
