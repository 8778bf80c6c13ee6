"""Which parameters a PrivateFL client keeps: the transformation (001 Alg. 2 line 13), or the reference code's set.

The reference code (BHui97/PrivateFL@39711e6:FedUser.py, ``CDPUser.set_model_state_dict``) copies the server's
weights into a client of an ``*_IN`` model for every key *except* those whose name holds 'norm' (its transformation
layer), 'bn' or 'downsample.1' (a ResNet's batch-norm layers): those stay local — not aggregated and, under CDP, not
clipped or noised. Torch-free.
"""

from __future__ import annotations

from enum import Enum

from privaudit.checks import parse_enum

#: The transformation's parameter prefix (``privaudit.papers.privatefl.transform.PERSONAL_PREFIX``).
TRANSFORM_PREFIX = "transform."
#: Name fragments of the state-dict keys the reference code keeps on each client for its ``*_IN`` models
#: (``CDPUser.set_model_state_dict``: 'norm', 'bn', 'downsample.1'), besides the transformation.
REFERENCE_PERSONAL_KEYS = ("norm", "bn", "downsample.1")


class PersonalLayers(str, Enum):
    """Which parameters each client keeps (never uploaded, never averaged)."""

    TRANSFORM = "transform"  # the transformation T_k only (001 Alg. 2 line 13)
    REFERENCE = "reference"  # also every parameter named with 'norm', 'bn' or 'downsample.1' (the reference's *_IN models)

    @classmethod
    def parse(cls, value: str | PersonalLayers) -> PersonalLayers:
        return parse_enum(cls, value, "personal layers")


def is_personal(name: str, layers: PersonalLayers | str = PersonalLayers.TRANSFORM) -> bool:
    """Whether parameter ``name`` stays on the client under ``layers``."""
    if name.startswith(TRANSFORM_PREFIX):
        return True
    return PersonalLayers.parse(layers) is PersonalLayers.REFERENCE and any(key in name for key in REFERENCE_PERSONAL_KEYS)


