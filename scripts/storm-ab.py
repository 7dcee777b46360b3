#!/usr/bin/env python3
"""The growth A/B side by side: issue 56's storm from two binaries (the
default storm and storm-atonce), each load's report (issue56.json, 3 s / 1 s,
and issue56-fast.json, 300 ms / 100 ms) read from two folders, and for each
steered layout the figures the A/B turns on, each against the same run's
splits, so that the two runs' clocks do not enter:

    scripts/storm-ab.py .bin/out-issue56 .bin/out-issue56-atonce

Prints a markdown table per load; a folder or layout missing is skipped with
a line saying so. Standard library only (the GPU machine has python3, not Go).
"""
import json
import os
import sys

LOADS = [("issue56.json", "3 s / 1 s"), ("issue56-fast.json", "300 ms / 100 ms")]
LAYOUTS = ["steer", "steer-r48"]


def report(folder, name):
    path = os.path.join(folder, name)
    try:
        with open(path) as f:
            return json.load(f).get("burst_report") or {}
    except (OSError, ValueError) as e:
        print(f"- {path}: {e}")
        return None


def layout(rep, name):
    for s in rep.get("layouts") or []:
        if s.get("layout") == name:
            return s
    return None


def x(v):
    return f"{v:.2f}x" if v else "-"


def pct(v):
    return f"{100 * v:.1f}%" if v else "-"


def ms(v):
    if v is None:
        return "-"
    return "never" if v < 0 else f"{v:.1f}"


def row(label, s):
    if s is None:
        return f"| {label} | - | - | - | - | - | - |"
    return "| {} | {} | {:.0f} ({}) | {} | {} | {} / {} | {} / {} |".format(
        label,
        x(s.get("burst_p99_to_split48")),
        s.get("burst_head_p99_us", 0),
        x(s.get("burst_head_p99_to_split48")),
        x(s.get("quiet_p99_to_split16")),
        pct(s.get("batch_to_split16")),
        ms(s.get("window_recovery_max_ms")),
        ms(s.get("window_recovery_median_ms")),
        f"{s.get('handoff_wait_p50_ms', 0):.2f}",
        f"{s.get('handoff_wait_p99_ms', 0):.2f}",
    )


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    base, variant = argv[1], argv[2]
    for name, load in LOADS:
        a, b = report(base, name), report(variant, name)
        if a is None or b is None:
            continue
        print(f"\n### The growth A/B, {load}: {base} (growth {a.get('growth') or 'drained'}) against {variant} (growth {b.get('growth') or 'drained'})\n")
        print("| layout, run | burst P99 / split48 | first 10 ms P99 us (/ split48's) | quiet P99 / split16 | batch / split16 | 10 ms windows back under target: worst / median ms | growth's wait P50 / P99 ms |")
        print("|---|---|---|---|---|---|---|")
        for l in LAYOUTS:
            sa, sb = layout(a, l), layout(b, l)
            if sa is None and sb is None:
                continue
            print(row(f"{l}, {a.get('growth') or 'drained'}", sa))
            print(row(f"{l}, {b.get('growth') or 'drained'}", sb))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
