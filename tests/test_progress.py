"""The shared progress bar: visible at every terminal width, silent when disabled."""

import io
import re

import pytest
from rich.console import Console

from privaudit.progress import MIN_BAR_WIDTH, progress_bar, progress_bars

LONG_LABEL = "upcycled-fedprox+output-perturbation · privatefl-cdp-eps8 · reference-mnist-dnn"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _console(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=True, color_system=None, legacy_windows=False), buf


def _final_lines(buf: io.StringIO) -> list[str]:
    """The last frame the live display left on screen, without cursor-control sequences."""
    text = _ESCAPES.sub("", buf.getvalue()).replace("\r", "\n")
    return [line for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize("width", [40, 200])
def test_bar_counter_and_label_fit_the_terminal(width):
    console, buf = _console(width)
    with progress_bars(console=console) as bars:
        first = bars.add(LONG_LABEL, total=1000)
        second = bars.add("tightness rows", total=10)
        first.advance(400, status="acc 0.913 loss 0.234")
        second.set(10)
    lines = _final_lines(buf)[-2:]
    assert all(len(line) <= width for line in lines), lines
    assert "400/1000" in lines[0] and "10/10" in lines[1]
    # the drawn cells (━, ╸): the finished bar is drawn over its whole width, the other over about 40 % of it
    drawn = [len(re.search(r"━[━╸]*", line).group(0)) for line in lines]
    assert drawn[1] >= MIN_BAR_WIDTH, lines
    assert 0.4 * drawn[1] - 1 <= drawn[0] <= 0.4 * drawn[1] + 1, lines
    assert lines[0].startswith(LONG_LABEL[:4])
    if width >= 100:
        assert LONG_LABEL not in lines[0] or width >= 3 * len(LONG_LABEL)  # the label is cut, not wrapped
        assert "acc 0.913" in lines[0]


def test_disabled_bar_prints_nothing_and_accepts_every_call():
    console, buf = _console(80)
    with progress_bar("trials", total=5, enabled=False, console=console) as bar:
        bar.advance()
        bar.advance(2, status="x")
        bar.set(5)
        bar.describe("done")
    assert buf.getvalue() == ""


def test_zero_total_shows_no_bar():
    console, buf = _console(80)
    with progress_bar("nothing to do", total=0, console=console) as bar:
        bar.advance()
    assert buf.getvalue() == ""


def test_messages_are_printed_even_when_the_bars_are_disabled():
    console, buf = _console(80)
    with progress_bars(enabled=False, console=console) as bars:
        bars.print("FAIL cell 3")
    assert "FAIL cell 3" in buf.getvalue()



def _pipe() -> tuple[Console, io.StringIO]:
    """A console that is not a terminal: a log file, a pipe, `make demo > log`."""
    buf = io.StringIO()
    return Console(file=buf, width=80, color_system=None), buf


def test_a_console_that_is_not_a_terminal_gets_a_line_at_every_tenth():
    # rich draws a bar only on a terminal: before issue 24 a long step printed nothing at all into a log
    console, buf = _pipe()
    with progress_bar("trials", total=40, console=console) as bar:
        for i in range(40):
            bar.advance(status=f"trial {i}")
    lines = buf.getvalue().splitlines()
    assert lines[0] == "trials: 0/40" and lines[-1] == "trials: 40/40 (trial 39)"
    assert [line.split(" ")[1] for line in lines] == [f"{k}/40" for k in (0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40)]


def test_line_progress_small_and_unknown_totals_and_resumed_bars():
    console, buf = _pipe()
    with progress_bars(console=console) as bars:
        small = bars.add("rounds", total=3, completed=1)  # resumed: one round already done
        unknown = bars.add("images", total=None)
        for _ in range(2):
            small.advance()
        for _ in range(5):
            unknown.advance()
        small.describe("rounds (done)")
    assert buf.getvalue().splitlines() == ["rounds: 1/3", "images: 0", "rounds: 2/3", "rounds: 3/3", "images: 1",
                                           "images: 2", "images: 4", "images: 5"]  # the last state once, at the end


def test_step_prints_one_line_unless_disabled():
    from privaudit.progress import step

    console, buf = _pipe()
    step("claim · reading: analysing", console=console)
    step("never shown", enabled=False, console=console)
    assert buf.getvalue() == "claim · reading: analysing\n"
