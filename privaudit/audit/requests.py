"""What ``privaudit audit`` asks, as one checked value: :class:`AuditRequest`, in one of five modes.

* ``list`` — the claims registry (:func:`privaudit.audit.claims.list_claims`);
* ``claim`` / ``suite`` — registered claims re-run and attacked (:func:`privaudit.audit.runner.run_claim`,
  :func:`~privaudit.audit.runner.run_suite`) with :meth:`AuditRequest.settings`;
* ``checkpoint`` — a trained federation audited in one run, with input canaries
  (:func:`privaudit.audit.workflows.checkpoint_one_run.run_one_run_audit`, :meth:`AuditRequest.one_run_options`) or
  white-box gradient canaries (:func:`privaudit.audit.workflows.gradient_canaries.run_gradient_canary_audit`,
  :meth:`AuditRequest.gradient_canary_options`) or white-box canary clients
  (:func:`privaudit.audit.workflows.client_canaries.run_client_canary_audit`, :meth:`AuditRequest.client_canary_options`);
* ``scores`` — attack scores computed elsewhere (:func:`run_scores_audit`).

Making the request checks every field for its mode — options of another mode are refused by name, numbers in range,
the executor, the device, and that ``--out`` can be written — each failure one
:class:`~privaudit.errors.InvalidParameterError`, before any trial, training or simulation starts. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.audit import scores_audit
from privaudit.audit.runner import AuditSettings, check_executor
from privaudit.audit.score_files import read_scores
from privaudit.audit.workflows import checkpoint_one_run, client_canaries, gradient_canaries
from privaudit.audit.workflows.checkpoint_one_run import OneRunOptions
from privaudit.audit.workflows.client_canaries import ClientCanaryOptions
from privaudit.audit.workflows.gradient_canaries import VIEWS, GradientCanaryOptions
from privaudit.device import resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.request_checks import check_threads, check_writable
from privaudit.stats.assumptions import design_of, mechanism_family
from privaudit.stats.claim_power import ClaimPower

#: Where claim, suite and checkpoint audits write when no ``out`` is given (a scores audit writes only when given one).
DEFAULT_OUT = Path("reports/audits")
#: The file a scores audit writes into ``out``.
SCORES_RESULT_FILE = "scores-audit.json"
MODES = ("list", "claim", "suite", "checkpoint", "scores")


@dataclass(frozen=True)
class AuditRequest:
    """One audit. Exactly one of ``list_claims``, ``claim``, ``suite``, ``checkpoint`` and ``scores`` chooses the mode;
    the other fields apply to the modes their flags name (``mechanism``, ``design`` and ``optimal_attack`` to
    ``scores``; ``one_run``, ``canaries``, ``canary_kind`` and the gradient-canary fields to ``checkpoint``; ``trials``
    to ``claim``/``suite``). Checked when made; :attr:`mode` is the mode's name and ``out`` defaults to
    :data:`DEFAULT_OUT` outside ``scores``."""

    list_claims: bool = False
    claim: str | None = None
    suite: str | None = None
    checkpoint: Path | None = None
    scores: Path | None = None
    mechanism: str = "any"
    design: str = "fixed"
    optimal_attack: bool = False
    one_run: bool = False
    canaries: int | None = None
    canary_kind: str | None = None
    gradient_canaries: int | None = None
    canary_view: str | None = None
    canary_magnitude: float | None = None
    canary_client: int | None = None
    client_canaries: int | None = None
    delta: float = 1e-5
    claimed_epsilon: float | None = None
    trials: int | None = None
    executor: str = "in-process"
    workers: int | None = None
    address: str | None = None
    alpha: float = 0.05
    power_trials: int = 200
    seed: int = 0
    out: Path | None = None
    threads: int = 1
    device: str = "cpu"
    progress: bool = True

    def __post_init__(self) -> None:
        chosen = [name for name, on in (("--list", self.list_claims), ("--claim", self.claim is not None),
                                        ("--suite", self.suite is not None), ("--checkpoint", self.checkpoint is not None),
                                        ("--scores", self.scores is not None)) if on]
        if len(chosen) != 1:
            raise InvalidParameterError("audit needs exactly one of --list, --claim ID, --suite NAME, --checkpoint DIR or "
                                        "--scores FILE" + (f" (got {', '.join(chosen)})" if chosen else ""))
        # an absent device is one line here (resolve_device loads torch: only for a device other than the CPU)
        if self.device.strip().lower() != "cpu" and resolve_device(self.device).type != "cpu" \
                and self.mode in ("list", "scores"):
            raise InvalidParameterError(f"--device applies to audits that train federations, not to --{self.mode}")
        scores_only = [name for name, on in (("--mechanism", self.mechanism != "any"), ("--design", self.design != "fixed"),
                                             ("--optimal-attack", self.optimal_attack)) if on]
        if self.mode != "scores" and scores_only:
            raise InvalidParameterError(f"the option(s) {', '.join(scores_only)} apply to --scores audits only (claims and "
                                        "checkpoints derive them from the mechanism they audit)")
        if self.mode == "scores":
            self._check_scores()
            return
        object.__setattr__(self, "out", DEFAULT_OUT if self.out is None else self.out)
        if self.trials is not None and self.trials < 1:
            raise InvalidParameterError(f"--trials must be a positive integer, got {self.trials}")
        check_threads(self.threads)
        checkpoint_only = [name for name, on in (
            ("--one-run", self.one_run), ("--canaries", self.canaries is not None),
            ("--gradient-canaries", self.gradient_canaries is not None), ("--canary-view", self.canary_view is not None),
            ("--canary-magnitude", self.canary_magnitude is not None), ("--canary-client", self.canary_client is not None),
            ("--client-canaries", self.client_canaries is not None))
            if on]
        if self.mode != "checkpoint" and checkpoint_only:
            raise InvalidParameterError(f"the option(s) {', '.join(checkpoint_only)} apply to --checkpoint audits only")
        if self.mode == "checkpoint" and self.client_canaries is not None:
            self.client_canary_options()
            check_writable(self.target(client_canaries.RESULT_FILE))  # before the training, not after it
        elif self.mode == "checkpoint" and self.white_box:
            self.gradient_canary_options()
            check_writable(self.target(gradient_canaries.RESULT_FILE))  # before the training, not after it
        elif self.mode == "checkpoint":
            self.one_run_options()
            check_writable(self.target(checkpoint_one_run.RESULT_FILE))  # before the training, not after it
        elif self.mode in ("claim", "suite"):
            check_executor(self.executor)
            check_writable(self.target(f"{self.claim or self.suite}.json"))  # before the trials, not after them
            self.settings()

    @property
    def mode(self) -> str:
        """``list``, ``claim``, ``suite``, ``checkpoint`` or ``scores``."""
        return next(mode for mode, on in zip(MODES, (self.list_claims, self.claim is not None, self.suite is not None,
                                                     self.checkpoint is not None, self.scores is not None), strict=True) if on)

    @property
    def white_box(self) -> bool:
        """A checkpoint audit with gradient canaries (any of their options given)."""
        return any(v is not None for v in (self.gradient_canaries, self.canary_view, self.canary_magnitude, self.canary_client))

    def target(self, name: str) -> Path:
        """The file ``name`` in ``out``."""
        assert self.out is not None
        return Path(self.out) / name

    def _check_scores(self) -> None:
        if self.trials is not None:
            raise InvalidParameterError("--trials does not apply to --scores (the scores are given)")
        mechanism_family(self.mechanism)
        design_of(self.design)
        if self.optimal_attack and self.claimed_epsilon is None:
            raise InvalidParameterError("--optimal-attack declares what an attack's silence means for a claim: give "
                                        "--claimed-epsilon too")
        if self.claimed_epsilon is not None and not (0 <= self.claimed_epsilon < float("inf")):
            raise InvalidParameterError(f"--claimed-epsilon must be a finite number ≥ 0, got {self.claimed_epsilon}")
        if self.power_trials < 1:
            raise InvalidParameterError(f"--power-trials must be a positive integer, got {self.power_trials}")
        if self.out is not None:  # checked before any work: a bad --out never costs the audit
            check_writable(self.target(SCORES_RESULT_FILE))

    def settings(self) -> AuditSettings:
        """How claim and suite audits run (checked)."""
        return AuditSettings(trials=self.trials, significance=self.alpha, seed=self.seed, executor=self.executor,
                             workers=self.workers, address=self.address, out=self.out, power_trials=self.power_trials,
                             progress=self.progress, torch_threads=self.threads)

    def client_canary_options(self) -> ClientCanaryOptions:
        """The white-box canary-client audit of the checkpoint (checked)."""
        others = [name for name, on in (("--one-run", self.one_run), ("--canaries", self.canaries is not None),
                                        ("--canary-kind", self.canary_kind is not None),
                                        ("--gradient-canaries and its options", self.white_box),
                                        ("--trials", self.trials is not None)) if on]
        if others:
            raise InvalidParameterError(f"--client-canaries is an audit of its own (m canary clients, one run); it does not "
                                        f"take {', '.join(others)}")
        if self.client_canaries is None or self.client_canaries < 2:
            raise InvalidParameterError(f"--client-canaries needs at least 2 canary clients, got {self.client_canaries}")
        return ClientCanaryOptions(self.client_canaries, delta=self.delta, significance=self.alpha,
                                   claimed_epsilon=self.claimed_epsilon, seed=self.seed, power_trials=self.power_trials)

    def one_run_options(self) -> OneRunOptions:
        """The one-run (input canaries) audit of the checkpoint (checked)."""
        if not self.one_run:
            raise InvalidParameterError("a checkpoint is audited in one run: add --one-run (input canaries, black-box), "
                                        "--gradient-canaries K (white-box, every round) or --client-canaries m (white-box "
                                        "canary clients); multi-run audits use --claim")
        if self.canaries is None:
            raise InvalidParameterError("--one-run needs --canaries m (the number of canaries, e.g. 500)")
        if self.trials is not None:
            raise InvalidParameterError("--trials does not apply to a one-run audit (it trains once)")
        return OneRunOptions(self.canaries, delta=self.delta, significance=self.alpha, claimed_epsilon=self.claimed_epsilon,
                             canary_kind=self.canary_kind or "mislabelled", seed=self.seed, power_trials=self.power_trials)

    def gradient_canary_options(self) -> GradientCanaryOptions:
        """The white-box gradient-canary audit of the checkpoint (checked)."""
        if self.canary_kind is not None:
            raise InvalidParameterError("--canary-kind chooses input canaries for --one-run; gradient canaries are random "
                                        "orthonormal directions")
        if self.gradient_canaries is None:
            raise InvalidParameterError("--canary-view, --canary-magnitude and --canary-client need --gradient-canaries K")
        if self.one_run:
            raise InvalidParameterError("--one-run and --gradient-canaries are mutually exclusive: choose input canaries in "
                                        "one run (--one-run --canaries m) or white-box gradient canaries (--gradient-canaries K)")
        if self.canaries is not None:
            raise InvalidParameterError("--canaries counts the input canaries of --one-run; give the number of gradient "
                                        "canaries with --gradient-canaries K alone")
        if self.trials is not None:
            raise InvalidParameterError("--trials does not apply to a gradient-canary audit (it trains once)")
        if self.gradient_canaries < 2:
            raise InvalidParameterError(f"--gradient-canaries needs at least 2 canaries, got {self.gradient_canaries}")
        view = "client" if self.canary_view is None else self.canary_view
        if view not in VIEWS:
            raise InvalidParameterError(f"unknown --canary-view {view!r}; use client or aggregate")
        if self.canary_magnitude is not None and not self.canary_magnitude > 0:
            raise InvalidParameterError(f"--canary-magnitude must be a positive number, got {self.canary_magnitude}")
        if self.canary_client is not None and self.canary_client < 0:
            raise InvalidParameterError(f"--canary-client must be a client id ≥ 0, got {self.canary_client}")
        return GradientCanaryOptions(self.gradient_canaries, delta=self.delta, significance=self.alpha,
                                     claimed_epsilon=self.claimed_epsilon, view=view, magnitude=self.canary_magnitude,
                                     client=0 if self.canary_client is None else self.canary_client, seed=self.seed,
                                     power_trials=self.power_trials)


def run_scores_audit(request: AuditRequest) -> dict[str, Any]:
    """Every route on the request's score file (:func:`~privaudit.audit.scores_audit.audit_score_file`): the valid
    ones at α/k each, the others with the reason; the result data."""
    assert request.scores is not None
    claim = ClaimPower(request.claimed_epsilon, trials=request.power_trials, seed=request.seed, progress=request.progress,
                       attack_optimal=request.optimal_attack)
    return scores_audit.audit_score_file(read_scores(request.scores), mechanism=mechanism_family(request.mechanism),
                                         design=design_of(request.design), delta=request.delta,
                                         significance=request.alpha, claim=claim, source=str(request.scores))
