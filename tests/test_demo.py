"""`make demo` runs the compute-epsilon tour end to end."""

from rich.console import Console

from privaudit.demo import TOUR, run_tour


def test_tour_runs_every_step(capsys):
    assert run_tour(Console(width=120)) == 0
    out = capsys.readouterr().out
    assert out.count("$ privaudit compute-epsilon") == len(TOUR)
    assert "1.58654" in out and "1.7529" in out  # Upcycled-FL's printed ε̄ and the σ² convention's
