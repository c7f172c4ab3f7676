// RUN: tc-opt %s --split-input-file --tcx-plan-memory | FileCheck %s

// Tests offsets on a small function: %a and %c have disjoint lifetimes and
// share bytes (offset 0); %b overlaps both and %d overlaps %b and %c, so
// they get their own bytes; views count as uses of their alloc.
// CHECK-LABEL: func.func @plan
// CHECK-SAME: tcx.activation_bytes = 1024 : i64, tcx.arena_size = 1536 : i64, tcx.backward_bytes = 1024 : i64
// CHECK-SAME: tcx.input_bytes = 1024 : i64, tcx.param_bytes = 256 : i64, tcx.peak_live_bytes = 1536 : i64
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
