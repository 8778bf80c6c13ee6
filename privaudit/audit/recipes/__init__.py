"""Recipes: one module per paper, turning a registered claim into the readings that test it.

A recipe is ``recipe(claim, trials) -> Sequence[Reading | ClaimDetails]`` (types in
:mod:`privaudit.audit.plan`); the claim names it as ``"module:function"``, imported only when the claim runs
(listing the claims imports no recipe, and no torch). Recipes only *describe* the work: trials run through the
executor in :mod:`privaudit.audit.runner`.

* :mod:`~privaudit.papers.upcycled.recipe` — Upcycled-FL Thm 6.2 (output perturbation) and
  :mod:`~privaudit.papers.upcycled.objective_recipe` — Thm 6.3 (objective perturbation); trials in
  :mod:`~privaudit.papers.upcycled.trials`;
* :mod:`~privaudit.papers.privatefl.recipe` — PrivateFL CDP (per-tensor clipping, client-level canary clients)
  and LDP participation; trials in :mod:`~privaudit.papers.privatefl.trials`;
* :mod:`~privaudit.papers.pfa.recipe` — PFA's reference calibration and participation;
* :mod:`~privaudit.papers.fedreg.recipe` — FedReg's claim as stated (it states no ε): FedReg+MG's inversion PSNR
  against DP-SGD's at the paper's noise levels (:mod:`privaudit.audit.comparison`), with DP-SGD's real ε and MG's
  "no DP guarantee (ε = ∞)" as facts; trials in :mod:`~privaudit.papers.fedreg.trials`;
* shared: :mod:`~privaudit.audit.recipes.accounting`, :mod:`~privaudit.audit.recipes.participation`,
  :mod:`~privaudit.audit.recipes.trial_results`.
"""
