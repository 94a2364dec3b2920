#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Draws the batch-slot utilization of static and continuous batching per step, from the CSV
# that `batching_sim --plot FILE.png` writes (step,static_utilization,continuous_utilization).
#   python3 scripts/plot_batching.py FILE.csv FILE.png
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def column(rows, name):
    steps, values = [], []
    for row in rows:
        if row[name] != "":
            steps.append(int(row["step"]))
            values.append(100.0 * float(row[name]))
    return steps, values


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_batching.py FILE.csv FILE.png")
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for name, label in (("static_utilization", "static batching"),
                        ("continuous_utilization", "continuous batching")):
        steps, values = column(rows, name)
        mean = sum(values) / len(values) if values else 0.0
        ax.step(steps, values, where="post", label=f"{label} (mean {mean:.0f}%)")
    ax.axhline(80, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel("step (one token per running request)")
    ax.set_ylabel("batch slots filled (%)")
    ax.set_ylim(0, 105)
    ax.legend(loc="lower left")
    ax.set_title("Slot utilization: static vs continuous batching")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
