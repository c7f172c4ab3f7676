#!/usr/bin/env python3
"""The precision benchmark's loss plot: the runs of bench/precision.sh accuracy beside each other.

    python3 bench/plot_precision.py OUT.png MODE=METRICS.jsonl [MODE=METRICS.jsonl ...]

Left: the training loss (smoothed, tc-run's loss_smooth) against the step; right: val_loss at its
steps, one line per mode. Reads schema "tc.metrics/1" through scripts/tc_metrics.py; a run that
stopped early is drawn as far as it got.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import tc_metrics  # noqa: E402


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for arg in sys.argv[2:]:
        mode, path = arg.split("=", 1)
        records = [o for _, o in tc_metrics.read_metrics(path)]
        train = [(o["step"], o["loss_smooth"]) for o in records
                 if o["kind"] == "train" and o.get("loss_smooth") is not None]
        val = [(o["step"], o["val_loss"]) for o in records if o["kind"] == "val"]
        if train:
            left.plot(*zip(*train), label=mode, linewidth=1)
        if val:
            right.plot(*zip(*val), marker="o", label=mode)
    left.set(xlabel="step", ylabel="train loss (smoothed, nats/byte)", title="training")
    right.set(xlabel="step", ylabel="val_loss (nats/byte)", title="held-out validation")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("byte-level GPT-2 124M architecture on the Linux kernel docs (bench/precision.sh)")
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=90)
    print(sys.argv[1])


if __name__ == "__main__":
    main()
