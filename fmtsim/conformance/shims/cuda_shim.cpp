// fmtsim's bridge to NVIDIA's host conversion functions (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h).
// Compiled on first use by fmtsim.conformance.cuda_impl against the user's own CUDA headers;
// it only loops over arrays and calls NVIDIA's functions, so the results are NVIDIA's.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cuda_fp8.h>
#include <cuda_fp6.h>
#include <cuda_fp4.h>

namespace {
__half_raw half_of(std::uint16_t b) { __half_raw h; h.x = b; return h; }
__nv_bfloat16_raw bf16_of(std::uint16_t b) { __nv_bfloat16_raw h; h.x = b; return h; }
__nv_saturation_t sat_of(int s) { return s ? __NV_SATFINITE : __NV_NOSAT; }
__nv_fp8_interpretation_t fp8_of(int e5m2) { return e5m2 ? __NV_E5M2 : __NV_E4M3; }
__nv_fp6_interpretation_t fp6_of(int e3m2) { return e3m2 ? __NV_E3M2 : __NV_E2M3; }
// fmtsim passes 0 nearest, 1 toward zero, 2 toward +Inf, 3 toward -Inf
cudaRoundMode mode_of(int r) {
  switch (r) {
    case 1: return cudaRoundZero;
    case 2: return cudaRoundPosInf;
    case 3: return cudaRoundMinInf;
    default: return cudaRoundNearest;
  }
}
}  // namespace

extern "C" {

int fmtsim_cuda_version() { return CUDART_VERSION; }

// ---- FP8: source 0 float, 1 double, 2 half bits, 3 bfloat16 bits
void fmtsim_to_fp8(int src, const void* x, std::uint8_t* out, std::size_t n, int sat, int e5m2) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (src) {
      case 0: out[i] = __nv_cvt_float_to_fp8(static_cast<const float*>(x)[i], sat_of(sat), fp8_of(e5m2)); break;
      case 1: out[i] = __nv_cvt_double_to_fp8(static_cast<const double*>(x)[i], sat_of(sat), fp8_of(e5m2)); break;
      case 2: out[i] = __nv_cvt_halfraw_to_fp8(half_of(static_cast<const std::uint16_t*>(x)[i]), sat_of(sat),
                                               fp8_of(e5m2)); break;
      default: out[i] = __nv_cvt_bfloat16raw_to_fp8(bf16_of(static_cast<const std::uint16_t*>(x)[i]), sat_of(sat),
                                                    fp8_of(e5m2)); break;
    }
  }
}

void fmtsim_to_fp6(int src, const void* x, std::uint8_t* out, std::size_t n, int e3m2, int rounding) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (src) {
      case 0: out[i] = __nv_cvt_float_to_fp6(static_cast<const float*>(x)[i], fp6_of(e3m2), mode_of(rounding)); break;
      case 1: out[i] = __nv_cvt_double_to_fp6(static_cast<const double*>(x)[i], fp6_of(e3m2), mode_of(rounding)); break;
      case 2: out[i] = __nv_cvt_halfraw_to_fp6(half_of(static_cast<const std::uint16_t*>(x)[i]), fp6_of(e3m2),
                                               mode_of(rounding)); break;
      default: out[i] = __nv_cvt_bfloat16raw_to_fp6(bf16_of(static_cast<const std::uint16_t*>(x)[i]), fp6_of(e3m2),
                                                    mode_of(rounding)); break;
    }
  }
}

void fmtsim_to_fp4(int src, const void* x, std::uint8_t* out, std::size_t n, int rounding) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (src) {
      case 0: out[i] = __nv_cvt_float_to_fp4(static_cast<const float*>(x)[i], __NV_E2M1, mode_of(rounding)); break;
      case 1: out[i] = __nv_cvt_double_to_fp4(static_cast<const double*>(x)[i], __NV_E2M1, mode_of(rounding)); break;
      case 2: out[i] = __nv_cvt_halfraw_to_fp4(half_of(static_cast<const std::uint16_t*>(x)[i]), __NV_E2M1,
                                               mode_of(rounding)); break;
      default: out[i] = __nv_cvt_bfloat16raw_to_fp4(bf16_of(static_cast<const std::uint16_t*>(x)[i]), __NV_E2M1,
                                                    mode_of(rounding)); break;
    }
  }
}

// ---- E8M0: source 0 float, 1 double, 3 bfloat16 bits (NVIDIA has no half -> e8m0)
void fmtsim_to_e8m0(int src, const void* x, std::uint8_t* out, std::size_t n, int sat, int rounding) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (src) {
      case 0: out[i] = __nv_cvt_float_to_e8m0(static_cast<const float*>(x)[i], sat_of(sat), mode_of(rounding)); break;
      case 1: out[i] = __nv_cvt_double_to_e8m0(static_cast<const double*>(x)[i], sat_of(sat), mode_of(rounding)); break;
      default: out[i] = __nv_cvt_bfloat16raw_to_e8m0(bf16_of(static_cast<const std::uint16_t*>(x)[i]), sat_of(sat),
                                                     mode_of(rounding)); break;
    }
  }
}

// ---- decodes of every code: kind 0 fp8 e4m3, 1 fp8 e5m2, 2 fp6 e2m3, 3 fp6 e3m2, 4 fp4 e2m1 (half bits),
// 5 e8m0 (bfloat16 bits)
void fmtsim_decode(int kind, const std::uint8_t* codes, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    __half_raw h;
    switch (kind) {
      case 0: case 1: h = __nv_cvt_fp8_to_halfraw(codes[i], fp8_of(kind)); out[i] = h.x; break;
      case 2: case 3: h = __nv_cvt_fp6_to_halfraw(codes[i], fp6_of(kind - 2)); out[i] = h.x; break;
      case 4: h = __nv_cvt_fp4_to_halfraw(codes[i], __NV_E2M1); out[i] = h.x; break;
      default: out[i] = __nv_cvt_e8m0_to_bf16raw(codes[i]).x; break;
    }
  }
}
}
