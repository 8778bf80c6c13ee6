"""Privacy accounting: mechanisms, accountants, the papers' closed forms, calibration, ledgers.

This package imports only numpy and scipy (and, lazily, prv-accountant / dp-accounting when those
accountants are asked for). It never imports torch or opacus, so ``privaudit compute-epsilon`` starts fast.
"""

from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Neighbouring,
    PureDP,
    Sampling,
    SubsampledGaussian,
)

__all__ = ["Composition", "Gaussian", "Laplace", "Neighbouring", "PureDP", "Sampling", "SubsampledGaussian"]
