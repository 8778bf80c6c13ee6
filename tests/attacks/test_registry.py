"""Attack registry, typed one-line errors, and the package boundary (attacks never imports the auditor)."""

import subprocess
import sys

import pytest
import torch

from attacks.inversion import (
    AnalyticAttack,
    ClientKnowledge,
    DataSpec,
    FedSGDRelease,
    InversionPayload,
    attack_options,
    available_attacks,
    build_attack,
    defence_specs,
    parse_defence,
    registered_attacks,
    release_update,
)
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.attacks import AdaptiveMGAttack
from privaudit.plugins import Paper, Ref
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn


def test_registry_lists_the_built_in_then_the_plug_in_attacks_with_descriptions():
    assert list(available_attacks()) == ["analytic", "label", "dlg", "ig", "imprint", "adaptive-mg"]
    assert all(isinstance(text, str) and text for text in available_attacks().values())
    assert attack_options("ig")["iterations"] == 1000
    assert attack_options("adaptive-mg")["fgsm_gradient"] == "straight-through"
    for name in registered_attacks():
        assert build_attack(name).name == name


def test_build_attack_applies_options():
    attack = build_attack("adaptive-mg", iterations=7, gamma=0.3)
    assert isinstance(attack, AdaptiveMGAttack)
    assert (attack.config.iterations, attack.config.gamma) == (7, 0.3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: build_attack("gradient-magic"), "unknown attack 'gradient-magic'; choose one of: analytic, label, dlg, ig, imprint, adaptive-mg"),
        (lambda: build_attack("ig", iterationz=5), "attack 'ig' has no option 'iterationz'"),
        (lambda: build_attack("ig", distance="l7"), "unknown gradient distance 'l7'"),
        (lambda: build_attack("dlg", label_strategy="psychic"), "unknown DLG label strategy 'psychic'"),
        (lambda: build_attack("ig", precision="float16"), "unknown precision 'float16'"),
        (lambda: ClientKnowledge(num_examples=2, update_kind="delta"), "needs the client's learning rate"),
        (lambda: ClientKnowledge(num_examples=2, labels=(1,)), "1 labels given for 2 examples"),
        (lambda: DataSpec((3, 8, 8), 10, mean=(0.5,), std=None), "give both mean and std"),
    ],
)
def test_bad_inputs_raise_one_line_typed_errors(call, message):
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_payload_checks():
    weights = seeded_weights(small_cnn, 0)
    payload = release_update(FedSGDRelease(), small_cnn, weights, torch.zeros(1, 3, 8, 8), torch.tensor([1]), COLOUR_8)
    bad = dict(payload.update)
    bad["0.weight"] = bad["0.weight"] * float("nan")
    with pytest.raises(InvalidParameterError, match="NaN"):
        InversionPayload(small_cnn, weights, bad, COLOUR_8, payload.knowledge)
    wrong_names = {"fc.weight": torch.zeros(3)}
    with pytest.raises(InvalidParameterError, match="names parameters the architecture does not have"):
        build_attack("ig", iterations=1).reconstruct(InversionPayload(small_cnn, weights, wrong_names, COLOUR_8, payload.knowledge))
    # a gradient attacked as if it were a FedReg delta
    with pytest.raises(InvalidParameterError, match="needs a parameter-delta update"):
        build_attack("adaptive-mg", iterations=1).reconstruct(payload)


def test_attacks_never_import_the_auditor():
    code = (
        "import sys, attacks, attacks.metrics, attacks.inversion\n"
        "from attacks.inversion import run_inversion\n"
        "assert not any(m == 'privaudit.audit' or m.startswith('privaudit.audit.') for m in sys.modules), 'imports privaudit.audit'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_attack_module_mentions_the_auditor_package():
    import re
    from pathlib import Path

    import attacks

    pattern = re.compile(r"^\s*(from\s+privaudit\.audit\b|import\s+privaudit\.audit\b|from\s+privaudit\s+import\s+.*\baudit\b)", re.M)
    root = Path(attacks.__file__).parent
    offenders = [p.name for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
    assert pattern.search("    from privaudit.audit.verdicts import x\n")  # the check can fail


# -- attacks and defences a paper plugs in (privaudit.plugins: PAPER.attacks, PAPER.defences) -----------------------
class EchoAttack(AnalyticAttack):
    """A plug-in stand-in: the analytic attack under another name."""

    name = "echo"
    description = "the analytic attack, registered by a test paper"


PLUGGED = Paper("plugged", "Plugged", attacks={"echo": Ref(f"{__name__}:EchoAttack")},
                defences={"quiet-sgd": Ref("attacks.inversion.release:FedSGDRelease")})
NOT_AN_ATTACK = Paper("wrong", "Wrong", attacks={"echo": Ref("json:dumps")})
SHADOWING = Paper("shadowing", "Shadowing", attacks={"ig": Ref(f"{__name__}:EchoAttack")})


def test_a_papers_attack_and_defence_join_the_registries_by_name(papers):
    papers("PLUGGED")
    assert list(registered_attacks()) == ["analytic", "label", "dlg", "ig", "imprint", "echo"]
    assert isinstance(build_attack("echo"), EchoAttack)
    assert defence_specs() == ("fedsgd", "fedavg", "fedprox", "quiet-sgd", "dpsgd:<σ>")
    assert isinstance(parse_defence("quiet-sgd"), FedSGDRelease)
    with pytest.raises(InvalidParameterError, match="unknown defence 'fedreg-mg'"):
        parse_defence("fedreg-mg")  # without its paper the name is unknown


def test_a_wrong_or_shadowing_plug_in_attack_is_one_clear_error(papers):
    papers("NOT_AN_ATTACK")
    with pytest.raises(InvalidParameterError, match="not an InversionAttack subclass"):
        registered_attacks()
    papers("SHADOWING")
    with pytest.raises(InvalidParameterError, match="not an InversionAttack subclass named 'ig'"):
        registered_attacks()
