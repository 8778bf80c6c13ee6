"""Canary insertion into federated training (the engine side of membership audits).

Canaries change what is trained, so they live with the engine; scoring them is the attacks' job
(:mod:`attacks.membership`). Every canary carries a membership bit drawn with probability ½, which is the
ground truth an audit compares scores against.

* :mod:`~privaudit.fl.canaries.inputs` — input-space canaries (mislabelled or out-of-distribution
  records) inserted into a chosen client's training data: a dataset transform.
* :mod:`~privaudit.fl.canaries.gradients` — gradient canaries (Dirac or random direction, Nasr et al. 2023;
  Steinke, Nasr & Jagielski 2023): an algorithm wrapper that adds C·c to a client's update in chosen rounds,
  before the privatizer.
* :mod:`~privaudit.fl.canaries.clients` — canary *clients* (Andrew et al. 2024): extra clients whose update
  is a fixed random unit direction; a dataset transform (placeholder clients) plus an algorithm wrapper;
  :mod:`~privaudit.fl.canaries.client_file` — the canary clients a recorded loop added, stored beside its checkpoint.
* :mod:`~privaudit.fl.canaries.directions` — the random unit and Dirac directions they share.
* :func:`~privaudit.fl.canaries.compose.with_canaries` — build a registry algorithm with canary wrappers
  placed between Upcycled-FL and the privatizer.
"""
