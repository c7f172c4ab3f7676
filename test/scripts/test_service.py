"""Tests tc-service (examples/service) for real: the tiny GPT of the main job
compiled for training on the CPU, the server started on a loopback port
(--port 0: it picks one and prints it), then

- every malformed request (bad JSON, wrong types, missing and unknown fields,
  token ids outside the vocabulary, a job already running, unknown routes and
  methods, a body over --max-body-bytes) gets its 4xx and a JSON message
  naming what is wrong;
- while a training job runs, 5 concurrent clients (status, eval, infer,
  malformed, oversized) each get every reply within 1 s;
- the job's losses with those clients are, to the bit, those of the same job
  run undisturbed, and inference after it sees the trained weights;
- SIGTERM stops the server cleanly (exit 0).

Needs build/bin/tc-compile and build/bin/tc-service (TC_BUILD_DIR); the
client is the standard library's urllib.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("TC_BUILD_DIR", os.path.join(ROOT, "build"))
TC_COMPILE = os.path.join(BUILD, "bin", "tc-compile")
TC_SERVICE = os.path.join(BUILD, "bin", "tc-service")
MAX_BODY = 65536
REPLY_LIMIT_S = 1.0


def request(base, method, path, body=None, raw=None, timeout=10):
    """(status, parsed JSON reply, seconds) of one request; `raw` is sent
    as the body's bytes as they are, `body` as JSON."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    return status, json.loads(text), time.monotonic() - t0


def start_server(artifact, *flags):
    """A tc-service on a free loopback port: (process, base URL). Its stderr
    goes to a file (a pipe nobody reads could fill and block it)."""
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([TC_SERVICE, artifact, "--port", "0", *flags],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    proc.log = log
    line = proc.stdout.readline()
    m = re.search(r"listening on http://(127\.0\.0\.1):(\d+)", line)
    if not m:
        proc.kill()
        stop_server(proc, want_rc=None)
        raise AssertionError(f"tc-service did not start: {line!r}")
    return proc, f"http://127.0.0.1:{m.group(2)}"


def stop_server(proc, want_rc=0):
    """SIGTERM, and the clean exit 0 it must give."""
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.log.seek(0)
        log = proc.log.read()
        proc.log.close()
    assert want_rc is None or rc == want_rc, f"tc-service exited {rc} on SIGTERM: {log}"


# (method, path, body or raw bytes, expected status, a word the message must contain)
MALFORMED = [
    ("POST", "/eval", b"{not json", 400, "not valid JSON"),
    ("POST", "/eval", b"", 400, "empty"),
    ("POST", "/eval", b"[1, 2, 3]", 400, "JSON object"),
    ("POST", "/eval", {}, 400, "missing field \"tokens\""),
    ("POST", "/eval", {"tokens": "abc"}, 400, "array of token ids"),
    ("POST", "/eval", {"tokens": [1, 2]}, 400, "takes 65 to"),
    ("POST", "/eval", {"tokens": [1] * 64 + [256]}, 400, "\"tokens\"[64] = 256 is outside"),
    ("POST", "/eval", {"tokens": [1] * 64 + [-1]}, 400, "vocabulary"),
    ("POST", "/eval", {"tokens": [1] * 64 + [1.5]}, 400, "must be an integer"),
    ("POST", "/eval", {"tokens": [1] * 65, "extra": 1}, 400, "unknown field \"extra\""),
    ("POST", "/infer", {"tokens": []}, 400, "has 0 token ids"),
    ("POST", "/infer", {"tokens": [1, 2], "generate": "3"}, 400, "\"generate\" must be an integer"),
    ("POST", "/infer", {"tokens": [1, 2], "generate": 100000}, 400, "outside"),
    ("POST", "/infer", {"tokens": [True]}, 400, "must be an integer, not a boolean"),
    ("POST", "/train/start", {}, 400, "missing field \"steps\""),
    ("POST", "/train/start", {"steps": 0}, 400, "\"steps\" = 0 is outside"),
    ("POST", "/train/start", {"steps": 5, "lr": "fast"}, 400, "\"lr\" must be a number"),
    ("POST", "/train/start", {"steps": 5, "schedule": "linear"}, 400, "is not one of"),
    ("POST", "/train/start", {"steps": 5, "step": 3}, 400, "unknown field \"step\""),
    ("POST", "/train/start", {"steps": 5, "data": "/nonexistent/tokens.bin"}, 400,
     "/nonexistent/tokens.bin"),
    ("GET", "/nope", None, 404, "no route GET /nope"),
    ("GET", "/%FF%FE", None, 404, "no route GET /"),  # not UTF-8: replaced in the message
    ("DELETE", "/health", None, 405, "use GET"),
    ("GET", "/eval", None, 405, "use POST"),
    ("POST", "/train/stop", b"{\"now\": true}", 400, "unknown field \"now\""),
]


class ServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in (TC_COMPILE, TC_SERVICE):
            if not os.path.exists(tool):
                raise AssertionError(
                    f"{tool} is missing: build it (scripts/build.sh; tc-service needs "
                    "libcpp-httplib-dev and nlohmann-json3-dev, which scripts/setup.sh installs)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="tc-service-test-")
        cls.artifact = os.path.join(cls.tmp.name, "tiny-gpt.tca")
        # The main job's model and training step (scripts/run.sh), at batch 2: steps
        # and forwards 4x faster than its 8, for replies within 1 s on a busy machine.
        subprocess.run(
            [TC_COMPILE, os.path.join(ROOT, "examples", "tiny-gpt", "tiny-gpt.onnx"),
             "--input", "input_ids=2x64", "--input", "labels=2x64", "--target", "cpu",
             "--train", "--optimizer", "adamw", "--lr", "3e-3", "--beta1", "0.9",
             "--beta2", "0.95", "--weight-decay", "0.1", "--no-decay", "bias$",
             "--no-decay", r"ln_[0-9f]*\.weight$", "--clip-grad-norm", "1.0",
             "-o", cls.artifact], check=True, capture_output=True)
        cls.tokens = os.path.join(cls.tmp.name, "tokens.bin")
        with open("/usr/share/common-licenses/GPL-3", "rb") as f:
            text = f.read()
        with open(cls.tokens, "wb") as f:  # byte tokens as uint16, as make_data.py writes them
            f.write(b"".join(bytes((c, 0)) for c in text))
        cls.proc, cls.base = start_server(cls.artifact, "--max-body-bytes", str(MAX_BODY))

    @classmethod
    def tearDownClass(cls):
        try:
            stop_server(cls.proc)
        finally:
            cls.tmp.cleanup()

    def call(self, method, path, body=None, raw=None):
        return request(self.base, method, path, body=body, raw=raw)

    def send_malformed(self, case):
        method, path, body, want, word = case
        raw = body if isinstance(body, bytes) else None
        status, reply, secs = self.call(method, path, body=None if raw is not None else body, raw=raw)
        self.assertEqual(status, want, f"{method} {path} {body!r}: {reply}")
        self.assertIn(word, reply.get("error", ""), f"{method} {path} {body!r}")
        return secs

    def run_job(self, steps, seed):
        status, reply, _ = self.call("POST", "/train/start", {"steps": steps, "seed": seed})
        self.assertEqual(status, 202, reply)
        return reply

    def wait_job(self, timeout=120):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            _, s, _ = self.call("GET", "/train/status")
            if s["state"] != "running":
                return s
            time.sleep(0.05)
        self.fail("the training job did not finish in time")

    def test_a_port_in_use_exits_2(self):
        port = self.base.rsplit(":", 1)[1]
        r = subprocess.run([TC_SERVICE, self.artifact, "--port", port], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"cannot bind 127.0.0.1:{port}", r.stderr)

    def test_health(self):
        status, reply, _ = self.call("GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(reply["status"], "ok")
        self.assertEqual((reply["batch"], reply["context"], reply["vocab"]), (2, 64, 256))

    def test_malformed_requests_get_4xx_with_a_message(self):
        for case in MALFORMED:
            self.send_malformed(case)

    def test_oversized_body_gets_413(self):
        status, reply, _ = self.call("POST", "/eval", raw=b" " * (MAX_BODY + 1))
        self.assertEqual(status, 413, reply)
        self.assertIn("--max-body-bytes", reply["error"])

    def test_bodies_the_limit_cannot_bound_are_refused(self):
        # cpp-httplib 0.11 bounds Content-Length bodies only: chunked,
        # length-less and compressed ones are refused before they are read.
        port = int(self.base.rsplit(":", 1)[1])
        cases = [("POST", "/eval", iter([b'{"tokens": [1]}']), {}, True, 411, "chunked"),
                 ("PUT", "/eval", None, {}, False, 411, "Content-Length"),
                 ("POST", "/eval", b"{}", {"Content-Encoding": "gzip"}, False, 415, "compressed"),
                 ("POST", "/eval", b"--x\r\n", {"Content-Type": "multipart/form-data; boundary=x"},
                  False, 415, "multipart")]
        for method, path, body, headers, chunked, want, word in cases:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            if body is None:  # no Content-Length at all
                conn.putrequest(method, path)
                conn.endheaders()
            else:
                conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
            r = conn.getresponse()
            reply = json.loads(r.read())
            conn.close()
            self.assertEqual(r.status, want, f"{method} {headers}: {reply}")
            self.assertIn(word, reply["error"])

    def test_eval_and_generation_are_tc_run_s(self):
        # A fresh server (the artifact's weights, whatever the other tests
        # trained): its /eval of 300 tokens is tc-run --eval of them, to the
        # bit, and its greedy generation tc-run --generate --temperature 0.
        tc_run = os.path.join(BUILD, "bin", "tc-run")
        prompt = [84, 104, 101]
        r = subprocess.run([tc_run, self.artifact, "--generate", "--prompt",
                            ",".join(map(str, prompt)), "--max-new-tokens", "8",
                            "--temperature", "0"], check=True, capture_output=True, text=True)
        generated = [int(t) for t in r.stdout.strip().split(",")][len(prompt):]
        with open("/usr/share/common-licenses/GPL-3", "rb") as f:
            ids = list(f.read(300))
        small = os.path.join(self.tmp.name, "small.bin")
        with open(small, "wb") as f:
            f.write(b"".join(bytes((c, 0)) for c in ids))
        metrics = os.path.join(self.tmp.name, "eval.jsonl")
        subprocess.run([tc_run, self.artifact, "--eval", "--data",
                        small, "--eval-iters", "1", "--metrics", metrics],
                       check=True, capture_output=True)
        with open(metrics) as f:
            want = json.loads(f.readline())
        proc, base = start_server(self.artifact)
        try:
            status, reply, _ = request(base, "POST", "/eval", {"tokens": ids})
            gstatus, greply, _ = request(base, "POST", "/infer", {"tokens": prompt, "generate": 8})
        finally:
            stop_server(proc)
        self.assertEqual(status, 200, reply)
        self.assertEqual((reply["loss"], reply["tokens"]), (want["val_loss"], want["val_tokens"]))
        self.assertEqual(gstatus, 200, greply)
        self.assertEqual(greply["generated"], generated)

    def test_eval_and_infer(self):
        text = b"This program is free software: you can redistribute it"
        ids = list(text) + [32] * 20
        status, reply, _ = self.call("POST", "/eval", {"tokens": ids})
        self.assertEqual(status, 200, reply)
        self.assertTrue(0 < reply["loss"] < 10, reply)
        status, reply, _ = self.call("POST", "/infer", {"tokens": ids[:10], "generate": 3})
        self.assertEqual(status, 200, reply)
        self.assertEqual(len(reply["logits"]), 256)
        self.assertEqual(len(reply["generated"]), 3)
        # Greedy: the first generated token is the argmax of the logits.
        self.assertEqual(reply["generated"][0], reply["next_token"])

    def test_job_conflicts_and_stop(self):
        self.run_job(1000, 7)
        status, reply, _ = self.call("POST", "/train/start", {"steps": 5})
        self.assertEqual(status, 409, reply)
        self.assertIn("is running", reply["error"])
        status, reply, _ = self.call("POST", "/train/stop")
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply["state"], "stopped")
        self.assertLess(reply["step"], 1000)
        status, reply, _ = self.call("POST", "/train/stop")
        self.assertEqual(status, 409, reply)
        self.assertIn("no training job is running", reply["error"])

    def test_job_on_a_token_file(self):
        status, reply, _ = self.call("POST", "/train/start",
                                     {"steps": 3, "data": self.tokens, "lr": 1e-3,
                                      "schedule": "cosine", "warmup": 1})
        self.assertEqual(status, 202, reply)
        s = self.wait_job()
        self.assertEqual((s["state"], s["step"], s["data"]), ("finished", 3, self.tokens), s)

    def test_concurrent_clients_during_a_job_and_bit_identical_losses(self):
        steps, seed = 30, 11
        _, before, _ = self.call("POST", "/infer", {"tokens": [10, 20, 30]})
        self.run_job(steps, seed)
        quiet = self.wait_job()
        self.assertEqual((quiet["state"], quiet["step"]), ("finished", steps), quiet)
        _, quiet_losses, _ = self.call("GET", "/train/losses")

        self.run_job(steps, seed)
        done = threading.Event()
        results = {}  # client -> [(status, seconds)]
        errors = []

        def client(name, fn):
            out = results.setdefault(name, [])
            try:
                while not done.is_set():
                    out.append(fn())
                    time.sleep(0.02)  # clients, not a load test: leave the CPU to the job
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(f"{name}: {e!r}")

        ids = list(range(32, 120))
        bad = [c for c in MALFORMED if c[1] != "/train/start"]
        counter = iter(range(10 ** 9))

        def status_client():
            s, r, t = self.call("GET", "/train/status")
            self.assertEqual(s, 200)
            self.assertIn(r["state"], ("running", "finished"))
            for k in ("step", "progress", "loss", "tokens_per_s", "elapsed_s"):
                self.assertIn(k, r)
            return s, t

        def eval_client():
            s, r, t = self.call("POST", "/eval", {"tokens": ids})
            self.assertEqual(s, 200, r)
            return s, t

        def infer_client():
            s, r, t = self.call("POST", "/infer", {"tokens": ids[:20], "generate": 2})
            self.assertEqual(s, 200, r)
            # One snapshot: the first greedy token is the logits' argmax,
            # whichever step the request lands after.
            logits = r["logits"]
            self.assertEqual(r["generated"][0], max(range(len(logits)), key=logits.__getitem__))
            return s, t

        def malformed_client():
            return 400, self.send_malformed(bad[next(counter) % len(bad)])

        def conflict_client():
            s, r, t = self.call("POST", "/train/start", {"steps": 3})
            self.assertEqual(s, 409, f"a second job while one ran: {r}")
            return s, t

        def oversized_client():
            s, r, t = self.call("POST", "/infer", raw=b"[" * (MAX_BODY + 100))
            self.assertEqual(s, 413, r)
            return s, t

        clients = {"status": status_client, "eval": eval_client, "infer": infer_client,
                   "malformed": malformed_client, "oversized": oversized_client}
        threads = [threading.Thread(target=client, args=kv) for kv in clients.items()]
        for t in threads:
            t.start()
        # The conflict client runs only while the job surely runs.
        conflict = [conflict_client() for _ in range(3)]
        while self.call("GET", "/train/status")[1]["state"] == "running":
            time.sleep(0.05)
        done.set()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        results["conflict"] = conflict
        for name, replies in results.items():
            self.assertGreater(len(replies), 0, name)
            slowest = max(t for _, t in replies)
            self.assertLess(slowest, REPLY_LIMIT_S, f"{name}: a reply took {slowest:.2f} s")
        _, busy, _ = self.call("GET", "/train/status")
        self.assertEqual((busy["state"], busy["step"]), ("finished", steps), busy)
        _, busy_losses, _ = self.call("GET", "/train/losses")
        self.assertEqual(len(busy_losses["losses"]), steps)
        self.assertEqual(busy_losses, quiet_losses)  # bit for bit: JSON keeps every digit
        self.assertLess(busy_losses["losses"][-1], busy_losses["losses"][0])
        # Inference now runs on the trained weights.
        _, after, _ = self.call("POST", "/infer", {"tokens": [10, 20, 30]})
        self.assertNotEqual(before["logits"], after["logits"])


class ServiceCliTest(unittest.TestCase):
    def test_bad_flags_and_artifacts_exit_2_with_a_message(self):
        if not os.path.exists(TC_SERVICE):
            self.fail(f"{TC_SERVICE} is missing")
        cases = [([], "no artifact given"),
                 (["/nonexistent/model.tca"], "/nonexistent/model.tca"),
                 (["m.tca", "--port", "99999"], "--port wants a whole number in [0, 65535]"),
                 (["m.tca", "--device", "tpu"], "--device wants cpu or cuda"),
                 (["m.tca", "--bogus", "1"], "unknown flag --bogus"),
                 (["m.tca", "--host"], "--host needs a value")]
        for args, word in cases:
            r = subprocess.run([TC_SERVICE] + args, capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(word, r.stderr, args)


class ServiceSourcesTest(unittest.TestCase):
    def test_includes_only_the_public_header_of_tc(self):
        folder = os.path.join(ROOT, "examples", "service")
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".cpp", ".h")):
                continue
            with open(os.path.join(folder, name)) as f:
                for line in f:
                    m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
                    if m:
                        self.assertTrue(m.group(1) == "tc/runtime.h" or
                                        m.group(1).startswith("examples/service/"),
                                        f"{name} includes {m.group(1)}")


if __name__ == "__main__":
    unittest.main()
