"""Federated training: the round loop, algorithms, privatizers and checkpoints.

Entry points (import the submodules; this package itself imports nothing heavy, so the CLI and
``privaudit.fl.engine.checkpoint.read_ledger`` stay torch-free):

* :func:`privaudit.fl.engine.round_loop.run_federation` — train an algorithm on a federated dataset;
* :mod:`privaudit.fl.algorithms` — FedAvg, FedProx, FedAvgM, SCAFFOLD, FedDyn, pFedMe, FedYogi, the
  :class:`~privaudit.fl.algorithms.upcycled.Upcycled` wrapper, and the name registry;
* :mod:`privaudit.fl.privacy.perturbation` — output and objective perturbation as wrappers that record privacy events;
* :mod:`privaudit.fl.engine.checkpoint` — trained federations on disk (manifest + safetensors);
* :mod:`privaudit.fl.engine.run` — a run described by names (what ``privaudit train`` executes).
"""
