// The NVIDIA fused dot-product step (fmtsim.mma.step.nv_step), chained along K, one output
// at a time, in 64-bit integers. Compiled on the user's machine by fmtsim.mma.compiled and
// held bit for bit to the numpy step by tests/test_mma_compiled.py.
//
// Per output and per step of L products: e_max = the largest a.exp + b.exp of a nonzero
// product, of C's exponent (clamped at c_emin) when C is nonzero, and e_zero when some
// product or C is zero; every product sgn * mag_a * mag_b * 2^(exp_a + exp_b - man_a - man_b)
// and C are truncated toward zero to the grid 2^(e_max - F) and summed exactly; the sum is
// rounded to the output format (toward zero or to nearest even). The result is the next
// step's C.
//
// Outputs this code does not finish are flagged in `bail` and left to the numpy step: a row
// of A or column of B with a NaN or Inf (the caller flags them), a non-finite C, and a result
// that reaches the output's overflow threshold.

#include <cstdint>
#include <cstring>
#include <cmath>

namespace {

// 2^x for -1022 <= x <= 1023, from its bits
inline double pow2(int32_t x) {
    return __builtin_bit_cast(double, uint64_t(int64_t(x) + 1023) << 52);
}

constexpr int kTile = 128;  // outputs of a row handled together: one step of B's columns stays in L1

// Step s (K columns s * step ..) of row i of A against columns j0 .. j0 + w of B (w <= kTile).
// The loops run along the outputs (j), so that the compiler vectorises every one of them.
template <int STEP>
void row_step(int64_t i, int64_t j0, int64_t w, int64_t n, int64_t k, int64_t s, int64_t step_rt,
              const int32_t* a_sig, const int32_t* a_exp, const int32_t* b_sig, const int32_t* b_exp,
              int32_t man_a, int32_t man_b, int32_t f, int32_t e_zero, int32_t c_emin,
              int32_t out_man, int32_t out_emin, bool out_rne, double out_top, float* out, uint8_t* bail) {
    const int64_t step = STEP ? STEP : step_rt;
    const int32_t shift0 = f - man_a - man_b;
    alignas(64) int32_t emax[kTile];
    alignas(64) int32_t zeros[kTile];
    alignas(64) int64_t sum[kTile];
    alignas(64) double rounded[kTile];
    float* o = out + i * n + j0;
    uint8_t* bl = bail + i * n + j0;
    {
        const int32_t c_floor = c_emin > -126 ? c_emin : -126;
        for (int64_t j = 0; j < w; ++j) {
            uint32_t cb;
            std::memcpy(&cb, &o[j], 4);
            const int32_t cef = int32_t((cb >> 23) & 0xFF);
            const int32_t c_e = cef ? cef - 127 : -126;
            const int32_t c_al = c_e > c_floor ? c_e : c_floor;
            emax[j] = (cb & 0x7FFFFFFF) ? c_al : e_zero;  // a zero C counts as a zero term
            zeros[j] = 0;
            sum[j] = 0;
        }
        const int64_t kk = s * step;
        // the largest exponent of a nonzero product (exponents lie far inside int32: zeros carry
        // -2^20, and their products are masked here)
        for (int64_t t = 0; t < step; ++t) {
            const int32_t as = a_sig[i * k + kk + t];
            const int32_t ae = a_exp[i * k + kk + t];
            const int32_t* bs = b_sig + (kk + t) * n + j0;
            const int32_t* be = b_exp + (kk + t) * n + j0;
            for (int64_t j = 0; j < w; ++j) {
                const int32_t p = as * bs[j];
                const int32_t e = ae + be[j];
                emax[j] = (p != 0 && e > emax[j]) ? e : emax[j];
                zeros[j] |= p == 0;
            }
        }
        for (int64_t j = 0; j < w; ++j) {
            emax[j] = (zeros[j] && e_zero > emax[j]) ? e_zero : emax[j];
        }
        // every term truncated toward zero to 2^(e_max - F), summed exactly
        for (int64_t t = 0; t < step; ++t) {
            const int32_t as = a_sig[i * k + kk + t];
            const int32_t ae = a_exp[i * k + kk + t] + shift0;
            const int32_t* bs = b_sig + (kk + t) * n + j0;
            const int32_t* be = b_exp + (kk + t) * n + j0;
            for (int64_t j = 0; j < w; ++j) {
                const int32_t p = as * bs[j];
                const int32_t sh = ae + be[j] - emax[j];  // <= F - man_a - man_b
                const uint64_t mag = uint64_t(uint32_t(p < 0 ? -p : p));
                const int32_t rs = -sh < 63 ? -sh : 63;
                const uint64_t term = sh >= 0 ? mag << (sh & 63) : mag >> rs;
                sum[j] += p < 0 ? -int64_t(term) : int64_t(term);
            }
        }
        // C aligned like a product, the sum rounded to the output: the next step's C. In double,
        // exactly: the caller guarantees |sum| + 2^(F + 1) < 2^53, C times a power of two and its
        // truncation are exact, and so are the scalings by powers of two (normal doubles).
        for (int64_t j = 0; j < w; ++j) {
            uint32_t cb;
            std::memcpy(&cb, &o[j], 4);
            const uint32_t c_bits = ((cb >> 23) & 0xFF) != 0xFF ? cb : 0u;  // NaN / Inf: left below
            const double cv = double(__builtin_bit_cast(float, c_bits));
            // truncations and roundings of values below 2^51 in magnitude: through int64, and by
            // adding and taking away 1.5 * 2^52 (ties to even in the default rounding mode)
            const double ct = double(int64_t(cv * pow2(f - emax[j])));  // C's term (0 for a zero C)
            const double v = (double(sum[j]) + ct) * pow2(emax[j] - f);  // the exact sum
            const int32_t ve = int32_t((__builtin_bit_cast(uint64_t, v) >> 52) & 0x7FF) - 1023;  // 0 or normal
            const int32_t g = (ve > out_emin ? ve : out_emin) - out_man;  // the output's ulp there
            const double y = v * pow2(-g);
            const double qn = (y + 0x1.8p52) - 0x1.8p52, qz = double(int64_t(y));
            rounded[j] = (out_rne ? qn : qz) * pow2(g) + 0.0;  // + 0: an exact zero is +0
        }
        for (int64_t j = 0; j < w; ++j) {
            uint32_t cb;
            std::memcpy(&cb, &o[j], 4);
            const bool c_finite = ((cb >> 23) & 0xFF) != 0xFF;
            const double r = rounded[j];
            const uint8_t left = uint8_t(bl[j] | !c_finite | (r >= out_top) | (-r >= out_top));
            bl[j] = left;
            // |r| < 2^128 where it is kept: the conversion is exact; where it is not, its bits are dropped
            const uint32_t r_bits = __builtin_bit_cast(uint32_t, float(left ? 0.0 : r));
            o[j] = __builtin_bit_cast(float, left ? cb : r_bits);
        }
    }
}

}  // namespace

extern "C" {

// a_sig, a_exp: (m, k) row-major, the signed significand (sgn * mag) and alignment exponent of
// each element of A (zeros: sig 0); b_sig, b_exp: (k, n), of B. Steps s0 .. s1 of `step`
// columns of K. c: (m, n) float32 C; out: (m, n) the chained result; bail: (m, n), 1 where the
// output is left to the numpy step. row_bad / col_bad: 1 for rows / columns to leave.
void fmtsim_nv_chain(int64_t m, int64_t n, int64_t k, int64_t s0, int64_t s1, int64_t step,
                     const int32_t* a_sig, const int32_t* a_exp, const int32_t* b_sig, const int32_t* b_exp,
                     const uint8_t* row_bad, const uint8_t* col_bad,
                     int32_t man_a, int32_t man_b, int32_t f, int32_t e_zero, int32_t c_emin_first,
                     int32_t c_emin_rest, int32_t out_man, int32_t out_emin, int32_t out_rne,
                     double out_top, const float* c, float* out, uint8_t* bail) {
    for (int64_t i = 0; i < m * n; ++i) {
        out[i] = c[i];
        bail[i] = row_bad[i / n] | col_bad[i % n];
    }
    // step by step over all outputs (a step of B is reused by every row while it is in cache)
    for (int64_t s = s0; s < s1; ++s) {
        const int32_t c_emin = s == s0 ? c_emin_first : c_emin_rest;
        for (int64_t j0 = 0; j0 < n; j0 += kTile) {
            const int64_t w = n - j0 < kTile ? n - j0 : kTile;
            for (int64_t i = 0; i < m; ++i) {
                auto run = [&](auto fn) {
                    fn(i, j0, w, n, k, s, step, a_sig, a_exp, b_sig, b_exp, man_a, man_b, f, e_zero, c_emin,
                       out_man, out_emin, out_rne != 0, out_top, out, bail);
                };
                switch (step) {  // the units' step lengths, unrolled
                    case 4: run(row_step<4>); break;
                    case 8: run(row_step<8>); break;
                    case 16: run(row_step<16>); break;
                    case 32: run(row_step<32>); break;
                    default: run(row_step<0>); break;
                }
            }
        }
    }
}

}  // extern "C"
