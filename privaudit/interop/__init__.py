"""Bring your own federation: record a training loop you wrote (or ran with opacus) as a privaudit checkpoint.

* :mod:`privaudit.interop.recorder` — :class:`FederationRecorder`, :class:`DatasetReference`,
  :class:`GaussianRelease`, :class:`NoDP`, :class:`ModelFactory`: any PyTorch loop, any ``nn.Module``;
* :mod:`privaudit.interop.opacus` — an opacus ``PrivacyEngine``'s accountant history as privacy events.

The checkpoint written is the one :mod:`privaudit.fl.engine.checkpoint` reads, so every command that reads
checkpoints reads it (README, "Bring your own federation").
"""

from privaudit.interop.recorder import (
    DatasetReference,
    FederationRecorder,
    GaussianRelease,
    ModelFactory,
    NoDP,
    privacy_events,
)

__all__ = ["DatasetReference", "FederationRecorder", "GaussianRelease", "ModelFactory", "NoDP", "privacy_events"]
