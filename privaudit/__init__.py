"""privaudit: check the privacy claims of differentially private federated learning.

The package is layered (see ``docs`` in README.md):

* :mod:`privaudit.accounting` — mechanisms, accountants, the papers' closed forms, calibration and
  per-client ledgers (numpy/scipy only; never imports torch);
* :mod:`privaudit.fl` — the federation loop, algorithms, privatizers and checkpoints (torch);
* :mod:`privaudit.audit` — statistics that turn attack scores into ε lower bounds, claims, verdicts;
* :mod:`privaudit.report` — result files rendered to Markdown/HTML.
"""

__version__ = "0.1.0"
