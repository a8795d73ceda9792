"""Known findings: the failures of kernels the suite has already found and written up.

Every run reads this list (:mod:`harness.plugins.known`): the gate, a soak's rounds and
the nightly.  A failure of a test of a kernel an entry names, whose every part's
message matches the entry's ``signature``, is a known failure: in a Hypothesis
test that example passes and the search goes on, and the test is pytest's
xfailed, with the finding as its reason, counted apart ("0 new, 5 known").  A
failure no entry matches is new, even in the same test.  An entry whose ``every_run`` says
that the fixed inputs every run draws show the bug, and whose test passes
having run them all, fails as FIXED: the finding's document and its entry are
out of date, as a strict xfail's test is.  An entry applies only where the
library version it is about is installed: another version's failures are new.

One entry per finding and test, each with the bug it names; the reproducers
are in the documents, and the strict expected failures of
``tests/suite/test_peers.py`` call the libraries directly.
"""

from __future__ import annotations

from dataclasses import dataclass

ANY: tuple[str, ...] = ()  # an entry's ops or dtypes: every one


@dataclass(frozen=True)
class KnownFinding:
    # The registered kernel the bug is in (specs/peers.py, specs/registry.py).
    kernel: str
    # The test function of tests/kernel/ that fails, by name.
    test: str
    # The operations (specs/operations.py) and dtypes ("float32", "float16", "bfloat16") of the test ids it
    # fails: the parts of the id after the kernel's; ANY for all.
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    # A regular expression searched in each failure's "Type: message": what the bug does to the output.
    signature: str
    # Where it is written up: the finding's document and section, or an upstream issue.
    finding: str
    # The distribution and the version (or the version's prefix) the finding is about.
    version: tuple[str, str]
    # The special cases (oracles/semantics.py's rules: "nan", "+inf", ...) of a special-case test's ids it fails;
    # ANY for all, and for tests without rules.
    rules: tuple[str, ...]
    # Whether the inputs every run draws first (the regression catalog, the seams, the coverage sweep) show it,
    # so that a pass of its test after all of them is news: the bug is fixed.  False where only the randomised
    # search reaches it, which a night may miss.
    every_run: bool


# The signatures are anchored at the failure's type and the suite's own words, and say which results are wrong, so
# that a failure of the same test with other wrong results is new.  BeyondBound's first line counts the elements
# beyond their bound and, of them, the special ones (results the special values decide); its second names the worst.
# Every element beyond its bound is a special one, the worst a number where the definition gives NaN:
NUMBERS_WHERE_NAN = (r"^BeyondBound: \S+: (\d+) of \d+ elements beyond the derived bound [^\n]*; \1 of them special: "
                     r"[^\n]*\nworst element: [^\n]*got -?(\d|inf)[^,]*, expected exactly nan")
# Every element beyond its bound is a NaN where the oracle's result is finite:
NAN_WHERE_NUMBERS = (r"^BeyondBound: \S+: (\d+) of \d+ elements beyond the derived bound [^\n]*\nworst element: "
                     r"[^\n]*got nan, [\s\S]*\nkernel: [^\n]*, and \1 NaN or inf where the oracle's result is finite")
# Rounding errors only: no special result wrong, no NaN or inf where the result is finite.
ROUNDING_ONLY = (r"^BeyondBound: \S+: \d+ of \d+ elements beyond the derived bound \([^\n]*\)\n"
                 r"(?![\s\S]*NaN or inf where the oracle's result is finite)")
# A special-case test's results: numbers where the rule gives NaN.
NUMBERS_FOR_THE_NAN_RULE = (r"^AssertionError: \S+ log_softmax, special case 'nan' [^\n]*got \[-?\d[^\]]*\] where the rule "
                            r"gives exactly nan")

KNOWN_FINDINGS: tuple[KnownFinding, ...] = (
    # FlagGems' log_softmax takes a row's maximum with NaN skipped and never meets the NaN again.
    KnownFinding("flag_gems", "test_output_within_derived_bound", ("log_softmax",), ANY, NUMBERS_WHERE_NAN,
                 "docs/findings/flag-gems.md 1: log_softmax of a row holding a NaN returns numbers",
                 ("flag-gems", "5.0.2"), rules=ANY, every_run=False),
    # The same, in the special case of a row holding a NaN, which every run tests.
    KnownFinding("flag_gems", "test_special_case_results_are_exact", ("log_softmax",), ANY, NUMBERS_FOR_THE_NAN_RULE,
                 "docs/findings/flag-gems.md 1: log_softmax of a row holding a NaN returns numbers",
                 ("flag-gems", "5.0.2"), rules=("nan",), every_run=True),
    # FlagGems' softmax over a leading dim (its non-inner kernel) drops NaN as its log_softmax does.
    KnownFinding("flag_gems", "test_output_within_derived_bound", ("softmax",), ANY, NUMBERS_WHERE_NAN,
                 "docs/findings/flag-gems.md 2: softmax over a leading dim drops NaN",
                 ("flag-gems", "5.0.2"), rules=ANY, every_run=False),
    # The same, where the metamorphic test's rows of a NaN over a leading dim should stay NaN, not sum to one.
    KnownFinding("flag_gems", "test_outputs_lie_in_the_unit_interval_and_rows_sum_to_one", ANY, ANY,
                 NUMBERS_WHERE_NAN, "docs/findings/flag-gems.md 2: softmax over a leading dim drops NaN",
                 ("flag-gems", "5.0.2"), rules=ANY, every_run=False),
    # FlagGems returns an empty input at once, in its own dtype, whatever half_to_float asks.
    KnownFinding("flag_gems", "test_output_within_derived_bound", ("softmax_fp32_out",), ("float16", "bfloat16"),
                 r"^ContractBroken: flag_gems: the kernel returned a result of shape (\([^)]*\b0\b[^)]*\)) and dtype "
                 r"torch\.b?float16 for softmax_fp32_out, whose result has x's shape \1 and dtype torch\.float32",
                 "docs/findings/flag-gems.md 3: an empty softmax with half_to_float keeps the half dtype",
                 ("flag-gems", "5.0.2"), rules=ANY, every_run=False),
    # Liger's backward multiplies grad by y in the half input dtype before it sums.
    KnownFinding("liger", "test_output_within_derived_bound", ("softmax_backward",), ("float16", "bfloat16"),
                 ROUNDING_ONLY,
                 "docs/findings/softmax-backward.md 2: grad * y in the input dtype",
                 ("liger-kernel", "0.8.5"), rules=ANY, every_run=False),
    # The same on rows past 2^31 elements.
    KnownFinding("liger", "test_offsets_past_2_31_elements", ("softmax_backward",), ("float16", "bfloat16"),
                 ROUNDING_ONLY,
                 "docs/findings/softmax-backward.md 2: grad * y in the input dtype",
                 ("liger-kernel", "0.8.5"), rules=ANY, every_run=False),
    # FlagGems' backwards read a non-contiguous output (and its gradient) as if contiguous.
    KnownFinding("flag_gems", "test_output_within_derived_bound", ("softmax_backward", "log_softmax_backward"), ANY,
                 ROUNDING_ONLY,
                 "docs/findings/softmax-backward.md 3: a non-contiguous output read as contiguous",
                 ("flag-gems", "5.0.2"), rules=ANY, every_run=False),
    # FlagGems' scaled softmax rescales its running sum by exp(-inf - (-inf)) after a first tile of -inf.
    KnownFinding("flag_gems_scaled", "test_output_within_derived_bound", ("scaled_softmax", "causal_softmax"), ANY,
                 NAN_WHERE_NUMBERS,
                 "docs/findings/scaled-softmax.md 1: a row whose first tile is -inf comes out NaN",
                 ("flag-gems", "5.0.2"), rules=ANY, every_run=False),
    # Inductor's compiled softmax(x * s, 0) over a unit-stride dim 0 of logits near 1e30.
    KnownFinding("inductor", "test_output_within_derived_bound", ("scaled_softmax",), ANY, NAN_WHERE_NUMBERS,
                 "docs/findings/scaled-softmax.md 2: NaN over a unit-stride dim 0 of logits near 1e30",
                 ("torch", "2.11."), rules=ANY, every_run=False),
)
