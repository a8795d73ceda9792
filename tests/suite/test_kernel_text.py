"""What a kernel says (its exception messages, its name) reaches the reports and the terminal as text: its HTML and
Markdown are not markup in summary.md, its control characters do not act on the terminal."""

import types

import pytest

from harness.guard.calls import ContractBroken
from harness.plugins.failures import one_screen
from report import artifacts
from report.text import markdown_code, printable
from tests.hostile.markup_message import CONTROL, MARKUP
from tests.suite.test_replay import SMALL, replay

KERNEL = "tests.hostile.markup_message:raises_markup"
ONE_TEST = ("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float32",
            "--hypothesis-profile", "mutation")
MARKUP_AS_TEXT = r"&lt;img src=x onerror=alert(1)&gt; \| \*\*bold\*\* \[link\](http://x) \`tick\`"
CONTROL_SHOWN = r"\x1b[2J\x1b[31mALL PASSED\x1b[0m\rOVERWRITE\x07\x9b31m"
# In Markdown, what the terminal shows with its backslashes and brackets escaped.
CONTROL_AS_TEXT = r"\\x1b\[2J\\x1b\[31mALL PASSED\\x1b\[0m\\rOVERWRITE\\x07\\x9b31m"
RUN = {"backend": "cpu", "device": "x86_64", "profile": "ci", "git_commit": "abc", "started": "today", "versions": {}}


def acts_on_a_terminal(text: str) -> list[str]:
    """The characters of ``text`` a terminal would obey: C0 controls but newline and tab, DEL, C1."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]


def test_a_kernels_message_and_name_in_summary_md_are_text_not_html_or_markup(tmp_path):
    kernel = "my|<b>kernel</b>"
    failure = artifacts.failure(f"t.py::test_x[{kernel}]", "call", f"t.py::test_x[{kernel}]\nValueError: {MARKUP}",
                                replay="python -m harness.replay --kernel 'a`b' CASE")
    invariances = {kernel: {"batch": {"promised": False, "held": False, "counterexample": "[x](http://x)",
                                      "tests": []}}}
    gate = ["kernel  category  verdict", f"```{kernel}  softmax/float32/normal  regressed"]
    artifacts.write_markdown(tmp_path, artifacts.Report(
        run=RUN, verdict="FAILED", failures=[failure], categories={}, records=[], missing=[f"t.py::test_y[{kernel}]"],
        gate=gate, invariances=invariances, in_progress=[f"- {kernel} softmax on shape=(2, 3)"]))
    summary = (tmp_path / "summary.md").read_text()
    assert f"- `t.py::test_x[{kernel}]` (call): ValueError: {MARKUP_AS_TEXT}\n" in summary  # a code span is text
    assert "  replay: ``python -m harness.replay --kernel 'a`b' CASE``\n" in summary  # a span its backtick cannot end
    assert r"| my\|&lt;b&gt;kernel&lt;/b&gt; | broken, not promised |" in summary  # one table cell, its pipe escaped
    assert r"- my\|&lt;b&gt;kernel&lt;/b&gt; / batch: \[x\](http://x)" in summary
    assert r"- \- my\|&lt;b&gt;kernel&lt;/b&gt; softmax on shape=(2, 3)" in summary  # no list nested in the item
    assert "\n````\nkernel  category  verdict\n```my|<b>kernel</b>" in summary  # a fence the name cannot close


def test_a_code_span_is_fenced_by_more_backticks_than_it_holds_and_keeps_to_one_line():
    assert markdown_code("a ``` b") == "````a ``` b````"
    assert markdown_code("`x`") == "`` `x` ``"
    assert markdown_code("one\ntwo") == "`one two`"


def test_control_characters_are_written_out_and_newlines_and_tabs_kept():
    assert printable(f"{CONTROL}\n\tend") == CONTROL_SHOWN + "\n\tend"
    assert not acts_on_a_terminal(printable("".join(map(chr, range(0xa0)))))


def test_a_failure_told_on_one_screen_shows_a_kernels_control_characters_and_obeys_none():
    try:
        try:
            raise RuntimeError(CONTROL)
        except RuntimeError as error:
            raise ContractBroken(f"k softmax on shape=(2, 3): the kernel raised RuntimeError: {error}") from error
    except ContractBroken as failure:
        told = one_screen(types.SimpleNamespace(nodeid="t.py::test_x[k]"), failure, "python -m harness.replay")
    assert not acts_on_a_terminal(told), told
    assert f"the kernel raised RuntimeError: {CONTROL_SHOWN}" in told  # the message, and the kernel's traceback
    assert f"RuntimeError: {CONTROL_SHOWN}" in told.split("the kernel's own traceback:")[1]


def test_a_kernels_message_reaches_summary_md_and_the_terminal_as_text(run_pytest, tmp_path):
    """Under ``--tb=short`` pytest's traceback tells the failure, and the failure's headline is the kernel's own
    line: it was raw in summary.md, and its escape sequences reached the terminal in the line saying the failure."""
    result = run_pytest(*ONE_TEST, "--kernel", KERNEL, "--tb=short", "--accuracy-report", str(tmp_path))
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:] + result.stderr[-3000:]
    assert not acts_on_a_terminal(result.stdout), result.stdout[-3000:]
    said = next(line for line in result.stdout.splitlines() if line.startswith("failure: "))
    assert said.endswith(f"ValueError: {MARKUP} {CONTROL_SHOWN}"), said
    summary = (tmp_path / "summary.md").read_text()
    assert f"(call): ValueError: {MARKUP_AS_TEXT} {CONTROL_AS_TEXT}\n" in summary, summary
    assert "<img" not in summary and not acts_on_a_terminal(summary)


def test_the_replay_shows_a_kernels_control_characters_and_obeys_none():
    result = replay("--kernel", KERNEL, "--device", "cpu", SMALL)
    assert result.returncode == 1 and f"the kernel raised ValueError: {MARKUP} {CONTROL_SHOWN}" in result.stdout, \
        result.stdout[-2000:] + result.stderr[-2000:]
    assert not acts_on_a_terminal(result.stdout), result.stdout[-2000:]
