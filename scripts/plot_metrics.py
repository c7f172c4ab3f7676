#!/usr/bin/env python3
"""Draws the curves of a training run from its metrics JSONL (`tc-run --metrics FILE`).

    python3 scripts/plot_metrics.py METRICS.jsonl [--out DIR]

Writes into DIR (default: the folder of METRICS.jsonl), against the step:
  loss.png        loss, loss_smooth, and val_loss where the run has val lines
  lr.png          the learning rate
  throughput.png  tokens_per_s
and prints the path of each file it wrote. Reads schema "tc.metrics/1" (scripts/tc_metrics.py);
eval lines and fields it does not know are ignored. A missing or empty file, a line that is
not JSON, an unknown schema version or a run without train lines is an error naming the file
(and the line), exit 2.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tc_metrics  # noqa: E402


def series(records, kind, field):
    """(steps, values) of `field` over the lines of `kind`, leaving out null values (a loss is
    null only on a skipped --fp16 step whose loss was not finite)."""
    pts = [(o["step"], o[field]) for _, o in records if o["kind"] == kind and o[field] is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


# Per PNG: the y label, whether the axis starts at 0, and its curves (kind, field, label, style).
FIGURES = [
    ("loss.png", "loss", False, [("train", "loss", "loss", {"alpha": 0.4}),
                                 ("train", "loss_smooth", "loss (smoothed)", {}),
                                 ("val", "val_loss", "val loss", {"marker": "o"})]),
    ("lr.png", "learning rate", False, [("train", "lr", "lr", {})]),
    ("throughput.png", "tokens/s", True, [("train", "tokens_per_s", "tokens/s", {})]),
]


def curves(records):
    """{file name: [(label, steps, values, style)]}: what each PNG draws (curves without a point,
    such as val loss in a run without val lines, left out)."""
    out = {}
    for name, _, _, spec in FIGURES:
        out[name] = [(label, *series(records, kind, field), style) for kind, field, label, style in spec]
        out[name] = [c for c in out[name] if c[1]]
    return out


def plot(metrics_path, out_dir):
    """Writes the PNGs and returns their paths. Raises MetricsError for bad input."""
    records = tc_metrics.read_metrics(metrics_path)
    if not any(o["kind"] == "train" for _, o in records):
        raise tc_metrics.MetricsError(f"{metrics_path}: no train lines to plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    run = os.path.basename(metrics_path)
    drawn = curves(records)
    written = []
    for name, ylabel, from_zero, _ in FIGURES:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        for label, steps, values, style in drawn[name]:
            ax.plot(steps, values, label=label, **style)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{ylabel} — {run}")
        ax.grid(True, alpha=0.3)
        if from_zero:
            ax.set_ylim(bottom=0)
        if len(drawn[name]) > 1:
            ax.legend()
        path = os.path.join(out_dir, name)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", metavar="METRICS.jsonl")
    ap.add_argument("--out", metavar="DIR", help="where the PNGs go (default: the folder of METRICS.jsonl)")
    args = ap.parse_args(argv)
    out = args.out or os.path.dirname(os.path.abspath(args.metrics))
    try:
        for path in plot(args.metrics, out):
            print(path)
    except tc_metrics.MetricsError as e:
        print(f"plot_metrics: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
