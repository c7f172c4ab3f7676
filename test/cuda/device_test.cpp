//===- device_test.cpp - errors, devices, the arena, copies ---------------===//
#include "test/cuda/cuda_test_util.h"

#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// Runs everywhere: no CUDA call needs a driver to turn an error into text.
TEST(CudaStatus, NamesTheCallAndTheError) {
  EXPECT_TRUE(cudaStatus(cudaSuccess, "cudaMalloc").isOk());
  Status oom = cudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(64 bytes)");
  EXPECT_EQ(oom.code(), StatusCode::ResourceExhausted);
  EXPECT_TRUE(contains(oom.message(), "cudaMalloc(64 bytes): ")) << oom.message();
  EXPECT_TRUE(contains(oom.message(), cudaGetErrorString(cudaErrorMemoryAllocation)))
      << oom.message();
  EXPECT_TRUE(contains(oom.message(), "cudaErrorMemoryAllocation")) << oom.message();
  EXPECT_EQ(cudaStatus(cudaErrorNoDevice, "x").code(), StatusCode::FailedPrecondition);
  EXPECT_EQ(cudaStatus(cudaErrorInsufficientDriver, "x").code(), StatusCode::FailedPrecondition);
  EXPECT_EQ(cudaStatus(cudaErrorInvalidValue, "x").code(), StatusCode::InvalidArgument);
  EXPECT_EQ(cudaStatus(cudaErrorIllegalAddress, "x").code(), StatusCode::Internal);
}

TEST(CudaStatus, CublasNamesTheCall) {
  EXPECT_TRUE(cublasStatus(CUBLAS_STATUS_SUCCESS, "cublasLtMatmul").isOk());
  Status st = cublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul bf16 M=1 N=2 K=3");
  EXPECT_EQ(st.code(), StatusCode::Unimplemented);
  EXPECT_TRUE(contains(st.message(), "cublasLtMatmul bf16 M=1 N=2 K=3: ")) << st.message();
  EXPECT_TRUE(contains(st.message(), "CUBLAS_STATUS_NOT_SUPPORTED")) << st.message();
  EXPECT_EQ(cublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "x").code(), StatusCode::ResourceExhausted);
}

// Without a GPU (or driver) every entry point answers with requireGpu()'s
// status instead of crashing; with a GPU this test has nothing to check.
TEST(CudaNoGpu, EveryEntryPointReturnsAStatus) {
  Status gpu = requireGpu();
  if (gpu.isOk())
    GTEST_SKIP() << "a GPU is present";
  std::printf("without a GPU: %s\n", gpu.toString().c_str());
  EXPECT_EQ(gpu.code(), StatusCode::FailedPrecondition);
  EXPECT_TRUE(contains(gpu.message(), "no CUDA GPU available: cudaGetDeviceCount"))
      << gpu.message();
  auto expectNoGpu = [&](const Status &st, const char *what) {
    EXPECT_FALSE(st.isOk()) << what;
    EXPECT_EQ(st.message(), gpu.message()) << what;
  };
  int n = -1;
  expectNoGpu(deviceCount(&n), "deviceCount");
  DeviceInfo info;
  expectNoGpu(queryDevice(0, &info), "queryDevice");
  expectNoGpu(selectDevice(0), "selectDevice");
  size_t f = 0, t = 0;
  expectNoGpu(memInfo(&f, &t), "memInfo");
  DeviceArena arena;
  expectNoGpu(DeviceArena::create(1 << 20, &arena), "DeviceArena::create");
  EXPECT_EQ(arena.base(), nullptr);
  Stream stream;
  expectNoGpu(Stream::create(&stream), "Stream::create");
  Event event;
  expectNoGpu(Event::create(&event), "Event::create");
  std::unique_ptr<Matmul> mm;
  expectNoGpu(Matmul::create(&mm), "Matmul::create");
  HostTensor h = makeHostTensor(f32({2}), {1, 2});
  expectNoGpu(copyToDevice(h, nullptr, 8, nullptr), "copyToDevice");
  expectNoGpu(copyToHost(nullptr, f32({2}), &h, nullptr), "copyToHost");
  float x = 0;
  expectNoGpu(softmaxForward(DType::F32, &x, &x, 1, 1, false, nullptr), "softmaxForward");
  expectNoGpu(layerNormForward(DType::F32, &x, nullptr, nullptr, &x, nullptr, nullptr, 1, 1, 1e-5f,
                               nullptr),
              "layerNormForward");
  expectNoGpu(crossEntropyForwardBackward(DType::F32, &x, DType::I64, &x, nullptr, nullptr, nullptr,
                                          &x, 1, 1, -100, 1.0f, nullptr),
              "crossEntropyForwardBackward");
  expectNoGpu(embeddingForward(DType::F32, &x, DType::I64, &x, &x, 1, 1, 1, nullptr),
              "embeddingForward");
  expectNoGpu(geluForward(DType::BF16, GeluApprox::Tanh, &x, &x, 1, nullptr), "geluForward");
  expectNoGpu(castBuffer(DType::F32, &x, DType::BF16, &x, 1, nullptr), "castBuffer");
  expectNoGpu(adamwUpdate(&x, DType::F32, &x, &x, &x, 1, AdamWConfig{}, nullptr, DType::F32,
                          nullptr, nullptr),
              "adamwUpdate");
  expectNoGpu(sumSquares(DType::F32, &x, 1, &x, &x, false, nullptr), "sumSquares");
}

class CudaDevice : public CudaTest {};

TEST_F(CudaDevice, QueryAndSelect) {
  int n = 0;
  ASSERT_OK(deviceCount(&n));
  EXPECT_GE(n, 1);
  DeviceInfo info;
  ASSERT_OK(queryDevice(0, &info));
  std::printf("device 0: %s\n", info.toString().c_str());
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.ccMajor, 7);
  EXPECT_GT(info.smCount, 0);
  EXPECT_GT(info.totalBytes, info.freeBytes);
  EXPECT_GE(info.runtimeVersion, 13000);
  Status bad = selectDevice(n);
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument) << bad.toString();
  EXPECT_TRUE(contains(bad.message(), "does not exist")) << bad.message();
}

TEST_F(CudaDevice, StreamsAndEventsOrderWork) {
  Stream other;
  ASSERT_OK(Stream::create(&other));
  Event done;
  ASSERT_OK(Event::create(&done));
  DevBuf buf;
  ASSERT_OK(devAlloc(1 << 20, &buf));
  // Fill on one stream, make the other wait, read back there.
  ASSERT_OK(cudaStatus(cudaMemsetAsync(buf.p, 0x3f, buf.bytes, stream()), "cudaMemsetAsync"));
  ASSERT_OK(done.record(stream()));
  ASSERT_OK(done.waitOn(other.get()));
  HostTensor back;
  ASSERT_OK(download(buf.p, ty(DType::U8, {1 << 20}), &back, other.get()));
  for (size_t i = 0; i < back.data.size(); i += 4099)
    ASSERT_EQ(back.data[i], 0x3f);
  Stream moved = std::move(other);
  EXPECT_EQ(other.get(), nullptr);
  EXPECT_NE(moved.get(), nullptr);
}

// The memory check: the arena is exactly the one allocation the plan
// asks for. The driver hands out memory in 2 MiB pages, so a size that is a
// multiple of 2 MiB must move cudaMemGetInfo's free bytes by exactly that.
TEST_F(CudaDevice, ArenaAllocatesExactlyTheRequestedBytes) {
  const size_t kPage = 2u << 20;
  { // The context's first allocation may set up allocator state: not measured.
    DeviceArena warm;
    ASSERT_OK(DeviceArena::create(kPage, &warm));
  }
  for (size_t bytes : {size_t(64) << 20, size_t(1) << 30, size_t(2) * kPage}) {
    ASSERT_OK(sync());
    size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
    ASSERT_OK(memInfo(&free0, &total));
    {
      DeviceArena arena;
      ASSERT_OK(DeviceArena::create(bytes, &arena));
      EXPECT_EQ(arena.size(), bytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.base()) % DeviceArena::kAlignment, 0u);
      ASSERT_OK(memInfo(&free1, &total));
      std::printf("arena of %zu bytes: free memory fell by %zu bytes\n", bytes, free0 - free1);
      EXPECT_EQ(free0 - free1, bytes);
    }
    ASSERT_OK(memInfo(&free2, &total));
    EXPECT_EQ(free2, free0) << "the arena's memory comes back when it is destroyed";
  }
  // A size that is not a page multiple costs whole pages, nothing more.
  size_t odd = (8u << 20) + 1000, free0 = 0, free1 = 0, total = 0;
  ASSERT_OK(memInfo(&free0, &total));
  DeviceArena arena;
  ASSERT_OK(DeviceArena::create(odd, &arena));
  ASSERT_OK(memInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, (odd + kPage - 1) / kPage * kPage);
  report("arena (cudaMemGetInfo delta)", DType::U8, 0, 0, -1, "64MiB,1GiB,4MiB");
}

TEST_F(CudaDevice, ArenaSlicesAreChecked) {
  DeviceArena arena;
  ASSERT_OK(DeviceArena::create(4096, &arena));
  void *p = nullptr;
  ASSERT_OK(arena.slice(256, 1024, &p));
  EXPECT_EQ(p, static_cast<char *>(arena.base()) + 256);
  ASSERT_OK(arena.slice(4096, 0, &p)); // empty buffer at the end
  Status misaligned = arena.slice(100, 16, &p);
  EXPECT_EQ(misaligned.code(), StatusCode::InvalidArgument);
  EXPECT_TRUE(contains(misaligned.message(), "not a multiple of 256")) << misaligned.message();
  Status outside = arena.slice(3840, 512, &p);
  EXPECT_EQ(outside.code(), StatusCode::InvalidArgument);
  EXPECT_TRUE(contains(outside.message(), "leaves the arena of 4096 bytes")) << outside.message();
  EXPECT_FALSE(arena.slice(size_t(1) << 40, 1, &p).isOk());
  EXPECT_FALSE(arena.zero(4000, 200, stream()).isOk());
  // zero() really zeroes.
  ASSERT_OK(cudaStatus(cudaMemsetAsync(arena.base(), 0xff, 4096, stream()), "cudaMemsetAsync"));
  ASSERT_OK(arena.zero(512, 1024, stream()));
  HostTensor back;
  ASSERT_OK(download(arena.base(), ty(DType::U8, {4096}), &back, stream()));
  for (size_t i = 0; i < 4096; ++i)
    ASSERT_EQ(back.data[i], i >= 512 && i < 1536 ? 0 : 0xff) << i;
  // Too large: a clear ResourceExhausted naming the size.
  DeviceArena huge;
  Status oom = DeviceArena::create(size_t(1) << 50, &huge);
  EXPECT_EQ(oom.code(), StatusCode::ResourceExhausted) << oom.toString();
  EXPECT_TRUE(contains(oom.message(), "cudaMalloc(1125899906842624 bytes)")) << oom.message();
  EXPECT_EQ(huge.base(), nullptr);
  // The failed allocation left no sticky error behind.
  ASSERT_OK(cudaStatus(cudaGetLastError(), "cudaGetLastError"));
}

TEST_F(CudaDevice, HostTensorsRoundTrip) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
    TensorType type = ty(dt, {3, 257});
    HostTensor h = dt == DType::I64 ? randomInts(type, rng, -1000, 1000) : randomTensor(type, rng);
    DevBuf d;
    ASSERT_OK(upload(h, &d, stream()));
    HostTensor back;
    ASSERT_OK(download(d.p, type, &back, stream()));
    EXPECT_EQ(back.type, h.type);
    EXPECT_EQ(back.data, h.data) << dtypeName(dt);
  }
  DevBuf d;
  ASSERT_OK(devAlloc(16, &d));
  Status st = copyToDevice(makeHostTensor(f32({3}), {1, 2, 3}), d.p, 16, stream());
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument) << st.toString();
}

} // namespace
} // namespace tc::rt::cuda
