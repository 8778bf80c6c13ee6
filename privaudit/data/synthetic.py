"""FedProx's Synthetic(α, β) federated data, generated from its published description.

Source: Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, "Federated Optimization in Heterogeneous Networks" (MLSys
2020) and its generator scripts (litian96/FedProx@3eed82e:data/synthetic_0.5_0.5/generate_synthetic.py and
data/synthetic_iid/generate_iid.py), which both Upcycled-FL papers use (003 §7.1 and App. F.1). For client k:

* n_k = int(lognormal(mean 4, sigma 2)) + 50 samples;
* u_k ~ N(0, α) and B_k ~ N(0, β) (α, β are standard deviations): model and data heterogeneity;
* Σ = diag(j^−1.2), j = 1..d;
* v_k ~ N(B_k, 1)^d; x ~ N(v_k, Σ);
* W_k ~ N(u_k, 1)^{d×C}, b_k ~ N(u_k, 1)^C; y = argmax softmax(x W_k + b_k);
* shuffle, train = first int(0.9 n_k), test = the rest.

The iid variant (``generate_iid.py``) uses one global W ~ N(0, 1)^{d×C}, b ~ N(0, 1)^C for every client and
v_k = B_k·1 with B_k = 0, i.e. v_k = 0; it has no heterogeneity, so ``iid=True`` requires α = β = 0.
FedProx's values are 30 clients, d = 60, C = 10; Upcycled-FL's shipped data has d = 20, C = 2.
FedProx sets no seed; here every draw comes from one ``numpy.random.Generator`` seeded with ``seed``, so
the procedure is exact and the numbers reproducible, but they are not FedProx's numbers.
"""

from __future__ import annotations

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError

__all__ = ["synthetic"]

_TRAIN_FRACTION = 0.9


def _check(alpha: float, beta: float, iid: bool, num_clients: int, dim: int, num_classes: int) -> None:
    if not (np.isfinite(alpha) and alpha >= 0 and np.isfinite(beta) and beta >= 0):
        raise InvalidParameterError(f"synthetic α and β are standard deviations and must be ≥ 0, got α={alpha}, β={beta}")
    if iid and (alpha != 0 or beta != 0):
        raise InvalidParameterError(
            f"the iid synthetic variant has no heterogeneity parameters: use alpha=beta=0, got α={alpha}, β={beta}"
        )
    if num_clients < 1 or dim < 1 or num_classes < 2:
        raise InvalidParameterError(
            f"synthetic needs num_clients ≥ 1, dim ≥ 1 and num_classes ≥ 2, got {num_clients}, {dim}, {num_classes}"
        )


def synthetic(
    alpha: float,
    beta: float,
    iid: bool = False,
    num_clients: int = 30,
    dim: int = 60,
    num_classes: int = 10,
    seed: int = 0,
) -> FederatedDataset:
    """Synthetic(α, β) (or the iid variant) as FedProx's generator draws it (module docstring), seeded with ``seed``.

    Inputs have shape ``(dim,)`` and are not scaled (``data_range`` records the observed min/max); each
    client's test split is the last 10 % of its shuffled samples and the pooled test set their union.
    """
    alpha, beta = float(alpha), float(beta)
    _check(alpha, beta, iid, int(num_clients), int(dim), int(num_classes))
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(mean=4.0, sigma=2.0, size=num_clients).astype(np.int64) + 50
    model_means = rng.normal(0.0, alpha, size=num_clients)  # u_k, the mean of W_k and b_k
    data_means = rng.normal(0.0, beta, size=num_clients)  # B_k
    feature_std = np.arange(1, dim + 1, dtype=np.float64) ** (-1.2 / 2)  # sqrt of diag(Σ)

    if iid:
        centres = np.ones((num_clients, dim)) * data_means[:, None]  # B_k·1 = 0
        global_weights = rng.normal(0.0, 1.0, size=(dim, num_classes))
        global_bias = rng.normal(0.0, 1.0, size=num_classes)
    else:
        centres = rng.normal(data_means[:, None], 1.0, size=(num_clients, dim))  # v_k ~ N(B_k, 1)^d

    clients: list[ClientData] = []
    for k in range(num_clients):
        if iid:
            weights, bias = global_weights, global_bias
        else:
            weights = rng.normal(model_means[k], 1.0, size=(dim, num_classes))
            bias = rng.normal(model_means[k], 1.0, size=num_classes)
        x = centres[k] + rng.standard_normal((sizes[k], dim)) * feature_std  # x ~ N(v_k, Σ), Σ diagonal
        y = np.argmax(x @ weights + bias, axis=1)  # argmax of softmax = argmax of the logits
        order = rng.permutation(sizes[k])
        x, y = x[order], y[order]
        n_train = int(_TRAIN_FRACTION * sizes[k])
        clients.append(ClientData(x[:n_train], y[:n_train], x[n_train:], y[n_train:]))

    all_x = np.concatenate([np.concatenate([c.x_train, c.x_test]) for c in clients])
    name = "synthetic:iid" if iid else f"synthetic:{alpha:g},{beta:g}"
    return FederatedDataset(
        name=name,
        clients=clients,
        num_classes=num_classes,
        input_shape=(dim,),
        data_range=(float(all_x.min()), float(all_x.max())),
        metadata={
            "source": "FedProx Synthetic(α,β) generator (Li et al., MLSys 2020)",
            "alpha": alpha,
            "beta": beta,
            "iid": bool(iid),
            "dim": int(dim),
            "seed": int(seed),
            "partition": "natural",
            "input_kind": "features",
        },
    )
