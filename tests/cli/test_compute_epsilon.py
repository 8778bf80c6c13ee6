"""`privaudit compute-epsilon` through the CLI entry point: documented JSON keys, human output, bad input."""

import json

import pytest

from privaudit.cli.app import main


def run(capsys, *args):
    code = main(["compute-epsilon", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *args):
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_dpsgd_json_keys(capsys):
    data = run_json(capsys, "--mechanism", "subsampled-gaussian", "--noise-multiplier", "1.0", "--sample-rate", "0.01",
                    "--steps", "1000", "--delta", "1e-5")
    assert set(data) >= {"inputs", "delta", "accountant", "epsilon", "notes", "assumptions"}
    assert data["accountant"] == "ctd" and data["delta"] == 1e-5
    assert data["epsilon"]["ctd"] == pytest.approx(1.828, abs=0.005)
    assert data["epsilon"]["rdp"] == pytest.approx(2.101, abs=2e-3)
    interval = run_json(capsys, "--mechanism", "subsampled-gaussian", "--noise-multiplier", "1.0", "--sample-rate", "0.01",
                        "--steps", "1000", "--delta", "1e-5", "--accountant", "prv")
    prv = interval["epsilon"]["prv"]
    assert prv["lower"] <= prv["estimate"] <= prv["upper"] and prv["estimate"] == pytest.approx(1.828, abs=0.005)


def test_accountant_all_and_rdp(capsys):
    data = run_json(capsys, "--mechanism", "subsampled-gaussian", "--noise-multiplier", "2.0", "--sample-rate", "0.01",
                    "--steps", "100", "--delta", "1e-5", "--accountant", "all")
    assert {"ctd", "prv", "pld", "rdp", "gdp"} <= set(data["epsilon"])
    assert data["epsilon"]["pld"] == pytest.approx(0.1898, abs=1e-3)
    assert "gdp" in data["approximate"] and "pure" in data["unavailable"]
    only = run_json(capsys, "--mechanism", "subsampled-gaussian", "--noise-multiplier", "2.0", "--sample-rate", "0.01",
                    "--steps", "100", "--delta", "1e-5", "--accountant", "rdp")
    assert set(only["epsilon"]) == {"rdp"} and only["accountant"] == "rdp"


def test_gaussian_exact(capsys):
    data = run_json(capsys, "--mechanism", "gaussian", "--noise-multiplier", "6.37", "--steps", "150", "--delta", "1e-3")
    exact = data["epsilon"]["ctd"]
    assert exact["lower"] == exact["upper"]
    per_tensor = run_json(capsys, "--mechanism", "gaussian", "--noise-multiplier", "6.37", "--steps", "150", "--delta", "1e-3",
                          "--tensors", "3", "--accountant", "rdp")
    assert per_tensor["epsilon"]["rdp"] == pytest.approx(16.6, abs=0.1)  # audit point P1


def test_calibrate(capsys):
    data = run_json(capsys, "--mechanism", "subsampled-gaussian", "--epsilon", "8", "--delta", "1e-3", "--sample-rate", "0.1",
                    "--steps", "1500", "--calibrate", "--accountant", "rdp")
    assert data["noise_multiplier"] == pytest.approx(2.15, abs=0.01)
    assert data["accountant"] == "rdp" and data["epsilon_at_noise"]["rdp"] <= 8


def test_upcycled_output(capsys):
    data = run_json(capsys, "--mechanism", "upcycled-output", "--rounds", "40", "--noise", "0.8", "--clip", "10",
                    "--dataset-size", "224.2", "--delta", "1e-3")
    assert data["epsilon"]["closed_form"] == pytest.approx(1.402, abs=1e-3)
    assert data["epsilon"]["ctd"]["upper"] < data["epsilon"]["closed_form"]
    assert any(a.startswith("FAILED") for a in data["assumptions"])
    squared = run_json(capsys, "--mechanism", "upcycled-output", "--rounds", "40", "--noise", "0.8", "--clip", "10",
                       "--dataset-size", "224.2", "--delta", "1e-3", "--noise-std", "sigma-squared", "--form", "printed",
                       "--sensitivity", "paper")
    assert squared["epsilon"]["closed_form"] == pytest.approx(1.753, abs=1e-3)


def test_upcycled_objective(capsys):
    data = run_json(capsys, "--mechanism", "upcycled-objective", "--rounds", "40", "--alpha", "20", "--mu", "0.5", "--u1", "1",
                    "--u2", "0.25", "--dataset-size", "224.2")
    assert data["epsilon"]["closed_form"] == pytest.approx(7.386, abs=1e-3)
    fedavg = run_json(capsys, "--mechanism", "upcycled-objective", "--rounds", "40", "--alpha", "20", "--mu", "0", "--u1", "1",
                      "--u2", "0.25", "--dataset-size", "224.2")
    assert fedavg["epsilon"]["closed_form"] == "inf"
    assert any("μ > 0" in a for a in fedavg["assumptions"])


def test_pfa_reference(capsys):
    data = run_json(capsys, "--mechanism", "pfa-reference", "--epsilon", "10", "--sample-rate", "0.002", "--steps", "8000",
                    "--delta", "1e-5", "--accountant", "rdp")
    assert data["inputs"]["noise_multiplier"] == pytest.approx(0.4, abs=1e-3)
    assert data["epsilon"]["rdp"] == pytest.approx(23.0, rel=0.03)


def test_schedule(tmp_path, capsys):
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"entries": [
        {"mechanism": {"type": "subsampled_gaussian", "noise_multiplier": 1.0, "sample_rate": 0.01}, "count": 500},
        {"mechanism": {"type": "subsampled_gaussian", "noise_multiplier": 2.0, "sample_rate": 0.02}, "count": 500},
        {"mechanism": {"type": "gaussian", "noise_multiplier": 8.0}, "count": 50}]}))
    data = run_json(capsys, "--schedule", str(path), "--delta", "1e-5")
    # independently measured (dp-accounting 0.6.0) "phases": PLD 4.204, RDP 4.549
    assert data["epsilon"]["ctd"] == pytest.approx(4.204, abs=0.02)
    assert data["epsilon"]["rdp"] == pytest.approx(4.549, abs=2e-3)


def test_human_output_is_a_table(capsys):
    code, out, _ = run(capsys, "--mechanism", "upcycled-output", "--rounds", "80", "--noise", "1", "--clip", "10",
                       "--dataset-size", "224.2", "--delta", "1e-3")
    assert code == 0
    assert "closed_form" in out and "1.58654" in out and "assumption" in out and "[add_remove]" in out


@pytest.mark.parametrize(
    "args",
    [
        ["--mechanism", "gaussian", "--noise-multiplier", "-1", "--steps", "10", "--delta", "1e-5"],
        ["--mechanism", "gaussian", "--noise-multiplier", "0", "--steps", "10", "--delta", "1e-5"],
        ["--mechanism", "subsampled-gaussian", "--noise-multiplier", "1", "--sample-rate", "0", "--steps", "10", "--delta", "1e-5"],
        ["--mechanism", "subsampled-gaussian", "--noise-multiplier", "1", "--sample-rate", "1.5", "--steps", "10", "--delta", "1e-5"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "10", "--delta", "0"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "10", "--delta", "1"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "1.5", "--delta", "1e-5"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "0", "--delta", "1e-5"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "-3", "--delta", "1e-5"],
        ["--mechanism", "subsampled-gaussian", "--epsilon", "-1", "--sample-rate", "0.1", "--steps", "10", "--delta", "1e-5", "--calibrate"],
        ["--mechanism", "warp-drive"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5", "--scale", "2"],
        ["--mechanism", "gaussian", "--steps", "10", "--delta", "1e-5"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "10"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5", "--schedule", "x.json"],
        ["--mechanism", "laplace", "--scale", "1", "--steps", "3", "--delta", "1e-5", "--calibrate", "--epsilon", "1"],
        ["--schedule", "/does/not/exist.json", "--delta", "1e-5"],
        ["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5", "--accountant", "magic"],
        ["--mechanism", "subsampled-gaussian", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "10", "--delta", "1e-5",
         "--neighbouring", "replace-one", "--accountant", "rdp"],
        ["--mechanism", "subsampled-gaussian", "--epsilon", "1", "--sample-rate", "0.1", "--steps", "10", "--delta", "1e-5",
         "--calibrate", "--accountant", "gdp"],
        ["--mechanism", "upcycled-output", "--rounds", "40", "--noise", "0.8", "--clip", "10", "--dataset-size", "224.2",
         "--delta", "1e-3", "--form", "poetic"],
        ["--bogus-flag"],
        [],
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, args):
    code, _out, err = run(capsys, *args)
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "Traceback" not in err


def test_unreadable_schedule_json(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    code, _, err = run(capsys, "--schedule", str(bad), "--delta", "1e-5")
    assert code == 2 and "not valid JSON" in err


def test_numerical_failure_is_reported_with_a_hint(capsys, monkeypatch):
    from privaudit.accounting.ctd import CtdAccountant
    from privaudit.accounting.prv import PrvAccountant
    from privaudit.errors import NumericalFailure

    def boom(self, *a, **k):
        raise NumericalFailure("prv-accountant failed: Discrete mean differs from continuous mean significantly.")

    def ctd_boom(self, *a, **k):
        raise NumericalFailure("ctd failed (simulated)")

    monkeypatch.setattr(PrvAccountant, "_run", boom)
    monkeypatch.setattr(CtdAccountant, "_composed", ctd_boom)
    code, _, err = run(capsys, "--mechanism", "subsampled-gaussian", "--noise-multiplier", "0.8", "--sample-rate", "0.1",
                       "--steps", "1000", "--delta", "1e-5", "--accountant", "prv")
    assert code == 2 and "Discrete mean" in err and "hint" in err
    data = run_json(capsys, "--mechanism", "subsampled-gaussian", "--noise-multiplier", "0.8", "--sample-rate", "0.1",
                    "--steps", "1000", "--delta", "1e-5")
    assert data["accountant"] == "pld" and {"ctd", "prv"} <= set(data["unavailable"])



def test_interrupt_is_one_line_not_a_traceback(capsys, monkeypatch):
    import privaudit.accounting.query as query

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(query, "epsilon_report", interrupted)
    code, _, err = run(capsys, "--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "1", "--delta", "1e-5")
    assert code == 130 and err.strip() == "error: aborted"
