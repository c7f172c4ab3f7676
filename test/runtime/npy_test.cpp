//===- npy_test.cpp - numpy .npy reading and writing ----------------------===//
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "runtime/src/base/file_io.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/npy.h"

namespace tc::rt {
namespace {

std::vector<uint8_t> npyBytes(const std::string &header, int major = 1,
                              std::vector<uint8_t> data = {}) {
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  size_t len = header.size();
  b.push_back(len & 0xFF);
  b.push_back((len >> 8) & 0xFF);
  if (major >= 2) {
    b.push_back((len >> 16) & 0xFF);
    b.push_back((len >> 24) & 0xFF);
  }
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Status parse(const std::vector<uint8_t> &b, HostTensor *t) {
  return parseNpy(b.data(), b.size(), "feed.npy", t);
}

TEST(Npy, RoundTripEveryNpyDType) {
  for (int i = 0; i < 17; ++i) {
    DType t = static_cast<DType>(i);
    HostTensor h = makeHostTensor({t, {2, 3}}, {1, 0, 1, 1, 0, 1});
    std::vector<uint8_t> bytes;
    Status st = serializeNpy(h, &bytes);
    if (!npyDescr(t)) {
      EXPECT_FALSE(st.isOk()) << dtypeName(t);
      EXPECT_NE(st.message().find(dtypeName(t)), std::string::npos);
      continue;
    }
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ((bytes.size() - h.data.size()) % 64, 0u) << "data must start 64-aligned";
    HostTensor back;
    ASSERT_TRUE(parse(bytes, &back).isOk());
    EXPECT_EQ(back.type, h.type) << dtypeName(t);
    EXPECT_EQ(back.data, h.data) << dtypeName(t);
  }
}

TEST(Npy, ScalarAndOneDim) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{}, std::vector<int64_t>{3},
                                     std::vector<int64_t>{0, 4}}) {
    HostTensor h = makeHostTensor({DType::F32, shape}, std::vector<double>(
                                                           TensorType{DType::F32, shape}.numElements(), 2.5));
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(serializeNpy(h, &bytes).isOk());
    HostTensor back;
    ASSERT_TRUE(parse(bytes, &back).isOk());
    EXPECT_EQ(back.type, h.type);
    EXPECT_EQ(back.data, h.data);
  }
}

TEST(Npy, ParsesHandWrittenHeadersV1V2V3) {
  std::vector<uint8_t> data(24, 0);
  data[0] = 7;
  for (int major : {1, 2, 3}) {
    HostTensor t;
    Status st = parse(npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n",
                               major, data),
                      &t);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(t.type, (TensorType{DType::I64, {3}}));
    EXPECT_EQ(hostTensorToInts(t), (std::vector<int64_t>{7, 0, 0}));
  }
  // Key order and quoting do not matter; '|u1' and '<u1' are both fine.
  HostTensor t;
  ASSERT_TRUE(parse(npyBytes("{\"shape\": (2, 1), \"fortran_order\": False, \"descr\": \"|u1\"}",
                             1, {1, 2}),
                    &t)
                  .isOk());
  EXPECT_EQ(t.type, (TensorType{DType::U8, {2, 1}}));
  ASSERT_TRUE(parse(npyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,)}", 1,
                             {0, 5}),
                    &t)
                  .isOk());
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0, 1})); // normalised to 0/1
}

void expectError(const std::vector<uint8_t> &b, const std::string &needle) {
  HostTensor t;
  Status st = parse(b, &t);
  ASSERT_FALSE(st.isOk()) << "expected an error containing '" << needle << "'";
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("feed.npy"), std::string::npos) << st.message();
}

TEST(Npy, MalformedFilesGiveClearErrors) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::vector<uint8_t> eight(8, 0);
  expectError({1, 2, 3}, "bad magic");
  expectError({'P', 'K', 3, 4, 5, 6, 7, 8, 9, 10, 11}, "bad magic");
  expectError(npyBytes(ok, 4, eight), "version 4");
  expectError(npyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 1, eight),
              "Fortran");
  expectError(npyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 1, eight),
              "big-endian");
  expectError(npyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 1, eight),
              "unsupported dtype '<c8'");
  expectError(npyBytes("{'descr': '<f4', 'shape': (2,), }", 1, eight), "fortran_order");
  expectError(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,-1), }", 1, eight),
              "shape");
  expectError(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 1,
                       eight),
              "unexpected key");
  expectError(npyBytes(ok, 1, std::vector<uint8_t>(7, 0)), "data has 7 bytes");
  expectError(npyBytes(ok, 1, std::vector<uint8_t>(9, 0)), "data has 9 bytes");
  std::vector<uint8_t> truncated = npyBytes(ok, 1, eight);
  truncated.resize(20);
  expectError(truncated, "truncated");
  expectError(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 1, eight), "");
  // Every prefix of a valid file errors cleanly.
  std::vector<uint8_t> good = npyBytes(ok, 1, eight);
  for (size_t n = 0; n < good.size(); ++n) {
    HostTensor t;
    EXPECT_FALSE(parseNpy(good.data(), n, "p.npy", &t).isOk()) << n;
  }
}

TEST(Npy, FilesOnDisk) {
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/tc_npy_test.npy";
  HostTensor h = makeHostTensor({DType::F64, {2, 2}}, {1.5, -2, 3, 4});
  ASSERT_TRUE(writeNpy(path, h).isOk());
  HostTensor back;
  ASSERT_TRUE(readNpy(path, &back).isOk());
  EXPECT_EQ(back.type, h.type);
  EXPECT_EQ(back.data, h.data);
  std::remove(path.c_str());
  Status st = readNpy(dir + "/does_not_exist.npy", &back);
  EXPECT_EQ(st.code(), StatusCode::NotFound);
  EXPECT_NE(st.message().find("does_not_exist.npy"), std::string::npos);
  HostTensor bf = makeHostTensor({DType::BF16, {2}}, {1, 2});
  EXPECT_FALSE(writeNpy(path, bf).isOk());
}

} // namespace
} // namespace tc::rt
