"""The regression gate: this run's categories against a committed baseline.

A baseline holds, per kernel and category, the max and mean ULP distance of a
derandomised run on one backend, and the Hypothesis profile that run used (a
gated run loads the same profile, so it draws the same inputs).  A category
fails the gate when its max ULP grows by more than max(1 ULP, 10 %), its mean
ULP by more than max(0.05 ULP, 10 %), or it disappears from a kernel that
ran.  The slack absorbs CPUs whose vector math differs (numpy's exp on AVX2
and AVX-512, say); on one machine two derandomised runs agree exactly.
A baseline also keeps, per kernel, which bitwise invariances held
(``report.invariances``): a kernel that loses one fails the gate, promised or not.

A missing, unreadable or malformed baseline is an error, never a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1
SLACK = {"max_ulp": (1.0, 0.10), "mean_ulp": (0.05, 0.10)}  # metric -> (absolute, relative)
SHOWN = ".4g"  # how the tables show a metric: a change below it is no finding


class BaselineError(ValueError):
    """The baseline file cannot be used."""


def default_path(backend: str) -> Path:
    return Path(__file__).resolve().parents[1] / "baselines" / f"{backend}.json"


def load(path: Path, backend: str) -> dict:
    """Read and validate a baseline for ``backend``."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BaselineError(f"no baseline at {path}; create one with --update-baseline") from None
    except (OSError, json.JSONDecodeError) as error:
        raise BaselineError(f"baseline {path} is not readable JSON: {error}") from None
    problems = []
    if not isinstance(data, dict):
        raise BaselineError(f"baseline {path} must hold a JSON object")
    if data.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    if data.get("backend") != backend:
        problems.append(f"made on backend {data.get('backend')!r}, this run is on {backend!r}")
    if not isinstance(data.get("profile"), str):
        problems.append("no Hypothesis profile")
    kernels = data.get("kernels")
    if not isinstance(kernels, dict) or not kernels:
        problems.append("no kernels")
    else:
        for kernel, groups in kernels.items():
            if not isinstance(groups, dict):
                problems.append(f"{kernel}: categories must be a JSON object")
                continue
            for key, stats in groups.items():
                if not (isinstance(stats, dict) and all(isinstance(stats.get(m), (int, float)) for m in SLACK)):
                    problems.append(f"{kernel} / {key}: needs numbers for {', '.join(SLACK)}")
    held = data.get("invariances", {})
    if not (isinstance(held, dict) and all(isinstance(cells, dict) and all(isinstance(v, bool) for v in cells.values())
                                           for cells in held.values())):
        problems.append("invariances must map kernel -> invariance -> true/false")
    if problems:
        raise BaselineError(f"baseline {path} is malformed: " + "; ".join(problems))
    return data


def build(categories: dict, *, backend: str, profile: str, run: dict, invariances: dict | None = None) -> dict:
    """A baseline from this run's categories (kernel -> category -> statistics) and invariances held."""
    return {
        "schema_version": SCHEMA_VERSION,
        "backend": backend,
        "profile": profile,
        "device": run.get("device"),
        "cpu_capability": run.get("cpu_capability"),
        "draws": run.get("draws"),
        "made_by": {key: run.get(key) for key in ("git_commit", "versions", "started")},
        "kernels": {
            kernel: {key: {metric: stats["kernel"][metric] or 0.0 for metric in SLACK} | {"records": stats["records"]}
                     for key, stats in groups.items()}
            for kernel, groups in categories.items()
        },
        "invariances": invariances or {},
    }


def write(path: Path, baseline: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")


def other_draws(reference: dict, run: dict) -> str | None:
    """Why this run's inputs are not the ones the baseline's statistics came from, if they are not.

    Statistics of other inputs say nothing of a kernel: compared, they flagged correct kernels.
    """
    made, now = reference.get("draws"), run.get("draws")
    if made == now:
        return None
    return (f"the suite draws other inputs than the baseline's (fingerprint {made} there, {now} here: other "
            "strategies, Hypothesis version or seeding); remake the baseline with --update-baseline")


def machine_bound(reference: dict, run: dict) -> dict[str, str]:
    """Kernels whose numbers this machine cannot reproduce, with the reason.

    On the CPU backend torch.softmax runs ATen's vectorised kernels, chosen by the
    instruction set: AVX2 and AVX512 round differently, by more than the slack
    (log_softmax of fp32 underflow rows: 5 ulp on one, 25 on the other).
    """
    made, now = reference.get("cpu_capability"), run.get("cpu_capability")
    if run.get("backend") == "cpu" and made != now:
        return {"torch": f"its CPU kernels depend on the instruction set: baseline made with {made}, this run {now}"}
    return {}


@dataclass(frozen=True)
class Finding:
    kernel: str
    category: str
    metric: str
    baseline: float | None
    now: float | None
    verdict: str  # "regressed", "disappeared", "lost", "improved", "new", "gained", "not gated"

    @property
    def fails(self) -> bool:
        return self.verdict in ("regressed", "disappeared", "lost")


def allowed(metric: str, old: float) -> float:
    absolute, relative = SLACK[metric]
    return old + max(absolute, relative * old)


def compare(baseline_kernels: dict, categories: dict) -> list[Finding]:
    """Findings for every kernel that ran; kernels of the baseline that did not run are not judged,
    and a kernel the baseline does not hold is named as not gated."""
    findings = []
    for kernel, now_groups in categories.items():
        if kernel not in baseline_kernels:
            records = sum(group["records"] for group in now_groups.values())
            findings.append(Finding(kernel, "all categories", "records", None, records, "not gated"))
            continue
        old_groups = baseline_kernels[kernel]
        for key, old in sorted(old_groups.items()):
            if key not in now_groups:
                findings.append(Finding(kernel, key, "records", old.get("records"), None, "disappeared"))
                continue
            for metric in SLACK:
                value = now_groups[key]["kernel"][metric] or 0.0  # None: the category holds no element
                if value > allowed(metric, old[metric]):
                    findings.append(Finding(kernel, key, metric, old[metric], value, "regressed"))
                elif value < old[metric] and f"{value:{SHOWN}}" != f"{old[metric]:{SHOWN}}":
                    findings.append(Finding(kernel, key, metric, old[metric], value, "improved"))
        for key in sorted(set(now_groups) - set(old_groups)):
            findings.append(Finding(kernel, key, "records", None, now_groups[key]["records"], "new"))
    return findings


def vanished(baseline_kernels: dict, categories: dict) -> list[Finding]:
    """Kernels the baseline (or an older report) holds that this run does not."""
    return [Finding(kernel, "all categories", "records", sum(group["records"] for group in groups.values()), None,
                    "disappeared")
            for kernel, groups in sorted(baseline_kernels.items()) if kernel not in categories]


def compare_invariances(baseline_held: dict, held: dict) -> list[Finding]:
    """An invariance that held in the baseline and broke now is lost; one broken there that holds now, gained.
    Only what this run measured is judged."""
    findings = []
    for kernel, now in sorted(held.items()):
        for name, holds in sorted(now.items()):
            before = baseline_held.get(kernel, {}).get(name)
            if before is True and not holds:
                findings.append(Finding(kernel, f"invariance: {name}", "held", None, None, "lost"))
            elif before is False and holds:
                findings.append(Finding(kernel, f"invariance: {name}", "held", None, None, "gained"))
    return findings


def table(findings: list[Finding], *, only_failures: bool) -> list[str]:
    """Aligned text rows: kernel, category, metric, baseline, the most the gate allows, now, verdict."""
    rows = [("kernel", "category", "metric", "baseline", "allowed", "now", "verdict")]
    rows += [(f.kernel, f.category, f.metric, "-" if f.baseline is None else f"{f.baseline:{SHOWN}}",
              f"{allowed(f.metric, f.baseline):{SHOWN}}" if f.metric in SLACK and f.baseline is not None else "-",
              "-" if f.now is None else f"{f.now:{SHOWN}}", f.verdict)
             for f in findings if f.fails or not only_failures]
    return aligned(rows) if len(rows) > 1 else []


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as lines of left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
