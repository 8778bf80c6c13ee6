"""A flagged inversion run (diverged, no progress) never reads as a defence's effect in the FedReg comparison claim."""

from privaudit.papers.fedreg.recipe import psnr_table

SPEC = {"attack": "ig", "adaptive": True, "sigmas": [0.01]}
DEFENCES = ("fedavg", "dpsgd:0.01", "fedreg", "fedreg-mg")


def _trial(image: int, mg_naive: float, mg_status: str) -> dict:
    rows = []
    for defence in DEFENCES:
        attackers = ("naive", "adaptive") if defence.startswith("fedreg") else ("naive",)
        for attacker in attackers:
            psnr, status = (mg_naive, mg_status) if (defence, attacker) == ("fedreg-mg", "naive") else (20.0, "ok")
            rows.append({"defence": defence, "attacker": attacker, "psnr": psnr, "status": status, "exact": False,
                         "ssim": 0.5, "label_accuracy": None, "seconds": 1.0})
    return {"image": image, "label": 0, "baseline_psnr": 10.0, "rows": rows}


def test_a_flagged_run_is_left_out_of_the_effective_psnr_and_counted():
    ok = psnr_table([_trial(0, 35.0, "ok"), _trial(1, 35.0, "ok")], SPEC)
    assert list(ok["effective"]["fedreg-mg"]) == [35.0, 35.0] and ok["flagged"]["fedreg-mg"] == 0
    # the same PSNR from a run that diverged says nothing about the defence: the other attacker's 20 dB stands
    flagged = psnr_table([_trial(0, 35.0, "diverged"), _trial(1, 35.0, "ok")], SPEC)
    assert list(flagged["effective"]["fedreg-mg"]) == [20.0, 35.0] and flagged["flagged"]["fedreg-mg"] == 1
    naive = next(r for r in flagged["rows"] if r["defence_id"] == "fedreg-mg" and r["attacker"] == "naive")
    assert naive["flagged_runs"] == 1 and naive["psnr"] == [35.0, 35.0]  # still shown, with its count


def test_result_files_without_a_status_count_as_ok():
    trial = _trial(0, 35.0, "ok")
    for row in trial["rows"]:
        row.pop("status")
    assert list(psnr_table([trial], SPEC)["effective"]["fedreg-mg"]) == [35.0]
