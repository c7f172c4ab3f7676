// RUN: tc-opt %s --split-input-file --tcx-schedule-streams | FileCheck %s
// RUN: tc-opt %s --split-input-file --tcx-schedule-streams="window=1" | FileCheck %s --check-prefix=W1
// RUN: tc-opt %s --split-input-file --tcx-schedule-streams="max-held-bytes=1024" | FileCheck %s --check-prefix=HELD

// Tests the weight gradient (transpose_lhs) on stream 1 between a wait for
// stream 0's work so far and a record, the data gradient beside it on
// stream 0, and stream 0's wait after the two stream-0 ops it runs beside
// (window 2: the data gradient and the copy of it; then the fill, and the
// copy that reads dW). With window 1 the wait comes before the copy; with
// max-held-bytes 1024 the matmul would keep %x (4 KiB, it is its last
// reader) live: it stays on stream 0.
// CHECK-LABEL: func.func @weight_grad
// CHECK-SAME: tcx.side_stream_ops = 1 : i64
// CHECK: %[[START:.+]] = tcx.record : !tcx.event
// CHECK-NEXT: tcx.wait %[[START]] {stream = 1 : i64}
// CHECK-NEXT: tcx.matmul ins(%[[X:.+]], %{{.+}} : {{.+}}) outs(%[[DW:.+]] : <32x16xbf16>) {k = 64 : i64, m = 32 : i64, n = 16 : i64, stream = 1 : i64, transpose_lhs = true}
// CHECK-NEXT: %[[DONE:.+]] = tcx.record {stream = 1 : i64} : !tcx.event
// CHECK-NEXT: tcx.alloc
// CHECK-NEXT: tcx.matmul
// CHECK-SAME: transpose_rhs = true
// CHECK-NEXT: tcx.alloc
// CHECK-NEXT: tcx.copy
// CHECK-NEXT: tcx.alloc
// CHECK-NEXT: tcx.wait %[[DONE]]{{$}}
// CHECK-NEXT: tcx.fill
// CHECK-NEXT: tcx.param
// CHECK-NEXT: tcx.copy %[[DW]]
// W1-LABEL: func.func @weight_grad
// W1: %[[DONE:.+]] = tcx.record {stream = 1 : i64} : !tcx.event
// W1-NEXT: tcx.alloc
// W1-NEXT: tcx.matmul
// W1-NEXT: tcx.alloc
// W1-NEXT: tcx.wait %[[DONE]]{{$}}
// W1-NEXT: tcx.copy
// HELD-LABEL: func.func @weight_grad
// HELD-NOT: tcx.record
// HELD-NOT: stream = 1
// HELD: return
func.func @weight_grad(%dy: !tcx.buffer<64x16xbf16>, %w: !tcx.buffer<16x32xbf16>) {
  %x = tcx.alloc {kind = "activation"} : !tcx.buffer<64x32xbf16>
  tcx.fill %x {value = 1.0 : f64} : !tcx.buffer<64x32xbf16>
  %dw = tcx.alloc {kind = "backward"} : !tcx.buffer<32x16xbf16>
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x16xbf16>) outs(%dw : !tcx.buffer<32x16xbf16>) {m = 32 : i64, n = 16 : i64, k = 64 : i64, transpose_lhs = true}
  %dx = tcx.alloc {kind = "backward"} : !tcx.buffer<64x32xbf16>
  tcx.matmul ins(%dy, %w : !tcx.buffer<64x16xbf16>, !tcx.buffer<16x32xbf16>) outs(%dx : !tcx.buffer<64x32xbf16>) {m = 64 : i64, n = 32 : i64, k = 16 : i64, transpose_rhs = true}
  %t = tcx.alloc {kind = "backward"} : !tcx.buffer<64x32xbf16>
  tcx.copy %dx, %t : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x32xbf16>
  %u = tcx.alloc {kind = "backward"} : !tcx.buffer<8xf32>
  tcx.fill %u : !tcx.buffer<8xf32>
  %g = tcx.param "grad:w" {kind = "gradient"} : !tcx.buffer<32x16xbf16>
  tcx.copy %dw, %g : !tcx.buffer<32x16xbf16>, !tcx.buffer<32x16xbf16>
  return
}

// -----

// Tests that the next stream-0 op writing what the matmul reads (here its
// dY, through a view) makes the matmul stay on stream 0: nothing would run
// beside it.
// CHECK-LABEL: func.func @overwritten_input
// CHECK-NOT: tcx.record
// CHECK-NOT: stream = 1
// CHECK: return
func.func @overwritten_input(%x: !tcx.buffer<64x32xbf16>) {
  %dy = tcx.alloc : !tcx.buffer<64x16xbf16>
  tcx.fill %dy : !tcx.buffer<64x16xbf16>
  %dw = tcx.alloc : !tcx.buffer<32x16xbf16>
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x16xbf16>) outs(%dw : !tcx.buffer<32x16xbf16>) {m = 32 : i64, n = 16 : i64, k = 64 : i64, transpose_lhs = true}
  %half = tcx.view %dy[1024] : !tcx.buffer<64x16xbf16> -> !tcx.buffer<32x16xbf16>
  tcx.fill %half {value = 2.0 : f64} : !tcx.buffer<32x16xbf16>
  tcx.copy %dw, %half : !tcx.buffer<32x16xbf16>, !tcx.buffer<32x16xbf16>
  return
}

// -----

// Tests two weight gradients in a row: one start for both (no stream-0 op
// between them), one wait before the return for both (stream 1 runs in
// order), and planned offsets (after tcx-plan-memory) as the bytes: the
// fill of arena bytes [0, 512) touches neither matmul's bytes.
// CHECK-LABEL: func.func @two_in_a_row
// CHECK: %[[START:.+]] = tcx.record : !tcx.event
// CHECK-NEXT: tcx.wait %[[START]] {stream = 1 : i64}
// CHECK-NEXT: tcx.matmul {{.+}}stream = 1 : i64
// CHECK-NEXT: tcx.record {stream = 1 : i64}
// CHECK-NEXT: tcx.matmul {{.+}}stream = 1 : i64
// CHECK-NEXT: %[[LAST:.+]] = tcx.record {stream = 1 : i64}
// CHECK-NEXT: tcx.fill
// CHECK-NEXT: tcx.wait %[[LAST]]{{$}}
// CHECK-NEXT: return
func.func @two_in_a_row(%x: !tcx.buffer<64x32xbf16>, %dy: !tcx.buffer<64x16xbf16>) {
  %arena = tcx.arena : !tcx.buffer<4096xi8>
  %a = tcx.view %arena[1024] : !tcx.buffer<4096xi8> -> !tcx.buffer<32x16xbf16>
  %b = tcx.view %arena[2048] : !tcx.buffer<4096xi8> -> !tcx.buffer<32x16xbf16>
  %c = tcx.view %arena[0] : !tcx.buffer<4096xi8> -> !tcx.buffer<128xf32>
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x16xbf16>) outs(%a : !tcx.buffer<32x16xbf16>) {m = 32 : i64, n = 16 : i64, k = 64 : i64, transpose_lhs = true}
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x16xbf16>) outs(%b : !tcx.buffer<32x16xbf16>) {m = 32 : i64, n = 16 : i64, k = 64 : i64, transpose_lhs = true}
  tcx.fill %c : !tcx.buffer<128xf32>
  return
}

// -----

// Tests that a function with events already is left alone.
// CHECK-LABEL: func.func @scheduled
// CHECK-NOT: stream = 1 : i64}
// CHECK: tcx.matmul
// CHECK-NOT: stream = 1
// CHECK: return
func.func @scheduled(%x: !tcx.buffer<64x32xbf16>, %dy: !tcx.buffer<64x16xbf16>, %dw: !tcx.buffer<32x16xbf16>, %o: !tcx.buffer<8xf32>) {
  %e = tcx.record : !tcx.event
  tcx.wait %e
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x32xbf16>, !tcx.buffer<64x16xbf16>) outs(%dw : !tcx.buffer<32x16xbf16>) {m = 32 : i64, n = 16 : i64, k = 64 : i64, transpose_lhs = true}
  tcx.fill %o : !tcx.buffer<8xf32>
  return
}
