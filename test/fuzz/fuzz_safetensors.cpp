//===- fuzz_safetensors.cpp - libFuzzer target: the safetensors reader ----===//
#include "runtime/src/base/safetensors.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tc::rt::SafetensorsFile out;
  (void)tc::rt::parseSafetensors(data, size, &out, "fuzz.safetensors");
  return 0;
}
