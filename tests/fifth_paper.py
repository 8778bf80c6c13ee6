"""A fifth paper, as a package of its own would define it: one PAPER value, every part a name (tests/test_plugins.py)."""

from privaudit.accounting.closed_form import ClosedForm, ClosedFormSpec, Parameter
from privaudit.fl.algorithms.spec_types import AlgorithmSpec, WrapperSpec
from privaudit.fl.privacy.registry import PrivacySpec
from privaudit.models import LogisticRegression, ModelSpec
from privaudit.plugins import Paper, Ref

PAPER = Paper(
    "gamma", "Gamma (2026)",
    algorithm_specs=(__name__,),
    algorithm_wrappers={"twice": Ref(f"{__name__}:TWICE")},
    privacy={"gamma-noise": Ref(f"{__name__}:GAMMA_NOISE")},
    models={"gamma-net": Ref(f"{__name__}:GAMMA_NET")},
    closed_forms={"gamma-bound": Ref(f"{__name__}:GAMMA_BOUND")},
)

SPECS = (AlgorithmSpec("gamma-avg", "Gamma's averaging", (), lambda: "gamma-avg built"),)
TWICE = WrapperSpec("twice", lambda base: f"{base}, twice", (), lambda algorithm: ("twice", algorithm))
GAMMA_NOISE = PrivacySpec("gamma-noise", "Gamma's noise", (), lambda algorithm: ("noised", algorithm))
GAMMA_NET = ModelSpec(lambda shape, classes: LogisticRegression(shape[0], classes, init="zeros"), "Gamma's net")
GAMMA_BOUND = ClosedFormSpec("gamma-bound", "ε = 2k", "Gamma Thm 1", (Parameter("k", "count"),),
                             lambda k: ClosedForm("gamma-bound", 2.0 * k, "ε = 2k", "Gamma Thm 1"))
