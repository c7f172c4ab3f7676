"""Tests tc-run --export-onnx (docs/export.md) against onnx 1.23.2 and ONNX Runtime.

    python3 -m unittest discover -s test/scripts -v

For the gpt2 / llama fixtures (TorchScript and dynamo exports), trained 3 AdamW steps on the CPU
reference: each --export-precision's file passes onnx.checker.check_model(full_check=True); its
linear-layer weights (and no other) are quantised as docs/export.md says, the MXFP4 E8M0 block scales
are OCP MX's of the trained weights (computed here with numpy); onnx.reference.ReferenceEvaluator
evaluates it to tc's own inference of the re-imported export (tc-compile reads the file back)
within 1e-5 relative, and ONNX Runtime too where it runs the types. Needs tc-compile and tc-run in
$TC_BUILD_DIR (default build/) /bin and onnx; skipped, saying so, without them.
"""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

try:
    import onnx
    import onnx.reference
except ImportError:  # pragma: no cover
    onnx = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("TC_BUILD_DIR", os.path.join(ROOT, "build")), "bin")
FIX = os.path.join(ROOT, "test", "fixtures")
SHAPES = ["--input", "input_ids=2x16", "--input", "labels=2x16"]
# ONNX TensorProto data types.
FLOAT, BF16, E4M3, E2M1, E8M0 = 1, 16, 17, 23, 24


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def rel_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))


@unittest.skipUnless(onnx is not None and os.path.exists(os.path.join(BIN, "tc-run")),
                     "needs onnx and tc-compile / tc-run in $TC_BUILD_DIR/bin")
class ExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tc-export-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def trained(self, fixture):
        """The fixture compiled for training and trained 3 steps: (artifact, checkpoint)."""
        tca = os.path.join(self.dir, fixture + ".tca")
        ckpt = os.path.join(self.dir, fixture + ".ckpt")
        if not os.path.exists(ckpt):
            model = fixture.split(".")[0]
            rc, out = run(os.path.join(BIN, "tc-compile"), os.path.join(FIX, fixture + ".onnx"),
                          *SHAPES, "--train", "--optimizer", "adamw", "--lr", "1e-2", "--quiet",
                          "-o", tca)
            self.assertEqual(rc, 0, out)
            rc, out = run(os.path.join(BIN, "tc-run"), tca, "--steps", 3, "--feed",
                          "input_ids=" + os.path.join(FIX, model + ".input_ids.npy"), "--feed",
                          "labels=" + os.path.join(FIX, model + ".labels.npy"), "--save", ckpt)
            self.assertEqual(rc, 0, out)
        return tca, ckpt

    def export(self, fixture, precision):
        tca, ckpt = self.trained(fixture)
        out = os.path.join(self.dir, "%s.%s.onnx" % (fixture, precision))
        rc, msg = run(os.path.join(BIN, "tc-run"), tca, "--init", ckpt, "--export-onnx", out,
                      "--export-precision", precision)
        self.assertEqual(rc, 0, msg)
        return out, ckpt

    def check(self, fixture, precision, linear):
        path, ckpt = self.export(fixture, precision)
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        opset = {o.domain: o.version for o in model.opset_import}[""]  # mxfp4: E8M0 scales
        self.assertEqual(opset, 24 if precision == "mxfp4" else 23)
        inits = {t.name: t for t in model.graph.initializer}
        quantized = sorted(n[: -len("_quantized")] for n in inits if n.endswith("_quantized"))
        self.assertEqual(len(quantized), linear, quantized)
        for name in quantized:
            self.assertNotIn(name, inits)  # the DequantizeLinear / Cast defines it
            self.assertEqual(inits[name + "_quantized"].data_type,
                             {"bf16": BF16, "fp8": E4M3, "mxfp4": E2M1, "nvfp4": E2M1}[precision])
            self.assertFalse(any(k in name for k in ("ln", "norm", "wte", "embed", "lm_head")),
                             name)
        if precision == "mxfp4":
            self.check_mx_scales(model, ckpt, quantized)
        if precision == "nvfp4":
            self.check_nv_scales(model, quantized)
        self.check_values(fixture, model, path)

    def check_mx_scales(self, model, ckpt, quantized):
        """E8M0 scale of each 1x32 block = 2^(floor(log2 amax) - 2) (E2M1's emax is 2)."""
        from safetensors.numpy import load_file
        weights = load_file(os.path.join(ckpt, "model.safetensors"))
        inits = {t.name: t for t in model.graph.initializer}
        axes = {n.output[0]: [a.i for a in n.attribute if a.name == "axis"][0]
                for n in model.graph.node if n.op_type == "DequantizeLinear"}
        for name in quantized:
            if name not in weights:
                continue  # a transposed copy (dynamo's folded W^T)
            w = weights[name].astype(np.float32)
            axis = axes[name]
            blocks = np.moveaxis(w, axis, -1)
            blocks = blocks.reshape(blocks.shape[:-1] + (-1, 32))
            amax = np.abs(blocks).max(axis=-1)
            want = np.clip(np.floor(np.log2(np.where(amax > 0, amax, 2.0 ** -127))) - 2, -127, 127)
            raw = np.frombuffer(inits[name + "_scale"].raw_data, dtype=np.uint8)
            got = raw.astype(np.int32).reshape(np.moveaxis(np.zeros(
                inits[name + "_scale"].dims), axis, -1).shape) - 127
            np.testing.assert_array_equal(got, want.astype(np.int32), err_msg=name)

    def check_nv_scales(self, model, quantized):
        """E4M3 1x16 block scales, repeated over the 16 rows of each 16x16 weight block, under
        an f32 per-tensor scale."""
        inits = {t.name: t for t in model.graph.initializer}
        axes = {n.output[0]: [a.i for a in n.attribute if a.name == "axis"] for n in model.graph.node}
        for name in quantized:
            s, s2 = inits[name + "_scale"], inits[name + "_scale_2"]
            self.assertEqual((s.data_type, s2.data_type, list(s2.dims)), (E4M3, FLOAT, []))
            self.assertEqual(axes[name], [axes[name][0]])
            axis = axes[name][0]
            grid = np.frombuffer(s.raw_data, dtype=np.uint8).reshape(tuple(s.dims))
            rows = np.moveaxis(grid, 1 - axis, 0)  # the non-block axis first
            for r in range(0, rows.shape[0], 16):
                self.assertTrue((rows[r:r + 16] == rows[r]).all(), name)

    def check_values(self, fixture, model, path):
        model_name = fixture.split(".")[0]
        feeds = {"input_ids": np.load(os.path.join(FIX, model_name + ".input_ids.npy")),
                 "labels": np.load(os.path.join(FIX, model_name + ".labels.npy"))}
        feeds = {i.name: feeds[i.name] for i in model.graph.input}
        names = [o.name for o in model.graph.output]
        ref = dict(zip(names, onnx.reference.ReferenceEvaluator(model).run(None, feeds)))
        # tc's own inference of the quantised model: the export imported back.
        tca = path + ".tca"
        rc, out = run(os.path.join(BIN, "tc-compile"), path, *SHAPES, "--quiet", "-o", tca)
        self.assertEqual(rc, 0, out)
        outs = path + ".outputs"
        args = [os.path.join(BIN, "tc-run"), tca, "--eval", "--save-outputs", outs]
        for k in feeds:
            np.save(os.path.join(self.dir, k + ".npy"), feeds[k])
            args += ["--feed", "%s=%s" % (k, os.path.join(self.dir, k + ".npy"))]
        rc, out = run(*args)
        self.assertEqual(rc, 0, out)
        for name in names:
            tc = np.load(os.path.join(outs, name + ".npy"))
            self.assertLessEqual(rel_err(tc, ref[name]), 1e-5, name)
        try:
            import onnxruntime
            sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        except ImportError:
            return
        except Exception as e:  # ORT without a kernel for these types: say so, go on
            print("onnxruntime does not run %s: %s" % (os.path.basename(path), str(e)[:200]))
            return
        for name, v in zip(names, sess.run(None, feeds)):
            self.assertLessEqual(rel_err(v, ref[name]), 1e-5, name)

    def test_gpt2_torchscript(self):
        for p in ("bf16", "fp8", "mxfp4", "nvfp4"):
            with self.subTest(precision=p):
                self.check("gpt2.ts", p, linear=8)

    def test_gpt2_dynamo(self):
        for p in ("bf16", "fp8", "mxfp4", "nvfp4"):
            with self.subTest(precision=p):
                self.check("gpt2.dynamo", p, linear=8)

    def test_llama_dynamo(self):
        for p in ("mxfp4", "nvfp4"):
            with self.subTest(precision=p):
                self.check("llama.dynamo", p, linear=14)

    def test_kept_layers_stay_high_precision(self):
        """The export quantises the layers the compile's plan trained quantised: with
        --keep-high-precision and --high-precision-last, those weights stay float, the others
        are FP4; --fp8-lm-head quantises the (untied) lm_head of llama too."""
        cases = [("gpt2.ts", ["--fp4-qat", "nvfp4", "--keep-high-precision", "attn\\.c_proj"],
                  lambda n: "c_proj" in n and "attn" in n, 6),
                 ("gpt2.ts", ["--fp8", "--high-precision-last", "1"], lambda n: ".h.1." in n, 4),
                 ("llama.dynamo", ["--fp8", "--fp8-lm-head"], lambda n: False, 15)]
        for i, (fixture, flags, kept, linear) in enumerate(cases):
            with self.subTest(fixture=fixture, flags=flags):
                tca = os.path.join(self.dir, "kept%d.tca" % i)
                rc, out = run(os.path.join(BIN, "tc-compile"), os.path.join(FIX, fixture + ".onnx"),
                              *SHAPES, "--train", *flags, "--quiet", "-o", tca)
                self.assertEqual(rc, 0, out)
                path = os.path.join(self.dir, "kept%d.onnx" % i)
                rc, out = run(os.path.join(BIN, "tc-run"), tca, "--export-onnx", path,
                              "--export-precision", "nvfp4")
                self.assertEqual(rc, 0, out)
                model = onnx.load(path)
                onnx.checker.check_model(model, full_check=True)
                inits = {t.name: t for t in model.graph.initializer}
                quantized = [n[: -len("_quantized")] for n in inits if n.endswith("_quantized")]
                self.assertEqual(len(quantized), linear, sorted(quantized))
                self.assertFalse([n for n in quantized if kept(n)], sorted(quantized))
                for n in inits:
                    if kept(n) and n.endswith("weight"):
                        self.assertEqual(inits[n].data_type, onnx.TensorProto.FLOAT, n)

    def test_safetensors(self):
        """Each precision's safetensors, loaded by the safetensors package (torch: F4 as
        float4_e2m1fn_x2), against the ONNX export of the same weights."""
        try:
            import torch
            from safetensors.torch import load_file
        except ImportError:
            self.skipTest("needs torch and safetensors")
        tca, ckpt = self.trained("gpt2.ts")
        for p in ("bf16", "fp8", "mxfp4", "nvfp4"):
            with self.subTest(precision=p):
                st = os.path.join(self.dir, "gpt2.%s.safetensors" % p)
                rc, msg = run(os.path.join(BIN, "tc-run"), tca, "--init", ckpt,
                              "--export-safetensors", st, "--export-precision", p)
                self.assertEqual(rc, 0, msg)
                got = load_file(st)
                path, _ = self.export("gpt2.ts", p)
                inits = {t.name: t for t in onnx.load(path).graph.initializer}
                want = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn,
                        "mxfp4": torch.float4_e2m1fn_x2, "nvfp4": torch.float4_e2m1fn_x2}[p]
                names = [n[: -len("_quantized")] for n in inits if n.endswith("_quantized")]
                self.assertEqual(len(names), 8)
                for n in names:
                    self.assertEqual(got[n].dtype, want, n)
                    # The very bytes of the ONNX initializer (FLOAT4E2M1 packs the same way).
                    self.assertEqual(got[n].contiguous().view(torch.uint8).numpy().tobytes(),
                                     inits[n + "_quantized"].raw_data, n)
                    if p == "mxfp4":
                        self.assertEqual(got[n + ".scale"].dtype, torch.float8_e8m0fnu)
                        self.assertEqual(got[n + ".scale"].view(torch.uint8).numpy().tobytes(),
                                         inits[n + "_scale"].raw_data)
                    if p == "nvfp4":
                        self.assertEqual(got[n + ".scale"].dtype, torch.float8_e4m3fn)
                        self.assertEqual(got[n + ".scale"].view(torch.uint8).numpy().tobytes(),
                                         inits[n + "_scale"].raw_data)
                        self.assertEqual(got[n + ".scale_2"].numpy().tobytes(),
                                         inits[n + "_scale_2"].raw_data)
                    if p == "fp8":
                        self.assertEqual(got[n + ".scale"].dtype, torch.float32)
                        self.assertEqual(got[n + ".scale"].numpy().tobytes(),
                                         inits[n + "_scale"].raw_data)
                self.assertEqual(got["transformer.ln_f.weight"].dtype, torch.float32)

    def test_errors(self):
        tca, ckpt = self.trained("gpt2.ts")
        tcrun = os.path.join(BIN, "tc-run")
        out = os.path.join(self.dir, "x.onnx")
        rc, msg = run(tcrun, tca, "--export-onnx", out, "--export-precision", "int3")
        self.assertEqual(rc, 2)
        self.assertIn("'int3' is unknown (nvfp4, mxfp4, fp8 or bf16)", msg)
        rc, msg = run(tcrun, tca, "--export-precision", "fp8")
        self.assertEqual(rc, 2)
        self.assertIn("--export-precision needs --export-onnx", msg)
        rc, msg = run(tcrun, tca, "--export-onnx", out)
        self.assertEqual(rc, 2)
        self.assertIn("need --export-precision", msg)
        rc, msg = run(tcrun, tca, "--export-onnx", "/nonexistent/dir/x.onnx",
                      "--export-precision", "fp8")
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent/dir/x.onnx", msg)


if __name__ == "__main__":
    unittest.main()
