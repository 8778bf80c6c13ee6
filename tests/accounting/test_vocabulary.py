"""One vocabulary per idea: the neighbouring relation and the sampling scheme are one enum each, parsed once at the
boundary in either spelling, written in one."""

import json

import numpy as np
import pytest

from privaudit.accounting import Composition, Neighbouring, Sampling, SubsampledGaussian
from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.accounting.schedule import composition_from_json
from privaudit.errors import InvalidParameterError
from privaudit.stats.one_run_paired import one_run_paired_bound, pair_parameters
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import Guesses


@pytest.mark.parametrize("spelling", ["add-remove", "add_remove", "Add-Remove", " ADD_REMOVE "])
def test_neighbouring_reads_every_spelling(spelling):
    assert Neighbouring.parse(spelling) is Neighbouring.ADD_REMOVE


@pytest.mark.parametrize("spelling", ["fixed-size", "fixed_size", "without-replacement", "fixed-size-without-replacement",
                                      "fixed_size_without_replacement"])
def test_sampling_reads_every_spelling(spelling):
    assert Sampling.parse(spelling) is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT


def test_unknown_spellings_name_the_choices():
    with pytest.raises(InvalidParameterError, match="use 'add-remove' or 'replace-one'"):
        Neighbouring.parse("add-one")
    with pytest.raises(InvalidParameterError, match="use 'poisson' or 'fixed-size-without-replacement'"):
        Sampling.parse("shuffled")


def test_files_are_written_in_one_spelling_and_read_in_both():
    ledger = PrivacyLedger(neighbouring="replace-one")
    ledger.record(PrivacyEvent("0", 1, SubsampledGaussian(1.0, 0.1, "fixed-size"), 3))
    data = ledger.to_dict()
    assert data["neighbouring"] == "replace_one"
    assert data["events"][0]["mechanism"]["sampling"] == "fixed_size_without_replacement"
    hyphenated = json.loads(json.dumps(data).replace("replace_one", "replace-one").replace(
        "fixed_size_without_replacement", "fixed-size"))
    assert PrivacyLedger.from_dict(hyphenated).to_dict() == data
    schedule = {"neighbouring": "replace-one", "entries": [[{"type": "subsampled-gaussian", "noise_multiplier": 1.0,
                                                            "sample_rate": 0.1, "sampling": "fixed-size"}, 3]]}
    assert composition_from_json(schedule) == Composition.of(SubsampledGaussian(1.0, 0.1, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT),
                                                             3, Neighbouring.REPLACE_ONE)


def test_the_paired_one_run_audit_takes_the_enum_and_writes_its_value():
    assert pair_parameters(1.0, 1e-5, Neighbouring.REPLACE_ONE) == (1.0, 1e-5)
    rng = np.random.default_rng(0)
    scores = AuditScores.of(rng.normal(2.0, 1.0, 200), rng.normal(0.0, 1.0, 200))
    by_name = one_run_paired_bound(scores, 0.05, 1e-5, Guesses(20, 0), "replace-one")
    by_value = one_run_paired_bound(scores, 0.05, 1e-5, Guesses(20, 0), Neighbouring.REPLACE_ONE)
    assert by_name == by_value and by_name[1]["neighbours"] == "replace_one"
