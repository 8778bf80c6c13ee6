"""PrivateFL (Yang, Hui, Yuan, Gong & Cao, USENIX Security 2023): algorithm, experiments, evidence, claims.

:data:`PAPER` is what the paper plugs into privaudit (``privaudit.plugins``): the ``privatefl`` algorithm, the
``ldp`` name for DP-SGD, the median variants of central DP, its models and closed form, its claims and its evidence
page. Every part is a name, imported when used.
"""

from privaudit.plugins import EvidencePageRef, Paper, Ref

PAPER = Paper(
    key="privatefl",
    title="PrivateFL (Yang, Hui, Yuan, Gong & Cao; USENIX Security 2023, 001)",
    algorithm_specs=("privaudit.papers.privatefl.specs",),
    privacy={"ldp": Ref("privaudit.papers.privatefl.specs:LDP")},
    extras={"central-dp": Ref("privaudit.papers.privatefl.central_dp:PrivateFLCentralDP")},
    demo=Ref("privaudit.papers.privatefl.demo:Demo"),
    claim_modules=("privaudit.papers.privatefl.claims",),
    models={"privatefl-dnn": Ref("privaudit.papers.privatefl.models:PRIVATEFL_DNN"),
            "privatefl-dnn-in": Ref("privaudit.papers.privatefl.models:PRIVATEFL_DNN_IN")},
    closed_forms={"per-tensor-clipping": Ref("privaudit.papers.privatefl.closed_forms:PER_TENSOR")},
    evidence_pages=(
        EvidencePageRef("privatefl-evidence", "privatefl", Ref("privaudit.papers.privatefl.pages:page"),
                        data_keys=("rounds", "epsilons", "dataset", "delta", "runs", "dpsgd_speed", "ddp_roundtrip",
                                   "wall_minutes", "workers", "cpus")),
    ),
)
