//===- fuzz_npy.cpp - libFuzzer target: the .npy reader --------------------===//
#include "runtime/src/base/npy.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tc::rt::HostTensor out;
  (void)tc::rt::parseNpy(data, size, "fuzz.npy", &out);
  return 0;
}
