"""Checks the loss-scaling records of a tc-run --metrics file of an --fp16 run.

usage: check_loss_scale.py RUN.jsonl INIT_SCALE GROWTH_INTERVAL [--expect-skips] [--same-batch]
       [--shifted-like CLEAN.jsonl] [--torch REF.json NAME LOSS_RTOL NORM_RTOL]

Replays torch.amp.GradScaler's update (scale x0.5 and growth tracker 0 on a
skipped step; else tracker + 1, and at the growth interval scale x2 and tracker
0) over the run's "skipped" flags and requires every step's "loss_scale" to be
the replayed one. --expect-skips requires at least one skipped step, one clean
step and one growth. With --same-batch (every step trains on one fixed batch), a skipped
step must leave the next step's loss exactly as it was (no parameter changed).
With --shifted-like, the clean steps of the run up to its second skipped run
must reproduce CLEAN.jsonl's first losses (AdamW's step count did not advance
on the skipped steps). With --torch, the run must be PyTorch's run NAME of
REF.json (scripts/make_fp16_reference.py: autocast(float16) + GradScaler):
the same skipped steps and scales, losses within LOSS_RTOL and gradient norms
within NORM_RTOL relative. Prints LOSS-SCALE-OK.
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
    if "--expect-skips" in argv:
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
    if "--torch" in argv:
        i = argv.index("--torch")
        ref = json.load(open(argv[i + 1]))["runs"][argv[i + 2]]
        rtol = {"loss": float(argv[i + 3]), "grad_norm": float(argv[i + 4])}
        assert ref["init_scale"] == float(argv[2]) and ref["growth_interval"] == interval, ref
        assert len(ref["trajectory"]) == len(run), (len(ref["trajectory"]), len(run))
        worst = {"loss": 0.0, "grad_norm": 0.0}
        for r, t in zip(run, ref["trajectory"]):
            assert (r["skipped"], r["loss_scale"]) == (t["skipped"], t["loss_scale"]), (r["step"], r, t)
            assert (r["grad_norm"] is None) == (t["grad_norm"] is None), (r["step"], r, t)
            for k in ("loss", "grad_norm"):
                if t[k] is not None:
                    worst[k] = max(worst[k], abs(r[k] - t[k]) / abs(t[k]))
        for k in worst:
            assert worst[k] <= rtol[k], (k, "relative difference", worst[k], "over", rtol[k])
        print("torch: largest relative differences: loss %.1e, grad_norm %.1e"
              % (worst["loss"], worst["grad_norm"]))
    print("LOSS-SCALE-OK", "skipped", sum(skipped), "of", len(run))


if __name__ == "__main__":
    main(sys.argv)
