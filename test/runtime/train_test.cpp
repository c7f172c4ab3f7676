//===- train_test.cpp - safetensors, artifact v2 entries, the Trainer -----===//
#include <cstdio>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/file_io.h"
#include "runtime/src/base/json.h"
#include "runtime/src/base/safetensors.h"
#include "runtime/src/schema/version.h"
#include "runtime/src/session/trainer.h"
#include "test_util.h"

using namespace tc::rt;
using namespace tc::rt::test;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/tc_train_test.XXXXXX";
  return ::mkdtemp(tmpl);
}

/// A model with one weight w (f32 [2]) and loss = sum(w * x), trained by plain
/// SGD: grad = x, update w - lr * g. Plus a fake optimizer-state entry that
/// counts steps (s + 1), to check that state is carried and checkpointed.
Artifact tinyTrainArtifact(int64_t gradAccum) {
  Artifact a;
  a.target = "cpu";
  a.producer = "test";
  appendParameter(&a, "w", tensor(f32({2}), {1, 2}), true);
  Parameter s;
  s.name = "count:w";
  s.type = f32({});
  s.kind = ParamKind::OptimizerState;
  s.init = ParamInit::Zeros;
  s.hasData = false;
  a.params.push_back(s);
  auto sumAll = [](FnBuilder &f, int32_t v) {
    return f.op("tc.reduce_sum", {v}, f32({}), {{"axes", aInts({0})}});
  };
  {
    FnBuilder f("grad_step");
    int32_t x = f.input("x", f32({2}));
    int32_t w = f.op("tc.parameter", {}, f32({2}), {{"name", aStr("w")}});
    f.output("loss", sumAll(f, f.op("tc.mul", {w, x}, f32({2}))));
    f.output("grad:w", x);
    a.functions.push_back(f.fn);
  }
  auto update = [&](FnBuilder &f, int32_t g, int32_t lr) {
    int32_t w = f.op("tc.parameter", {}, f32({2}), {{"name", aStr("w")}});
    int32_t c = f.op("tc.parameter", {}, f32({}), {{"name", aStr("count:w")}});
    int32_t one = f.op("tc.constant", {}, f32({}), {{"value", aTensor(tensor(f32({}), {1}))}});
    f.output("grad_norm", f.op("tc.sqrt", {sumAll(f, f.op("tc.mul", {g, g}, f32({2})))}, f32({})));
    f.output("update:w", f.op("tc.sub", {w, f.op("tc.mul", {lr, g}, f32({2}))}, f32({2})));
    f.output("update:count:w", f.op("tc.add", {c, one}, f32({})));
  };
  {
    FnBuilder f("apply_step");
    int32_t g = f.input("grad:w", f32({2}));
    int32_t lr = f.input("lr", f32({}));
    f.input("step", f32({}));
    update(f, g, lr);
    a.functions.push_back(f.fn);
  }
  {
    FnBuilder f("train_step");
    int32_t x = f.input("x", f32({2}));
    int32_t lr = f.input("lr", f32({}));
    f.input("step", f32({}));
    int32_t w = f.op("tc.parameter", {}, f32({2}), {{"name", aStr("w")}});
    f.output("loss", sumAll(f, f.op("tc.mul", {w, x}, f32({2}))));
    update(f, x, lr);
    a.functions.push_back(f.fn);
  }
  a.reports["training"] = "{\"loss\": \"loss\", \"optimizer\": \"sgd\", \"lr\": 0.5, "
                          "\"grad_accum\": " + std::to_string(gradAccum) + "}";
  return a;
}

double at(const HostTensor &t, size_t i) { return hostTensorToDoubles(t)[i]; }

} // namespace

TEST(Safetensors, RoundTripAndLayout) {
  SafetensorsFile f;
  f.metadata["format"] = "pt";
  f.tensors["b.bias"] = tensor(f32({3}), {1, 2, 3});
  f.tensors["a.weight"] = tensor(f64({2, 2}), {1, 2, 3, 4});
  f.tensors["mask"] = itensor(i1({2}), {1, 0});
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeSafetensors(f, &bytes).isOk());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(bytes[i]) << (8 * i);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + n);
  // Names sorted; metadata first; f64 data first (largest element size).
  EXPECT_LT(header.find("\"a.weight\""), header.find("\"b.bias\""));
  EXPECT_NE(header.find("\"__metadata__\":{\"format\":\"pt\"}"), std::string::npos);
  EXPECT_NE(header.find("\"a.weight\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[0,32]}"),
            std::string::npos);
  SafetensorsFile g;
  ASSERT_TRUE(parseSafetensors(bytes.data(), bytes.size(), &g, "t").isOk());
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), 3u);
  for (const auto &[k, v] : f.tensors) {
    EXPECT_EQ(g.tensors[k].type, v.type) << k;
    EXPECT_EQ(g.tensors[k].data, v.data) << k;
  }
}

TEST(Safetensors, BrokenFilesAreErrors) {
  SafetensorsFile f;
  f.tensors["w"] = tensor(f32({4}), {1, 2, 3, 4});
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeSafetensors(f, &bytes).isOk());
  SafetensorsFile g;
  for (size_t cut : {size_t(0), size_t(5), size_t(12), bytes.size() - 1}) {
    Status st = parseSafetensors(bytes.data(), cut, &g, "t");
    EXPECT_EQ(st.code(), StatusCode::DataLoss) << cut << ": " << st.message();
  }
  std::vector<uint8_t> extra = bytes;
  extra.push_back(0);
  EXPECT_NE(parseSafetensors(extra.data(), extra.size(), &g, "t").message().find("after the last"),
            std::string::npos);
  std::vector<uint8_t> garbage = bytes;
  garbage[9] = '!';
  EXPECT_EQ(parseSafetensors(garbage.data(), garbage.size(), &g, "t").code(), StatusCode::DataLoss);
}

TEST(Json, ParsesWhatTcWrites) {
  JsonValue v;
  ASSERT_TRUE(parseJson("{\"a\": [1, -2.5e3, true, null], \"s\": \"x\\\"\\u0041\"}", &v, "t").isOk());
  EXPECT_EQ(v.find("a")->array[1].num, -2500);
  EXPECT_EQ(v.find("s")->str, "x\"A");
  EXPECT_FALSE(parseJson("{\"a\": 1,}", &v, "t").isOk());
  EXPECT_FALSE(parseJson("[1", &v, "t").isOk());
}

TEST(ArtifactV2, KindsAndInitialisersRoundTrip) {
  Artifact a = tinyTrainArtifact(1);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(a, &bytes).isOk());
  Artifact b;
  ASSERT_TRUE(parseArtifact(bytes.data(), bytes.size(), &b).isOk());
  ASSERT_EQ(b.params.size(), 2u);
  EXPECT_EQ(b.params[0].kind, ParamKind::Parameter);
  EXPECT_EQ(b.params[1].kind, ParamKind::OptimizerState);
  EXPECT_EQ(b.params[1].init, ParamInit::Zeros);
  EXPECT_FALSE(b.params[1].hasData);
  // A version-1 file is refused with a message that says what to do.
  bytes[8] = 1;
  Status st = parseArtifact(bytes.data(), bytes.size(), &b);
  EXPECT_EQ(st.code(), StatusCode::Unimplemented);
  EXPECT_NE(st.message().find("version 1 is too old (written by a tc before 0.2.0)"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("recompile"), std::string::npos);
  EXPECT_NE(st.message().find(std::string("this tc (") + kTcVersion + ")"), std::string::npos);
}

TEST(Trainer, LearningRateSchedule) {
  EXPECT_DOUBLE_EQ(learningRate(5, 100, 1.0, 0, "constant"), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(1, 100, 1.0, 10, "cosine"), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(10, 100, 1.0, 10, "cosine"), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(11, 100, 1.0, 10, "cosine"), 1.0);
  EXPECT_NEAR(learningRate(100, 100, 1.0, 10, "cosine"), 0.1, 1e-12);
  EXPECT_NEAR(learningRate(50, 99, 1.0, 0, "cosine"), 0.55, 1e-12);
}

/// Entry `name` of a trainer's state table (empty when it has none).
HostTensor entry(const Trainer &t, const std::string &name) {
  HostTensor v;
  EXPECT_TRUE(t.getEntry(name, &v).isOk()) << name;
  return v;
}

TEST(Trainer, StepsUpdateStateAndAccumulate) {
  for (int64_t accum : {1, 2}) {
    Artifact a = tinyTrainArtifact(accum);
    Trainer t;
    ASSERT_TRUE(t.init(&a, {}).isOk());
    ASSERT_EQ(t.dataInputNames(), std::vector<std::string>{"x"});
    std::vector<std::vector<HostTensor>> micro;
    if (accum == 1)
      micro = {{tensor(f32({2}), {1, 1})}};
    else // mean gradient (1, 1), mean loss
      micro = {{tensor(f32({2}), {0, 2})}, {tensor(f32({2}), {2, 0})}};
    StepResult r;
    ASSERT_TRUE(t.step(1, 0.5, micro, &r).isOk());
    EXPECT_DOUBLE_EQ(r.loss, accum == 1 ? 3.0 : 3.0); // 1+2 ; (4 + 2) / 2
    EXPECT_NEAR(r.gradNorm, std::sqrt(2.0), 1e-6);
    EXPECT_DOUBLE_EQ(at(entry(t, "w"), 0), 0.5);
    EXPECT_DOUBLE_EQ(at(entry(t, "w"), 1), 1.5);
    EXPECT_DOUBLE_EQ(at(entry(t, "count:w"), 0), 1.0);
  }
}

// Steps submitted ahead (the run loop's pipelining): the same results and
// state as step() one at a time, collected in order; a read of the state
// sees every submitted step; more than Executor::kMaxSubmitted in flight, or
// a collect out of order, is refused.
TEST(Trainer, SubmittedStepsEqualStepsInOrder) {
  Artifact a = tinyTrainArtifact(1);
  Trainer serial, ahead;
  ASSERT_TRUE(serial.init(&a, {}).isOk());
  ASSERT_TRUE(ahead.init(&a, {}).isOk());
  EXPECT_TRUE(ahead.defersSteps());
  auto batch = [](double v) {
    return std::vector<std::vector<HostTensor>>{{tensor(f32({2}), {v, 2 * v})}};
  };
  std::vector<double> want;
  for (int s = 1; s <= 3; ++s) {
    StepResult r;
    ASSERT_TRUE(serial.step(s, 0.5, batch(s), &r).isOk());
    want.push_back(r.loss);
  }
  uint64_t t1 = 0, t2 = 0, t3 = 0;
  ASSERT_TRUE(ahead.submitStep(1, 0.5, batch(1), &t1).isOk());
  ASSERT_TRUE(ahead.submitStep(2, 0.5, batch(2), &t2).isOk());
  EXPECT_EQ(ahead.submitStep(3, 0.5, batch(3), &t3).code(), StatusCode::FailedPrecondition);
  StepResult r;
  EXPECT_EQ(ahead.collectStep(t2, &r).code(), StatusCode::FailedPrecondition);
  ASSERT_TRUE(ahead.collectStep(t1, &r).isOk());
  EXPECT_EQ(r.loss, want[0]);
  // Reading the state runs what is submitted: w after step 2.
  HostTensor w;
  ASSERT_TRUE(ahead.getEntry("count:w", &w).isOk());
  EXPECT_DOUBLE_EQ(at(w, 0), 2.0);
  ASSERT_TRUE(ahead.submitStep(3, 0.5, batch(3), &t3).isOk());
  ASSERT_TRUE(ahead.collectStep(t2, &r).isOk());
  EXPECT_EQ(r.loss, want[1]);
  ASSERT_TRUE(ahead.collectStep(t3, &r).isOk());
  EXPECT_EQ(r.loss, want[2]);
  EXPECT_EQ(hostTensorToDoubles(entry(ahead, "w")), hostTensorToDoubles(entry(serial, "w")));
  EXPECT_EQ(ahead.collectStep(t3, &r).code(), StatusCode::FailedPrecondition); // none left
}

TEST(Trainer, F64StateIsNotRounded) {
  Artifact a = tinyTrainArtifact(1);
  Trainer t;
  ExecOptions o;
  o.precision = RefPrecision::F64;
  ASSERT_TRUE(t.init(&a, o).isOk());
  EXPECT_EQ(entry(t, "w").type.dtype, DType::F64);
  StepResult r;
  ASSERT_TRUE(t.step(1, 0.1, {{tensor(f32({2}), {1, 1})}}, &r).isOk());
  EXPECT_EQ(at(entry(t, "w"), 0), 1.0 - 0.1); // f64 arithmetic, no f32 rounding
}

TEST(Trainer, CheckpointRoundTripAndCorruption) {
  Artifact a = tinyTrainArtifact(1);
  std::string dir = tempDir() + "/ckpt";
  Trainer t;
  ASSERT_TRUE(t.init(&a, {}).isOk());
  StepResult r;
  ASSERT_TRUE(t.step(1, 0.5, {{tensor(f32({2}), {1, 1})}}, &r).isOk());
  CheckpointMeta meta;
  meta.step = 1;
  meta.rngState = 0xfedcba9876543210ULL;
  meta.dataPosition = 7;
  meta.artifactHash = "abc";
  ASSERT_TRUE(t.saveCheckpoint(dir, meta).isOk());
  ASSERT_TRUE(t.saveCheckpoint(dir, meta).isOk()); // replacing works too

  Trainer u;
  ASSERT_TRUE(u.init(&a, {}).isOk());
  CheckpointMeta got;
  Status st = u.loadCheckpoint(dir, "abc", &got);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(got.step, 1);
  EXPECT_EQ(got.rngState, meta.rngState);
  EXPECT_EQ(got.dataPosition, 7u);
  EXPECT_EQ(entry(u, "w").data, entry(t, "w").data);
  EXPECT_EQ(entry(u, "count:w").data, entry(t, "count:w").data);

  st = u.loadCheckpoint(dir, "other", &got);
  EXPECT_NE(st.message().find("another artifact"), std::string::npos) << st.message();

  // Flip one byte of the weights: the CRC catches it.
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(readFileBytes(dir + "/model.safetensors", &bytes).isOk());
  bytes.back() ^= 1;
  ASSERT_TRUE(writeFileAtomic(dir + "/model.safetensors", bytes.data(), bytes.size()).isOk());
  st = u.loadCheckpoint(dir, "abc", &got);
  EXPECT_EQ(st.code(), StatusCode::DataLoss);
  EXPECT_NE(st.message().find("CRC-32"), std::string::npos) << st.message();
  // Truncate it.
  bytes.resize(bytes.size() / 2);
  ASSERT_TRUE(writeFileAtomic(dir + "/model.safetensors", bytes.data(), bytes.size()).isOk());
  st = u.loadCheckpoint(dir, "abc", &got);
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
}

TEST(Trainer, InitWeightsChecksNamesAndShapes) {
  Artifact a = tinyTrainArtifact(1);
  Trainer t;
  ASSERT_TRUE(t.init(&a, {}).isOk());
  std::string dir = tempDir();
  SafetensorsFile f;
  f.tensors["w"] = tensor(f32({3}), {1, 2, 3});
  f.tensors["extra"] = tensor(f32({1}), {0});
  ASSERT_TRUE(writeSafetensors(dir + "/bad.safetensors", f).isOk());
  Status st = t.loadWeights(dir + "/bad.safetensors");
  EXPECT_NE(st.message().find("unexpected: extra"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("mismatch: w (file f32 3, model f32 2)"), std::string::npos)
      << st.message();
  f.tensors.clear();
  f.tensors["w"] = tensor(f64({2}), {5, 6}); // f64 -> f32 is accepted
  ASSERT_TRUE(writeSafetensors(dir + "/ok.safetensors", f).isOk());
  ASSERT_TRUE(t.loadWeights(dir + "/ok.safetensors").isOk());
  EXPECT_EQ(at(entry(t, "w"), 1), 6.0);
}

TEST(Trainer, TokenDataWindows) {
  std::string path = tempDir() + "/t.bin";
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 100; ++i) {
    bytes.push_back(static_cast<uint8_t>(i));
    bytes.push_back(0);
  }
  ASSERT_TRUE(writeFileAtomic(path, bytes.data(), bytes.size()).isOk());
  TokenData d;
  ASSERT_TRUE(d.open(path, 2).isOk());
  EXPECT_EQ(d.numTokens(), 100);
  Rng rng;
  HostTensor ids, labels;
  ASSERT_TRUE(d.nextBatch(3, 8, DType::I64, &rng, &ids, &labels).isOk());
  std::vector<int64_t> x = hostTensorToInts(ids), y = hostTensorToInts(labels);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(y[i], x[i] + 1); // labels are the next tokens
  EXPECT_EQ(d.position, 3u);
  Rng again;
  TokenData d2;
  ASSERT_TRUE(d2.open(path, 2).isOk());
  HostTensor ids2, labels2;
  ASSERT_TRUE(d2.nextBatch(3, 8, DType::I64, &again, &ids2, &labels2).isOk());
  EXPECT_EQ(ids2.data, ids.data); // deterministic
  TokenData bad;
  EXPECT_EQ(bad.open(path, 4).code(), StatusCode::Ok); // 200 bytes is 50 uint32s
  // A model that shifts the labels itself (HF) gets the same tokens.
  Rng same;
  TokenData d3;
  ASSERT_TRUE(d3.open(path, 2).isOk());
  HostTensor ids3, labels3;
  ASSERT_TRUE(d3.nextBatch(3, 8, DType::I64, &same, &ids3, &labels3, LabelShift::Same).isOk());
  EXPECT_EQ(ids3.data, ids.data); // the same windows
  EXPECT_EQ(labels3.data, ids3.data);
}

TEST(Trainer, ChooseLabels) {
  Artifact none, hf, plain, bad;
  hf.reports["labels"] = R"({"convention": "same", "input": "labels", "ignore_index": -100,
                             "reason": "the model shifts 'labels' itself"})";
  plain.reports["labels"] = R"({"convention": "next", "input": "labels", "reason": "r"})";
  bad.reports["labels"] = R"({"convention": "sideways"})";
  LabelShift s;
  std::string msg, note;
  ASSERT_TRUE(chooseLabels(none, "", &s, &msg, &note).isOk());
  EXPECT_EQ(s, LabelShift::Next);
  EXPECT_NE(msg.find("the default"), std::string::npos) << msg;
  ASSERT_TRUE(chooseLabels(hf, "", &s, &msg, &note).isOk());
  EXPECT_EQ(s, LabelShift::Same);
  EXPECT_NE(msg.find("shifts 'labels' itself"), std::string::npos) << msg;
  EXPECT_TRUE(note.empty());
  ASSERT_TRUE(chooseLabels(hf, "next", &s, &msg, &note).isOk()); // the flag wins, with a note
  EXPECT_EQ(s, LabelShift::Next);
  EXPECT_NE(note.find("overrides the artifact's 'same'"), std::string::npos) << note;
  ASSERT_TRUE(chooseLabels(plain, "next", &s, &msg, &note).isOk());
  EXPECT_TRUE(note.empty());
  ASSERT_TRUE(chooseLabels(plain, "same", &s, &msg, &note).isOk());
  EXPECT_EQ(s, LabelShift::Same);
  EXPECT_FALSE(note.empty());
  EXPECT_EQ(chooseLabels(none, "shifted", &s, &msg, &note).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(chooseLabels(bad, "", &s, &msg, &note).code(), StatusCode::DataLoss);
}
