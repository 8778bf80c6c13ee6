"""FedReg (Xu, Hong, Huang & Jiang, ICLR 2022): algorithm, local step, evidence, claims.

:data:`PAPER` is what the paper plugs into privaudit (``privaudit.plugins``): FedReg, FedReg+MG and the baselines the
paper compares with, its models, its claims and its two evidence pages (FedReg's and the gradient-inversion one).
Every part is a name, imported when used.
"""

from privaudit.plugins import EvidencePageRef, Paper, Ref

PAPER = Paper(
    key="fedreg",
    title="FedReg (Xu, Hong, Huang & Jiang; ICLR 2022, 002)",
    algorithm_specs=("privaudit.papers.fedreg.specs",),
    claim_modules=("privaudit.papers.fedreg.claims",),
    models={"fedreg-cnn": Ref("privaudit.papers.fedreg.models:FEDREG_CNN"),
            "fedreg-mlp": Ref("privaudit.papers.fedreg.models:FEDREG_MLP")},
    evidence_pages=(
        EvidencePageRef("fedreg-evidence", "fedreg", Ref("privaudit.papers.fedreg.pages:page"),
                        data_keys=("settings", "runs", "seconds", "r_a", "sgd_reference", "accuracy"),
                        inputs=("inversion", "claims_audit")),
        EvidencePageRef("inversion-evidence", "inversion", Ref("privaudit.papers.fedreg.pages:inversion_page"),
                        data_keys=("settings", "seconds", "records")),
    ),
    attacks={"adaptive-mg": Ref("privaudit.papers.fedreg.attacks:AdaptiveMGAttack")},
    demo=Ref("privaudit.papers.fedreg.demo:Demo"),
    defences={"fedreg": Ref("privaudit.papers.fedreg.defences:plain_fedreg_release"),
              "fedreg-mg": Ref("privaudit.papers.fedreg.defences:FedRegMGRelease")},
)
