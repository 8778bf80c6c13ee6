"""Federated training, in four sub-packages and a run described by names; this package itself imports nothing (the CLI
and ``privaudit.fl.engine.checkpoint.read_ledger`` stay torch-free). Layers: engine < algorithms < privacy < canaries;
a layer imports none above it (``tests/fl/test_fl_layers.py``).

* :mod:`privaudit.fl.engine` — the generic machinery and the plug-in points it declares: the round loop (one
  :class:`~privaudit.fl.engine.round_loop.Federation` that owns a run; :func:`~privaudit.fl.engine.round_loop.run_federation`
  loops over it, Flower's hosted strategy calls the same steps), the algorithm core
  (:mod:`~privaudit.fl.engine.algorithm`) and its optional capabilities (:mod:`~privaudit.fl.engine.capabilities`),
  the local solver and the trainer view it gets (:mod:`~privaudit.fl.engine.local_solver`), batched and sequential
  trainers, local training and its configuration, client sampling and stragglers, evaluation, seeding, checkpoints on
  disk (manifest + safetensors, :mod:`~privaudit.fl.engine.checkpoint`).
* :mod:`privaudit.fl.algorithms` — one module per algorithm (FedAvg, FedProx, FedAvgM, SCAFFOLD, FedDyn, pFedMe,
  FedYogi, FedCurv, FedSGD); wrappers forward capabilities generically (:mod:`~privaudit.fl.algorithms.base`).
  :mod:`~privaudit.fl.algorithms.registry` names every algorithm; the papers' own algorithms (PrivateFL, FedReg,
  PFA and its baselines) and wrappers (Upcycled-FL's even-round extrapolation around any algorithm) live in
  :mod:`privaudit.papers` and register through the paper registry (:mod:`privaudit.plugins`).
* :mod:`privaudit.fl.privacy` — privatizers as wrappers around any algorithm, each recording its privacy events in
  the ledger: output perturbation, DP-SGD, central DP at the server (DP-FedAvg, :mod:`~privaudit.fl.privacy.central_dp`;
  a paper's median variants plug in), distributed DP (Skellam noise under secure aggregation);
  :mod:`~privaudit.fl.privacy.registry` maps ``--privacy NAME`` to them and to the papers' own mechanisms (Upcycled-FL's
  objective perturbation, PrivateFL's name ``ldp`` for DP-SGD).
* :mod:`privaudit.fl.canaries` — input, gradient and client canaries inserted into a run for membership audits
  (scoring them is :mod:`attacks.membership`'s job).
* :mod:`privaudit.fl.run` — a run described by names and options (:class:`~privaudit.fl.run.TrainSpec`, what
  ``privaudit train`` executes): the algorithm and privatizer registries composed with the round loop.
"""
