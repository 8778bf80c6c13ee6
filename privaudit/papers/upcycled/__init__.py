"""Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu; ICLR 2024 draft and TMLR 2024): experiments, claims and recipes.

:data:`PAPER` is what the paper plugs into privaudit (``privaudit.plugins``): the ``upcycled-X`` wrapper around every
algorithm, its two privatizers (Thm 6.2's output perturbation, Thm 6.3's objective perturbation), its models, its
closed forms for ``compute-epsilon``, its claims and its evidence pages. Every part is a name, imported when used.
"""

from privaudit.plugins import EvidencePageRef, Paper, Ref

PAPER = Paper(
    key="upcycled",
    title="Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu; ICLR draft 000, TMLR 2024 003)",
    algorithm_wrappers={"upcycled": Ref("privaudit.papers.upcycled.specs:WRAPPER")},
    privacy={"output-perturbation": Ref("privaudit.papers.upcycled.specs:OUTPUT_PERTURBATION"),
             "objective-perturbation": Ref("privaudit.papers.upcycled.specs:OBJECTIVE_PERTURBATION")},
    claim_modules=("privaudit.papers.upcycled.claims",),
    models={"logreg": Ref("privaudit.papers.upcycled.models:LOGREG"),
            "glm-logistic": Ref("privaudit.papers.upcycled.models:GLM_LOGISTIC"),
            "upcycled-mlp": Ref("privaudit.papers.upcycled.models:UPCYCLED_MLP")},
    closed_forms={"upcycled-output": Ref("privaudit.papers.upcycled.closed_forms:OUTPUT"),
                  "upcycled-objective": Ref("privaudit.papers.upcycled.closed_forms:OBJECTIVE")},
    evidence_pages=(
        EvidencePageRef("upcycled-table1", "upcycled-table1", Ref("privaudit.papers.upcycled.pages:table1_page"),
                        data_keys=("seeds", "rounds", "datasets", "upcycle", "display", "runs", "wall_minutes", "workers",
                                   "cpus")),
        EvidencePageRef("upcycled-private", "upcycled-private", Ref("privaudit.papers.upcycled.pages:private_page"),
                        data_keys=("delta", "tau", "rounds", "seed", "accountant", "runs", "paper_size_epsilon",
                                   "wall_minutes", "workers", "cpus")),
    ),
    # the paper's models for the data a run names no model for: its synthetic data, its FEMNIST substitutes
    demo=Ref("privaudit.papers.upcycled.demo:Demo"),
    defaults={"default_models": {"vectors": "logreg", "images": "upcycled-mlp"}},
)
