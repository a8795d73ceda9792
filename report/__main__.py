"""``python -m report compare OLD.json NEW.json``: what improved and what regressed between two runs.

Both files are ``accuracy.json`` reports (``--accuracy-report``); categories are
compared with the regression gate's rules and slack (:mod:`report.baseline`).
Bitwise invariances that held in OLD and broke in NEW count as regressions.
Exit status 1 when something regressed or disappeared, for nightly trend jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import baseline, invariances


def load_categories(path: Path) -> tuple[dict, dict, dict]:
    """A report's run, categories and invariances held (reports older than the invariances have none)."""
    try:
        document = json.loads(path.read_text())
        return document["run"], document["categories"], invariances.held(document.get("invariances", {}))
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise SystemExit(f"{path}: not an accuracy.json report ({error})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="compare two accuracy.json reports")
    compare.add_argument("old", type=Path)
    compare.add_argument("new", type=Path)
    args = parser.parse_args(argv)

    old_run, old, old_held = load_categories(args.old)
    new_run, new, new_held = load_categories(args.new)
    reference = baseline.build(old, backend=old_run.get("backend"), profile=old_run.get("profile"), run=old_run)
    findings = baseline.compare(reference["kernels"], new) + baseline.compare_invariances(old_held, new_held)
    print(f"old: {args.old} ({old_run.get('git_commit')}, {old_run.get('started')})")
    print(f"new: {args.new} ({new_run.get('git_commit')}, {new_run.get('started')})")
    for title, verdicts in (("regressed", ("regressed", "disappeared", "lost")), ("improved", ("improved", "gained")),
                            ("new categories", ("new",))):
        rows = [f for f in findings if f.verdict in verdicts]
        print(f"\n{title}: {len(rows)}")
        for line in baseline.table(rows, only_failures=False):
            print("  " + line)
    return 1 if any(f.fails for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
