//===- fuzz_artifact.cpp - libFuzzer target: the artifact reader ----------===//
//
// Any bytes into parseArtifact (header, section table, every section decoder,
// validateArtifact): it must return a status, never crash, read out of
// bounds or allocate without bound (ASan/UBSan catch the rest).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/schema/artifact.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tc::rt::Artifact out;
  (void)tc::rt::parseArtifact(data, size, &out, "fuzz.tca");
  return 0;
}
