"""`make demo` runs the compute-epsilon tour end to end."""

import pytest
from rich.console import Console

from privaudit.cli.demo import DEFAULT_STEPS, DEMO_EXECUTOR, TOUR, default_steps, run_default_audit, run_tour


def test_tour_runs_every_step(capsys):
    assert run_tour(Console(width=120)) == 0
    out = capsys.readouterr().out
    assert out.count("$ privaudit compute-epsilon") == len(TOUR)
    assert "1.58654" in out and "1.7529" in out  # 003's ε̄ by the draft's (000 Thm 5.2) form, and the σ² convention's


def test_the_trials_of_the_audit_and_of_lira_run_on_the_chosen_executor():
    def executors(steps):
        return {" ".join(args[:2]): args[args.index("--executor") + 1] for _, args in steps if "--executor" in args}

    assert executors(DEFAULT_STEPS) == {"audit --suite": DEMO_EXECUTOR, "attack membership": DEMO_EXECUTOR}
    assert DEMO_EXECUTOR == "in-process"  # a pool per reading was slower on 2 cores (privaudit.cli.demo)
    assert set(executors(default_steps("process")).values()) == {"process"}
    assert [args[0] for _, args in default_steps("process")] == [args[0] for _, args in DEFAULT_STEPS]
    # one torch thread per inversion: two spin-wait for each other on a busy 2-core machine (privaudit.cli.demo)
    assert {args[args.index("--threads") + 1] for _, args in DEFAULT_STEPS if "--threads" in args} == {"1"}


@pytest.mark.slow
def test_default_audit_writes_every_section(tmp_path, monkeypatch):
    # the whole `make demo` audit (a few minutes): claims, ledger, ROC, reconstructions, one report
    monkeypatch.chdir(tmp_path)
    assert run_default_audit(Console(width=120)) == 0
    md = (tmp_path / "reports/default/report/report.md").read_text()
    for title in ("## Claims", "## Per-client ε vs budget", "## ε vs rounds", "## Membership inference",
                  "## Gradient inversion", "## Accuracy vs rounds"):
        assert title in md
    # it opens with the claims at a glance, and lacks no section a privaudit command writes
    assert md.split("\n## ")[1].startswith("The claims at a glance") and "no results for" not in md
