//===- fuzz_json.cpp - libFuzzer target: the JSON reader (state.json, reports) ===//
#include "runtime/src/base/json.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tc::rt::JsonValue v;
  (void)tc::rt::parseJson(std::string(reinterpret_cast<const char *>(data), size), &v,
                          "fuzz.json");
  return 0;
}
