"""Bring your own federation: record a training loop you wrote (or ran with opacus) as a privaudit checkpoint.

* :mod:`privaudit.interop.recorder` — :class:`FederationRecorder` and :class:`ModelFactory`: any PyTorch loop, any
  ``nn.Module``; :mod:`privaudit.interop.dataset_reference` — :class:`DatasetReference`, the records it trained on;
  :mod:`privaudit.interop.releases` — :class:`GaussianRelease`, :class:`NoDP` and :func:`privacy_events`, its
  releases in your terms; :mod:`privaudit.interop.recorder_checks` — the checks run when the recorder closes;
* :mod:`privaudit.interop.opacus` — an opacus ``PrivacyEngine``'s accountant history as privacy events;
* :mod:`privaudit.interop.canary_clients` — :class:`LoopCanaries`, canary clients your loop samples like its own
  clients, scored on the recorded global models (``privaudit audit --checkpoint RUN --client-canaries m``).

The checkpoint written is the one :mod:`privaudit.fl.engine.checkpoint` reads, so every command that reads
checkpoints reads it (README, "Bring your own federation").
"""

from privaudit.interop.canary_clients import LoopCanaries
from privaudit.interop.dataset_reference import DatasetReference
from privaudit.interop.recorder import FederationRecorder, ModelFactory
from privaudit.interop.releases import GaussianRelease, NoDP, privacy_events

__all__ = ["DatasetReference", "FederationRecorder", "GaussianRelease", "LoopCanaries", "ModelFactory", "NoDP",
           "privacy_events"]
