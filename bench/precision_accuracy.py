#!/usr/bin/env python3
"""The table of bench/precision.sh's accuracy phase.

    precision_accuracy.py DIR[,DIR...] MODES SEED [SEED...]

reads DIR/acc-MODE-sSEED.jsonl (tc-run's metrics of each run; several DIRs
when the seeds ran in separate device calls) and prints, per mode, the
validation loss at step 1000 of every seed, their mean and sample standard
deviation, and the mean's relative difference from bf16's mean, judged
against the issue's limits (FP8 and FP16 within 1%, FP4 QAT within 2%), then
the per-seed differences from bf16 of the same seed with their mean and its
standard error (the seeds' own spread cancels in those). With one seed there
is no spread: the verdict is then one draw, and says so.
Missing runs are listed, never counted.
"""
import json
import os
import statistics
import sys

LIMIT = {"fp8": 0.01, "fp16": 0.01, "nvfp4": 0.02, "mxfp4": 0.02}
FINAL = 1000


def load(dirs, mode, seed):
    for d in dirs:
        path = os.path.join(d, f"acc-{mode}-s{seed}.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                return [json.loads(line) for line in f if line.strip()]
    return None


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    dirs, modes, seeds = argv[1].split(","), argv[2].split(","), argv[3:]
    rows, missing = {}, []
    for m in modes:
        finals, tps, skipped, curves = {}, [], 0, {}
        for s in seeds:
            recs = load(dirs, m, s)
            if recs is None:
                missing.append(f"{m} seed {s}")
                continue
            val = {r["step"]: r["val_loss"] for r in recs if r.get("kind") == "val"}
            train = [r for r in recs if r.get("kind") == "train"]
            tps += [r["tokens_per_s"] for r in train[5:] if r.get("tokens_per_s")]
            skipped += sum(1 for r in train if r.get("skipped"))
            curves[s] = val
            if FINAL in val:
                finals[s] = val[FINAL]
            else:
                last = train[-1]["step"] if train else 0
                missing.append(f"{m} seed {s} (stopped at step {last})")
        rows[m] = (finals, statistics.median(tps) if tps else None, skipped, curves)

    print()
    print("== precision accuracy: byte-level GPT-2 124M architecture, Linux kernel docs, "
          f"{FINAL} steps of 16 x 1024, seeds {' '.join(seeds)}")
    base = rows.get("bf16", ({},))[0]
    base_mean = statistics.mean(base.values()) if base else None
    for m, (finals, tps, skipped, curves) in rows.items():
        if not finals:
            print(f"  {m:<6} no run reached step {FINAL}")
            continue
        mean = statistics.mean(finals.values())
        sd = statistics.stdev(finals.values()) if len(finals) > 1 else None
        per_seed = " ".join(f"s{s}:{v:.4f}" for s, v in finals.items())
        spread = f" sd {sd:.4f} ({sd / mean:.2%})" if sd is not None else ""
        verdict = ""
        if m != "bf16" and base_mean:
            rel = (mean - base_mean) / base_mean
            lim = LIMIT.get(m, 0)
            ok = "PASS" if abs(rel) <= lim else "FAIL"
            draws = f"means of {len(finals)} and {len(base)} seeds" if len(finals) > 1 else "one seed"
            verdict = f"  {rel:+.2%} vs bf16 (limit {lim:.0%}, {draws}: {ok})"
        # Paired by seed (same initialisation and data order): the spread
        # between seeds cancels, what is left is the mode's effect and the
        # GPU's run-to-run noise.
        pairs = [(v - base[s]) / base[s] for s, v in finals.items() if m != "bf16" and s in base]
        if len(pairs) > 1:
            pm, pse = statistics.mean(pairs), statistics.stdev(pairs) / len(pairs) ** 0.5
            verdict += (f"; paired by seed {' '.join(f'{d:+.2%}' for d in pairs)}: "
                        f"mean {pm:+.2%} +- {pse:.2%} (standard error)")
        extra = f", {skipped} skipped steps" if m == "fp16" else ""
        speed = f", {tps:,.0f} tok/s" if tps else ""
        print(f"  {m:<6} val_loss@{FINAL} mean {mean:.4f}{spread} [{per_seed}]{verdict}{speed}{extra}")
        for s, val in curves.items():
            print(f"         s{s}: " + " ".join(f"{k}:{val[k]:.4f}" for k in sorted(val)))
    for what in missing:
        print(f"  missing: {what}")
    return 0 if not missing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
