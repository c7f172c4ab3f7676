"""Tests scripts/plot_metrics.py (and the JSONL reader it shares, scripts/tc_metrics.py).

    python3 -m unittest discover -s test/scripts -v
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "plot_metrics.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import plot_metrics  # noqa: E402
import tc_metrics  # noqa: E402


def train(step, **over):
    line = {"schema": "tc.metrics/1", "kind": "train", "step": step, "loss": 3.0 / step,
            "loss_smooth": 3.1 / step, "lr": 1e-3 * step, "grad_norm": None, "tokens": 64,
            "tokens_total": 64 * step, "tokens_per_s": 500.0 + step, "step_time_s": 0.1,
            "elapsed_s": 0.1 * step, "mfu": None, "hfu": None}
    line.update(over)
    return line


def val(step, loss):
    return {"schema": "tc.metrics/1", "kind": "val", "step": step, "val_loss": loss, "val_tokens": 128}


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


class PlotMetricsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.metrics = os.path.join(self.tmp.name, "metrics.jsonl")

    def write(self, lines):
        with open(self.metrics, "w") as f:
            for line in lines:
                f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")

    def run_script(self, *args):
        p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def test_writes_three_pngs_and_prints_them(self):
        self.write([train(1), train(2), val(2, 1.4), train(3)])
        out = os.path.join(self.tmp.name, "plots")
        rc, stdout, stderr = self.run_script(self.metrics, "--out", out)
        self.assertEqual(rc, 0, stderr)
        names = ["loss.png", "lr.png", "throughput.png"]
        self.assertEqual(stdout.split(), [os.path.join(out, n) for n in names])
        for n in names:
            self.assertEqual(png_size(os.path.join(out, n)), (800, 450))

    def test_default_out_is_the_metrics_folder(self):
        self.write([train(1), train(2)])
        rc, stdout, stderr = self.run_script(self.metrics)
        self.assertEqual(rc, 0, stderr)
        self.assertEqual(stdout.split()[0], os.path.join(self.tmp.name, "loss.png"))
        self.assertTrue(os.path.isfile(os.path.join(self.tmp.name, "throughput.png")))

    def test_curves_hold_the_jsonl_values(self):
        self.write([train(1), train(2), val(2, 1.4), train(3),
                    {"schema": "tc.metrics/1", "kind": "eval", "step": 3, "function": "eval", "loss": 9.0}])
        c = plot_metrics.curves(tc_metrics.read_metrics(self.metrics))
        loss = {label: (steps, values) for label, steps, values, _ in c["loss.png"]}
        self.assertEqual(sorted(loss), ["loss", "loss (smoothed)", "val loss"])
        self.assertEqual(loss["loss"], ([1, 2, 3], [3.0, 1.5, 1.0]))  # not the eval line's 9.0
        self.assertEqual(loss["val loss"], ([2], [1.4]))
        self.assertEqual(c["lr.png"][0][1:3], ([1, 2, 3], [1e-3, 2e-3, 3e-3]))
        self.assertEqual(c["throughput.png"][0][1:3], ([1, 2, 3], [501.0, 502.0, 503.0]))

    def test_a_skipped_steps_null_loss_has_no_point(self):
        # --fp16: a skipped step whose loss was inf has loss null (and loss_scale, skipped).
        self.write([train(1, loss=None, loss_scale=65536.0, skipped=True),
                    train(2, loss_scale=32768.0, skipped=False)])
        c = plot_metrics.curves(tc_metrics.read_metrics(self.metrics))
        loss = {label: (steps, values) for label, steps, values, _ in c["loss.png"]}
        self.assertEqual(loss["loss"], ([2], [1.5]))
        rc, _, stderr = self.run_script(self.metrics, "--out", self.tmp.name)
        self.assertEqual(rc, 0, stderr)

    def test_no_val_lines_no_val_curve(self):
        self.write([train(1), train(2)])
        c = plot_metrics.curves(tc_metrics.read_metrics(self.metrics))
        self.assertEqual([label for label, *_ in c["loss.png"]], ["loss", "loss (smoothed)"])

    def test_unknown_fields_and_kinds_of_1x_are_ignored(self):
        self.write([train(1, new_field=[1, 2]), {"schema": "tc.metrics/1.3", "kind": "report", "x": 1},
                    dict(train(2), schema="tc.metrics/1.3")])
        rc, _, stderr = self.run_script(self.metrics, "--out", self.tmp.name)
        self.assertEqual(rc, 0, stderr)

    def check_error(self, expected):
        rc, stdout, stderr = self.run_script(self.metrics, "--out", self.tmp.name)
        self.assertEqual(rc, 2, stdout + stderr)
        self.assertIn(expected, stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "loss.png")))

    def test_missing_file(self):
        self.check_error("metrics.jsonl: no such file")

    def test_empty_file(self):
        self.write([])
        self.check_error("metrics.jsonl: empty")
        self.write(["", "  "])
        self.check_error("metrics.jsonl: empty")

    def test_line_that_is_not_json(self):
        self.write([train(1), train(2), '{"schema": "tc.metrics/1", "kind": "tr'])
        self.check_error("metrics.jsonl:3: not JSON")
        self.write([train(1), "[1, 2]"])
        self.check_error("metrics.jsonl:2: not a JSON object")

    def test_unknown_schema(self):
        self.write([train(1), dict(train(2), schema="tc.metrics/2")])
        self.check_error('metrics.jsonl:2: unknown schema "tc.metrics/2"')
        self.write([dict(train(1), schema="other/1")])
        self.check_error('metrics.jsonl:1: unknown schema "other/1"')
        line = train(1)
        del line["schema"]
        self.write([line])
        self.check_error('metrics.jsonl:1: no "schema" field')

    def test_line_not_of_the_schema(self):
        line = train(2)
        del line["loss"]
        self.write([train(1), line])
        self.check_error('metrics.jsonl:2: train line without "loss"')
        self.write([train(1, lr="high")])
        self.check_error('metrics.jsonl:1: "lr" is "high", expected float')
        self.write([dict(train(1), step=1.5)])
        self.check_error('metrics.jsonl:1: "step" is 1.5, expected int')
        self.write([train(1, loss=True)])
        self.check_error('metrics.jsonl:1: "loss" is true, expected float')

    def test_no_train_lines(self):
        self.write([val(1, 2.0)])
        self.check_error("metrics.jsonl: no train lines to plot")


if __name__ == "__main__":
    unittest.main()
