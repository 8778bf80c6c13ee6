"""The papers' closed forms reproduce their printed numbers and expose their assumptions; the registry finds them."""

import math
import subprocess
import sys

import pytest

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.closed_form import ClosedFormSpec, Parameter, closed_form, closed_forms
from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa import closed_forms as pfa
from privaudit.papers.privatefl import closed_forms as privatefl
from privaudit.papers.upcycled import closed_forms as upcycled


def test_upcycled_output_paper_numbers():
    # 003 Fig. 3's 1.59 / 1.40 are the ICLR draft's Thm 5.2 form at δ = 1e-3 (M=80, σ=1 → 1.587; M=40, σ=0.8 → 1.402;
    # σ² convention → 1.753, U1); 003's own Thm 6.2 prints r + 2·sqrt(r·ln(1/δ)): 1.562 / 1.373 (the default form)
    draft = dict(form="draft")
    assert upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3, **draft).value == pytest.approx(1.587, abs=1e-3)
    assert upcycled.upcycled_output_perturbation(40, 0.8, 10, 224.2, 1e-3, **draft).value == pytest.approx(1.402, abs=1e-3)
    assert upcycled.upcycled_output_perturbation(40, 0.8, 10, 224.2, 1e-3, noise_std="sigma-squared", **draft).value == pytest.approx(1.753, abs=1e-3)
    assert upcycled.upcycled_output_perturbation(40, 0.8, 10, 224.2, 1e-3, form="printed").value == pytest.approx(1.402, abs=1e-3)  # old name
    tmlr = upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3)
    assert tmlr.value == pytest.approx(1.562, abs=1e-3) and "003" in tmlr.source and "Thm 6.2 as printed" in tmlr.formula
    assert upcycled.upcycled_output_perturbation(40, 0.8, 10, 224.2, 1e-3).value == pytest.approx(1.373, abs=1e-3)
    assert upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3, form="corrected").value == pytest.approx(1.562, abs=1e-3)
    assert "000" in upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3, **draft).source
    # U3: replace-one doubles the sensitivity: 3.17
    assert upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3, sensitivity="replace-one", form="draft").value == pytest.approx(3.17, abs=0.01)


def test_upcycled_output_clipped_model_is_huge():
    # audit point U2: Δ = 2τ with the code's std (σ² = 1 for σ = 1): r = M·Δ²/(2s²) → ε in the tens of thousands
    res = upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3, sensitivity="clipped-model", form="corrected")
    assert res.value > 10_000


def test_upcycled_output_composition_is_the_same_mechanism():
    res = upcycled.upcycled_output_perturbation(80, 1.0, 10, 224.2, 1e-3)
    (mech, count), = res.composition.entries
    assert count == 80 and mech.noise_multiplier == 1.0 and mech.sensitivity == pytest.approx(10 / 224.2)
    tight = get_accountant("auto").epsilon(res.composition, 1e-3).epsilon
    assert tight < res.value  # the printed moments-accountant bound is looser than the exact Gaussian ε
    assert any("FAILED" not in a for a in res.assumptions)
    assert res.failed_assumptions  # δ·|D| = 0.22 is not small


def test_upcycled_objective_numbers_and_failed_assumptions():
    # 003 Thm 6.3 as printed, u₁ = 1, u₂ = 1/4: formula with μ=0.5, |D|=224.2 gives 7.64 (M=80, α=10) and 7.39 (M=40, α=20); μ=1, |D|≈225 → 7.36
    assert upcycled.upcycled_objective_perturbation(80, 10, 0.5, 1, 0.25, 224.2).value == pytest.approx(7.64, abs=0.01)
    assert upcycled.upcycled_objective_perturbation(40, 20, 0.5, 1, 0.25, 224.2).value == pytest.approx(7.39, abs=0.01)
    assert upcycled.upcycled_objective_perturbation(80, 10, 1.0, 1, 0.25, 225).value == pytest.approx(7.36, abs=0.01)
    printed = upcycled.upcycled_objective_perturbation(40, 20, 0.5, 1, 0.25, 224.2, terms="printed")
    assert printed.details["terms"] == 41
    fedavg = upcycled.upcycled_objective_perturbation(40, 20, 0.0, 1, 0.25, 224.2)
    assert math.isinf(fedavg.value) and not fedavg.valid and fedavg.composition is None
    bad = upcycled.upcycled_objective_perturbation(40, 20, 0.5, 1, 100.0, 224.2)
    assert any("u₂" in a for a in bad.failed_assumptions)


def test_pfa_reference_calibration_and_true_epsilon():
    # audit point F1: N_m = 1200, B = 8 (q = 1/150), T* = 8000, δ = 1e-5: σ = 13.33/ε; claimed 1 → RDP 0.158
    q = 8 / 1200
    sigma = pfa.pfa_reference_noise(q, 8000, 1e-5, 1.0)
    assert sigma == pytest.approx(13.33, abs=0.01)
    assert pfa.pfa_reference_epsilon(q, 8000, 1e-5, sigma) == pytest.approx(1.0)
    res = pfa.pfa_reference(q, 8000, 1e-5, 1.0)
    assert get_accountant("rdp").epsilon(res.composition, 1e-5).epsilon == pytest.approx(0.158, abs=0.005)


def test_pfa_reference_public_client_under_noised():
    # audit point F1: N = 2000, B = 4 (q = 1/500): claimed 10 → actual 23.0 (RDP)
    res = pfa.pfa_reference(4 / 2000, 8000, 1e-5, 10.0)
    assert get_accountant("rdp").epsilon(res.composition, 1e-5).epsilon == pytest.approx(23.0, rel=0.03)


def test_per_tensor_clipping_effective_multiplier():
    # audit point P1: MNIST DNN, L = 3, σ = 6.37, q = 1, 150 rounds, δ = 1e-3: claimed 8 → RDP 16.6
    z = privatefl.per_tensor_effective_multiplier(6.37, 3).value
    assert z == pytest.approx(6.37 / math.sqrt(3))
    from privaudit.accounting import Composition, Gaussian

    assert get_accountant("rdp").epsilon(Composition.of(Gaussian(z), 150), 1e-3).epsilon == pytest.approx(16.6, abs=0.1)


def test_expected_client_steps():
    assert pfa.expected_client_steps(clients_per_round=8, rounds=100, num_clients=10, local_steps=100) == 8000


@pytest.mark.parametrize("kwargs", [{"form": "x"}, {"noise_std": "sigma-cubed"}, {"sensitivity": "tiny"}])
def test_bad_switches(kwargs):
    with pytest.raises(InvalidParameterError):
        upcycled.upcycled_output_perturbation(10, 1.0, 1.0, 100, 1e-3, **kwargs)


def test_bad_numbers():
    with pytest.raises(InvalidParameterError):
        upcycled.upcycled_output_perturbation(0, 1.0, 1.0, 100, 1e-3)
    with pytest.raises(InvalidParameterError):
        pfa.pfa_reference_noise(0.1, 100, 1e-5, -1.0)


def test_the_registry_lists_the_papers_forms_and_fills_defaults():
    assert list(closed_forms()) == ["pfa-reference", "per-tensor-clipping", "upcycled-output", "upcycled-objective"]
    output = closed_form("upcycled-output")
    assert output.required == {"rounds", "noise", "clip", "dataset_size", "delta"}
    assert output.optional == {"form", "noise_std", "sensitivity"}
    # compute-epsilon's default form is the draft's (1.402 at M = 40, σ = 0.8): the spec fills it in
    assert output(rounds=40, noise=0.8, clip=10, dataset_size=224.2, delta=1e-3).value == pytest.approx(1.402, abs=1e-3)
    reference = closed_form("pfa-reference")(epsilon=1.0, sample_rate=8 / 1200, steps=8000, delta=1e-5)
    assert reference.details["noise_multiplier"] == pytest.approx(13.33, abs=0.01)
    assert closed_form("pfa-reference").reported == ("noise_multiplier",)
    with pytest.raises(InvalidParameterError, match="unknown closed form 'nope'; registered: pfa-reference"):
        closed_form("nope")
    with pytest.raises(InvalidParameterError, match="needs dataset_size"):
        output(rounds=40, noise=0.8, clip=10, delta=1e-3)
    with pytest.raises(InvalidParameterError, match="takes no parameter"):
        output(rounds=40, noise=0.8, clip=10, dataset_size=224.2, delta=1e-3, alpha=1.0)
    with pytest.raises(InvalidParameterError, match="kind must be one of"):
        ClosedFormSpec("x", "x", "x", (Parameter("a", "weird"),), lambda a: None)


def test_the_papers_closed_form_modules_load_without_torch():
    code = ("import sys; from privaudit.accounting.closed_form import closed_forms; closed_forms(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]
