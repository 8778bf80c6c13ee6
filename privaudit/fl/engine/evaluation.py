"""Evaluation of the global model: pooled test accuracy, per-client test accuracy, optional training loss and accuracy.

Evaluation is the experimenter's measurement, not part of the protocol: the evaluator copies the test (and,
if asked, training) tensors once before round 1, so server-only rounds stay provably data-free for the
protocol (:class:`~privaudit.papers.upcycled.algorithm.Upcycled`). Evaluating on clients' *training* data every
round is what the Upcycled-FL code publishes (audit point U9); it is off by default. Its training accuracy is the
reference's: correct predictions over all clients' training examples pooled (osu-srml/Upcycled-FL@4dd7400:server/avg.py,
``test``, weights each client's accuracy by its share of the training examples, which is the pooled accuracy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from privaudit.data.base import FederatedDataset
from privaudit.fl.engine.params import State

_CHUNK = 8192


@dataclass(frozen=True)
class Evaluation:
    test_accuracy: float | None
    test_loss: float | None
    per_client_accuracy: list[float | None]
    personalised_accuracy: float | None = None
    train_loss: float | None = None
    train_accuracy: float | None = None


def _copy(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(x, copy=True))


class Evaluator:
    def __init__(self, model: nn.Module, dataset: FederatedDataset, *, train_loss: bool = False) -> None:
        self.model = model
        self.test = None if dataset.test is None or len(dataset.test[1]) == 0 else (_copy(dataset.test[0]), _copy(dataset.test[1]))
        sizes = [c.num_test for c in dataset.clients]
        self.client_bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if sum(sizes):
            self.client_test = (
                _copy(np.concatenate([c.x_test for c in dataset.clients])),
                _copy(np.concatenate([c.y_test for c in dataset.clients])),
            )
        else:
            self.client_test = None
        self.same_test = self.test is not None and self.client_test is not None and all(
            torch.equal(a, b) for a, b in zip(self.test, self.client_test, strict=True)
        )
        self.train = None
        if train_loss:
            self.train = (
                _copy(np.concatenate([c.x_train for c in dataset.clients])),
                _copy(np.concatenate([c.y_train for c in dataset.clients])),
            )

    def _logits(self, state: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                return torch.cat([functional_call(self.model, dict(state), (x[i : i + _CHUNK],)) for i in range(0, len(x), _CHUNK)])
        finally:
            self.model.train(was_training)

    def _per_client(self, correct: torch.Tensor) -> list[float | None]:
        out: list[float | None] = []
        for lo, hi in zip(self.client_bounds[:-1], self.client_bounds[1:], strict=True):
            out.append(float(correct[lo:hi].double().mean()) if hi > lo else None)
        return out

    def evaluate(self, state: State, personal: Mapping[int, State] | None = None) -> Evaluation:
        test_accuracy = test_loss = None
        per_client: list[float | None] = [None] * (len(self.client_bounds) - 1)
        if self.test is not None:
            logits = self._logits(state, self.test[0])
            correct = logits.argmax(dim=1) == self.test[1]
            test_accuracy = float(correct.double().mean())
            test_loss = float(F.cross_entropy(logits, self.test[1]))
            if self.same_test:
                per_client = self._per_client(correct)
        if self.client_test is not None and not self.same_test:
            per_client = self._per_client(self._logits(state, self.client_test[0]).argmax(dim=1) == self.client_test[1])
        personalised = None
        if personal and self.client_test is not None:
            hits = total = 0
            for cid, own in personal.items():
                lo, hi = int(self.client_bounds[cid]), int(self.client_bounds[cid + 1])
                if hi > lo:
                    predictions = self._logits(own, self.client_test[0][lo:hi]).argmax(dim=1)
                    hits += int((predictions == self.client_test[1][lo:hi]).sum())
                    total += hi - lo
            personalised = hits / total if total else None
        train_loss = train_accuracy = None
        if self.train is not None:
            train_logits = self._logits(state, self.train[0])
            train_loss = float(F.cross_entropy(train_logits, self.train[1]))
            train_accuracy = float((train_logits.argmax(dim=1) == self.train[1]).double().mean())
        return Evaluation(test_accuracy, test_loss, per_client, personalised, train_loss, train_accuracy)
