"""The nightly driver and its league table: every kernel side by side, accuracy against speed, and what changed."""

import json
import signal

from harness.nightly import compare
from report import league
from report.summary import ULP_BUCKETS, categorize
from tests.scenarios.soak_stalled import is_running, stalled_pid
from tests import subruns

STALLED = "tests/scenarios/soak_stalled.py"


def nightly_command(out, *options, tests=(STALLED, "-k", "passes")):
    """``python -m harness.nightly`` into ``out``, its soak's rounds running ``tests`` on the CPU (the scenarios'
    tests judge no kernel: the nightly's --kernel would deselect them without --self-tests)."""
    return subruns.python("harness.nightly", "--out", str(out), *options,
                          "--", "-p", "no:xdist", "--device", "cpu", "--self-tests", *tests)


def stats(max_ulp, mean_ulp, correctly_rounded, worst_ratio, elements):
    side = {"max_ulp": max_ulp, "mean_ulp": mean_ulp, "correctly_rounded": correctly_rounded,
            "max_fractional_ulp": max_ulp, "worst_ratio": worst_ratio, "violations": 0, "non_finite": 0,
            "special_misses": 0}
    return {"records": 1, "elements": elements, "kernel": side, "torch": side}


CATEGORIES = {
    "full_softmax": {"softmax/float32/normal": stats(3, 0.2, 0.8, 0.3, 1000),
                     "softmax/float32/equal": stats(0, 0.0, 1.0, 0.1, 3000),
                     "log_softmax/float32/normal": stats(1, 0.1, 0.9, 0.2, 10)},
    "liger": {"softmax/float32/normal": stats(85, 9.0, 0.1, 0.9, 500)},
}
BENCH = {"device": {"name": "a GPU"}, "results": [
    {"M": 4096, "N": 128, "dtype": "float32", "gbps": {"full_softmax": 600, "liger": 300, "copy": 700}},
    {"M": 4096, "N": 4096, "dtype": "float32", "gbps": {"full_softmax": 2600, "liger": 2700, "copy": 2800}},
    {"M": 64, "N": 1 << 20, "dtype": "float32", "gbps": {"full_softmax": 1800, "copy": 2900}},
]}


def test_rows_merge_value_classes_and_take_the_speed_of_the_same_dtype():
    rows = {(r["kernel"], r["values"]): r for r in league.rows(CATEGORIES, BENCH)}
    overall = rows["full_softmax", "all"]
    assert overall["elements"] == 4000 and overall["max_ulp"] == 3
    assert overall["mean_ulp"] == (0.2 * 1000) / 4000  # element-weighted, log_softmax left out
    assert overall["gbps"] == 1800 and abs(overall["copy_fraction"] - 600 / 700) < 1e-12  # medians over shapes
    assert rows["liger", "all"]["gbps"] == 1500  # only the shapes it ran
    assert ("liger", "equal") not in rows


def test_the_league_is_written_with_a_plot_per_dtype(tmp_path):
    written = league.write(tmp_path, {"categories": CATEGORIES, "invariances": {
        "liger": {"batch": {"promised": False, "held": False, "counterexample": "row 0"}}}}, BENCH)
    assert {p.name for p in written} == {"league.md", "league.json", "league_float32.png"}
    text = (tmp_path / "league.md").read_text()
    assert "| liger | float32 | all | 500 | 85 | 9.000 | 10.0 | 0.9 | 0 | 0 | 1500 | 0.70 |" in text
    assert "liger: batch broken, not promised" in text
    assert (tmp_path / "league_float32.png").stat().st_size > 1000


def test_the_driver_soaks_merges_rounds_writes_the_league_and_compares_with_last_night(tmp_path):
    def night(out, *extra):
        return subruns.run(
            nightly_command(out, "--minutes", "0.3", *extra,
                            # One test: its share is the whole round, time for the fixed inputs and a search too
                            # on a loaded machine.
                            tests=["tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float32",
                                   "--kernel", "torch"]),
            timeout=600, SOFTMAX_SUITE_EXAMPLES=str(tmp_path / "examples"))

    first = night(tmp_path / "one")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    report = json.loads((tmp_path / "one" / "accuracy.json").read_text())
    assert set(report["categories"]) == {"torch"} and report["run"]["rounds"] >= 1
    fixed = json.loads((tmp_path / "one" / "fixed.json").read_text())
    assert {r["inputs"] for r in fixed["records"]} == {"fixed"} and {r["inputs"] for r in report["records"]} == {
        "fixed", "search"}
    assert "| torch | float32 | all |" in (tmp_path / "one" / "league.md").read_text()
    second = night(tmp_path / "two", "--previous", str(tmp_path / "one"))
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    summary = (tmp_path / "two" / "nightly.md").read_text()
    assert summary.startswith("# Nightly run\n\n**PASSED**") and "no regression against" in summary
    assert "regressed: 0" in (tmp_path / "two" / "compare.txt").read_text()


def test_a_night_whose_time_box_is_not_a_positive_number_of_minutes_is_refused(tmp_path):
    # tests/suite/test_soak.py tries other values: the drivers share the type of --minutes
    result = subruns.run(nightly_command(tmp_path / "night", "--minutes=-5"), timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "argument --minutes" in result.stderr and "above 0" in result.stderr, result.stderr
    assert not (tmp_path / "night").exists()


def test_a_signal_to_the_nightly_driver_leaves_the_night_so_far_written_and_marked_interrupted(tmp_path):
    pid_file = tmp_path / "stalled.pid"
    night = subruns.start(nightly_command(tmp_path / "night", "--minutes", "1", tests=[STALLED, "-k", "stalls"]),
                          SOFTMAX_SUITE_PID_FILE=str(pid_file))
    try:
        stalled = stalled_pid(pid_file, night)
        night.send_signal(signal.SIGINT)
        output = night.communicate(timeout=60)[0]
    finally:
        night.kill()
    assert night.returncode == 130, output
    assert not is_running(stalled), "the round's pytest outlived the nightly driver"
    assert (tmp_path / "night" / "nightly.md").read_text().startswith("# Nightly run\n\n**INTERRUPTED** by SIGINT")
    assert json.loads((tmp_path / "night" / "accuracy.json").read_text())["run"]["rounds"] == 1  # the stopped round


def test_a_night_merges_only_the_rounds_its_soak_lists_and_a_rerun_is_refused_unless_resumed(tmp_path):
    stray = tmp_path / "night" / "soak" / "round-1"  # a round of a killed run: no soak.json lists it
    stray.mkdir(parents=True)
    (stray / "accuracy.json").write_text(json.dumps({
        "schema_version": 1, "run": {"seed": "pinned: 12345 + crc32(test name)"}, "verdict": "the stray round",
        "failures": [], "records": [], "invariances": {}}))
    refused = subruns.run(nightly_command(tmp_path / "night", "--minutes", "0.2"))
    assert refused.returncode == 2 and "round-1" in refused.stderr and "--resume" in refused.stderr, refused.stderr
    assert not (tmp_path / "night" / "soak" / "round-2").exists()
    resumed = subruns.run(nightly_command(tmp_path / "night", "--minutes", "0.2", "--resume"))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    listed = json.loads((tmp_path / "night" / "soak" / "soak.json").read_text())["rounds"]
    seeds = json.loads((tmp_path / "night" / "accuracy.json").read_text())["run"]["seeds"]
    assert [r["round"] for r in listed] == [2] and seeds == [f"pinned: {listed[0]['seed']} + crc32(test name)"]


def fixed_record(kernel, values, max_ulp, replay):
    errors = {"elements": 100, "max_ulp": max_ulp, "mean_ulp": max_ulp / 10, "correctly_rounded": 0.5,
              "max_fractional_ulp": max_ulp, "worst_ratio": 0.5, "violations": 0, "non_finite": 0, "special_misses": 0,
              "allclose": True, "ulp_histogram": [0] * len(ULP_BUCKETS)}
    return {"kernel": kernel, "op": "softmax", "dtype": "float32", "values": values, "inputs": "fixed",
            "replay": replay, "kernel_errors": errors, "torch_errors": errors}


def fixed_report(tmp_path, name, records):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"schema_version": 1, "run": {"backend": "cpu", "profile": "nightly"},
                                "records": records, "categories": categorize(records), "invariances": {}}))
    return path


def test_nights_are_compared_on_the_fixed_inputs_both_reached_and_a_kernel_that_vanished_counts(tmp_path):
    last = [fixed_record("k", "normal", 3, "a"), fixed_record("k", "normal", 9, "b"),
            fixed_record("k", "zeros", 0, "c"), fixed_record("gone", "normal", 1, "d")]
    # Tonight's time box ended the sweep before inputs b and c (a loaded machine): no change in the kernel.
    tonight = [fixed_record("k", "normal", 3, "a"), fixed_record("k", "normal", 3, "a")]
    text, regressed = compare(fixed_report(tmp_path, "last", last), fixed_report(tmp_path, "tonight", tonight))
    assert regressed and "gone" in text and "zeros" not in text, text
    text, regressed = compare(fixed_report(tmp_path, "last", last[:3]), fixed_report(tmp_path, "tonight", tonight))
    assert not regressed and "compared on the 1 fixed input(s) both judged" in text, text
    worse = [fixed_record("k", "normal", 30, "a")]
    text, regressed = compare(fixed_report(tmp_path, "last", last[:3]), fixed_report(tmp_path, "tonight", worse))
    assert regressed and "max_ulp" in text, text
