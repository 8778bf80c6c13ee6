"""PFA / PFA+ (Liu, Lou, Xiong, Liu & Meng, PVLDB 2022: heterogeneous-DP FL with projected aggregation): algorithms, budgets, experiments, claims.

:data:`PAPER` is what the paper plugs into privaudit (``privaudit.plugins``): PFA, PFA+ and their baselines, its
models and closed form, its claims and its evidence page. Every part is a name, imported when used.
"""

from privaudit.plugins import EvidencePageRef, Paper, Ref

PAPER = Paper(
    key="pfa",
    title="PFA / PFA+ (Liu, Lou, Xiong, Liu & Meng; PVLDB 2022, 004)",
    algorithm_specs=("privaudit.papers.pfa.specs",),
    claim_modules=("privaudit.papers.pfa.claims",),
    models={"pfa-lr": Ref("privaudit.papers.pfa.models:PFA_LR"), "pfa-cnn": Ref("privaudit.papers.pfa.models:PFA_CNN")},
    closed_forms={"pfa-reference": Ref("privaudit.papers.pfa.closed_forms:REFERENCE")},
    demo=Ref("privaudit.papers.pfa.demo:Demo"),
    evidence_pages=(
        EvidencePageRef("pfa-evidence", "pfa", Ref("privaudit.papers.pfa.pages:page"),
                        data_keys=("settings", "wall_seconds", "workers", "training_seconds", "accuracy", "comparisons",
                                   "privacy", "uplink", "claim_table", "participation", "paper_scale_uplink")),
    ),
)
