//===- artifact_test.cpp - the artifact file format -----------------------===//
#include <cstdio>
#include <dirent.h>
#include <string>

#include <gtest/gtest.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/file_io.h"
#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

/// A small artifact using every attribute kind, two functions, parameters
/// with and without data, and reports.
Artifact sampleArtifact() {
  Artifact a;
  a.target = "cpu";
  a.producer = "tc-compile test";
  appendParameter(&a, "w", tensor(f32({2, 2}), {1, 2, 3, 4}), true);
  appendParameter(&a, "b", tensor(f32({2}), {0.5, -0.5}));
  Parameter nodata;
  nodata.name = "frozen";
  nodata.type = f32({3});
  nodata.hasData = false;
  a.params.push_back(nodata);
  // Version 3: initialisers with arguments.
  Parameter normal;
  normal.name = "h.0.attn.weight";
  normal.type = ty(DType::BF16, {4, 2});
  normal.hasData = false;
  normal.trainable = true;
  normal.init = ParamInit::Normal;
  normal.initArgs[0] = 0.0;
  normal.initArgs[1] = 0.02;
  a.params.push_back(normal);
  Parameter uniform = normal;
  uniform.name = "wte";
  uniform.type = f32({3, 2});
  uniform.init = ParamInit::Uniform;
  uniform.initArgs[0] = -0.125;
  uniform.initArgs[1] = 0.25;
  a.params.push_back(uniform);
  Parameter ones = normal;
  ones.name = "ln_f.weight";
  ones.type = ty(DType::F16, {2});
  ones.init = ParamInit::Ones;
  ones.initArgs[0] = ones.initArgs[1] = 0;
  a.params.push_back(ones);

  FnBuilder f("infer");
  int32_t x = f.input("x", f32({1, 2}));
  int32_t w = f.op("tc.parameter", {}, f32({2, 2}), {{"name", aStr("w")}, {"trainable", aInt(1)}});
  int32_t b = f.op("tc.parameter", {}, f32({2}), {{"name", aStr("b")}});
  int32_t y = f.op("tc.matmul", {x, w}, f32({1, 2}), {{"transpose_rhs", aInt(0)}});
  int32_t z = f.op("tc.add", {y, b}, f32({1, 2}));
  Attr floats;
  floats.kind = Attr::Kind::Floats;
  floats.floats = {1.5, -2};
  int32_t c = f.op("tc.constant", {}, f32({2}),
                   {{"value", aTensor(tensor(f32({2}), {10, 20}))}, {"note", floats},
                    {"eps", aFloat(1e-5)}, {"perm", aInts({0, -1})}});
  int32_t out = f.op("tc.add", {z, c}, f32({1, 2}));
  f.output("out", out);
  a.functions.push_back(f.fn);

  FnBuilder g("eval_step");
  int32_t i = g.input("ids", i64({4}));
  g.output("ids_out", i);
  a.functions.push_back(g.fn);

  a.reports["memory"] = "peak 1 KiB";
  a.reports["precision"] = "all f32";
  return a;
}

void expectSameArtifact(const Artifact &a, const Artifact &b) {
  EXPECT_EQ(a.formatVersion, b.formatVersion);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.producer, b.producer);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.reports, b.reports);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(a.params[i].name, b.params[i].name);
    EXPECT_EQ(a.params[i].type, b.params[i].type);
    EXPECT_EQ(a.params[i].trainable, b.params[i].trainable);
    EXPECT_EQ(a.params[i].hasData, b.params[i].hasData);
    EXPECT_EQ(a.params[i].kind, b.params[i].kind);
    EXPECT_EQ(a.params[i].init, b.params[i].init);
    EXPECT_EQ(a.params[i].initArgs[0], b.params[i].initArgs[0]);
    EXPECT_EQ(a.params[i].initArgs[1], b.params[i].initArgs[1]);
    EXPECT_EQ(a.params[i].offset, b.params[i].offset);
    EXPECT_EQ(a.params[i].bytes, b.params[i].bytes);
  }
  ASSERT_EQ(a.functions.size(), b.functions.size());
  for (size_t i = 0; i < a.functions.size(); ++i) {
    const Function &f = a.functions[i], &g = b.functions[i];
    EXPECT_EQ(f.name, g.name);
    EXPECT_EQ(f.values, g.values);
    EXPECT_EQ(f.inputs, g.inputs);
    EXPECT_EQ(f.inputNames, g.inputNames);
    EXPECT_EQ(f.outputs, g.outputs);
    EXPECT_EQ(f.outputNames, g.outputNames);
    ASSERT_EQ(f.ops.size(), g.ops.size());
    for (size_t k = 0; k < f.ops.size(); ++k) {
      EXPECT_EQ(f.ops[k].name, g.ops[k].name);
      EXPECT_EQ(f.ops[k].operands, g.ops[k].operands);
      EXPECT_EQ(f.ops[k].results, g.ops[k].results);
      ASSERT_EQ(f.ops[k].attrs.size(), g.ops[k].attrs.size());
      for (const auto &[key, x] : f.ops[k].attrs) {
        const Attr &y = g.ops[k].attrs.at(key);
        EXPECT_EQ(x.kind, y.kind) << key;
        EXPECT_EQ(x.i, y.i) << key;
        EXPECT_EQ(x.f, y.f) << key;
        EXPECT_EQ(x.s, y.s) << key;
        EXPECT_EQ(x.ints, y.ints) << key;
        EXPECT_EQ(x.floats, y.floats) << key;
        EXPECT_EQ(x.tensor.type, y.tensor.type) << key;
        EXPECT_EQ(x.tensor.data, y.tensor.data) << key;
      }
    }
  }
}

/// Recomputes the header's CRC-32 (bytes 24..27: over the 32-byte header and
/// the section table, the field itself read as 0) after a test edited them.
void fixHeaderCrc(std::vector<uint8_t> &bytes) {
  uint32_t count = bytes[12] | bytes[13] << 8 | bytes[14] << 16 | (uint32_t)bytes[15] << 24;
  std::vector<uint8_t> head(bytes.begin(), bytes.begin() + 32 + 24 * count);
  for (int k = 0; k < 4; ++k)
    head[24 + k] = 0;
  uint32_t crc = crc32(head.data(), head.size());
  for (int k = 0; k < 4; ++k)
    bytes[24 + k] = (crc >> (8 * k)) & 0xFF;
}

TEST(Artifact, MemoryRoundTrip) {
  Artifact a = sampleArtifact();
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(a, &bytes).isOk());
  EXPECT_EQ(bytes.size() % 64, 0u);
  Artifact b;
  Status st = parseArtifact(bytes.data(), bytes.size(), &b);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectSameArtifact(a, b);
  // The loaded artifact runs.
  std::vector<HostTensor> outs;
  st = runFunction(b, *b.findFunction("infer"), {tensor(f32({1, 2}), {1, 1})}, &outs);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectValues(outs[0], {1 + 3 + 0.5 + 10, 2 + 4 - 0.5 + 20});
}

// Tests that the committed artifacts (written by earlier tc versions of this
// format) decode and encode back to the same bytes: one field list drives
// both directions, and the format has not drifted.
TEST(Artifact, CommittedArtifactsReencodeByteIdentical) {
  for (const char *name : {"initializers.tca", "train.tca"}) {
    std::string path = std::string(TC_ARTIFACT_SEEDS_DIR) + "/" + name;
    std::vector<uint8_t> file;
    ASSERT_TRUE(readFileBytes(path, &file).isOk()) << path;
    Artifact a;
    Status st = parseArtifact(file.data(), file.size(), &a, path);
    ASSERT_TRUE(st.isOk()) << st.toString();
    std::vector<uint8_t> again;
    ASSERT_TRUE(serializeArtifact(a, &again).isOk());
    EXPECT_TRUE(again == file) << path << ": " << again.size() << " bytes, was " << file.size();
  }
}

TEST(Artifact, KernelsRoundTripAndSurviveOnlyIntact) {
  Artifact a = sampleArtifact();
  a.target = "sm_120";
  KernelBinary k;
  k.name = "tc_fusion_0123456789abcdef";
  k.arch = "sm_120a";
  k.source = "extern \"C\" __global__ void tc_fusion_0123456789abcdef() {}";
  k.ptx = ".version 9.0\n.target sm_120a\n";
  k.cubin = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33, 0, 0, 9};
  a.kernels = {k, k};
  a.kernels[1].name = "tc_reduce_sum_1";
  a.kernels[1].cubin.clear();
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(a, &bytes).isOk());
  Artifact b;
  Status st = parseArtifact(bytes.data(), bytes.size(), &b);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_EQ(b.kernels.size(), 2u);
  EXPECT_EQ(b.kernels[0].name, k.name);
  EXPECT_EQ(b.kernels[0].arch, "sm_120a");
  EXPECT_EQ(b.kernels[0].source, k.source);
  EXPECT_EQ(b.kernels[0].ptx, k.ptx);
  EXPECT_EQ(b.kernels[0].cubin, k.cubin);
  EXPECT_TRUE(b.kernels[1].cubin.empty());
  // A CPU artifact has no KERNELS section at all (same bytes as before).
  Artifact c = sampleArtifact();
  std::vector<uint8_t> plain;
  ASSERT_TRUE(serializeArtifact(c, &plain).isOk());
  EXPECT_LT(plain.size(), bytes.size());
  // Every truncation of the kernel-carrying file is an error, never a crash.
  for (size_t n = 0; n < bytes.size(); n += 7) {
    Artifact out;
    EXPECT_FALSE(parseArtifact(bytes.data(), n, &out, "k.tca").isOk()) << n;
  }
}

/// sampleArtifact() plus a kernel and a device program using every buffer
/// space and op kind.
Artifact deviceArtifact() {
  Artifact a = sampleArtifact();
  a.target = "sm_90";
  KernelBinary k;
  k.name = "train_step_fusion_0";
  k.arch = "sm_90";
  k.source = "extern \"C\" __global__ void train_step_fusion_0() {}";
  a.kernels = {k};
  DeviceFunction f;
  f.name = "infer";
  f.arenaBytes = 1024;
  f.inputNames = {"x"};
  f.outputNames = {"out"};
  f.consts = {tensor(f32({2}), {10, 20})};
  auto buf = [&](DeviceBuffer::Space s, uint64_t off, TensorType t, std::string name,
                 int32_t index) {
    DeviceBuffer b;
    b.space = s;
    b.offset = off;
    b.type = t;
    b.bytes = static_cast<uint64_t>(t.numElements()) * 4;
    b.name = std::move(name);
    b.index = index;
    f.buffers.push_back(b);
    return static_cast<int32_t>(f.buffers.size() - 1);
  };
  int32_t x = buf(DeviceBuffer::Space::Input, 0, f32({1, 2}), "x", 0);
  int32_t w = buf(DeviceBuffer::Space::Param, 0, f32({2, 2}), "w", -1);
  int32_t c = buf(DeviceBuffer::Space::Const, 0, f32({2}), "", 0);
  int32_t y = buf(DeviceBuffer::Space::Arena, 256, f32({1, 2}), "", -1);
  int32_t o = buf(DeviceBuffer::Space::Output, 0, f32({1, 2}), "out", 0);
  int32_t g = buf(DeviceBuffer::Space::Param, 4, f32({2}), "grad:w", -1);
  auto op = [&](std::string kind, std::string name, std::vector<int32_t> ins,
                std::vector<int32_t> outs, std::map<std::string, Attr> attrs = {}) {
    DeviceOp d;
    d.kind = std::move(kind);
    d.name = std::move(name);
    d.ins = std::move(ins);
    d.outs = std::move(outs);
    d.attrs = std::move(attrs);
    f.ops.push_back(std::move(d));
  };
  op("fill", "", {}, {g}, {{"value", aFloat(0)}});
  op("matmul", "", {x, w}, {y}, {{"m", aInt(1)}, {"n", aInt(2)}, {"k", aInt(2)},
                                 {"compute_type", aStr("f32")}});
  op("launch", "train_step_fusion_0", {y, c}, {o}, {{"elements", aInt(2)}});
  op("library", "softmax_fwd", {o}, {o}, {{"rows", aInt(1)}, {"cols", aInt(2)}});
  op("record", "", {}, {}, {{"stream", aInt(0)}, {"event", aInt(0)}});
  op("wait", "", {}, {}, {{"stream", aInt(1)}, {"event", aInt(0)}});
  op("copy", "", {y}, {o});
  f.outputs = {o};
  a.deviceFunctions.push_back(f);
  return a;
}

TEST(Artifact, DeviceProgramRoundTrip) {
  Artifact a = deviceArtifact();
  std::vector<uint8_t> bytes;
  Status st = serializeArtifact(a, &bytes);
  ASSERT_TRUE(st.isOk()) << st.toString();
  Artifact b;
  st = parseArtifact(bytes.data(), bytes.size(), &b);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_EQ(b.deviceFunctions.size(), 1u);
  const DeviceFunction &f = a.deviceFunctions[0], &g = b.deviceFunctions[0];
  EXPECT_EQ(g.name, f.name);
  EXPECT_EQ(g.arenaBytes, f.arenaBytes);
  EXPECT_EQ(g.inputNames, f.inputNames);
  EXPECT_EQ(g.outputNames, f.outputNames);
  EXPECT_EQ(g.outputs, f.outputs);
  ASSERT_EQ(g.consts.size(), 1u);
  EXPECT_EQ(g.consts[0].type, f.consts[0].type);
  EXPECT_EQ(g.consts[0].data, f.consts[0].data);
  ASSERT_EQ(g.buffers.size(), f.buffers.size());
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    EXPECT_EQ(g.buffers[i].space, f.buffers[i].space) << i;
    EXPECT_EQ(g.buffers[i].offset, f.buffers[i].offset) << i;
    EXPECT_EQ(g.buffers[i].bytes, f.buffers[i].bytes) << i;
    EXPECT_EQ(g.buffers[i].type, f.buffers[i].type) << i;
    EXPECT_EQ(g.buffers[i].name, f.buffers[i].name) << i;
    EXPECT_EQ(g.buffers[i].index, f.buffers[i].index) << i;
  }
  ASSERT_EQ(g.ops.size(), f.ops.size());
  for (size_t i = 0; i < f.ops.size(); ++i) {
    EXPECT_EQ(g.ops[i].kind, f.ops[i].kind) << i;
    EXPECT_EQ(g.ops[i].name, f.ops[i].name) << i;
    EXPECT_EQ(g.ops[i].ins, f.ops[i].ins) << i;
    EXPECT_EQ(g.ops[i].outs, f.ops[i].outs) << i;
    ASSERT_EQ(g.ops[i].attrs.size(), f.ops[i].attrs.size()) << i;
  }
  EXPECT_EQ(g.ops[1].attrs.at("compute_type").s, "f32");
  EXPECT_EQ(g.ops[2].attrs.at("elements").i, 2);
  // Re-encoding gives the same bytes.
  std::vector<uint8_t> again;
  ASSERT_TRUE(serializeArtifact(b, &again).isOk());
  EXPECT_EQ(again, bytes);
}

TEST(Artifact, DeviceProgramEveryTruncationErrors) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(deviceArtifact(), &bytes).isOk());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    Artifact out;
    ASSERT_FALSE(parseArtifact(prefix.data(), prefix.size(), &out, "d.tca").isOk()) << n;
  }
}

TEST(Artifact, DeviceProgramValidation) {
  ASSERT_TRUE(validateArtifact(deviceArtifact()).isOk());
  auto rejects = [](Artifact a, const std::string &needle) {
    Status st = validateArtifact(a);
    EXPECT_FALSE(st.isOk()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    // A writer refuses it too, so no such file is ever produced.
    std::vector<uint8_t> bytes;
    EXPECT_FALSE(serializeArtifact(a, &bytes).isOk()) << needle;
  };
  Artifact a = deviceArtifact();
  a.deviceFunctions[0].ops[1].ins[0] = 1 << 30; // hostile buffer index
  rejects(a, "out of range");
  a = deviceArtifact();
  a.deviceFunctions[0].ops[1].outs[0] = -1;
  rejects(a, "out of range");
  a = deviceArtifact();
  a.deviceFunctions[0].outputs[0] = 99;
  rejects(a, "output 'out'");
  a = deviceArtifact();
  a.deviceFunctions[0].buffers[3].offset = 1020; // 8 bytes at 1020 of 1024
  rejects(a, "outside the 1024 bytes of the arena");
  a = deviceArtifact();
  a.deviceFunctions[0].buffers[3].offset = ~uint64_t{0}; // overflow
  rejects(a, "outside");
  a = deviceArtifact();
  a.deviceFunctions[0].buffers[1].name = "nope";
  rejects(a, "unknown parameter 'nope'");
  a = deviceArtifact();
  a.deviceFunctions[0].buffers[1].offset = 12; // 16-byte view of a 16-byte param
  rejects(a, "parameter 'w'");
  // The 16-bit copy of an f32 entry (kShadowPrefix): bf16 or f16 of as many
  // elements; of nothing, as f32, or past its elements, refused.
  auto shadowed = [&](TensorType t, uint64_t offset, const std::string &name) {
    Artifact s = deviceArtifact();
    DeviceBuffer &b = s.deviceFunctions[0].buffers[1];
    b.name = name;
    b.type = t;
    b.offset = offset;
    b.bytes = static_cast<uint64_t>(t.numElements()) * dtypeStorageBytes(t.dtype);
    return s;
  };
  EXPECT_TRUE(validateArtifact(shadowed({DType::BF16, {2, 2}}, 0, "shadow:w")).isOk());
  EXPECT_TRUE(validateArtifact(shadowed({DType::F16, {2}}, 4, "shadow:w")).isOk());
  rejects(shadowed({DType::BF16, {2, 2}}, 0, "shadow:nope"), "unknown parameter 'shadow:nope'");
  rejects(shadowed({DType::F32, {2, 2}}, 0, "shadow:w"), "a copy is bf16 or f16 of an f32 entry");
  rejects(shadowed({DType::BF16, {2, 2}}, 2, "shadow:w"), "parameter 'shadow:w'");
  rejects(shadowed({DType::BF16, {2, 2}}, 0, "shadow:"), "unknown parameter 'shadow:'");
  EXPECT_EQ(shadowSourceOf("shadow:w"), "w");
  EXPECT_EQ(shadowSourceOf("shadow:grad:w"), "grad:w");
  EXPECT_TRUE(shadowSourceOf("shadow:").empty());
  EXPECT_TRUE(shadowSourceOf("shadowed").empty());
  EXPECT_TRUE(shadowSourceOf("w").empty());
  a = deviceArtifact();
  a.deviceFunctions[0].buffers[2].index = 5;
  rejects(a, "constant #5");
  a = deviceArtifact();
  a.deviceFunctions[0].buffers[0].index = 3;
  rejects(a, "position 3");
  a = deviceArtifact();
  a.deviceFunctions[0].ops[2].name = "missing_kernel";
  rejects(a, "unknown kernel 'missing_kernel'");
  a = deviceArtifact();
  a.deviceFunctions[0].ops[0].kind = "jump";
  rejects(a, "unknown kind");
  a = deviceArtifact();
  a.deviceFunctions.push_back(a.deviceFunctions[0]);
  rejects(a, "duplicate device function");
  // Without kernels (compiled without cubins), launch names are not checked;
  // nor are launches marked missing_kernel.
  a = deviceArtifact();
  a.kernels.clear();
  EXPECT_TRUE(validateArtifact(a).isOk());
  a = deviceArtifact();
  a.deviceFunctions[0].ops[2].name = "infer_split_3";
  a.deviceFunctions[0].ops[2].attrs["missing_kernel"] = aInt(1);
  EXPECT_TRUE(validateArtifact(a).isOk());
  // A file carrying a hostile index (checksum fixed up, so only validation
  // can catch it) is rejected by the reader. The DEVICE payload ends with the
  // last op's output index and its attribute count (0).
  a = deviceArtifact();
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(a, &bytes).isOk());
  auto rd32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t{bytes[at + i]} << (8 * i);
    return v;
  };
  auto rd64 = [&](size_t at) { return uint64_t{rd32(at)} | uint64_t{rd32(at + 4)} << 32; };
  uint32_t nsections = rd32(12);
  bool patched = false;
  for (uint32_t i = 0; i < nsections; ++i) {
    size_t entry = 32 + 24 * size_t{i};
    if (rd32(entry) != 7)
      continue;
    uint64_t off = rd64(entry + 8), size = rd64(entry + 16);
    ASSERT_EQ(rd32(off + size - 4), 0u);
    ASSERT_EQ(rd32(off + size - 8), 4u);
    for (int k = 0; k < 4; ++k)
      bytes[off + size - 8 + k] = k == 3 ? 0x7f : 0xff;
    uint32_t crc = crc32(bytes.data() + off, size);
    for (int k = 0; k < 4; ++k)
      bytes[entry + 4 + k] = static_cast<uint8_t>(crc >> (8 * k));
    patched = true;
  }
  ASSERT_TRUE(patched);
  fixHeaderCrc(bytes);
  Artifact out;
  Status st = parseArtifact(bytes.data(), bytes.size(), &out, "hostile.tca");
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument) << st.toString();
  EXPECT_NE(st.message().find("buffer #2147483647"), std::string::npos) << st.message();
}

TEST(Artifact, FileRoundTripIsAtomic) {
  std::string dir = ::testing::TempDir() + "/tc_artifact_test";
  std::string cmd = "mkdir -p " + dir;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string path = dir + "/m.tca";
  Artifact a = sampleArtifact();
  ASSERT_TRUE(writeArtifact(a, path).isOk());
  ASSERT_TRUE(writeArtifact(a, path).isOk()); // overwrite
  Artifact b;
  Status st = readArtifact(path, &b);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectSameArtifact(a, b);
  // The file equals the in-memory encoding, and no temporary is left over.
  std::vector<uint8_t> onDisk, inMemory;
  ASSERT_TRUE(readFileBytes(path, &onDisk).isOk());
  ASSERT_TRUE(serializeArtifact(a, &inMemory).isOk());
  EXPECT_EQ(onDisk, inMemory);
  DIR *d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  int files = 0;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.')
      ++files;
  closedir(d);
  EXPECT_EQ(files, 1);
  std::remove(path.c_str());

  st = readArtifact(dir + "/missing.tca", &b);
  EXPECT_EQ(st.code(), StatusCode::NotFound);
  EXPECT_NE(st.message().find("missing.tca"), std::string::npos);
  st = writeArtifact(a, dir + "/no/such/folder/m.tca");
  EXPECT_EQ(st.code(), StatusCode::IoError);
}

TEST(Artifact, EveryTruncationErrors) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(sampleArtifact(), &bytes).isOk());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n); // exact-size buffer
    Artifact out;
    Status st = parseArtifact(prefix.data(), prefix.size(), &out, "t.tca");
    ASSERT_FALSE(st.isOk()) << "prefix of " << n << " bytes parsed";
    EXPECT_NE(st.message().find("t.tca"), std::string::npos) << st.message();
  }
  // The same through the file reader, for a few lengths.
  std::string path = ::testing::TempDir() + "/tc_trunc.tca";
  for (size_t n : {size_t{0}, size_t{5}, size_t{24}, size_t{100}, bytes.size() - 1}) {
    ASSERT_TRUE(writeFileAtomic(path, bytes.data(), n).isOk());
    Artifact out;
    Status st = readArtifact(path, &out);
    EXPECT_EQ(st.code(), StatusCode::DataLoss) << n << ": " << st.toString();
  }
  std::remove(path.c_str());
}

TEST(Artifact, EveryByteFlipIsSafe) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(sampleArtifact(), &bytes).isOk());
  int errors = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x5A;
    Artifact out;
    if (!parseArtifact(bad.data(), bad.size(), &out).isOk())
      ++errors;
  }
  // Only alignment padding is not covered by a checksum or a check.
  EXPECT_GT(errors, static_cast<int>(bytes.size()) / 2);
}

/// Rewrites the payload of section `kind` and fixes its checksum, so that
/// the decoder itself (not the CRC) must catch the damage.
std::vector<uint8_t> patchSection(std::vector<uint8_t> bytes, uint32_t kind,
                                  size_t at, std::vector<uint8_t> patch,
                                  bool fixCrc = true) {
  auto rd32 = [&](size_t o) {
    return bytes[o] | bytes[o + 1] << 8 | bytes[o + 2] << 16 | (uint32_t)bytes[o + 3] << 24;
  };
  auto rd64 = [&](size_t o) { return rd32(o) | (uint64_t)rd32(o + 4) << 32; };
  uint32_t count = rd32(12);
  for (uint32_t s = 0; s < count; ++s) {
    size_t e = 32 + 24 * s;
    if (rd32(e) != kind)
      continue;
    uint64_t off = rd64(e + 8), size = rd64(e + 16);
    for (size_t k = 0; k < patch.size(); ++k)
      if (at + k < size)
        bytes[off + at + k] = patch[k];
    if (!fixCrc)
      continue;
    uint32_t crc = crc32(bytes.data() + off, size);
    for (int k = 0; k < 4; ++k)
      bytes[e + 4 + k] = (crc >> (8 * k)) & 0xFF;
  }
  fixHeaderCrc(bytes);
  return bytes;
}

TEST(Artifact, HeaderAndTableAreChecksummed) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(sampleArtifact(), &bytes).isOk());
  // A flipped section kind (REPORTS -> an unknown kind, which readers skip)
  // must not silently drop the section: the header CRC catches it.
  std::vector<uint8_t> bad = bytes;
  bad[32] ^= 0x40;
  Artifact out;
  Status st = parseArtifact(bad.data(), bad.size(), &out, "k.tca");
  EXPECT_EQ(st.code(), StatusCode::DataLoss);
  EXPECT_NE(st.message().find("header or section table fails its CRC-32"), std::string::npos)
      << st.message();
}

TEST(Artifact, HostileCountsAreRejectedWithoutAllocating) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(sampleArtifact(), &bytes).isOk());
  // FUNCTIONS (kind 2): a function count of 2^32 - 1.
  std::vector<uint8_t> bad = patchSection(bytes, 2, 0, {0xFF, 0xFF, 0xFF, 0xFF});
  Artifact out;
  Status st = parseArtifact(bad.data(), bad.size(), &out, "h.tca");
  EXPECT_EQ(st.code(), StatusCode::DataLoss);
  EXPECT_NE(st.message().find("count"), std::string::npos) << st.message();
  // The first function's name length: huge.
  bad = patchSection(bytes, 2, 4, {0xF0, 0xFF, 0xFF, 0x7F});
  st = parseArtifact(bad.data(), bad.size(), &out, "h.tca");
  EXPECT_EQ(st.code(), StatusCode::DataLoss);
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  // PARAMS (kind 3): the first parameter's dtype becomes 200.
  bad = patchSection(bytes, 3, 4 + 4 + 1, {200});
  st = parseArtifact(bad.data(), bad.size(), &out, "h.tca");
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("dtype"), std::string::npos) << st.message();
  // A corrupted payload with the old checksum.
  bad = patchSection(bytes, 4, 0, {0x42}, /*fixCrc=*/false);
  st = parseArtifact(bad.data(), bad.size(), &out, "h.tca");
  EXPECT_EQ(st.code(), StatusCode::DataLoss);
  EXPECT_NE(st.message().find("WEIGHTS checksum mismatch"), std::string::npos) << st.message();
}

/// Random damage behind valid checksums: the decoder and validator must
/// reject it or produce an artifact that the executor runs or rejects
/// cleanly (this test is most useful under ASan/UBSan).
TEST(Artifact, RandomMutationsWithFixedChecksums) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(sampleArtifact(), &bytes).isOk());
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    uint32_t kind = 2 + next() % 2; // FUNCTIONS or PARAMS
    std::vector<uint8_t> bad = bytes;
    int flips = 1 + next() % 3;
    for (int k = 0; k < flips; ++k) {
      size_t at = next() % 200;
      bad = patchSection(bad, kind, at, {static_cast<uint8_t>(next())});
    }
    Artifact out;
    if (!parseArtifact(bad.data(), bad.size(), &out).isOk())
      continue;
    ++parsed;
    for (const Function &f : out.functions) {
      bool small = true;
      for (const TensorType &t : f.values)
        small &= t.numElements() <= (1 << 20);
      if (!small)
        continue; // legal but too big to run in a unit test
      std::vector<HostTensor> ins;
      for (int32_t id : f.inputs) {
        HostTensor t;
        t.type = f.values[id];
        t.data.assign(storageBytes(t.type), 0);
        ins.push_back(t);
      }
      std::vector<HostTensor> outs;
      (void)runFunction(out, f, ins, &outs); // any status, no crash
    }
  }
  std::printf("%d of 3000 mutated artifacts still parsed\n", parsed);
}

TEST(Artifact, InitialiserValidation) {
  Artifact a = sampleArtifact();
  a.params[3].initArgs[1] = -1; // normal std < 0
  std::vector<uint8_t> bytes;
  Status st = serializeArtifact(a, &bytes);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("std"), std::string::npos) << st.message();
  a = sampleArtifact();
  a.params[4].initArgs[0] = 1; // uniform low > high
  st = serializeArtifact(a, &bytes);
  EXPECT_NE(st.message().find("low"), std::string::npos) << st.message();
  a = sampleArtifact();
  a.params[5].hasData = true; // ones with data
  st = serializeArtifact(a, &bytes);
  EXPECT_NE(st.message().find("has data but a ones initialiser"), std::string::npos)
      << st.message();
}

TEST(Artifact, HeaderErrors) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(sampleArtifact(), &bytes).isOk());
  Artifact out;
  std::vector<uint8_t> bad = bytes;
  bad[1] = 'X';
  EXPECT_NE(parseArtifact(bad.data(), bad.size(), &out).message().find("bad magic"),
            std::string::npos);
  bad = bytes;
  bad[8] = 9; // format version 9
  Status st = parseArtifact(bad.data(), bad.size(), &out);
  EXPECT_EQ(st.code(), StatusCode::Unimplemented);
  EXPECT_NE(st.message().find("version 9"), std::string::npos);
  bad = bytes;
  bad[8] = 2; // version 2: parameter entries without initialiser arguments
  st = parseArtifact(bad.data(), bad.size(), &out);
  EXPECT_EQ(st.code(), StatusCode::Unimplemented);
  EXPECT_NE(st.message().find("version 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("version 4"), std::string::npos) << st.message();
  bad = bytes;
  bad.push_back(0); // the size no longer matches the header
  EXPECT_EQ(parseArtifact(bad.data(), bad.size(), &out).code(), StatusCode::DataLoss);
}

TEST(Artifact, ValidationCatchesBrokenPrograms) {
  Artifact a = sampleArtifact();
  std::vector<uint8_t> bytes;
  Artifact bad = a;
  bad.functions[0].ops[2].operands[0] = 99;
  Status st = serializeArtifact(bad, &bytes);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("%99"), std::string::npos) << st.message();
  bad = a;
  std::swap(bad.functions[0].ops[2], bad.functions[0].ops[3]); // use before def
  st = validateArtifact(bad);
  EXPECT_NE(st.message().find("before it is defined"), std::string::npos) << st.message();
  bad = a;
  bad.params[0].offset = 1 << 20;
  st = validateArtifact(bad);
  EXPECT_NE(st.message().find("parameter 'w'"), std::string::npos) << st.message();
  bad = a;
  bad.functions[0].outputNames.clear();
  EXPECT_FALSE(validateArtifact(bad).isOk());
  bad = a;
  bad.functions.push_back(bad.functions[0]);
  EXPECT_NE(validateArtifact(bad).message().find("duplicate function"), std::string::npos);
}

TEST(Artifact, Crc32KnownValue) {
  const char *s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t *>(s), 9), 0xCBF43926u);
}

// The eight-bytes-at-a-time CRC against the bit-at-a-time definition, at
// every length around the 8-byte steps, every start offset, and split in two
// calls (continuing `crc`), for both polynomials.
TEST(Artifact, Crc32SlicedEqualsBitwise) {
  auto bitwise = [](uint32_t poly, const uint8_t *d, size_t n, uint32_t crc) {
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) {
      crc ^= d[i];
      for (int k = 0; k < 8; ++k)
        crc = (crc & 1) ? poly ^ (crc >> 1) : crc >> 1;
    }
    return ~crc;
  };
  std::vector<uint8_t> bytes(64);
  uint32_t x = 12345;
  for (uint8_t &b : bytes)
    b = uint8_t((x = x * 1103515245u + 12345u) >> 24);
  for (size_t off = 0; off < 8; ++off)
    for (size_t n = 0; off + n <= bytes.size(); ++n) {
      const uint8_t *d = bytes.data() + off;
      ASSERT_EQ(crc32(d, n), bitwise(0xEDB88320u, d, n, 0)) << off << " " << n;
      ASSERT_EQ(crc32c(d, n), bitwise(0x82F63B78u, d, n, 0)) << off << " " << n;
      size_t h = n / 3;
      ASSERT_EQ(crc32(d + h, n - h, crc32(d, h)), crc32(d, n));
    }
}

TEST(Artifact, EvalStepIsInferOnTheDevice) {
  Artifact a;
  DeviceFunction infer;
  infer.name = "infer";
  a.deviceFunctions.push_back(infer);
  ASSERT_NE(a.findDeviceFunction("eval_step"), nullptr);
  EXPECT_EQ(a.findDeviceFunction("eval_step")->name, "infer");
  EXPECT_EQ(a.findDeviceFunction("train_step"), nullptr);
  DeviceFunction own;
  own.name = "eval_step";
  a.deviceFunctions.push_back(own);
  EXPECT_EQ(a.findDeviceFunction("eval_step")->name, "eval_step");
}

} // namespace
} // namespace tc::rt

// A shape whose element count overflows int64 saturates (a fuzzing finding:
// [2^31, 2^31, 2^31] was undefined behaviour) rather than wrapping to a small
// count that a reader would then trust.
TEST(TensorTypeTest, NumElementsSaturates) {
  using tc::rt::DType;
  using tc::rt::TensorType;
  int64_t big = int64_t{1} << 31;
  EXPECT_EQ((TensorType{DType::F32, {big, big, big}}.numElements()), INT64_MAX);
  EXPECT_EQ((TensorType{DType::F32, {big, big}}.numElements()), big * big);
  EXPECT_EQ((TensorType{DType::F32, {3, 0, big}}.numElements()), 0);
}

namespace tc::rt {
namespace {
using namespace tc::rt::test;

// The program is checked against the parameter table when an artifact is
// written or read: a tc.parameter of a name the table lacks, or read with
// another type, is refused then rather than in the middle of a step.
TEST(Artifact, ProgramMatchesParameterTable) {
  Artifact a = sampleArtifact();
  FnBuilder f("uses_params");
  int32_t w = f.op("tc.parameter", {}, f32({2, 2}), {{"name", aStr("w")}});
  f.output("w", w);
  a.functions.push_back(f.fn);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(a, &bytes).isOk());
  Artifact missing = a;
  missing.functions.back().ops[0].attrs["name"] = aStr("nowhere");
  Status st = validateArtifact(missing);
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("reads parameter 'nowhere', which is not in the parameter table"),
            std::string::npos) << st.message();
  Artifact retyped = a;
  retyped.functions.back().values[static_cast<size_t>(w)] = f32({4});
  st = validateArtifact(retyped);
  EXPECT_NE(st.message().find("reads parameter 'w' as f32 4, the parameter table has f32 2x2"),
            std::string::npos) << st.message();
}

} // namespace
} // namespace tc::rt
