"""Quality targets of issue 5 on the real architectures (slow: run with ``pytest -m slow``).

They assert reconstruction quality only, never wall-clock time.
"""

import pytest
import torch

from attacks.inversion import DataSpec, DPSGDRelease, FedSGDRelease, build_attack, release_update
from attacks.metrics import score_reconstruction
from privaudit.data.embedded import sample_images
from privaudit.models import build_model
from privaudit.papers.fedreg.attacks import AdaptiveMGConfig, naive_and_adaptive
from privaudit.papers.fedreg.defences import FedRegMGRelease
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images

pytestmark = pytest.mark.slow

CIFAR = DataSpec((3, 32, 32), 10, mean=(0.4914, 0.4822, 0.4465), std=(0.2023, 0.1994, 0.2010))
RAW = DataSpec((3, 32, 32), 10)


def _image(name):
    return torch.from_numpy(sample_images(32, (name,))[0])


def _payload(model, spec, image01, label, defence=None, seed=0):
    def factory():
        return build_model(model, spec.shape, spec.num_classes)

    weights = seeded_weights(factory, seed)
    return release_update(defence or FedSGDRelease(), factory, weights, spec.from_unit_range(image01),
                          torch.tensor([label]), spec, seed=seed)


def _psnr(spec, image01, result):
    return score_reconstruction(image01, spec.to_unit_range(result.images)).psnr[0]


@pytest.mark.parametrize(("name", "seed"), [("astronaut", 0), ("chelsea", 1)])
def test_inverting_gradients_reaches_20_db_on_convnet_in_1000_iterations(name, seed):
    image = _image(name)
    payload = _payload("convnet", CIFAR, image, seed, seed=seed)
    result = build_attack("ig", iterations=1000).reconstruct(payload, seed=0)
    assert result.labels.tolist() == [seed]
    assert _psnr(CIFAR, image, result) >= 20.0


def test_dlg_reaches_40_db_on_the_dlg_lenet():
    image = _image("astronaut")
    payload = _payload("lenet-dlg", RAW, image, 0)
    result = build_attack(
        "dlg", steps=150, label_strategy="auto", line_search=True, init="uniform", precision="float64",
        tolerance_grad=0.0, tolerance_change=0.0,
    ).reconstruct(payload, seed=0)
    assert result.labels.tolist() == [0]
    assert _psnr(RAW, image, result) >= 40.0


@pytest.mark.parametrize("attack_seed", range(6))
def test_dlg_reaches_40_db_on_the_small_cnn_update_from_every_start(attack_seed):
    # The single-image FedSGD update of test_inverting_gradients.py; default DLG settings (300 outer steps).
    truth = unit_images(1, COLOUR_8, 0)
    payload = release_update(FedSGDRelease(), small_cnn, seeded_weights(small_cnn, 0), COLOUR_8.from_unit_range(truth),
                             torch.tensor([3]), COLOUR_8)
    result = build_attack("dlg").reconstruct(payload, seed=attack_seed)
    assert result.labels.tolist() == [3]
    assert score_reconstruction(truth, COLOUR_8.to_unit_range(result.images)).psnr[0] >= 40.0


def test_dlg_reaches_40_db_on_the_convnet_single_image_fedsgd_case_ig_solves():
    # Issue 16's DLG target, on the 140k-parameter ``convnet`` (lfw 25×25, labels inferred by iDLG): the case where
    # Inverting Gradients reaches 35.5 dB (reports/inversion.md). Measured: 45.96 / 41.65 / 40.10 / 50.88 dB with
    # `privaudit attack inversion --dataset lfw --model convnet --defense fedsgd --attack dlg --images 4 --iterations 150`.
    from attacks.inversion import InversionExperiment, run_inversion

    run = run_inversion(InversionExperiment(attack="dlg", defence="fedsgd", dataset="lfw", model="convnet", num_images=2,
                                            attack_options={"steps": 150}, seed=0))
    assert min(run.psnr) >= 40.0


def test_dp_noise_destroys_what_ig_recovers_without_it():
    image = _image("astronaut")
    clean = _payload("convnet", CIFAR, image, 0, DPSGDRelease(lr=0.01, local_steps=1, clip_norm=1.0, noise_multiplier=0.0))
    noisy = _payload("convnet", CIFAR, image, 0, DPSGDRelease(lr=0.01, local_steps=1, clip_norm=1.0, noise_multiplier=0.1))
    attack = build_attack("ig", iterations=1000)
    assert _psnr(CIFAR, image, attack.reconstruct(clean)) >= 18.0
    assert _psnr(CIFAR, image, attack.reconstruct(noisy)) <= 12.0


@pytest.mark.parametrize("seed", [0, 1])
def test_adaptive_attack_beats_the_naive_one_on_fedreg_mg(seed):
    weights = seeded_weights(small_cnn, seed)
    truth = unit_images(1, COLOUR_8, seed)
    defence = FedRegMGRelease(lr=0.1, local_steps=1, gamma=0.5, pseudo_step=1e-3, fgsm_steps=10)
    payload = release_update(defence, small_cnn, weights, COLOUR_8.from_unit_range(truth), torch.tensor([3]), COLOUR_8)
    results = naive_and_adaptive(payload, AdaptiveMGConfig(iterations=400, gamma=0.5, pseudo_step=1e-3, fgsm_steps=10), seed=0)
    naive = score_reconstruction(truth, COLOUR_8.to_unit_range(results["naive"].images)).psnr[0]
    adaptive = score_reconstruction(truth, COLOUR_8.to_unit_range(results["adaptive"].images)).psnr[0]
    assert adaptive >= naive + 5.0
