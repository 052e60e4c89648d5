// The NVIDIA fused dot-product step (fmtsim.mma.step.nv_step), the CDNA3 FP8 step
// (fmtsim.mma.step.amd_step) and the NVIDIA block-scaled FP4 step (grouped_step), chained
// along K: one row of A against up to kTile columns of B at a time, every loop running along
// the outputs so that the compiler vectorises it; exact integer terms, and C's term and the
// roundings in doubles where they are exact (in integers for the FP4 step). At the end, the
// fma family's chains of IEEE fused multiply-adds (fmtsim.mma.fma). Compiled on the user's
// machine by fmtsim.native for fmtsim.mma.compiled and held bit for bit to the numpy step by
// tests/test_mma_compiled.py.
//
// NVIDIA, per output and per step of L products: e_max = the largest a.exp + b.exp of a nonzero
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
#include <type_traits>

namespace {

// 2^x for -1022 <= x <= 1023, from its bits
inline double pow2(int32_t x) {
    return __builtin_bit_cast(double, uint64_t(int64_t(x) + 1023) << 52);
}

// trunc(p * 2^sh) toward zero, p = the product of two significands; T = int32_t when the caller
// has checked that every term and a step's sum fit it (narrow units: twice the lanes), else int64_t
template <typename T>
inline T term(int32_t p, int32_t sh) {
    using U = std::make_unsigned_t<T>;
    constexpr int32_t kTop = int32_t(sizeof(T)) * 8 - 1;
    const U mag = U(uint32_t(p < 0 ? -p : p));
    const int32_t rs = -sh < kTop ? -sh : kTop;
    const U t = sh >= 0 ? U(mag << (sh & kTop)) : U(mag >> rs);
    return p < 0 ? T(-T(t)) : T(t);
}

constexpr int kTile = 128;  // outputs of a row handled together: one step of B's columns stays in L1

// Step s (K columns s * step ..) of row i of A against columns j0 .. j0 + w of B (w <= kTile).
// The loops run along the outputs (j), so that the compiler vectorises every one of them.
template <int STEP, typename T>
void row_step(int64_t i, int64_t j0, int64_t w, int64_t n, int64_t k, int64_t s, int64_t step_rt,
              const int32_t* a_sig, const int32_t* a_exp, const int32_t* b_sig, const int32_t* b_exp,
              int32_t man_a, int32_t man_b, int32_t f, int32_t e_zero, int32_t c_emin,
              int32_t out_man, int32_t out_emin, bool out_rne, double out_top, float* out, uint8_t* bail) {
    const int64_t step = STEP ? STEP : step_rt;
    const int32_t shift0 = f - man_a - man_b;
    alignas(64) int32_t emax[kTile];
    alignas(64) int32_t zeros[kTile];
    alignas(64) T sum[kTile];
    alignas(64) double rounded[kTile];
    float* o = out + i * n + j0;
    uint8_t* bl = bail + i * n + j0;
    {  // one step: C's alignment, the largest exponent, the terms, the rounding
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
                sum[j] += term<T>(p, sh);
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

// AMD CDNA3 FP8 (fmtsim.mma.step.amd_step without product overflow): step s of row i against
// columns j0 .. j0 + w. Products aligned and truncated per group (G = 2: even and odd k apart),
// the groups combined by rounding down (arithmetic shifts), C joined rounding down (C below
// e_max - F - 1 dropped when drop_small_c), the sum rounded down to F2 bits and then to
// nearest even fp32.
template <int STEP, int G, typename T>
void amd_row_step(int64_t i, int64_t j0, int64_t w, int64_t n, int64_t k, int64_t s, int64_t step_rt,
                  const int32_t* a_sig, const int32_t* a_exp, const int32_t* b_sig, const int32_t* b_exp,
                  int32_t man_a, int32_t man_b, int32_t f, int32_t f2, bool drop_small_c, float* out,
                  uint8_t* bail) {
    const int64_t step = STEP ? STEP : step_rt;
    const int32_t shift0 = f - man_a - man_b;
    constexpr int32_t kNone = -(1 << 30);  // a group with no nonzero product
    alignas(64) int32_t gmax[G][kTile];
    alignas(64) T sum[G][kTile];
    float* o = out + i * n + j0;
    uint8_t* bl = bail + i * n + j0;
    for (int g = 0; g < G; ++g) {
        for (int64_t j = 0; j < w; ++j) {
            gmax[g][j] = kNone;
            sum[g][j] = 0;
        }
    }
    const int64_t kk = s * step;
    for (int64_t t = 0; t < step; ++t) {
        const int32_t as = a_sig[i * k + kk + t];
        const int32_t ae = a_exp[i * k + kk + t];
        const int32_t* bs = b_sig + (kk + t) * n + j0;
        const int32_t* be = b_exp + (kk + t) * n + j0;
        int32_t* gm = gmax[t % G];
        for (int64_t j = 0; j < w; ++j) {
            const int32_t p = as * bs[j];
            const int32_t e = ae + be[j];
            gm[j] = (p != 0 && e > gm[j]) ? e : gm[j];
        }
    }
    for (int64_t t = 0; t < step; ++t) {
        const int32_t as = a_sig[i * k + kk + t];
        const int32_t ae = a_exp[i * k + kk + t] + shift0;
        const int32_t* bs = b_sig + (kk + t) * n + j0;
        const int32_t* be = b_exp + (kk + t) * n + j0;
        const int32_t* gm = gmax[t % G];
        T* sm = sum[t % G];
        for (int64_t j = 0; j < w; ++j) {
            const int32_t p = as * bs[j];
            const int32_t sh = ae + be[j] - gm[j];  // <= F - man_a - man_b where p != 0
            sm[j] += term<T>(p, sh);
        }
    }
    for (int64_t j = 0; j < w; ++j) {
        // the groups written out (G is 1 or 2): a loop nest with inner loops is not vectorised
        static_assert(G == 1 || G == 2, "one group, or even and odd");
        int32_t edot = gmax[0][j];
        if constexpr (G == 2) edot = gmax[1][j] > edot ? gmax[1][j] : edot;
        const int32_t d0 = edot - gmax[0][j];
        int64_t sdot = int64_t(sum[0][j]) >> (d0 < 63 ? d0 : 63);  // arithmetic: rounds down
        if constexpr (G == 2) {
            const int32_t d1 = edot - gmax[1][j];
            sdot += int64_t(sum[1][j]) >> (d1 < 63 ? d1 : 63);
        }
        uint32_t cb;
        std::memcpy(&cb, &o[j], 4);
        const int32_t cef = int32_t((cb >> 23) & 0xFF);
        const int64_t c_sig = cef == 0xFF ? 0 : cef ? ((cb & 0x7FFFFF) | (1u << 23)) : (cb & 0x7FFFFF);
        const int64_t cs = (cb >> 31) ? -c_sig : c_sig;
        const int32_t c_exp = cef ? cef - 127 : -126;
        const int32_t emax = edot > c_exp ? edot : c_exp;
        const int64_t kd = int64_t(edot) - emax + (f2 + 1 - f);
        const int64_t kdr = -kd < 63 ? -kd : 63;
        // left shifts of negative values as multiplications by powers of two (no overflow: below 2^62)
        sdot = kd >= 0 ? sdot * (int64_t(1) << (kd & 63)) : sdot >> kdr;
        const int64_t kc = int64_t(c_exp) - emax + (f - 23);
        const int64_t kcr = -kc < 63 ? -kc : 63;
        int64_t sc = kc >= 0 ? cs * (int64_t(1) << (kc & 63)) : cs >> kcr;
        sc = (drop_small_c && c_exp < emax - f - 1) ? 0 : sc;
        const int64_t total = sdot + sc * (int64_t(1) << (f2 + 1 - f));
        const double v = double(total) * pow2(emax - f2 - 1);  // exact below 2^53 (else left)
        const int32_t ve = int32_t((__builtin_bit_cast(uint64_t, v) >> 52) & 0x7FF) - 1023;
        const int32_t g = (ve > -126 ? ve : -126) - f2;
        const double y = v * pow2(-g);
        const double yt = double(int64_t(y));  // |y| < 2^(F2 + 2)
        const double r = (yt - (yt > y ? 1.0 : 0.0)) * pow2(g) + 0.0;  // floor; + 0: a zero is +0
        const float rf = float(r);  // the fp32 rounding: nearest even (Inf past the range)
        const uint32_t rb = __builtin_bit_cast(uint32_t, rf);
        const int64_t lim = int64_t(1) << 53;
        const uint8_t left = uint8_t(bl[j] | (cef == 0xFF) | (total >= lim) | (-total >= lim) |
                                     (((rb >> 23) & 0xFF) == 0xFF));
        bl[j] = left;
        o[j] = __builtin_bit_cast(float, left ? cb : rb);
    }
}

// The driver every chain shares: out = C and bail = the caller's rows and columns to leave, then
// each(s, i, j0, w) for every step s0 .. s1 - 1, every tile of up to kTile columns and every row
// (a step of B is reused by every row while it is in cache).
template <typename Each>
void chain_steps(int64_t m, int64_t n, int64_t s0, int64_t s1, const uint8_t* row_bad, const uint8_t* col_bad,
                 const float* c, float* out, uint8_t* bail, Each each) {
    for (int64_t i = 0; i < m * n; ++i) {
        out[i] = c[i];
        bail[i] = row_bad[i / n] | col_bad[i % n];
    }
    for (int64_t s = s0; s < s1; ++s) {
        for (int64_t j0 = 0; j0 < n; j0 += kTile) {
            const int64_t w = n - j0 < kTile ? n - j0 : kTile;
            for (int64_t i = 0; i < m; ++i) each(s, i, j0, w);
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
                     double out_top, int32_t narrow, const float* c, float* out, uint8_t* bail) {
    chain_steps(m, n, s0, s1, row_bad, col_bad, c, out, bail, [&](int64_t s, int64_t i, int64_t j0, int64_t w) {
        const int32_t c_emin = s == s0 ? c_emin_first : c_emin_rest;
        auto run = [&](auto fn) {
            fn(i, j0, w, n, k, s, step, a_sig, a_exp, b_sig, b_exp, man_a, man_b, f, e_zero, c_emin, out_man,
               out_emin, out_rne != 0, out_top, out, bail);
        };
        if (narrow) {
            switch (step) {  // the units' step lengths, unrolled
                case 16: run(row_step<16, int32_t>); break;
                case 32: run(row_step<32, int32_t>); break;
                default: run(row_step<0, int32_t>); break;
            }
        } else {
            switch (step) {
                case 4: run(row_step<4, int64_t>); break;
                case 8: run(row_step<8, int64_t>); break;
                case 16: run(row_step<16, int64_t>); break;
                case 32: run(row_step<32, int64_t>); break;
                default: run(row_step<0, int64_t>); break;
            }
        }
    });
}

}  // extern "C"

extern "C" {

// As fmtsim_nv_chain, for the CDNA3 FP8 units: groups = 2 when even and odd products are
// aligned apart; f2: the fraction bits of the first rounding.
void fmtsim_amd_chain(int64_t m, int64_t n, int64_t k, int64_t s0, int64_t s1, int64_t step,
                      const int32_t* a_sig, const int32_t* a_exp, const int32_t* b_sig, const int32_t* b_exp,
                      const uint8_t* row_bad, const uint8_t* col_bad, int32_t man_a, int32_t man_b, int32_t f,
                      int32_t f2, int32_t groups, int32_t drop_small_c, int32_t narrow, const float* c, float* out,
                      uint8_t* bail) {
    chain_steps(m, n, s0, s1, row_bad, col_bad, c, out, bail, [&](int64_t s, int64_t i, int64_t j0, int64_t w) {
        auto run = [&](auto fn) {
            fn(i, j0, w, n, k, s, step, a_sig, a_exp, b_sig, b_exp, man_a, man_b, f, f2, drop_small_c != 0, out,
               bail);
        };
        if (groups == 2) {
            if (narrow) {
                switch (step) {
                    case 16: run(amd_row_step<16, 2, int32_t>); break;
                    default: run(amd_row_step<0, 2, int32_t>); break;
                }
            } else {
                run(amd_row_step<0, 2, int64_t>);
            }
        } else {
            switch (step) {
                case 16: run(amd_row_step<16, 1, int64_t>); break;
                default: run(amd_row_step<0, 1, int64_t>); break;
            }
        }
    });
}

}  // extern "C"

namespace {

// NVIDIA block-scaled FP4 (fmtsim.mma.step.grouped_step, family nv_grouped): step s of row i
// against columns j0 .. j0 + w. Each group of G products is summed exactly (the elements are
// small integers in units of their format's smallest step), multiplied by its scale product and
// aligned on the scale product's exponent (e_zero for a group whose products are all zero or
// whose scale is zero); the groups and C are truncated toward zero to 2^(e_max - F), summed in
// int64 (the caller checks that the sum fits), and the sum is rounded toward zero to fp32 in
// integers (it can pass 2^53, so not through a double). A result of 2^128 or more is left.
template <int STEP, int G>
void grouped_row_step(int64_t i, int64_t j0, int64_t w, int64_t n, int64_t k, int64_t s, int64_t step_rt,
                      int64_t group_rt, const int32_t* a_val, const int32_t* b_val, const int32_t* sa_mag,
                      const int32_t* sa_exp, const int32_t* sb_mag, const int32_t* sb_exp, int64_t n_blocks,
                      int64_t block, int32_t f, int32_t shift, int32_t e_zero, float* out, uint8_t* bail) {
    const int64_t step = STEP ? STEP : step_rt;
    const int64_t group = G ? G : group_rt;
    const int64_t n_groups = step / group;
    constexpr int kMaxGroups = 8;  // the caller keeps step / group <= 8
    alignas(64) int32_t emax[kTile];
    alignas(64) int32_t ge[kMaxGroups][kTile];
    alignas(64) int64_t gt[kMaxGroups][kTile];
    alignas(64) int64_t sum[kTile];
    float* o = out + i * n + j0;
    uint8_t* bl = bail + i * n + j0;
    const int64_t kk = s * step;
    for (int64_t j = 0; j < w; ++j) {
        uint32_t cb;
        std::memcpy(&cb, &o[j], 4);
        const int32_t cef = int32_t((cb >> 23) & 0xFF);
        emax[j] = (cb & 0x7FFFFFFF) && cef != 0xFF ? (cef ? cef - 127 : -126) : e_zero;
    }
    for (int64_t g = 0; g < n_groups; ++g) {
        alignas(64) int32_t psum[kTile];
        alignas(64) int32_t nz[kTile];
        for (int64_t j = 0; j < w; ++j) {
            psum[j] = 0;
            nz[j] = 0;
        }
        for (int64_t t = 0; t < group; ++t) {
            const int64_t kt = kk + g * group + t;
            const int32_t av = a_val[i * k + kt];
            const int32_t* bv = b_val + kt * n + j0;
            for (int64_t j = 0; j < w; ++j) {
                psum[j] += av * bv[j];
                nz[j] |= (av != 0) & (bv[j] != 0);
            }
        }
        const int64_t blk = (kk + g * group) / block;
        const int32_t am = sa_mag[i * n_blocks + blk], ae = sa_exp[i * n_blocks + blk];
        const int32_t* bm = sb_mag + blk * n + j0;
        const int32_t* be = sb_exp + blk * n + j0;
        for (int64_t j = 0; j < w; ++j) {
            const int32_t smag = am * bm[j];
            const bool zero = nz[j] == 0 || smag == 0;
            const int32_t e = zero ? e_zero : ae + be[j];
            ge[g][j] = e;
            emax[j] = e > emax[j] ? e : emax[j];
            const int64_t p = psum[j];
            gt[g][j] = (p < 0 ? -p : p) * int64_t(smag);  // |group sum| * scale product, signed below
            gt[g][j] = p < 0 ? -gt[g][j] : gt[g][j];
        }
    }
    for (int64_t j = 0; j < w; ++j) sum[j] = 0;
    for (int64_t g = 0; g < n_groups; ++g) {
        for (int64_t j = 0; j < w; ++j) {
            const int64_t t = gt[g][j];
            const uint64_t mag = uint64_t(t < 0 ? -t : t) << shift;
            const int32_t d = emax[j] - ge[g][j];  // >= 0
            const uint64_t tr = mag >> (d < 63 ? d : 63);
            sum[j] += t < 0 ? -int64_t(tr) : int64_t(tr);
        }
    }
    for (int64_t j = 0; j < w; ++j) {
        uint32_t cb;
        std::memcpy(&cb, &o[j], 4);
        const int32_t cef = int32_t((cb >> 23) & 0xFF);
        const bool c_finite = cef != 0xFF;
        // C aligned like a product: trunc(c_sig * 2^(c_exp - e_max + F - 23)), signed
        const int64_t c_sig = c_finite ? (cef ? ((cb & 0x7FFFFF) | (1u << 23)) : (cb & 0x7FFFFF)) : 0;
        const int32_t c_exp = cef ? cef - 127 : -126;
        const int32_t sh = c_exp - emax[j] + (f - 23);
        const int64_t ct = sh >= 0 ? c_sig << (sh < 63 ? sh : 63) : c_sig >> (-sh < 63 ? -sh : 63);
        const int64_t total = sum[j] + ((cb >> 31) ? -ct : ct);
        // toward zero onto fp32's grid: 24 bits below the leading one, none below 2^-149
        const uint64_t mag = uint64_t(total < 0 ? -total : total);
        const int32_t x = emax[j] - f;  // the exponent of the sum's last bit
        const int32_t top = mag ? x + 63 - __builtin_clzll(mag | 1) : -1000;  // exponent of the leading one
        const int32_t lsb = top - 23 > -149 ? top - 23 : -149;
        const int32_t drop = lsb - x;
        const uint64_t q = drop >= 64 ? 0 : drop >= 0 ? mag >> drop : mag << (-drop < 63 ? -drop : 63);
        // q * 2^lsb: normal when q has 24 bits (lsb > -149 or q >= 2^23), else subnormal
        const uint32_t bits = q >= (1u << 23) ? (uint32_t(lsb + 23 + 127) << 23) | uint32_t(q & 0x7FFFFF)
                                              : uint32_t(q);
        const uint32_t rb = (total < 0 && q ? 0x80000000u : 0u) | bits;
        const uint8_t left = uint8_t(bl[j] | !c_finite | (q && top > 127));
        bl[j] = left;
        o[j] = __builtin_bit_cast(float, left ? cb : rb);
    }
}

}  // namespace

extern "C" {

// As fmtsim_nv_chain, for the nv_grouped units: a_val (m, k), b_val (k, n): each element's
// signed value in units of its format's smallest step; sa_mag / sa_exp (m, n_blocks) and
// sb_mag / sb_exp (n_blocks, n): the block scales' significands and exponents; shift: F minus
// the fraction bits of a group's value times its scale product.
void fmtsim_grouped_chain(int64_t m, int64_t n, int64_t k, int64_t s0, int64_t s1, int64_t step, int64_t group,
                          const int32_t* a_val, const int32_t* b_val, const int32_t* sa_mag,
                          const int32_t* sa_exp, const int32_t* sb_mag, const int32_t* sb_exp, int64_t n_blocks,
                          int64_t block, const uint8_t* row_bad, const uint8_t* col_bad, int32_t f, int32_t shift,
                          int32_t e_zero, const float* c, float* out, uint8_t* bail) {
    chain_steps(m, n, s0, s1, row_bad, col_bad, c, out, bail, [&](int64_t s, int64_t i, int64_t j0, int64_t w) {
        auto run = [&](auto fn) {
            fn(i, j0, w, n, k, s, step, group, a_val, b_val, sa_mag, sa_exp, sb_mag, sb_exp, n_blocks, block, f,
               shift, e_zero, out, bail);
        };
        if (step == 64 && group == 16) {
            run(grouped_row_step<64, 16>);  // every nv_grouped unit's shape
        } else {
            run(grouped_row_step<0, 0>);
        }
    });
}

}  // extern "C"

namespace {

// The fma family (fmtsim.mma.fma): D = fma(a_k, b_k, D) for k = k0 .. k1 - 1 in that order,
// each rounded once by the CPU's IEEE fused multiply-add (std::fma: vfmadd where the CPU has
// it, the C library's correctly rounded fma otherwise), with gradual underflow, signed zeros,
// Inf and NaN as IEEE 754 gives them (a NaN's payload is not kept: the caller writes every NaN
// result as the canonical one). Rows are taken kRows at a time and columns kCols at a time, so
// that a row of B is read once for several rows of D; each output still sees K in order.
template <typename T>
void fma_rows(int64_t i0, int64_t rows, int64_t n, int64_t k, int64_t k0, int64_t k1, const T* a, const T* b,
              T* out) {
    constexpr int64_t kRows = 8, kCols = 256;
    alignas(64) T acc[kRows][kCols];
    for (int64_t j0 = 0; j0 < n; j0 += kCols) {
        const int64_t w = n - j0 < kCols ? n - j0 : kCols;
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < w; ++j) acc[r][j] = out[(i0 + r) * n + j0 + j];
        }
        for (int64_t kk = k0; kk < k1; ++kk) {
            const T* bk = b + kk * n + j0;
            for (int64_t r = 0; r < rows; ++r) {
                const T ar = a[(i0 + r) * k + kk];
                T* ac = acc[r];
                for (int64_t j = 0; j < w; ++j) ac[j] = std::fma(ar, bk[j], ac[j]);
            }
        }
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < w; ++j) out[(i0 + r) * n + j0 + j] = acc[r][j];
        }
    }
}

template <typename T>
void fma_chain(int64_t m, int64_t n, int64_t k, int64_t k0, int64_t k1, const T* a, const T* b, T* out) {
    constexpr int64_t kRows = 8;
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
        fma_rows<T>(i0, m - i0 < kRows ? m - i0 : kRows, n, k, k0, k1, a, b, out);
    }
}

}  // namespace

extern "C" {

// a (m, k), b (k, n) row-major values; out (m, n): C on entry, D on return, after the FMAs
// of K columns k0 .. k1 - 1.
void fmtsim_fma32_chain(int64_t m, int64_t n, int64_t k, int64_t k0, int64_t k1, const float* a, const float* b,
                        float* out) {
    fma_chain<float>(m, n, k, k0, k1, a, b, out);
}

void fmtsim_fma64_chain(int64_t m, int64_t n, int64_t k, int64_t k0, int64_t k1, const double* a,
                        const double* b, double* out) {
    fma_chain<double>(m, n, k, k0, k1, a, b, out);
}

}  // extern "C"
