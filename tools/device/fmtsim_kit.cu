// fmtsim device kit: runs the GPU conversion instructions and matrix units that fmtsim models, on
// operands that tools/device/kit.py prepares from `fmtsim gen` vector files, `fmtsim probe gen`
// sets and the *.gemm.bin files, and writes raw results that kit.py turns into what `fmtsim ver`
// and `fmtsim probe infer` read.
//
// Written for this project from the PTX ISA (instruction names, operand packing and fragment
// layouts); it includes no vendor code. One source, built for the GPU found (run.sh) or for every
// target (tests/test_device_kit.py): each instruction sits behind the architecture guard PTX
// requires, and a kernel built where its instruction does not exist reports "unsupported" at run
// time instead of computing anything.
//
//   fmtsim_kit info                                   device name, compute capability, driver
//   fmtsim_kit cvt OP IN OUT N                        N inputs (uint32 each) -> N results (uint32 each)
//   fmtsim_kit mma KERNEL DIR M N K [VARIANT]         DIR/a.bin b.bin c.bin [sa.bin sb.bin] -> DIR/d.bin
//
// Conversions (OP): inputs are float32 bits, or float16/bfloat16 bits in the low 16 bits; results
// are codes in the low bits (encode) or float32 bits (decode, widened exactly from the f16/bf16 the
// instruction writes). The x2 instructions take element 0 in the LOW half of the packed result
// (`cvt.*x2 d, a, b` puts a in the high half), so element pairs are passed as (x[2i+1], x[2i]).
//
// Matrix units (KERNEL): A is M x K (row-major codes), B is K x N (row-major codes), C and D are
// M x N float32; M, N, K are multiples of the instruction shape (kit.py pads). Each output tile
// chains the instruction along K: the result of one step is the next step's C, as a GEMM kernel
// does (fp32, or fp16 for the .f16-accumulate kernels: their C must be fp16 values, refused
// otherwise, is narrowed to fp16 in the kernel, and D is widened back to float32 exactly). tf32
// kernels take A and B as float32 bit patterns holding tf32 values (A and B are 4 bytes each). VARIANT selects among operand-packing candidates where the PTX ISA text admits more
// than one reading (kit.py runs a layout self-check first and keeps the variant that passes).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "fmtsim_kit: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, \
              __LINE__);                                                                    \
      exit(3);                                                                              \
    }                                                                                       \
  } while (0)

// ---- architecture guards ------------------------------------------------------------------
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define HAVE_FP8_CVT 1   // cvt e4m3x2/e5m2x2 from f32 and f16x2, and back to f16x2: sm_89+
#define HAVE_MMA_FP8 1   // mma.sync m16n8k32 e4m3/e5m2: sm_89+
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
#define HAVE_MMA_FP8_F16 1  // the same with fp16 C/D (.f16.e4m3.e4m3.f16): PTX ISA 8.7 (CUDA 12.8), sm_89+
                            // (CUTLASS include/cutlass/arch/mma_sm89.h gates its F16 form the same way)
#endif
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HAVE_MMA_F16 1   // mma.sync m16n8k16 f16/bf16 (f32 or f16 accumulate), m16n8k8 tf32: sm_80+
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HAVE_WGMMA 1     // wgmma.mma_async: sm_90a only
#endif
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM101_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM103_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL) ||   \
    defined(__CUDA_ARCH_FEAT_SM121_ALL) ||                                             \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000)
#define HAVE_FP4_CVT 1   // cvt e2m1x2/e2m3x2/e3m2x2/ue8m0x2: sm_100a/sm_120a (arch-specific)
#endif
#if defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define HAVE_MMA_SM120 1 // mma.sync kind::f8f6f4 / block_scale kinds: sm_120a
#endif

// ---- conversions ----------------------------------------------------------------------------
enum CvtOp {
  F32_E4M3, F32_E5M2, F16_E4M3, F16_E5M2,                // .rn.satfinite, sm_89
  F32_E2M1, F32_E2M3, F32_E3M2,                          // .rn.satfinite, sm_100a/120a
  F32_UE8_RZ, F32_UE8_RZ_SAT, F32_UE8_RP, F32_UE8_RP_SAT, // sm_100a/120a
  BF16_UE8_RZ, BF16_UE8_RZ_SAT, BF16_UE8_RP, BF16_UE8_RP_SAT,
  DEC_E4M3, DEC_E5M2, DEC_E2M1, DEC_E2M3, DEC_E3M2, DEC_UE8,
  N_CVT
};
static const char* CVT_NAMES[N_CVT] = {
    "f32_to_e4m3.rne.satfinite", "f32_to_e5m2.rne.satfinite", "f16_to_e4m3.rne.satfinite",
    "f16_to_e5m2.rne.satfinite", "f32_to_e2m1.rne.satfinite", "f32_to_e2m3.rne.satfinite",
    "f32_to_e3m2.rne.satfinite", "f32_to_e8m0.rtz.nonsat",    "f32_to_e8m0.rtz.satfinite",
    "f32_to_e8m0.rup.nonsat",    "f32_to_e8m0.rup.satfinite", "bf16_to_e8m0.rtz.nonsat",
    "bf16_to_e8m0.rtz.satfinite", "bf16_to_e8m0.rup.nonsat",  "bf16_to_e8m0.rup.satfinite",
    "e4m3_to_f32", "e5m2_to_f32", "e2m1_to_f32", "e2m3_to_f32", "e3m2_to_f32", "e8m0_to_f32"};

__device__ __forceinline__ float f16_bits_to_f32(uint32_t h) {
  float f;
  asm("{.reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t;}" : "=f"(f) : "h"((uint16_t)h));
  return f;
}

// One thread converts the pair (in[2i], in[2i+1]); n is even (kit.py pads).
__global__ void k_cvt(int op, const uint32_t* in, uint32_t* out, int n, int* supported) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (2 * i + 1 >= n) return;
  uint32_t x0 = in[2 * i], x1 = in[2 * i + 1];
  float f0 = __uint_as_float(x0), f1 = __uint_as_float(x1);
  uint32_t lo = 0, hi = 0;  // results for elements 0 and 1
  bool ok = false;
  uint16_t s = 0;
  uint32_t r = 0;
  uint32_t pair16 = (x0 & 0xFFFF) | (x1 << 16);  // two 16-bit sources, element 0 low
  switch (op) {
#if HAVE_FP8_CVT
    case F32_E4M3: asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F32_E5M2: asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F16_E4M3: asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(s) : "r"(pair16)); ok = true; break;
    case F16_E5M2: asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(s) : "r"(pair16)); ok = true; break;
    case DEC_E4M3: asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((uint16_t)((x0 & 0xFF) | (x1 & 0xFF) << 8))); ok = true; break;
    case DEC_E5M2: asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"((uint16_t)((x0 & 0xFF) | (x1 & 0xFF) << 8))); ok = true; break;
#endif
#if HAVE_FP4_CVT
    case F32_E2M1: asm("{.reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %1, %2; cvt.u32.u8 %0, t;}" : "=r"(r) : "f"(f1), "f"(f0)); s = (uint16_t)(r & 0xF) | (uint16_t)((r >> 4) & 0xF) << 8; ok = true; break;
    case F32_E2M3: asm("cvt.rn.satfinite.e2m3x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F32_E3M2: asm("cvt.rn.satfinite.e3m2x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F32_UE8_RZ: asm("cvt.rz.ue8m0x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F32_UE8_RZ_SAT: asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F32_UE8_RP: asm("cvt.rp.ue8m0x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case F32_UE8_RP_SAT: asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(s) : "f"(f1), "f"(f0)); ok = true; break;
    case BF16_UE8_RZ: asm("cvt.rz.ue8m0x2.bf16x2 %0, %1;" : "=h"(s) : "r"(pair16)); ok = true; break;
    case BF16_UE8_RZ_SAT: asm("cvt.rz.satfinite.ue8m0x2.bf16x2 %0, %1;" : "=h"(s) : "r"(pair16)); ok = true; break;
    case BF16_UE8_RP: asm("cvt.rp.ue8m0x2.bf16x2 %0, %1;" : "=h"(s) : "r"(pair16)); ok = true; break;
    case BF16_UE8_RP_SAT: asm("cvt.rp.satfinite.ue8m0x2.bf16x2 %0, %1;" : "=h"(s) : "r"(pair16)); ok = true; break;
    case DEC_E2M1: asm("{.reg .b8 t; cvt.u8.u32 t, %1; cvt.rn.f16x2.e2m1x2 %0, t;}" : "=r"(r) : "r"((x0 & 0xF) | (x1 & 0xF) << 4)); ok = true; break;
    case DEC_E2M3: asm("cvt.rn.f16x2.e2m3x2 %0, %1;" : "=r"(r) : "h"((uint16_t)((x0 & 0x3F) | (x1 & 0x3F) << 8))); ok = true; break;
    case DEC_E3M2: asm("cvt.rn.f16x2.e3m2x2 %0, %1;" : "=r"(r) : "h"((uint16_t)((x0 & 0x3F) | (x1 & 0x3F) << 8))); ok = true; break;
    case DEC_UE8: asm("cvt.rn.bf16x2.ue8m0x2 %0, %1;" : "=r"(r) : "h"((uint16_t)((x0 & 0xFF) | (x1 & 0xFF) << 8))); ok = true; break;
#endif
    default: break;
  }
  if (!ok) {
    if (i == 0) *supported = 0;
    return;
  }
  if (op >= DEC_E4M3) {
    if (op == DEC_UE8) {  // bf16 halves widen to float32 by a shift
      lo = (r & 0xFFFF) << 16;
      hi = r & 0xFFFF0000u;
    } else {
      lo = __float_as_uint(f16_bits_to_f32(r & 0xFFFF));
      hi = __float_as_uint(f16_bits_to_f32(r >> 16));
    }
  } else {
    lo = s & 0xFF;
    hi = s >> 8;
  }
  out[2 * i] = lo;
  out[2 * i + 1] = hi;
}

// ---- matrix units ---------------------------------------------------------------------------
// Fragment coordinates for a warp's m16n8 tile (PTX ISA, "Matrix fragments for mma.m16n8kK"):
// lane = 4 * group + tig. C/D element i (0..3): row group + 8 * (i / 2), column 2 * tig + i % 2.
enum MmaKernel {
  MMA_E4M3_E4M3, MMA_E4M3_E5M2, MMA_E5M2_E4M3, MMA_E5M2_E5M2,  // sm_89 m16n8k32
  MMA_F16, MMA_BF16,                                            // sm_80 m16n8k16
  MMA_F16_F16,                                                  // sm_80 m16n8k16, fp16 C/D
  MMA_E4M3_E4M3_F16, MMA_E4M3_E5M2_F16, MMA_E5M2_E4M3_F16, MMA_E5M2_E5M2_F16,  // sm_89 m16n8k32, fp16 C/D
  MMA_TF32,                                                     // sm_80 m16n8k8
  WG_E4M3_E4M3, WG_E4M3_E5M2, WG_E5M2_E4M3, WG_E5M2_E5M2, WG_F16, WG_BF16,  // sm_90a m64n8k32/16
  F8F6F4,      // sm_120a m16n8k32 kind::f8f6f4 (types from VARIANT)
  MXF8F6F4,    // sm_120a m16n8k32 kind::mxf8f6f4.block_scale.scale_vec::1X ue8m0
  MXF4,        // sm_120a m16n8k64 kind::mxf4.block_scale.scale_vec::2X ue8m0
  NVF4_UE8X2,  // sm_120a m16n8k64 kind::mxf4nvf4.block_scale.scale_vec::2X ue8m0 (block 32)
  NVF4_UE4X4,  // sm_120a m16n8k64 kind::mxf4nvf4.block_scale.scale_vec::4X ue4m3 (block 16)
  N_MMA
};
static const char* MMA_NAMES[N_MMA] = {
    "mma_sync_e4m3_e4m3", "mma_sync_e4m3_e5m2", "mma_sync_e5m2_e4m3", "mma_sync_e5m2_e5m2",
    "mma_sync_f16", "mma_sync_bf16", "mma_sync_f16_f16", "mma_sync_e4m3_e4m3_f16",
    "mma_sync_e4m3_e5m2_f16", "mma_sync_e5m2_e4m3_f16", "mma_sync_e5m2_e5m2_f16", "mma_sync_tf32", "wgmma_e4m3_e4m3", "wgmma_e4m3_e5m2", "wgmma_e5m2_e4m3",
    "wgmma_e5m2_e5m2", "wgmma_f16", "wgmma_bf16", "mma_f8f6f4", "mma_mxf8f6f4", "mma_mxf4",
    "mma_mxf4nvf4_ue8m0x32", "mma_mxf4nvf4_ue4m3x16"};
// instruction shape (M, N, K) per kernel
__host__ __device__ static bool is_16bit(int k) {
  return k == MMA_F16 || k == MMA_BF16 || k == MMA_F16_F16 || k == WG_F16 || k == WG_BF16;
}
__host__ __device__ static bool f16_accumulate(int k) { return k >= MMA_F16_F16 && k <= MMA_E5M2_E5M2_F16; }
static int shape_m(int k) { return (k >= WG_E4M3_E4M3 && k <= WG_BF16) ? 64 : 16; }
static int shape_k(int k) {
  if (is_16bit(k)) return 16;
  if (k == MMA_TF32) return 8;
  if (k == MXF4 || k == NVF4_UE8X2 || k == NVF4_UE4X4) return 64;
  return 32;
}
static int elem_bytes(int k) { return is_16bit(k) ? 2 : (k == MMA_TF32 ? 4 : 1); }

// An 8-bit-element A fragment (m16n8k32): register r (0..3) holds 4 consecutive k of row
// group + 8 * (r % 2), columns 4 * tig + 16 * (r / 2) ... + 3.
__device__ __forceinline__ uint32_t frag_a8(const uint8_t* A, int lda, int row0, int k0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  const uint8_t* p = A + (size_t)(row0 + g + 8 * (r & 1)) * lda + k0 + 4 * t + 16 * (r >> 1);
  return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}
// An 8-bit-element B fragment (K x 8, "col"): register r (0..1) holds k = 4 * tig + 16 * r ... + 3
// of column group.
__device__ __forceinline__ uint32_t frag_b8(const uint8_t* B, int ldb, int k0, int col0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  uint32_t v = 0;
  for (int j = 0; j < 4; ++j) v |= (uint32_t)B[(size_t)(k0 + 4 * t + 16 * r + j) * ldb + col0 + g] << (8 * j);
  return v;
}
// 16-bit elements (m16n8k16): A register r (0..3): row group + 8 * (r % 2), k = 2 * tig + 8 * (r / 2)
// and +1; B register r (0..1): k = 2 * tig + 8 * r and +1, column group.
__device__ __forceinline__ uint32_t frag_a16(const uint16_t* A, int lda, int row0, int k0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  const uint16_t* p = A + (size_t)(row0 + g + 8 * (r & 1)) * lda + k0 + 2 * t + 8 * (r >> 1);
  return p[0] | (uint32_t)p[1] << 16;
}
__device__ __forceinline__ uint32_t frag_b16(const uint16_t* B, int ldb, int k0, int col0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  return B[(size_t)(k0 + 2 * t + 8 * r) * ldb + col0 + g] |
         (uint32_t)B[(size_t)(k0 + 2 * t + 8 * r + 1) * ldb + col0 + g] << 16;
}
// tf32 elements (m16n8k8, "Matrix Fragments for mma.m16n8k8", .tf32): A register r (0..3) holds one
// element, row group + 8 * (r % 2), k = tig + 4 * (r / 2); B register r (0..1): k = tig + 4 * r, column
// group. The registers hold the tf32 format, whose internal layout PTX leaves to the implementation
// ("Alternate Floating-Point Data Formats"), so the float32 pattern goes through cvt.rna.tf32.f32: on
// the tf32 values kit.py passes (13 low bits zero) the rounding changes no value. (CUTLASS's
// cute/atom/mma_traits_sm80.hpp SM80_16x8x8_F32TF32TF32F32_TN encodes the same A and B layouts.)
__device__ __forceinline__ uint32_t to_tf32(uint32_t x) {
  uint32_t r = x;
#if HAVE_MMA_F16
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
#endif
  return r;
}
__device__ __forceinline__ uint32_t frag_a32(const uint32_t* A, int lda, int row0, int k0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  return to_tf32(A[(size_t)(row0 + g + 8 * (r & 1)) * lda + k0 + t + 4 * (r >> 1)]);
}
__device__ __forceinline__ uint32_t frag_b32(const uint32_t* B, int ldb, int k0, int col0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  return to_tf32(B[(size_t)(k0 + t + 4 * r) * ldb + col0 + g]);
}
// An fp16 accumulator (C/D of the .f16 forms, "Matrix Fragments for mma.m16n8k16" and
// "... for mma.m16n8k32"): two .f16x2 registers holding the four elements the f32 form holds in
// four, in the same positions: register j = elements 2j (low half) and 2j + 1 (high half).
__device__ __forceinline__ uint32_t f16x2_from_f32(float lo, float hi) {
  uint32_t r;
  asm("{.reg .f16 l, h; cvt.rn.f16.f32 l, %1; cvt.rn.f16.f32 h, %2; mov.b32 %0, {l, h};}"
      : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}
// FP4 elements packed two per byte for the m16n8k64 block-scaled kinds: A register r holds 8
// consecutive k of row group + 8 * (r % 2), k = 8 * tig + 32 * (r / 2) ...; B register r: k = 8 * tig
// + 32 * r ..., column group. Element j of the 8 sits in bits 4j..4j+3 (element 0 lowest).
__device__ __forceinline__ uint32_t frag_a4(const uint8_t* A, int lda, int row0, int k0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  const uint8_t* p = A + (size_t)(row0 + g + 8 * (r & 1)) * lda + k0 + 8 * t + 32 * (r >> 1);
  uint32_t v = 0;
  for (int j = 0; j < 8; ++j) v |= (uint32_t)(p[j] & 0xF) << (4 * j);
  return v;
}
__device__ __forceinline__ uint32_t frag_b4(const uint8_t* B, int ldb, int k0, int col0, int lane, int r) {
  int g = lane >> 2, t = lane & 3;
  uint32_t v = 0;
  for (int j = 0; j < 8; ++j) v |= (uint32_t)(B[(size_t)(k0 + 8 * t + 32 * r + j) * ldb + col0 + g] & 0xF) << (4 * j);
  return v;
}
// kind::f8f6f4 takes FP6/FP4 codes in 8-bit containers. Where the code sits in its byte is
// VARIANT bit 0: 0 = the low bits, 1 = shifted left by 2 (bits 2..5 for FP4, 2..7 for FP6).
__device__ __forceinline__ uint32_t contain(uint32_t v, int shift2) {
  return shift2 ? (v << 2) & 0xFCFCFCFCu : v;
}

// Block-scale registers for the sm_120 block_scale kinds (scale-a-data, scale-b-data), with
// byte-id and thread-id selectors 0. VARIANT bits 1..2 choose the packing: a quad (the four lanes
// of one group) supplies 16 bytes, q = 4 * tig + byte. Variant 0: q -> row group + 8 * (q / V),
// scale column q % V (the rows' V scales in turn); variant 1: row group + 8 * (q % 2), column q / 2;
// variant 2: like 0 but only lane tig 0 supplies, row group + 8 * (byte / V), column byte % V.
// B: column group, scale row q (variants 0, 1) or byte of lane tig 0 (variant 2).
__device__ __forceinline__ uint32_t scale_a_reg(const uint8_t* SA, int lds, int row0, int s0, int V, int lane, int var) {
  int g = lane >> 2, t = lane & 3;
  uint32_t v = 0;
  for (int j = 0; j < 4; ++j) {
    int q = 4 * t + j, row, col;
    if (var == 2) { if (t) break; row = g + 8 * (j / V); col = j % V; }
    else if (var == 1) { row = g + 8 * (q % 2); col = q / 2; }
    else { row = g + 8 * (q / V); col = q % V; }
    if (row >= 16 || col >= V) continue;
    v |= (uint32_t)SA[(size_t)(row0 + row) * lds + s0 + col] << (8 * j);
  }
  return v;
}
__device__ __forceinline__ uint32_t scale_b_reg(const uint8_t* SB, int lds, int s0, int col0, int V, int lane, int var) {
  int g = lane >> 2, t = lane & 3;
  uint32_t v = 0;
  for (int j = 0; j < 4; ++j) {
    int q = (var == 2) ? (t ? 99 : j) : 4 * t + j;
    if (q >= V) continue;
    v |= (uint32_t)SB[(size_t)(s0 + q) * lds + col0 + g] << (8 * j);
  }
  return v;
}

#define MMA_FP8(TA, TB)                                                                          \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                   \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define MMA_FP8_F16(TA, TB)                                                                      \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f16." TA "." TB ".f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};" \
               : "+r"(h[0]), "+r"(h[1])                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

// One warp per m16n8 output tile; blockIdx.x = tile row, blockIdx.y = tile column.
__global__ void k_mma_sync(int kern, int variant, const void* Av, const void* Bv, const float* C,
                           const uint8_t* SA, const uint8_t* SB, float* D, int M, int N, int K,
                           int* supported) {
  int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  int row0 = blockIdx.x * 16, col0 = blockIdx.y * 8;
  float d[4];
  for (int i = 0; i < 4; ++i) d[i] = C[(size_t)(row0 + g + 8 * (i / 2)) * N + col0 + 2 * t + i % 2];
  uint32_t h[2] = {0, 0};  // the fp16 accumulator of the .f16 forms (C is fp16 values: exact)
  if (f16_accumulate(kern)) { h[0] = f16x2_from_f32(d[0], d[1]); h[1] = f16x2_from_f32(d[2], d[3]); }
  bool ok = false;
  const uint8_t* A8 = (const uint8_t*)Av;
  const uint8_t* B8 = (const uint8_t*)Bv;
  int kstep = is_16bit(kern) ? 16 : (kern == MMA_TF32 ? 8 : (kern >= MXF4 ? 64 : 32));
  for (int k0 = 0; k0 < K; k0 += kstep) {
    uint32_t a[4], b[2];
    if (is_16bit(kern)) {
      for (int r = 0; r < 4; ++r) a[r] = frag_a16((const uint16_t*)Av, K, row0, k0, lane, r);
      for (int r = 0; r < 2; ++r) b[r] = frag_b16((const uint16_t*)Bv, N, k0, col0, lane, r);
    } else if (kern == MMA_TF32) {
      for (int r = 0; r < 4; ++r) a[r] = frag_a32((const uint32_t*)Av, K, row0, k0, lane, r);
      for (int r = 0; r < 2; ++r) b[r] = frag_b32((const uint32_t*)Bv, N, k0, col0, lane, r);
    } else if (kern >= MXF4) {
      for (int r = 0; r < 4; ++r) a[r] = frag_a4(A8, K, row0, k0, lane, r);
      for (int r = 0; r < 2; ++r) b[r] = frag_b4(B8, N, k0, col0, lane, r);
    } else {
      for (int r = 0; r < 4; ++r) a[r] = frag_a8(A8, K, row0, k0, lane, r);
      for (int r = 0; r < 2; ++r) b[r] = frag_b8(B8, N, k0, col0, lane, r);
      if (kern == F8F6F4 || kern == MXF8F6F4) {  // variant bits 8..: element types; bit 0: container
        int ta = (variant >> 8) & 7, tb = (variant >> 11) & 7;
        if (ta >= 2) for (int r = 0; r < 4; ++r) a[r] = contain(a[r], variant & 1);
        if (tb >= 2) for (int r = 0; r < 2; ++r) b[r] = contain(b[r], variant & 1);
      }
    }
    switch (kern) {
#if HAVE_MMA_FP8
      case MMA_E4M3_E4M3: MMA_FP8("e4m3", "e4m3"); ok = true; break;
      case MMA_E4M3_E5M2: MMA_FP8("e4m3", "e5m2"); ok = true; break;
      case MMA_E5M2_E4M3: MMA_FP8("e5m2", "e4m3"); ok = true; break;
      case MMA_E5M2_E5M2: MMA_FP8("e5m2", "e5m2"); ok = true; break;
#endif
#if HAVE_MMA_FP8_F16
      case MMA_E4M3_E4M3_F16: MMA_FP8_F16("e4m3", "e4m3"); ok = true; break;
      case MMA_E4M3_E5M2_F16: MMA_FP8_F16("e4m3", "e5m2"); ok = true; break;
      case MMA_E5M2_E4M3_F16: MMA_FP8_F16("e5m2", "e4m3"); ok = true; break;
      case MMA_E5M2_E5M2_F16: MMA_FP8_F16("e5m2", "e5m2"); ok = true; break;
#endif
#if HAVE_MMA_F16
      case MMA_F16:
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        ok = true; break;
      case MMA_BF16:
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        ok = true; break;
      case MMA_F16_F16:
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                     : "+r"(h[0]), "+r"(h[1])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        ok = true; break;
      case MMA_TF32:
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        ok = true; break;
#endif
#if HAVE_MMA_SM120
      case F8F6F4: {
        // element types: 0 e4m3, 1 e5m2, 2 e3m2, 3 e2m3, 4 e2m1 (variant bits 8..10 for A, 11..13 for B)
#define F8F6F4_CASE(TA, TB)                                                                        \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32." TA "." TB ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
        int ta = (variant >> 8) & 7, tb = (variant >> 11) & 7;
        ok = true;
        if (ta == 0 && tb == 0) F8F6F4_CASE("e4m3", "e4m3");
        else if (ta == 1 && tb == 1) F8F6F4_CASE("e5m2", "e5m2");
        else if (ta == 0 && tb == 1) F8F6F4_CASE("e4m3", "e5m2");
        else if (ta == 1 && tb == 0) F8F6F4_CASE("e5m2", "e4m3");
        else if (ta == 2 && tb == 3) F8F6F4_CASE("e3m2", "e2m3");
        else if (ta == 2 && tb == 2) F8F6F4_CASE("e3m2", "e3m2");
        else if (ta == 3 && tb == 3) F8F6F4_CASE("e2m3", "e2m3");
        else if (ta == 4 && tb == 4) F8F6F4_CASE("e2m1", "e2m1");
        else if (ta == 4 && tb == 1) F8F6F4_CASE("e2m1", "e5m2");
        else ok = false;
        break;
      }
      case MXF8F6F4: {
        int var = (variant >> 1) & 3, s0 = k0 / 32;
        uint32_t sa = scale_a_reg(SA, K / 32, row0, s0, 1, lane, var);
        uint32_t sb = scale_b_reg(SB, N, s0, col0, 1, lane, var);
#define MXF8_CASE(TA, TB)                                                                          \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32." TA "." TB ".f32.ue8m0 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa), "r"(sb))
        int ta = (variant >> 8) & 7, tb = (variant >> 11) & 7;
        ok = true;
        if (ta == 0 && tb == 0) MXF8_CASE("e4m3", "e4m3");
        else if (ta == 4 && tb == 1) MXF8_CASE("e2m1", "e5m2");
        else if (ta == 1 && tb == 1) MXF8_CASE("e5m2", "e5m2");
        else if (ta == 4 && tb == 4) MXF8_CASE("e2m1", "e2m1");
        else ok = false;
        break;
      }
      case MXF4: case NVF4_UE8X2: case NVF4_UE4X4: {
        int V = (kern == NVF4_UE4X4) ? 4 : 2, blk = 64 / V, var = (variant >> 1) & 3, s0 = k0 / blk;
        uint32_t sa = scale_a_reg(SA, K / blk, row0, s0, V, lane, var);
        uint32_t sb = scale_b_reg(SB, N, s0, col0, V, lane, var);
        if (kern == MXF4)
          asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};"
                       : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                       : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa), "r"(sb));
        else if (kern == NVF4_UE8X2)
          asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};"
                       : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                       : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa), "r"(sb));
        else
          asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};"
                       : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                       : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa), "r"(sb));
        ok = true;
        break;
      }
#endif
      default: break;
    }
    if (!ok) break;
  }
  if (!ok) {
    if (lane == 0 && blockIdx.x == 0 && blockIdx.y == 0) *supported = 0;
    return;
  }
  if (f16_accumulate(kern))  // fp16 D widened to float32: exact
    for (int i = 0; i < 4; ++i) d[i] = f16_bits_to_f32((h[i / 2] >> (16 * (i % 2))) & 0xFFFF);
  for (int i = 0; i < 4; ++i) D[(size_t)(row0 + g + 8 * (i / 2)) * N + col0 + 2 * t + i % 2] = d[i];
}

// wgmma (sm_90a): one warpgroup (128 threads) per m64n8 tile, A and B from shared memory in the
// no-swizzle K-major layout: 8-row x 16-byte core matrices, each 128 contiguous bytes. Core matrix
// (m-group i, k-group j) of A sits at byte 128 * (i * KG + j) (KG = k-groups per step: 2); of B
// likewise with n-groups. The descriptor's two strides are the distance between k-adjacent core
// matrices (128) and between m/n-adjacent ones (128 * KG); which of the descriptor's "leading" and
// "stride" fields holds which is VARIANT bit 0, checked by kit.py's layout self-check.
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lead, uint32_t stride) {
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)((lead >> 4) & 0x3FFF) << 16 |
         (uint64_t)((stride >> 4) & 0x3FFF) << 32;  // base offset 0, swizzle mode 0 (none)
}

__global__ void k_wgmma(int kern, int variant, const void* Av, const void* Bv, const float* C, float* D,
                        int M, int N, int K, int* supported) {
  __shared__ __align__(128) uint8_t sA[64 * 32];
  __shared__ __align__(128) uint8_t sB[8 * 32];
  int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  int row0 = blockIdx.x * 64, col0 = blockIdx.y * 8;
  float d[4];
  for (int i = 0; i < 4; ++i) d[i] = C[(size_t)(row0 + 16 * warp + g + 8 * (i / 2)) * N + col0 + 2 * t + i % 2];
  int eb = (kern == WG_F16 || kern == WG_BF16) ? 2 : 1;
  int kstep = 32 / eb;  // 32 bytes of K per step
  bool ok = false;
  for (int k0 = 0; k0 < K; k0 += kstep) {
    // stage: A row r, byte c (0..31) -> core (r / 8, c / 16), inside it row r % 8, byte c % 16
    for (int idx = tid; idx < 64 * 32; idx += 128) {
      int r = idx / 32, c = idx % 32;
      const uint8_t* src = (const uint8_t*)Av + ((size_t)(row0 + r) * K + k0) * eb + c;
      sA[128 * ((r / 8) * 2 + c / 16) + (r % 8) * 16 + c % 16] = *src;
    }
    for (int idx = tid; idx < 8 * 32; idx += 128) {
      int n = idx / 32, c = idx % 32, e = c / eb, byte = c % eb;
      const uint8_t* src = (const uint8_t*)Bv + ((size_t)(k0 + e) * N + col0 + n) * eb + byte;
      sB[128 * (c / 16) + n * 16 + c % 16] = *src;
    }
    __syncthreads();
#if HAVE_WGMMA
    uint32_t lead = (variant & 1) ? 256 : 128, stride = (variant & 1) ? 128 : 256;
    uint64_t da = smem_desc(sA, lead, stride), db = smem_desc(sB, (variant & 1) ? 128 : 128, (variant & 1) ? 128 : 128);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#define WG_FP8(TA, TB)                                                                              \
  asm volatile("{.reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n8k32.f32." TA "." TB " {%0,%1,%2,%3}, %4, %5, p, 1, 1;}" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da), "l"(db) : "memory")
    ok = true;
    switch (kern) {
      case WG_E4M3_E4M3: WG_FP8("e4m3", "e4m3"); break;
      case WG_E4M3_E5M2: WG_FP8("e4m3", "e5m2"); break;
      case WG_E5M2_E4M3: WG_FP8("e5m2", "e4m3"); break;
      case WG_E5M2_E5M2: WG_FP8("e5m2", "e5m2"); break;
      case WG_F16:
        asm volatile("{.reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;}"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da), "l"(db) : "memory");
        break;
      case WG_BF16:
        asm volatile("{.reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;}"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da), "l"(db) : "memory");
        break;
      default: ok = false;
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
    __syncthreads();
    if (!ok) break;
  }
  if (!ok) {
    if (tid == 0 && blockIdx.x == 0 && blockIdx.y == 0) *supported = 0;
    return;
  }
  for (int i = 0; i < 4; ++i) D[(size_t)(row0 + 16 * warp + g + 8 * (i / 2)) * N + col0 + 2 * t + i % 2] = d[i];
}

// ---- host -----------------------------------------------------------------------------------
static std::vector<uint8_t> read_file(const std::string& path, bool required = true) {
  std::vector<uint8_t> buf;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) {
    if (required) { fprintf(stderr, "fmtsim_kit: cannot open %s\n", path.c_str()); exit(2); }
    return buf;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf.resize(n);
  if (n && fread(buf.data(), 1, n, f) != (size_t)n) { fprintf(stderr, "fmtsim_kit: short read %s\n", path.c_str()); exit(2); }
  fclose(f);
  return buf;
}
static void write_file(const std::string& path, const void* p, size_t n) {
  std::string tmp = path + ".part";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) { fprintf(stderr, "fmtsim_kit: cannot write %s\n", path.c_str()); exit(2); }
  if (rename(tmp.c_str(), path.c_str()) != 0) { fprintf(stderr, "fmtsim_kit: cannot rename %s\n", tmp.c_str()); exit(2); }
}
template <class T>
static T* to_device(const std::vector<uint8_t>& v) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, v.size() ? v.size() : 4));
  if (v.size()) CHECK(cudaMemcpy(p, v.data(), v.size(), cudaMemcpyHostToDevice));
  return (T*)p;
}
// Whether a float32 is an fp16 value (NaN and Inf included): the .f16 kernels' C must be, since the
// kernel narrows it to fp16 and a rounded C would be a different problem from the one kit.py posed.
static bool fp16_representable(float f) {
  if (f != f || f == 0.0f || std::isinf(f)) return true;
  double a = std::fabs((double)f);
  if (a > 65504.0) return false;
  int e;
  std::frexp(a, &e);                                 // a = m * 2^e, m in [0.5, 1)
  double quantum = std::ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);  // fp16 ulp at a (subnormals: 2^-24)
  return std::fmod(a, quantum) == 0.0;
}
static int lookup(const char* const* names, int n, const char* name) {
  for (int i = 0; i < n; ++i) if (!strcmp(names[i], name)) return i;
  return -1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fmtsim_kit info | cvt OP IN OUT N | mma KERNEL DIR M N K [VARIANT] | list\n");
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "list") {
    for (int i = 0; i < N_CVT; ++i) printf("cvt %s\n", CVT_NAMES[i]);
    for (int i = 0; i < N_MMA; ++i) printf("mma %s %d %d %d\n", MMA_NAMES[i], shape_m(i), 8, shape_k(i));
    return 0;
  }
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  if (cmd == "info") {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    int drv = 0, rt = 0;
    CHECK(cudaDriverGetVersion(&drv));
    CHECK(cudaRuntimeGetVersion(&rt));
    printf("{\"name\": \"%s\", \"cc\": \"%d.%d\", \"driver\": %d, \"runtime\": %d}\n", prop.name, prop.major,
           prop.minor, drv, rt);
    return 0;
  }
  int* d_sup;
  int one = 1, sup = 0;
  CHECK(cudaMalloc(&d_sup, sizeof(int)));
  CHECK(cudaMemcpy(d_sup, &one, sizeof(int), cudaMemcpyHostToDevice));
  if (cmd == "cvt" && argc == 6) {
    int op = lookup(CVT_NAMES, N_CVT, argv[2]);
    if (op < 0) { fprintf(stderr, "fmtsim_kit: unknown conversion %s (see `fmtsim_kit list`)\n", argv[2]); return 2; }
    int n = atoi(argv[5]);
    std::vector<uint8_t> in = read_file(argv[3]);
    if (n <= 0 || n % 2 || in.size() != (size_t)n * 4) { fprintf(stderr, "fmtsim_kit: %s: expected %d uint32 (an even count)\n", argv[3], n); return 2; }
    uint32_t* d_in = to_device<uint32_t>(in);
    uint32_t* d_out;
    CHECK(cudaMalloc(&d_out, (size_t)n * 4));
    int pairs = n / 2;
    k_cvt<<<(pairs + 255) / 256, 256>>>(op, d_in, d_out, n, d_sup);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(&sup, d_sup, sizeof(int), cudaMemcpyDeviceToHost));
    if (!sup) { printf("unsupported\n"); return 4; }
    std::vector<uint32_t> out(n);
    CHECK(cudaMemcpy(out.data(), d_out, (size_t)n * 4, cudaMemcpyDeviceToHost));
    write_file(argv[4], out.data(), (size_t)n * 4);
    printf("ok\n");
    return 0;
  }
  if (cmd == "mma" && (argc == 7 || argc == 8)) {
    int kern = lookup(MMA_NAMES, N_MMA, argv[2]);
    if (kern < 0) { fprintf(stderr, "fmtsim_kit: unknown matrix kernel %s (see `fmtsim_kit list`)\n", argv[2]); return 2; }
    std::string dir = argv[3];
    int M = atoi(argv[4]), N = atoi(argv[5]), K = atoi(argv[6]);
    int variant = argc == 8 ? (int)strtol(argv[7], nullptr, 0) : 0;
    if (M <= 0 || N <= 0 || K <= 0 || M % shape_m(kern) || N % 8 || K % shape_k(kern)) {
      fprintf(stderr, "fmtsim_kit: %s needs M %% %d, N %% 8, K %% %d == 0 (got %d %d %d)\n", argv[2], shape_m(kern),
              shape_k(kern), M, N, K);
      return 2;
    }
    int eb = elem_bytes(kern);
    std::vector<uint8_t> a = read_file(dir + "/a.bin"), b = read_file(dir + "/b.bin"), c = read_file(dir + "/c.bin");
    std::vector<uint8_t> sa = read_file(dir + "/sa.bin", false), sb = read_file(dir + "/sb.bin", false);
    if (a.size() != (size_t)M * K * eb || b.size() != (size_t)K * N * eb || c.size() != (size_t)M * N * 4) {
      fprintf(stderr, "fmtsim_kit: %s: operand sizes do not match M=%d N=%d K=%d\n", dir.c_str(), M, N, K);
      return 2;
    }
    if (f16_accumulate(kern)) {
      const float* cf = (const float*)c.data();
      for (size_t i = 0; i < (size_t)M * N; ++i)
        if (!fp16_representable(cf[i])) {
          fprintf(stderr, "fmtsim_kit: %s takes an fp16 C: c.bin[%zu] = %.9g is not an fp16 value\n", argv[2], i,
                  (double)cf[i]);
          return 2;
        }
    }
    void* d_a = to_device<uint8_t>(a);
    void* d_b = to_device<uint8_t>(b);
    float* d_c = to_device<float>(c);
    uint8_t* d_sa = to_device<uint8_t>(sa);
    uint8_t* d_sb = to_device<uint8_t>(sb);
    float* d_d;
    CHECK(cudaMalloc(&d_d, (size_t)M * N * 4));
    dim3 grid(M / shape_m(kern), N / 8);
    if (kern >= WG_E4M3_E4M3 && kern <= WG_BF16)
      k_wgmma<<<grid, 128>>>(kern, variant, d_a, d_b, d_c, d_d, M, N, K, d_sup);
    else
      k_mma_sync<<<grid, 32>>>(kern, variant, d_a, d_b, d_c, d_sa, d_sb, d_d, M, N, K, d_sup);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(&sup, d_sup, sizeof(int), cudaMemcpyDeviceToHost));
    if (!sup) { printf("unsupported\n"); return 4; }
    std::vector<float> out((size_t)M * N);
    CHECK(cudaMemcpy(out.data(), d_d, out.size() * 4, cudaMemcpyDeviceToHost));
    write_file(dir + "/d.bin", out.data(), out.size() * 4);
    printf("ok\n");
    return 0;
  }
  fprintf(stderr, "fmtsim_kit: bad arguments (run without arguments for usage)\n");
  return 2;
}
