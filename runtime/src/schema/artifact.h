//===- artifact.h - the artifact file: read, write, validate ----*- C++ -*-===//
//
// One artifact file holds everything needed to run a compiled model: the
// target, the functions (the op-level reference program), the parameter
// table, the weights and the reports. Its format, version 4 (files of any
// other version are rejected with a message naming both versions; older ones
// are asked to be recompiled):
//
// All integers are little-endian; floats are IEEE-754 binary64 bit patterns.
//
//   offset  size    field
//   0       8       magic: 0x89 'T' 'C' 'A' '\r' '\n' 0x1A '\n'
//   8       4       u32 format version (Artifact::kFormatVersion)
//   12      4       u32 section count S (1 <= S <= 64)
//   16      8       u64 total file size in bytes (detects truncation at once)
//   24      4       u32 CRC-32 of bytes 0..31 and the section table, this
//                   field read as 0 (a flipped section kind or offset is
//                   detected, not silently skipped; version 4)
//   28      4       reserved (0)
//   32      24*S    section table, one entry per section:
//                     u32 kind, u32 CRC-32 (zlib polynomial) of the payload,
//                     u64 offset of the payload, u64 size of the payload
//   ...             payloads, each starting at a 64-byte aligned offset,
//                   inside the file and not overlapping the header, the
//                   table or each other.
//
// Section kinds (each at most once):
//   1 META       str target, str producer                       (required)
//   2 FUNCTIONS  u32 count, then `function` * count              (required)
//   3 PARAMS     u32 count, then `param` * count                 (required)
//   4 WEIGHTS    raw bytes: Artifact::weights                    (required)
//   5 REPORTS    u32 count, then (str key, str value) * count    (optional)
//   6 KERNELS    u32 count, then (str name, str arch, str CUDA source, str PTX,
//                u64 n, n cubin bytes) * count                   (GPU targets)
//   7 DEVICE     u32 count, then `devfn` * count       (GPU targets, optional)
// Readers skip sections of unknown kind, so a newer writer may add some.
//
// Encodings inside the sections:
//   str       u32 length, then that many bytes (UTF-8)
//   type      u8 dtype (dtype.h numbering), u32 rank, i64 dim * rank
//   function  str name; u32 nvalues, type * nvalues; u32 ninputs,
//             (i32 value id, str name) * ninputs; u32 noutputs,
//             (i32 value id, str name) * noutputs; u32 nops, op * nops
//   op        str name ("tc.add"); u32 n, i32 operand * n; u32 n,
//             i32 result * n; u32 nattrs, (str key, attr) * nattrs
//   attr      u8 kind (Attr::Kind), then by kind: Int i64 | Float f64 |
//             String str | Ints u32 n, i64 * n | Floats u32 n, f64 * n |
//             Tensor type, u64 nbytes, bytes (storage format)
//   param     str name, type, u8 flags (bit 0 trainable, bit 1 has data),
//             u8 kind (ParamKind: 0 parameter, 1 buffer, 2 optimizer state),
//             u8 initialiser (ParamInit: 0 data, 1 zeros, 2 ones, 3 normal,
//             4 uniform), f64 arg0, f64 arg1 (normal: mean, std; uniform:
//             low, high; 0 otherwise), u64 offset into WEIGHTS, u64 bytes.
//             An entry whose initialiser is not data has no bytes (flags bit
//             1 clear): the runtime computes its value from (seed, name)
//             with init_rng.h, on the host or on the device (init.h).
//             Version 3 added the two f64 arguments and kinds 2-4.
//   devfn     str name; u64 arena bytes; u32 n, str input name * n;
//             u32 n, (i32 output buffer, str name) * n;
//             u32 n, (type, u64 nbytes, bytes) * n   (constant data);
//             u32 n, buffer * n; u32 n, devop * n
//   buffer    u8 space (DeviceBuffer::Space: 0 arena, 1 param, 2 const,
//             3 input, 4 output), u64 byte offset (into the arena, the
//             parameter, the constant or the argument), u64 bytes, type,
//             str name (parameter name / argument name), i32 index
//             (const: constant number; input/output: position; else -1)
//   devop     str kind ("launch", "library", "matmul", "copy", "fill",
//             "record", "wait"), str name (kernel symbol / library callee),
//             u32 n, i32 input buffer * n; u32 n, i32 output buffer * n;
//             u32 nattrs, (str key, attr) * nattrs
//   Validation: buffer and output indices in range, arena buffers inside
//   the arena, param buffers inside their parameter-table entry (or, for
//   "grad:<p>", inside p's size), const/input indices in range, and every
//   launched kernel present in KERNELS when the artifact carries kernels
//   (except launches with the Int attribute missing_kernel = 1: tcx kernels
//   CUDA codegen does not generate yet, which a runtime must refuse).
//
// Every count and length is checked against the bytes that remain before
// anything is allocated, every checksum is verified, and the result is
// validated (validateArtifact) before a reader returns it: a truncated,
// corrupted or hostile file gives a DataLoss/InvalidArgument status, never
// a crash or a huge allocation.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_ARTIFACT_H
#define TC_RUNTIME_SCHEMA_ARTIFACT_H

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/src/base/crc.h" // crc32 of the sections, for readers and tests
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

/// Writes `artifact` to `path` atomically (temporary file in the same folder,
/// fsync, rename). Fails without touching `path` if the artifact is invalid.
Status writeArtifact(const Artifact &artifact, const std::string &path);
/// Reads and validates the artifact at `path`.
Status readArtifact(const std::string &path, Artifact *out);

/// In-memory variants of the two above. `name` is used in error messages.
Status serializeArtifact(const Artifact &artifact, std::vector<uint8_t> *out);
Status parseArtifact(const uint8_t *data, size_t size, Artifact *out,
                     const std::string &name = "<memory>");

/// Structural checks: dtypes and shapes valid, value ids in range, every op
/// operand defined before use, names per input/output, constant tensors and
/// parameter byte ranges consistent with their types and the weights.
Status validateArtifact(const Artifact &artifact);
Status validateFunction(const Function &fn);

/// Appends `t` to the weights (at a 64-byte aligned offset) and adds a
/// parameter entry for it. Returns the new entry.
Parameter &appendParameter(Artifact *artifact, const std::string &name,
                           const HostTensor &t, bool trainable = false);

} // namespace tc::rt

#endif // TC_RUNTIME_SCHEMA_ARTIFACT_H
