"""Checks the loss-scaling records of a tc-run --metrics file of an --fp16 run.

usage: check_loss_scale.py RUN.jsonl INIT_SCALE GROWTH_INTERVAL [--same-batch]
       [--shifted-like CLEAN.jsonl]

Replays torch.amp.GradScaler's update (scale x0.5 and growth tracker 0 on a
skipped step; else tracker + 1, and at the growth interval scale x2 and tracker
0) over the run's "skipped" flags and requires every step's "loss_scale" to be
the replayed one. Requires at least one skipped step, one clean step and one
growth. With --same-batch (every step trains on one fixed batch), a skipped
step must leave the next step's loss exactly as it was (no parameter changed).
With --shifted-like, the clean steps of the run up to its second skipped run
must reproduce CLEAN.jsonl's first losses (AdamW's step count did not advance
on the skipped steps). Prints LOSS-SCALE-OK.
"""
import json
import sys


def train_lines(path):
    return [r for r in (json.loads(l) for l in open(path)) if r["kind"] == "train"]


def main(argv):
    run = train_lines(argv[1])
    scale, interval = float(argv[2]), int(argv[3])
    same_batch = "--same-batch" in argv
    clean = train_lines(argv[argv.index("--shifted-like") + 1]) if "--shifted-like" in argv else None
    tracker, grew = 0, False
    for r in run:
        assert r["loss_scale"] == scale, (r["step"], r["loss_scale"], scale)
        if r["skipped"]:
            scale, tracker = scale * 0.5, 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker, grew = scale * 2, 0, True
    skipped = [r["skipped"] for r in run]
    assert any(skipped) and not all(skipped) and grew, skipped
    if same_batch:
        for a, b in zip(run, run[1:]):
            if a["skipped"]:
                assert a["loss"] == b["loss"], (a["step"], a["loss"], b["loss"])
    if clean is not None:
        first = skipped.index(False)
        n = (skipped[first:] + [True]).index(True)
        for r, c in zip(run[first:first + n], clean):
            assert abs(r["loss"] - c["loss"]) <= 1e-5 * abs(c["loss"]), (r["step"], r["loss"], c["loss"])
    print("LOSS-SCALE-OK", "skipped", sum(skipped), "of", len(run))


if __name__ == "__main__":
    main(sys.argv)
