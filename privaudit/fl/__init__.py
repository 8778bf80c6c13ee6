"""Federated training, in four sub-packages; this package itself imports nothing (the CLI and
``privaudit.fl.engine.checkpoint.read_ledger`` stay torch-free).

* :mod:`privaudit.fl.engine` — the generic machinery: the round loop
  (:func:`privaudit.fl.engine.round_loop.run_federation`), batched and sequential trainers, local training and its
  configuration, client sampling and stragglers, evaluation, seeding, checkpoints on disk (manifest + safetensors,
  :mod:`~privaudit.fl.engine.checkpoint`) and a run described by names (:mod:`~privaudit.fl.engine.run`, what
  ``privaudit train`` executes).
* :mod:`privaudit.fl.algorithms` — one module per algorithm behind one interface (:mod:`~privaudit.fl.algorithms.base`):
  FedAvg, FedProx, FedAvgM, SCAFFOLD, FedDyn, pFedMe, FedYogi, FedCurv, FedSGD, and
  :class:`~privaudit.fl.algorithms.upcycled.Upcycled`, Upcycled-FL's even-round extrapolation around any of them.
  :mod:`~privaudit.fl.algorithms.registry` names every algorithm; the papers' own algorithms (PrivateFL, FedReg,
  PFA and its baselines) live in :mod:`privaudit.papers` and register through its ``ALGORITHM_MODULES``.
* :mod:`privaudit.fl.privacy` — privatizers as wrappers around any algorithm, each recording its privacy events in
  the ledger: output and objective perturbation (Upcycled-FL), DP-SGD / PrivateFL's LDP, central DP at the server
  (DP-FedAvg and PrivateFL's CDP, :mod:`~privaudit.fl.privacy.central_dp`), distributed DP (Skellam noise under
  secure aggregation); :mod:`~privaudit.fl.privacy.registry` maps ``--privacy NAME`` to them.
* :mod:`privaudit.fl.canaries` — input, gradient and client canaries inserted into a run for membership audits
  (scoring them is :mod:`attacks.membership`'s job).
"""
