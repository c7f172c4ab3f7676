//===- ops_shape_test.cpp - data movement, gather, leaves, op coverage ----===//
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

std::vector<double> iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

TEST(Shape, ReshapeTransposeBroadcast) {
  HostTensor x = tensor(f32({2, 3}), iota(6));
  expectValues(runOp("tc.reshape", {x}, f32({3, 2})), iota(6));
  expectValues(runOp("tc.reshape", {x}, f32({6})), iota(6));
  expectValues(runOp("tc.transpose", {x}, f32({3, 2}), {{"permutation", aInts({1, 0})}}),
               {0, 3, 1, 4, 2, 5});
  HostTensor y = tensor(f32({2, 3, 4}), iota(24));
  HostTensor t = runOp("tc.transpose", {y}, f32({4, 2, 3}), {{"permutation", aInts({2, 0, 1})}});
  std::vector<double> v = hostTensorToDoubles(t);
  EXPECT_EQ(v[0 * 6 + 1 * 3 + 2], 1 * 12 + 2 * 4 + 0); // t[0,1,2] = y[1,2,0]
  EXPECT_EQ(v[3 * 6 + 0 * 3 + 1], 0 * 12 + 1 * 4 + 3); // t[3,0,1] = y[0,1,3]
  expectInts(runOp("tc.transpose", {itensor(i64({1, 2}), {5, 6})}, i64({2, 1}),
                   {{"permutation", aInts({1, 0})}}),
             {5, 6});
  expectValues(runOp("tc.broadcast", {tensor(f32({3}), {1, 2, 3})}, f32({2, 3})),
               {1, 2, 3, 1, 2, 3});
  expectValues(runOp("tc.broadcast", {tensor(f32({2, 1}), {1, 2})}, f32({2, 3})),
               {1, 1, 1, 2, 2, 2});
  expectValues(runOp("tc.broadcast", {tensor(f32({}), {7})}, f32({2})), {7, 7});
  std::vector<HostTensor> outs;
  EXPECT_FALSE(tryRunOp("tc.reshape", {x}, {f32({4})}, {}, &outs).isOk());
  EXPECT_FALSE(tryRunOp("tc.broadcast", {x}, {f32({3, 3})}, {}, &outs).isOk());
  EXPECT_FALSE(
      tryRunOp("tc.transpose", {x}, {f32({3, 2})}, {{"permutation", aInts({0, 0})}}, &outs).isOk());
}

TEST(Shape, SliceWithNegativeStrides) {
  HostTensor x = tensor(f32({5}), iota(5));
  auto slice = [&](const HostTensor &in, TensorType out, std::vector<int64_t> s,
                   std::vector<int64_t> st) {
    return runOp("tc.slice", {in}, out, {{"starts", aInts(s)}, {"strides", aInts(st)}});
  };
  expectValues(slice(x, f32({3}), {1}, {1}), {1, 2, 3});
  expectValues(slice(x, f32({3}), {0}, {2}), {0, 2, 4});
  expectValues(slice(x, f32({3}), {4}, {-2}), {4, 2, 0});
  expectValues(slice(x, f32({5}), {4}, {-1}), {4, 3, 2, 1, 0});
  expectValues(slice(x, f32({0}), {9}, {1}), {});
  HostTensor m = tensor(f32({3, 4}), iota(12));
  expectValues(slice(m, f32({2, 2}), {2, 1}, {-1, 2}), {9, 11, 5, 7});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.slice", {x}, {f32({3})}, {{"starts", aInts({3})}, {"strides", aInts({1})}},
                       &outs);
  EXPECT_NE(st.message().find("leave the input extent 5"), std::string::npos) << st.message();
  st = tryRunOp("tc.slice", {x}, {f32({2})}, {{"starts", aInts({0})}, {"strides", aInts({-1})}},
                &outs);
  EXPECT_FALSE(st.isOk());
}

TEST(Shape, ConcatAndSplit) {
  HostTensor a = tensor(f32({2, 1}), {1, 2}), b = tensor(f32({2, 2}), {3, 4, 5, 6});
  expectValues(runOp("tc.concat", {a, b}, f32({2, 3}), {{"axis", aInt(1)}}), {1, 3, 4, 2, 5, 6});
  expectValues(runOp("tc.concat", {b, b}, f32({4, 2}), {{"axis", aInt(0)}}),
               {3, 4, 5, 6, 3, 4, 5, 6});
  HostTensor x = tensor(f32({2, 3}), iota(6));
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.split", {x}, {f32({2, 1}), f32({2, 2})}, {{"axis", aInt(1)}}, &outs);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_EQ(outs.size(), 2u);
  expectValues(outs[0], {0, 3});
  expectValues(outs[1], {1, 2, 4, 5});
  st = tryRunOp("tc.split", {x}, {f32({1, 3}), f32({1, 3})}, {{"axis", aInt(0)}}, &outs);
  ASSERT_TRUE(st.isOk());
  expectValues(outs[1], {3, 4, 5});
  st = tryRunOp("tc.split", {x}, {f32({2, 1}), f32({2, 1})}, {{"axis", aInt(1)}}, &outs);
  EXPECT_NE(st.message().find("add up to 2"), std::string::npos) << st.message();
  st = tryRunOp("tc.concat", {a, b}, {f32({2, 4})}, {{"axis", aInt(1)}}, &outs);
  EXPECT_FALSE(st.isOk());
}

TEST(Shape, PadModes) {
  HostTensor x = tensor(f32({3}), {1, 2, 3});
  Attrs p = {{"low", aInts({2})}, {"high", aInts({2})}};
  expectValues(runOp("tc.pad", {x}, f32({7}), p), {0, 0, 1, 2, 3, 0, 0});
  Attrs v = p;
  v["value"] = aFloat(-1);
  expectValues(runOp("tc.pad", {x}, f32({7}), v), {-1, -1, 1, 2, 3, -1, -1});
  Attrs r = p;
  r["mode"] = aStr("reflect");
  expectValues(runOp("tc.pad", {x}, f32({7}), r), {3, 2, 1, 2, 3, 2, 1});
  Attrs e = p;
  e["mode"] = aStr("edge");
  expectValues(runOp("tc.pad", {x}, f32({7}), e), {1, 1, 1, 2, 3, 3, 3});
  HostTensor m = itensor(i64({2, 2}), {1, 2, 3, 4});
  expectInts(runOp("tc.pad", {m}, i64({3, 3}),
                   {{"low", aInts({1, 0})}, {"high", aInts({0, 1})}, {"value", aFloat(9)}}),
             {9, 9, 9, 1, 2, 9, 3, 4, 9});
  expectInts(runOp("tc.pad", {m}, i64({2, 4}),
                   {{"low", aInts({0, 1})}, {"high", aInts({0, 1})}, {"mode", aStr("reflect")}}),
             {2, 1, 2, 1, 4, 3, 4, 3});
}

TEST(Gather, NegativeIndicesAndErrors) {
  HostTensor data = tensor(f32({3, 2}), {1, 2, 3, 4, 5, 6});
  expectValues(runOp("tc.gather", {data, itensor(i64({2}), {2, -3})}, f32({2, 2}),
                     {{"axis", aInt(0)}}),
               {5, 6, 1, 2});
  expectValues(runOp("tc.gather", {data, itensor(i32({2, 2}), {0, 1, 1, 0})}, f32({2, 2, 2}),
                     {{"axis", aInt(0)}}),
               {1, 2, 3, 4, 3, 4, 1, 2});
  expectValues(runOp("tc.gather", {data, itensor(i64({1}), {-1})}, f32({3, 1}),
                     {{"axis", aInt(1)}}),
               {2, 4, 6});
  expectValues(runOp("tc.gather", {data, itensor(i64({}), {1})}, f32({2}), {{"axis", aInt(0)}}),
               {3, 4});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.gather", {data, itensor(i64({2}), {0, 3})}, {f32({2, 2})},
                       {{"axis", aInt(0)}}, &outs);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange);
  EXPECT_NE(st.message().find("tc.gather"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("index 3"), std::string::npos) << st.message();
  st = tryRunOp("tc.gather", {data, itensor(i64({1}), {-4})}, {f32({1, 2})}, {{"axis", aInt(0)}},
                &outs);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange);
}

TEST(Leaves, ParameterFromWeightsOrOverride) {
  Artifact a;
  appendParameter(&a, "w", tensor(f32({2}), {1.5, 2.5}));
  Parameter nodata;
  nodata.name = "frozen";
  nodata.type = f32({2});
  nodata.hasData = false;
  a.params.push_back(nodata);
  auto run = [&](const std::string &name, TensorType t,
                 const std::map<std::string, HostTensor> *ov, std::vector<HostTensor> *outs) {
    FnBuilder b;
    b.output("p", b.op("tc.parameter", {}, t, {{"name", aStr(name)}, {"trainable", aInt(1)}}));
    return runFunction(a, b.fn, {}, outs, {}, ov);
  };
  std::vector<HostTensor> outs;
  ASSERT_TRUE(run("w", f32({2}), nullptr, &outs).isOk());
  expectValues(outs[0], {1.5, 2.5});
  std::map<std::string, HostTensor> ov = {{"w", tensor(f32({2}), {7, 8})},
                                          {"frozen", tensor(f32({2}), {3, 4})}};
  ASSERT_TRUE(run("w", f32({2}), &ov, &outs).isOk());
  expectValues(outs[0], {7, 8});
  ASSERT_TRUE(run("frozen", f32({2}), &ov, &outs).isOk());
  expectValues(outs[0], {3, 4});
  Status st = run("frozen", f32({2}), nullptr, &outs);
  EXPECT_EQ(st.code(), StatusCode::FailedPrecondition);
  EXPECT_NE(st.message().find("parameter 'frozen' has no data"), std::string::npos) << st.message();
  st = run("nope", f32({2}), nullptr, &outs);
  EXPECT_EQ(st.code(), StatusCode::NotFound);
  EXPECT_NE(st.message().find("'nope'"), std::string::npos);
  st = run("w", f32({3}), nullptr, &outs);
  EXPECT_NE(st.message().find("f32 3"), std::string::npos) << st.message();
  std::map<std::string, HostTensor> badOv = {{"w", tensor(f64({2}), {7, 8})}};
  st = run("w", f32({2}), &badOv, &outs);
  EXPECT_NE(st.message().find("override"), std::string::npos) << st.message();
}

TEST(Leaves, ConstantAndSplat) {
  FnBuilder b;
  int32_t c = b.op("tc.constant", {}, i64({3}), {{"value", aTensor(itensor(i64({3}), {4, 5, 6}))}});
  int32_t s = b.op("tc.constant", {}, f32({2, 2}), {{"value", aTensor(tensor(f32({}), {0.5}))}});
  b.output("c", c);
  b.output("s", s);
  std::vector<HostTensor> outs;
  Artifact a;
  ASSERT_TRUE(runFunction(a, b.fn, {}, &outs).isOk());
  expectInts(outs[0], {4, 5, 6});
  expectValues(outs[1], {0.5, 0.5, 0.5, 0.5});
  FnBuilder bad;
  bad.output("c", bad.op("tc.constant", {}, f32({3}), {{"value", aTensor(tensor(f32({2}), {1, 2}))}}));
  EXPECT_FALSE(runFunction(a, bad.fn, {}, &outs).isOk());
}

/// Every op of the catalog (TcOps.td) is implemented, and nothing else.
TEST(Coverage, EveryOpOfTheCatalogIsSupported) {
  std::ifstream in(TC_OPS_TD_PATH);
  ASSERT_TRUE(in.good()) << "cannot read " << TC_OPS_TD_PATH;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string td = ss.str();
  std::regex def(R"re(def\s+\w+\s*:\s*TC_\w+<\s*"(\w+)")re");
  std::set<std::string> catalog;
  for (auto it = std::sregex_iterator(td.begin(), td.end(), def); it != std::sregex_iterator(); ++it)
    catalog.insert("tc." + (*it)[1].str());
  EXPECT_GT(catalog.size(), 70u);
  // Ops that only the GPU pipeline creates (tc-fuse, tc-fuse-fp8-delayed),
  // after the op-level program the CPU executor runs has been written.
  const std::set<std::string> gpuPipelineOnly = {"tc.fusion", "tc.yield", "tc.quantize_delayed",
                                                 "tc.fp8_scale_update"};
  for (const std::string &op : catalog)
    EXPECT_TRUE(isSupportedOp(op) || gpuPipelineOnly.count(op))
        << op << " is in TcOps.td but not in the executor";
  for (const std::string &op : supportedOps())
    EXPECT_TRUE(catalog.count(op)) << op << " is in the executor but not in TcOps.td";
}

} // namespace
} // namespace tc::rt
