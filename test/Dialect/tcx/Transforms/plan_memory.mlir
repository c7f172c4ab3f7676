// RUN: tc-opt %s --split-input-file --tcx-plan-memory | FileCheck %s

// Tests offsets on a small function: %a and %c have disjoint lifetimes and
// share bytes (offset 0); %b overlaps both and %d overlaps %b and %c, so
// they get their own bytes; views count as uses of their alloc.
// CHECK-LABEL: func.func @plan
// CHECK-SAME: tcx.activation_bytes = 1024 : i64, tcx.arena_size = 1536 : i64, tcx.backward_bytes = 1024 : i64
// CHECK-SAME: tcx.input_bytes = 1024 : i64, tcx.narrow_bytes = 0 : i64, tcx.param_bytes = 256 : i64, tcx.peak_live_bytes = 1536 : i64
// CHECK: %[[ARENA:.+]] = tcx.arena : <1536xi8>
// CHECK: %[[A:.+]] = tcx.view %[[ARENA]][0] {kind = "activation"} : <1536xi8> -> <256xf32>
// CHECK: %[[B:.+]] = tcx.view %[[ARENA]][1024] {kind = "output"} : <1536xi8> -> <64xf32>
// CHECK: %[[C:.+]] = tcx.view %[[ARENA]][0] {kind = "backward"} : <1536xi8> -> <256xf32>
// CHECK: %[[D:.+]] = tcx.view %[[ARENA]][1280] {kind = "activation"} : <1536xi8> -> <64xf32>
// CHECK-NOT: tcx.alloc
// CHECK: return %[[B]]
func.func @plan(%in: !tcx.buffer<256xf32>) -> !tcx.buffer<64xf32> {
  %w = tcx.param "w" : !tcx.buffer<64xf32>
  %a = tcx.alloc {kind = "activation"} : !tcx.buffer<256xf32>
  tcx.copy %in, %a : !tcx.buffer<256xf32>, !tcx.buffer<256xf32>
  %b = tcx.alloc {kind = "output"} : !tcx.buffer<64xf32>
  %av = tcx.view %a[0] : !tcx.buffer<256xf32> -> !tcx.buffer<64xf32>
  tcx.copy %av, %b : !tcx.buffer<64xf32>, !tcx.buffer<64xf32>
  %c = tcx.alloc {kind = "backward"} : !tcx.buffer<256xf32>
  tcx.fill %c {value = 1.0 : f64} : !tcx.buffer<256xf32>
  %d = tcx.alloc {kind = "activation"} : !tcx.buffer<64xf32>
  %cv = tcx.view %c[0] : !tcx.buffer<256xf32> -> !tcx.buffer<64xf32>
  tcx.copy %cv, %d : !tcx.buffer<64xf32>, !tcx.buffer<64xf32>
  tcx.copy %d, %w : !tcx.buffer<64xf32>, !tcx.buffer<64xf32>
  return %b : !tcx.buffer<64xf32>
}

// -----

// Tests best fit: when %f is placed, %b (1024 bytes at 2048) and %d (512
// bytes at 4096) are dead, leaving two holes between live buffers; %f (256
// bytes) takes the smaller one (4096), where first fit would take 2048.
// CHECK-LABEL: func.func @best_fit
// CHECK-SAME: tcx.arena_size = 5120 : i64
// CHECK: %[[F:.+]] = tcx.view %{{.+}}[4096] {kind = "activation"} : <5120xi8> -> <64xf32>
// CHECK: tcx.fill %[[F]]
func.func @best_fit() {
  %a = tcx.alloc : !tcx.buffer<512xf32>
  %b = tcx.alloc : !tcx.buffer<256xf32>
  %c = tcx.alloc : !tcx.buffer<256xf32>
  %d = tcx.alloc : !tcx.buffer<128xf32>
  %e = tcx.alloc : !tcx.buffer<128xf32>
  %f = tcx.alloc : !tcx.buffer<64xf32>
  tcx.fill %a : !tcx.buffer<512xf32>
  tcx.fill %b : !tcx.buffer<256xf32>
  tcx.fill %c : !tcx.buffer<256xf32>
  tcx.fill %d : !tcx.buffer<128xf32>
  tcx.fill %e : !tcx.buffer<128xf32>
  tcx.copy %b, %c : !tcx.buffer<256xf32>, !tcx.buffer<256xf32>
  tcx.copy %d, %e : !tcx.buffer<128xf32>, !tcx.buffer<128xf32>
  tcx.fill %f : !tcx.buffer<64xf32>
  tcx.fill %a : !tcx.buffer<512xf32>
  tcx.fill %c : !tcx.buffer<256xf32>
  tcx.fill %e : !tcx.buffer<128xf32>
  return
}

// -----

// Tests that a planned function is left alone by a second run.
// CHECK-LABEL: func.func @planned
// CHECK: tcx.arena : <256xi8>
// CHECK-NOT: tcx.arena
func.func @planned() attributes {tcx.arena_size = 256 : i64} {
  %arena = tcx.arena : !tcx.buffer<256xi8>
  %v = tcx.view %arena[0] : !tcx.buffer<256xi8> -> !tcx.buffer<64xf32>
  tcx.fill %v : !tcx.buffer<64xf32>
  return
}

// -----

// Tests the FP8/FP4 peak: the bytes of narrow-float buffers (f8 and f4 copies
// of operands) live at once, whatever their kind, each rounded up to the
// 256-byte alignment. %q8 and %q4 overlap (2 x 256); %late starts after both
// are dead. The f32 %out, live beside %late, does not count.
// CHECK-LABEL: func.func @narrow
// CHECK-SAME: tcx.narrow_bytes = 512 : i64
func.func @narrow(%in: !tcx.buffer<64xf32>) -> !tcx.buffer<64xf32> {
  %q8 = tcx.alloc {kind = "activation"} : !tcx.buffer<64xf8E4M3FN>
  tcx.fill %q8 {value = 1.0 : f64} : !tcx.buffer<64xf8E4M3FN>
  %q4 = tcx.alloc {kind = "backward"} : !tcx.buffer<64xf4E2M1FN>
  tcx.fill %q4 {value = 1.0 : f64} : !tcx.buffer<64xf4E2M1FN>
  tcx.fill %q8 {value = 2.0 : f64} : !tcx.buffer<64xf8E4M3FN>
  %late = tcx.alloc {kind = "activation"} : !tcx.buffer<64xf8E5M2>
  tcx.fill %late {value = 1.0 : f64} : !tcx.buffer<64xf8E5M2>
  %out = tcx.alloc {kind = "output"} : !tcx.buffer<64xf32>
  tcx.copy %in, %out : !tcx.buffer<64xf32>, !tcx.buffer<64xf32>
  return %out : !tcx.buffer<64xf32>
}

// -----

// Tests liveness across streams: the matmul on stream 1 reads %a last, but
// %a lives until stream 0 waits for the event recorded after the matmul, so
// %b (filled on stream 0 meanwhile) gets bytes of its own; in program order
// alone %b would take %a's (offset 0, as %d takes %c's after the wait).
// CHECK-LABEL: func.func @side_stream
// CHECK-SAME: tcx.arena_size = 9216 : i64
// CHECK: %[[A:.+]] = tcx.view %{{.+}}[0] {kind = "activation"} : <9216xi8> -> <64x32xbf16>
// CHECK: tcx.matmul ins(%[[A]], {{.+}}stream = 1 : i64
// CHECK: %[[B:.+]] = tcx.view %{{.+}}[4096] {kind = "activation"} : <9216xi8> -> <64x32xbf16>
// CHECK: tcx.fill %[[B]]
// CHECK: %[[D:.+]] = tcx.view %{{.+}}[0] {kind = "activation"} : <9216xi8> -> <64x32xbf16>
// CHECK: tcx.fill %[[D]]
func.func @side_stream(%dy: !tcx.buffer<64x16xbf16>, %out: !tcx.buffer<32x16xbf16>) {
  %a = tcx.alloc : !tcx.buffer<64x32xbf16>
  tcx.fill %a : !tcx.buffer<64x32xbf16>
  %dw = tcx.alloc : !tcx.buffer<32x16xbf16>
  %start = tcx.record : !tcx.event
  tcx.wait %start {stream = 1 : i64}
  tcx.matmul ins(%a, %dy : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x16xbf16>) outs(%dw : !tcx.buffer<32x16xbf16>) {m = 32 : i64, n = 16 : i64, k = 64 : i64, stream = 1 : i64, transpose_lhs = true}
  %done = tcx.record {stream = 1 : i64} : !tcx.event
  %b = tcx.alloc : !tcx.buffer<64x32xbf16>
  tcx.fill %b : !tcx.buffer<64x32xbf16>
  tcx.wait %done
  tcx.copy %dw, %out : !tcx.buffer<32x16xbf16>, !tcx.buffer<32x16xbf16>
  %d = tcx.alloc : !tcx.buffer<64x32xbf16>
  tcx.fill %d : !tcx.buffer<64x32xbf16>
  return
}
