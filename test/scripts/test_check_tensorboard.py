"""Tests scripts/check_tensorboard.py.

    python3 -m unittest discover -s test/scripts -v

CheckerTest writes event files with tensorboard's own Python writer, so it needs no tc build.
RuntimeWriterTest reads event files that tc's C++ EventWriter (runtime/src/base/tensorboard.h)
wrote: it runs the GoogleTest TensorBoard.WritesRunForCheckScript of tc_runtime_tests with
TC_TB_OUT set, from $TC_RUNTIME_TESTS or else $TC_BUILD_DIR (default build/) /test/runtime/
tc_runtime_tests, and is skipped, saying so, when that binary does not exist.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check_tensorboard.py")


def run_check(events_dir, metrics):
    p = subprocess.run([sys.executable, SCRIPT, events_dir, metrics], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def train(step, **over):
    line = {"schema": "tc.metrics/1", "kind": "train", "step": step, "loss": 2.0 + 0.1 * step,
            "loss_smooth": 2.05 + 0.1 * step, "lr": 3e-4, "grad_norm": 0.5, "tokens": 256,
            "tokens_total": 256 * step, "tokens_per_s": 1000.5 * step, "step_time_s": 0.1,
            "elapsed_s": 0.1 * step, "mfu": None, "hfu": None}
    line.update(over)
    return line


TAGS = {"loss": "train/loss", "loss_smooth": "train/loss_smooth", "lr": "train/lr",
        "grad_norm": "train/grad_norm", "tokens_per_s": "train/tokens_per_s", "mfu": "train/mfu"}


def scalars_of(lines):
    """The (tag, step, value) that tc-run --tensorboard writes for these lines."""
    out = []
    for line in lines:
        if line["kind"] == "train":
            out += [(tag, line["step"], line[f]) for f, tag in TAGS.items() if line[f] is not None]
        elif line["kind"] == "val":
            out.append(("val/loss", line["step"], line["val_loss"]))
    return out


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.events = os.path.join(self.dir, "tb")
        self.metrics = os.path.join(self.dir, "metrics.jsonl")
        self.lines = [train(1), train(2, mfu=0.25, grad_norm=None),
                      {"schema": "tc.metrics/1", "kind": "val", "step": 2, "val_loss": 0.1, "val_tokens": 512},
                      train(3),
                      {"schema": "tc.metrics/1", "kind": "eval", "step": 3, "function": "eval", "loss": 2.5}]

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, lines=None, scalars=None):
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        lines = self.lines if lines is None else lines
        scalars = scalars_of(lines) if scalars is None else scalars
        with open(self.metrics, "w") as f:
            for line in lines:
                f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        shutil.rmtree(self.events, ignore_errors=True)
        w = EventFileWriter(self.events)
        for tag, step, value in scalars:
            v = summary_pb2.Summary.Value(tag=tag, simple_value=value)
            w.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=[v])))
        w.close()

    def test_equal_run_passes(self):
        self.write()
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok: 16 scalars", out)

    def test_values_compare_as_float32(self):
        # 0.1 is not a float32: the event file holds float32(0.1), which must count as equal,
        # and so must a double that rounds to the same float32.
        self.lines[2]["val_loss"] = 0.1 + 1e-12
        self.write()
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 0, out)

    def test_value_one_float32_ulp_off_fails(self):
        import numpy as np

        scalars = scalars_of(self.lines)
        i = scalars.index(("train/lr", 3, 3e-4))
        scalars[i] = ("train/lr", 3, float(np.nextafter(np.float32(3e-4), np.float32(1))))
        self.write(scalars=scalars)
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("metrics.jsonl:4: lr = 0.0003", out)
        self.assertIn("train/lr at step 3", out)

    def test_missing_scalar_fails(self):
        scalars = [s for s in scalars_of(self.lines) if s[0] != "train/mfu"]
        self.write(scalars=scalars)
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("metrics.jsonl:2: mfu = 0.25: no TensorBoard scalar train/mfu at step 2", out)

    def test_missing_val_scalar_fails(self):
        self.write(scalars=[s for s in scalars_of(self.lines) if s[0] != "val/loss"])
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("metrics.jsonl:3: val_loss", out)

    def test_scalar_at_wrong_step_fails(self):
        scalars = scalars_of(self.lines)
        i = scalars.index(("train/loss", 1, self.lines[0]["loss"]))
        scalars[i] = ("train/loss", 4, self.lines[0]["loss"])
        self.write(scalars=scalars)
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("metrics.jsonl:1: loss", out)

    def test_scalar_not_in_jsonl_fails(self):
        self.write(scalars=scalars_of(self.lines) + [("train/grad_norm", 2, 1.0)])
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("TensorBoard scalar train/grad_norm at step 2 = 1.0 is not in", out)

    def test_repeated_step_must_repeat_in_order(self):
        # A resumed run logs step 3 again: both files must have both values, in order.
        self.lines.append(train(3, loss=9.0))
        self.write()
        self.assertEqual(run_check(self.events, self.metrics)[0], 0)
        scalars = scalars_of(self.lines)
        self.write(scalars=[s for s in scalars if s != ("train/loss", 3, 9.0)])
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("metrics.jsonl:6: loss = 9.0: no TensorBoard scalar train/loss at step 3 "
                      "(only 1 at that step)", out)

    def test_long_run_is_read_whole(self):
        # EventAccumulator keeps a random 10,000 scalars a tag unless told to keep all.
        self.write(lines=[train(s) for s in range(1, 10101)])
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok: 50500 scalars", out)

    def test_unknown_schema_is_bad_input(self):
        self.write(lines=self.lines[:1] + [dict(self.lines[1], schema="tc.metrics/2")])
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 2, out)
        self.assertIn('metrics.jsonl:2: unknown schema "tc.metrics/2"', out)

    def test_no_event_file_is_bad_input(self):
        self.write()
        empty = os.path.join(self.dir, "empty")
        os.mkdir(empty)
        rc, out = run_check(empty, self.metrics)
        self.assertEqual(rc, 2, out)
        self.assertIn("no TensorBoard event file", out)
        rc, out = run_check(self.events, os.path.join(self.dir, "nope.jsonl"))
        self.assertEqual(rc, 2, out)
        self.assertIn("nope.jsonl: no such file", out)


def runtime_tests_binary():
    path = os.environ.get("TC_RUNTIME_TESTS")
    if not path:
        build = os.environ.get("TC_BUILD_DIR", os.path.join(ROOT, "build"))
        path = os.path.join(build, "test", "runtime", "tc_runtime_tests")
    return path


class RuntimeWriterTest(unittest.TestCase):
    """Event files of tc's C++ EventWriter, read by tensorboard's reader."""

    def setUp(self):
        binary = runtime_tests_binary()
        if not os.path.isfile(binary):
            self.skipTest(f"{binary} not built (set TC_RUNTIME_TESTS or TC_BUILD_DIR)")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        env = dict(os.environ, TC_TB_OUT=self.tmp.name)
        p = subprocess.run([binary, "--gtest_filter=TensorBoard.WritesRunForCheckScript"],
                           env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.events = os.path.join(self.tmp.name, "tb")
        self.metrics = os.path.join(self.tmp.name, "metrics.jsonl")
        (name,) = os.listdir(self.events)
        self.event_file = os.path.join(self.events, name)

    def test_every_scalar_equals_its_jsonl_value(self):
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok: 24 scalars", out)

    def test_changed_jsonl_value_is_found(self):
        with open(self.metrics) as f:
            lines = f.readlines()
        line = json.loads(lines[3])
        line["loss"] = float(line["loss"]) + 1e-6  # a different float32
        lines[3] = json.dumps(line) + "\n"
        with open(self.metrics, "w") as f:
            f.writelines(lines)
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("metrics.jsonl:4: loss", out)

    def test_corrupted_record_is_found(self):
        # Flip a byte inside the last record's data: tensorboard's reader rejects the record
        # (CRC-32C), so the last JSONL value has no scalar.
        with open(self.event_file, "r+b") as f:
            f.seek(-6, os.SEEK_END)
            b = f.read(1)
            f.seek(-6, os.SEEK_END)
            f.write(bytes([b[0] ^ 0x01]))
        rc, out = run_check(self.events, self.metrics)
        self.assertEqual(rc, 1, out)
        self.assertIn("no TensorBoard scalar", out)


if __name__ == "__main__":
    unittest.main()
