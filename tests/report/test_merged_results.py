"""A report's merged ``results.json`` is an input too: ``privaudit report <report dir> --out X`` renders the same report."""

from __future__ import annotations

import json

import pytest

from privaudit.cli.app import main
from privaudit.errors import InvalidParameterError
from privaudit.report.build import build_report
from privaudit.report.results import MERGED_SCHEMA, read_merged

from .fixtures import write_fixture_results


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit")
    write_fixture_results(root)
    (root / "manifest.json").write_text('{"schema": "privaudit.checkpoint/1"}')  # skipped, and remembered as skipped
    return build_report([root], tmp_path_factory.mktemp("report"), title="t", note="Regenerate: `make x`.")


def test_round_trip_of_the_merged_results(first, tmp_path):
    again = build_report([first.merged.parent], tmp_path / "again", title="t", note="Regenerate: `make x`.")
    assert again.merged.read_text() == first.merged.read_text()
    assert again.markdown.read_text() == first.markdown.read_text()
    assert again.html.read_text() == first.html.read_text()
    assert [p.name for p in again.figures] == [p.name for p in first.figures]
    merged = json.loads(first.merged.read_text())
    assert merged["schema"] == MERGED_SCHEMA and len(merged["skipped"]) == 1 and "Regenerate: `make x`." in again.markdown.read_text()


def test_the_merged_file_named_explicitly_and_in_place(first, tmp_path, capsys):
    results, skipped = read_merged(first.merged)
    assert skipped == json.loads(first.merged.read_text())["skipped"]
    assert len(results) == len(json.loads(first.merged.read_text())["results"]) and all(r.source is not None for r in results)
    assert main(["report", str(first.merged), "--out", str(tmp_path / "cli"), "--title", "t", "--note", "Regenerate: `make x`."]) == 0
    assert (tmp_path / "cli" / "report.md").read_text() == first.markdown.read_text()
    # rendering a report directory into itself reads its merged file before writing it again
    in_place = build_report([tmp_path / "cli"], tmp_path / "cli", title="t", note="Regenerate: `make x`.")
    assert in_place.merged.read_text() == first.merged.read_text()


def test_merged_files_written_before_the_schema_was_named_are_read(first, tmp_path):
    legacy = json.loads(first.merged.read_text())
    del legacy["schema"]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.json").write_text(json.dumps(legacy))
    again = build_report([tmp_path / "old"], tmp_path / "again", title="t", note="Regenerate: `make x`.")
    assert again.markdown.read_text() == first.markdown.read_text()


@pytest.mark.parametrize(("content", "message"), [
    ('{"schema": "privaudit.report/1", "results": [{"schema": "privaudit.result/1", "kind": "ledger", "data": {}}]}', "lacks"),
    ('{"schema": "privaudit.report/1", "results": [3]}', "results\\[0\\] is not an object"),
    ('{"schema": "privaudit.report/1", "results": [], "skipped": [1]}', "'skipped' must be a list"),
    ('{"hello": 1}', "not a privaudit report's merged results"),
])
def test_a_bad_merged_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(InvalidParameterError, match=message):
        read_merged(path)
