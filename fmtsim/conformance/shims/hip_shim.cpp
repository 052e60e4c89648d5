// fmtsim's bridge to AMD's host FP8 conversion functions (hip/amd_detail/amd_hip_fp8.h).
// Compiled on first use by fmtsim.conformance.hip_impl against the user's ROCm headers with the
// host compiler; it only loops over arrays and calls AMD's functions, so the results are AMD's.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if !(defined(__clang__) && defined(__HIP__))
// Outside hipcc, host_defines.h leaves out the few type traits the header names in namespace
// __hip_internal; the standard library's are the same traits.
namespace __hip_internal {
using std::conditional;
using std::is_same;
}  // namespace __hip_internal
#include <hip/amd_detail/amd_hip_vector_types.h>
#include <hip/amd_detail/amd_hip_fp16.h>
// declared (the pair conversion the header names is not part of the host fp16 header); the
// shim never calls the x2 functions that use it
float2 __half22float2(__half2);
#endif
#include <hip/amd_detail/amd_hip_fp8.h>

#if !(defined(__clang__) && defined(__HIP__))
#include <cstdlib>
// hip_assert.h's device-side assertion printer names these device-library functions; compiled
// for the host they would be left undefined. The host conversions never reach them.
extern "C" {
__attribute__((weak)) uint64_t __ockl_fprintf_stderr_begin() { std::abort(); }
__attribute__((weak)) uint64_t __ockl_fprintf_append_args(uint64_t, uint32_t, uint64_t, uint64_t, uint64_t,
                                                          uint64_t, uint64_t, uint64_t, uint64_t, uint32_t) {
  std::abort();
}
__attribute__((weak)) uint64_t __ockl_fprintf_append_string_n(uint64_t, const char*, uint64_t, uint32_t) {
  std::abort();
}
}
#endif

extern "C" {

// interp: 0 OCP E4M3, 1 OCP E5M2, 2 E4M3 FNUZ, 3 E5M2 FNUZ; source 0 float, 1 double,
// 2 half bits, 3 bfloat16 bits
void fmtsim_hip_to_fp8(int src, const void* x, std::uint8_t* out, std::size_t n, int sat, int interp) {
  const __hip_saturation_t s = sat ? __HIP_SATFINITE : __HIP_NOSAT;
  const __hip_fp8_interpretation_t t = static_cast<__hip_fp8_interpretation_t>(interp);
  for (std::size_t i = 0; i < n; ++i) {
    switch (src) {
      case 0: out[i] = __hip_cvt_float_to_fp8(static_cast<const float*>(x)[i], s, t); break;
      case 1: out[i] = __hip_cvt_double_to_fp8(static_cast<const double*>(x)[i], s, t); break;
      case 2: {
        __half_raw h;
        h.x = static_cast<const std::uint16_t*>(x)[i];
        out[i] = __hip_cvt_halfraw_to_fp8(h, s, t);
        break;
      }
      default: {
        __hip_bfloat16_raw b;
        b.x = static_cast<const std::uint16_t*>(x)[i];
        out[i] = __hip_cvt_bfloat16raw_to_fp8(b, s, t);
        break;
      }
    }
  }
}

// every code decoded to float by the header's own decoder (what the fp8 types' operator float
// calls). __hip_cvt_fp8_to_halfraw is not used: outside hipcc its __half_raw holds an integer,
// and the _Float16 result would be converted by value.
void fmtsim_hip_decode(int interp, const std::uint8_t* codes, float* out, std::size_t n) {
  const bool fnuz = interp >= 2;
  const int we = (interp == 0 || interp == 2) ? 4 : 5;
  const int wm = (interp == 0 || interp == 2) ? 3 : 2;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = fnuz ? internal::cast_from_f8<float, true>(codes[i], wm, we)
                  : internal::cast_from_f8<float, false>(codes[i], wm, we);
  }
}
}
