#!/usr/bin/env python3
"""Checks TensorBoard event files against the metrics JSONL of the same run.

    python3 scripts/check_tensorboard.py EVENTS_DIR METRICS.jsonl

Reads EVENTS_DIR with tensorboard's own reader (EventAccumulator, every scalar kept) and checks
both ways, for the tags of scripts/tc_metrics.py's TENSORBOARD_TAGS (train/loss, train/lr,
val/loss, ...):
  - every non-null JSONL field that has a tag has a scalar at its step, equal to the JSONL value
    rounded to float32 (TensorBoard's simple_value is a float);
  - every scalar in the event files comes from such a JSONL field (no tag, step or value that
    the JSONL does not have).
A step logged more than once (a resumed run) must carry the same values in the same order in
both. Prints "ok: ..." and exits 0, or names the first mismatch and exits 1; bad input (no
event files, an unreadable or malformed JSONL) exits 2.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tc_metrics  # noqa: E402


def read_scalars(events_dir):
    """{(tag, step): [value, ...]} of the event files in events_dir, in file and record order."""
    import logging

    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(events_dir, size_guidance={ea.SCALARS: 0}, purge_orphaned_data=False)
    acc.Reload()
    got = collections.defaultdict(list)
    for tag in acc.Tags()[ea.SCALARS]:
        for ev in acc.Scalars(tag):
            got[(tag, ev.step)].append(ev.value)
    return got


def check(events_dir, metrics_path):
    """(the first mismatch as a message or None, the number of scalars read).

    Raises MetricsError for bad input."""
    import numpy as np

    if not os.path.isdir(events_dir):
        raise tc_metrics.MetricsError(f"{events_dir}: not a directory")
    if not any("tfevents" in name for name in os.listdir(events_dir)):
        raise tc_metrics.MetricsError(f"{events_dir}: no TensorBoard event file (events.out.tfevents.*)")
    records = tc_metrics.read_metrics(metrics_path)
    got = read_scalars(events_dir)
    count = sum(len(v) for v in got.values())
    # JSONL -> TensorBoard, in file order: the i-th value of a (tag, step) in the JSONL is
    # the i-th scalar of that tag and step in the event files.
    seen = collections.Counter()
    for n, obj in records:
        for (kind, field), tag in tc_metrics.TENSORBOARD_TAGS.items():
            if obj["kind"] != kind or obj[field] is None:
                continue
            key = (tag, obj["step"])
            i = seen[key]
            seen[key] += 1
            have = got.get(key, [])
            where, value = f"{metrics_path}:{n}", obj[field]
            if i >= len(have):
                more = f" (only {len(have)} at that step)" if have else ""
                return f"{where}: {field} = {value!r}: no TensorBoard scalar {tag} at step {key[1]}{more}", count
            if not tc_metrics.same_float32(value, have[i]):
                with np.errstate(over="ignore"):
                    f32 = float(np.float32(value))
                return (f"{where}: {field} = {value!r} (float32 {f32!r}) but TensorBoard's "
                        f"{tag} at step {key[1]} is {have[i]!r}"), count
    # TensorBoard -> JSONL: scalars that no JSONL field accounts for.
    for (tag, step), have in sorted(got.items()):
        if len(have) > seen[(tag, step)]:
            return (f"{events_dir}: TensorBoard scalar {tag} at step {step} = "
                    f"{have[seen[(tag, step)]]!r} is not in {metrics_path}"), count
    return None, count


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("events_dir", metavar="EVENTS_DIR")
    ap.add_argument("metrics", metavar="METRICS.jsonl")
    args = ap.parse_args(argv)
    try:
        mismatch, count = check(args.events_dir, args.metrics)
    except tc_metrics.MetricsError as e:
        print(f"check_tensorboard: error: {e}", file=sys.stderr)
        return 2
    if mismatch:
        print(f"check_tensorboard: mismatch: {mismatch}", file=sys.stderr)
        return 1
    print(f"check_tensorboard: ok: {count} scalars in {args.events_dir} equal {args.metrics}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
