#!/usr/bin/env bash
# A failure of each kind of test that judges a kernel, as printed, and its replay line run once as printed; then a
# run under -x, whose first failure told is the accuracy test's.  Each run is one test against a planted bug, under
# the default profile (dev), from the checkout's root.  Usage: bash docs/transcripts/failures.sh
# Of each run's output the session header is left out, and after the failures the suite's figures and coverage
# tables (sections of its own); the failure blocks are as printed.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=$(mktemp)
slow=$(mktemp -d)
trap 'rm -rf "$log" "$slow"' EXIT

# The run's failures as said when they happen, its FAILURES section up to the suite's own sections, its last line.
told() {
    grep -E "^(failure: |  replay: )" "$log"
    awk '/^=+ FAILURES =+$/ { on = 1 } /^-+ / && !/^-+ Captured / { on = 0 } /^=+ short test summary/ { on = 0 }
         on' "$log"
    tail -1 "$log"
}

said() {  # a command as a shell reads it: each word that needs quotes in single quotes
    local word line="\$"
    for word in "$@"; do
        if [[ $word =~ ^[A-Za-z0-9_./:=,+-]+$ ]]; then line+=" $word"; else line+=" '$word'"; fi
    done
    echo "$line"
}

run() {
    echo; said "$@"
    "$@" > "$log" 2>&1
    local status=$?
    told; echo "(exit $status)"
}

replay() {
    local command
    command=$(grep -m1 "^replay in one step: " "$log" | sed 's/^replay in one step: //')
    echo; echo "\$ $command"
    bash -c "$command" > "$log" 2>&1
    local status=$?
    if [[ $command == "python -m harness.replay "* ]]; then cat "$log"; else told; fi
    echo "(exit $status)"
}

kind() {  # kind NAME KERNEL TEST-ID: the test run against the kernel, then its replay line
    echo; echo "## $1"; echo; echo '```text'
    run python -m pytest "$3" --kernel "$2" --device cpu
    replay
    echo '```'
}

kind "Accuracy" specs.mutants:partial_row_max \
    "tests/kernel/test_accuracy.py::test_output_within_derived_bound[specs.mutants:partial_row_max-softmax-float32]"
kind "Special cases" specs.mutants:all_neg_inf_uniform \
    "tests/kernel/test_special_cases.py::test_special_case_results_are_exact[specs.mutants:all_neg_inf_uniform--inf rows-softmax]"
kind "Refusals" tests.hostile.out_of_capabilities:zeros_outside \
    "tests/kernel/test_refusals.py::test_inputs_are_refused_exactly_outside_the_declared_capabilities[tests.hostile.out_of_capabilities:zeros_outside]"
kind "Statistical bias" specs.mutants:bf16_truncation \
    "tests/kernel/test_statistical_bias.py::test_mean_signed_error_is_within_the_statistical_bound[specs.mutants:bf16_truncation]"
kind "Bound tightness" specs.mutants:low_precision_reciprocal \
    "tests/kernel/test_bound_tightness.py::test_bound_is_tight_on_a_fixed_input_set[specs.mutants:low_precision_reciprocal-torch.float16]"
kind "Shift invariance" specs.mutants:no_max_subtraction \
    "tests/kernel/test_metamorphic.py::test_shift_invariance_is_bitwise[specs.mutants:no_max_subtraction]"
kind "Batch invariance" specs.mutants:row_count_dependent_sum \
    "tests/kernel/test_metamorphic.py::test_batch_invariance_is_bitwise[specs.mutants:row_count_dependent_sum-2]"
kind "Determinism" tests.hostile.cached_output:noisy \
    "tests/kernel/test_metamorphic.py::test_run_to_run_determinism_is_bitwise[tests.hostile.cached_output:noisy]"
kind "Permutation" specs.mutants:partial_row_max \
    "tests/kernel/test_metamorphic.py::test_permutation_equivariance[specs.mutants:partial_row_max]"
kind "Unit interval and sum to one" specs.mutants:partial_row_max \
    "tests/kernel/test_metamorphic.py::test_outputs_lie_in_the_unit_interval_and_rows_sum_to_one[specs.mutants:partial_row_max]"
kind "Monotonicity" tests.scenarios.property_bugs:extremes_swapped \
    "tests/kernel/test_metamorphic.py::test_monotonicity_within_rows[tests.scenarios.property_bugs:extremes_swapped]"
kind "Dim equivalence" tests.scenarios.property_bugs:half_off_the_last_dim \
    "tests/kernel/test_metamorphic.py::test_dim_equivalence[tests.scenarios.property_bugs:half_off_the_last_dim]"

echo; echo "## Under -x, the most specific failure first"; echo; echo '```text'
run python -m pytest -n 2 -x tests/kernel -k "special_case or mean_signed or test_output_within" \
    --kernel specs.mutants:nan_dropped_by_max --device cpu
echo '```'

echo; echo "## A shrink that the run's bound stops"; echo
echo "A kernel half a second a call, whose bug only long rows show: shrinking its failing example outlasts the dev"
echo "profile's 20 s (harness/profiles.py).  $slow/slow.py:"; echo; echo '```python'
cat > "$slow/slow.py" <<'KERNEL'
import time

import torch

from specs.registry import Capabilities


def slow_on_long_rows(x, dim):
    """torch's softmax, half a second a call, with its outputs' last column zeroed on rows of 600 or more."""
    time.sleep(0.5)
    y = torch.softmax(x, dim)
    if x.dim() and x.shape[dim] >= 600:
        y.narrow(dim, x.shape[dim] - 1, 1).zero_()
    return y


slow_on_long_rows.capabilities = Capabilities(dtypes=frozenset({torch.float32}))
KERNEL
cat "$slow/slow.py"; echo '```'; echo; echo '```text'
run python -m pytest "tests/kernel/test_metamorphic.py::test_dim_equivalence[$slow/slow.py:slow_on_long_rows]" \
    --kernel "$slow/slow.py:slow_on_long_rows" --device cpu
echo '```'
