import json

import pytest

from privaudit.accounting import Gaussian, SubsampledGaussian
from privaudit.accounting.schedule import composition_from_json, load_schedule
from privaudit.errors import InvalidParameterError


def test_schedule_formats(tmp_path):
    data = {
        "neighbouring": "add_remove",
        "entries": [
            {"mechanism": {"type": "subsampled_gaussian", "noise_multiplier": 1.0, "sample_rate": 0.01}, "count": 500},
            {"mechanism": {"type": "subsampled_gaussian", "noise_multiplier": 2.0, "sample_rate": 0.02}, "steps": 500},
            [{"type": "gaussian", "noise_multiplier": 8.0}, 50],
        ],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    comp = load_schedule(path)
    assert dict(comp.entries) == {SubsampledGaussian(1.0, 0.01): 500, SubsampledGaussian(2.0, 0.02): 500, Gaussian(8.0): 50}
    assert composition_from_json(data["entries"]).total_count == 1050


@pytest.mark.parametrize(
    "bad",
    [{}, {"entries": []}, {"entries": [{"mechanism": {"type": "gaussian", "noise_multiplier": 1}}]},
     {"entries": [[{"type": "warp", "x": 1}, 1]]}, {"entries": [[{"type": "gaussian", "noise_multiplier": -1}, 1]]},
     {"entries": [[{"type": "gaussian", "noise_multiplier": 1, "mu": 3}, 1]]}, {"entries": [[{"type": "gaussian", "noise_multiplier": 1}, 1.5]]}],
)
def test_bad_schedules(bad):
    with pytest.raises(InvalidParameterError):
        composition_from_json(bad)


def test_unreadable_file(tmp_path):
    with pytest.raises(InvalidParameterError, match="cannot read"):
        load_schedule(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InvalidParameterError, match="not valid JSON"):
        load_schedule(tmp_path / "bad.json")
