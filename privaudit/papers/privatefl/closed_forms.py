"""PrivateFL-CDP's per-tensor clipping as a closed form (001 §5; BHui97/PrivateFL@39711e6:FedServer.py,
``agg_updates``; audit point P1).

:data:`PER_TENSOR` is the paper's ``closed_forms`` part: ``compute-epsilon --tensors L`` turns a noise multiplier into
the effective one of L separately clipped and noised tensors. Torch-free: imports only ``privaudit.accounting``.
"""

from __future__ import annotations

import math

from privaudit.accounting.closed_form import ClosedForm, ClosedFormSpec, Parameter, count, positive


def per_tensor_effective_multiplier(noise_multiplier: float, num_tensors: int) -> ClosedForm:
    """PrivateFL-CDP's per-tensor clipping (audit point P1): L tensors, each clipped to C_k and noised N(0, (σC_k)²).

    Rescaling block k by 1/C_k gives a per-client L2 sensitivity of √L with unit-σ noise on every block, so
    the release is a Gaussian mechanism with effective multiplier σ/√L — independent of the C_k. Correct
    per-layer clipping (McMahan et al. 2018) would add noise σ·sqrt(Σ_j C_j²) to every tensor instead.
    """
    sigma, tensors = positive("noise_multiplier", noise_multiplier), count("num_tensors", num_tensors)
    return ClosedForm(
        name="per-tensor-clipping",
        value=sigma / math.sqrt(tensors),
        formula="z_eff = σ/√L",
        source="PrivateFL reference code (FedServer.agg_updates), audit point P1",
        assumptions=(f"L = {tensors} separately clipped tensors, each with its own noise σ·C_k",
                     "the clip norms C_k do not depend on the data (the reference code uses unprivatised medians, audit point P2)"),
        details={"num_tensors": tensors},
    )


PER_TENSOR = ClosedFormSpec(
    "per-tensor-clipping",
    "the effective Gaussian noise multiplier σ/√L of L tensors clipped and noised one by one (a multiplier, not an ε)",
    "PrivateFL reference code, BHui97/PrivateFL@39711e6:FedServer.py agg_updates (audit point P1)",
    (Parameter("noise_multiplier", "positive"), Parameter("num_tensors", "count")),
    per_tensor_effective_multiplier,
    gives="noise-multiplier",
)
