"""The papers' tests train on the engine's tiny federated problems (see ``tests/fl/conftest.py``)."""

from tests.fl.conftest import tiny_dataset  # noqa: F401  (fixture, re-exported for pytest)
