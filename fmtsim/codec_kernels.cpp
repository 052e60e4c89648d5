// Element conversions in one pass, compiled on the user's machine by fmtsim.native; their numpy
// twins are in fmtsim.rounding (encode_fast, stochastic) and a test holds each pair equal bit
// for bit (tests/test_codec_compiled.py).
//
// Encode reads fmtsim's own tables (rounding.table_f32 / table_16: the code of every index, built
// by the exact encoder), so these loops decide nothing about rounding:
//   float32  table[(u | ((u & mask) + mask)) >> s]: u >> s with the sticky bit or-ed in, the
//            round-to-odd index at which every rounding boundary is an even index
//   16-bit   table[u]: every float16 / bfloat16 pattern has its code
// Decode, where the CPU has AVX-512, gathers sixteen values at a time from its 256-entry table.
//
// Stochastic rounding (fmtsim_sr_f32): see its comment.

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

inline uint32_t pick(uint32_t c, uint32_t x, uint32_t y) { return y ^ ((x ^ y) & (0u - c)); }  // c ? x : y, c 0 or 1

inline uint32_t odd_index(uint32_t v, uint32_t mask, int32_t shift) { return (v | ((v & mask) + mask)) >> shift; }

}  // namespace

extern "C" {

// The indices of a block are computed in one loop the compiler vectorises, then the table is read
// one byte at a time, eight codes to a store: on the CPUs measured (tools/bench.py) scalar loads
// from a table in the L1 cache beat vector gathers.
constexpr int64_t kBlock = 256;
// byte t of an 8-byte store: bits 8t.. on a little-endian machine, 8(7 - t).. on a big-endian one
constexpr int kLittle = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
inline int byte_shift(int t) { return 8 * (kLittle ? t : 7 - t); }

void fmtsim_encode_f32(int64_t n, const uint32_t* u, const uint8_t* table, int32_t shift, uint8_t* out) {
    const uint32_t mask = (1u << shift) - 1u;
    alignas(64) uint32_t idx[kBlock];
    int64_t i = 0;
    for (; i + kBlock <= n; i += kBlock) {
        for (int64_t k = 0; k < kBlock; ++k) idx[k] = odd_index(u[i + k], mask, shift);
        for (int64_t k = 0; k < kBlock; k += 8) {
            uint64_t w = 0;
            for (int t = 0; t < 8; ++t) w |= uint64_t(table[idx[k + t]]) << byte_shift(t);
            std::memcpy(out + i + k, &w, 8);
        }
    }
    for (; i < n; ++i) out[i] = table[odd_index(u[i], mask, shift)];
}

// Round to nearest even by arithmetic, for a signed float format whose codes are sign, exponent
// field and trailing significand (FP8/FP6/FP4, FNUZ, signed P3109): no table read, so the loop
// vectorises whole. Its caller (rounding.arith_params) reads the parameters off the policy's table
// and runs this kernel, both variants, on every round-to-odd index before using it; both it and
// the table give a code that depends on the input only through that index, so the check covers
// every float32 input. p: [rebias, drop, half_m1, min_normal, sub_base, max_mag, sign_code,
// zero+, zero-, over+, over-, inf+, inf-, nan+, nan-, magic] (each kind of result's code per sign).
//
// A result below the smallest normal is the significand shifted to the smallest subnormal's
// weight, rounded to nearest even. The fast variant lets the FPU do that rounding: |x| + magic,
// magic = 2^(emin - man + 23), has its ulp at that weight, so the sum's low bits are the code
// (the trick c10's and most half-precision converters use). It needs the FP environment's
// round-to-nearest, which this kernel reads on every call; under another rounding mode (set by
// fesetround) the integer variant runs. Neither depends on flush-to-zero or denormals-are-zero:
// a float32 subnormal is far below half of every format's smallest subnormal here, so it gives 0
// either way.
}  // extern "C"

namespace {

template <bool kFpuRounds>
void encode_f32_rne(int64_t n, const uint32_t* __restrict__ u, const uint32_t* __restrict__ p,
                    uint8_t* __restrict__ out) {
    const uint32_t rebias = p[0], drop = p[1], half_m1 = p[2], min_normal = p[3], max_mag = p[5], sign_code = p[6];
    const int32_t sub_base = int32_t(p[4]);
    const uint32_t zero_p = p[7], zero_n = p[8], over_p = p[9], over_n = p[10], inf_p = p[11], inf_n = p[12],
                   nan_p = p[13], nan_n = p[14], magic_bits = p[15];
    float magic;
    std::memcpy(&magic, &magic_bits, 4);
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t v = u[i];
        const uint32_t a = v & 0x7FFFFFFFu;
        const uint32_t neg = v >> 31;
        // normal: rebias the exponent field, then drop the low bits with a half ulp (less one, plus
        // the kept lsb: ties to even); a carry out of the significand steps the exponent, as it should
        const uint32_t t = a - rebias;
        const uint32_t normal = (t + half_m1 + ((t >> drop) & 1u)) >> drop;
        uint32_t sub;
        if (kFpuRounds) {
            float af;
            std::memcpy(&af, &a, 4);
            const float sum = af + magic;
            std::memcpy(&sub, &sum, 4);
            sub -= magic_bits;
        } else {  // the significand (implicit bit included) shifted by the same rule, at least 1 bit
            const uint32_t e = a >> 23;
            const uint32_t sig = (a & 0x7FFFFFu) | (uint32_t(e != 0) << 23);
            const int32_t sh = std::min(std::max(sub_base - int32_t(e | uint32_t(e == 0)), int32_t(1)), int32_t(31));
            sub = (sig + ((1u << (sh - 1)) - 1u) + ((sig >> sh) & 1u)) >> sh;
        }
        // selects as masks: the compiler keeps them in vector registers (a ?: chain became branches)
        const uint32_t mag = pick(a < min_normal, sub, normal);
        uint32_t code = mag | (sign_code & (0u - neg));
        code = pick(mag == 0, pick(neg, zero_n, zero_p), code);
        code = pick(mag > max_mag, pick(neg, over_n, over_p), code);
        code = pick(a >= 0x7F800000u, pick(a == 0x7F800000u, pick(neg, inf_n, inf_p), pick(neg, nan_n, nan_p)), code);
        out[i] = uint8_t(code);
    }
}

}  // namespace

extern "C" {

// integer_subnormals: 1 runs the integer variant whatever the rounding mode (the caller's check
// runs both)
void fmtsim_encode_f32_rne(int64_t n, const uint32_t* u, const uint32_t* p, int32_t integer_subnormals, uint8_t* out) {
    if (!integer_subnormals && std::fegetround() == FE_TONEAREST) {
        encode_f32_rne<true>(n, u, p, out);
    } else {
        encode_f32_rne<false>(n, u, p, out);
    }
}

void fmtsim_encode_16(int64_t n, const uint16_t* u, const uint8_t* table, uint8_t* out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = 0;
        for (int t = 0; t < 8; ++t) w |= uint64_t(table[u[i + t]]) << byte_shift(t);
        std::memcpy(out + i, &w, 8);
    }
    for (; i < n; ++i) out[i] = table[u[i]];
}

// decode: the float32 value (as bits) of each byte code, from a 256-entry table
void fmtsim_decode_u8(int64_t n, const uint8_t* codes, const uint32_t* values, uint32_t* out) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
        _mm512_storeu_si512(out + i, _mm512_i32gather_epi32(idx, static_cast<const void*>(values), 4));
    }
#endif
    for (; i < n; ++i) out[i] = values[codes[i]];
}

}  // extern "C"

// Stochastic rounding of float32 inputs (rounding.encode_sr_f32; its twin is rounding.encode_f64,
// the same steps in numpy). For each finite nonzero input within the format's finite range: the
// position of its toward-zero neighbour on its sign's side, by the round-to-odd index of |u|
// (``below``: a table built from the side's magnitudes, boundaries at even indices as for
// encode), then the stochastic rule on the exact fraction of the gap: a - lo is exact (Sterbenz,
// or lo is 0) and the gap is a power of two, so scaling by powers of two keeps every step exact.
// Every other input (NaN, Inf, zero, beyond max finite, a negative into an unsigned format) is
// marked in ``rest`` and left to the numpy path.
namespace {

inline int32_t exponent_of(double v) {  // floor(log2 v) of a positive normal double
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return int32_t(b >> 52) - 1023;
}

inline double pow2(int32_t k) {  // 2^k, -1022 <= k <= 1023
    const uint64_t b = uint64_t(k + 1023) << 52;
    double v;
    std::memcpy(&v, &b, 8);
    return v;
}

// The two signs' tables are one array each (the negative side's after the positive's, its
// positions offset by the positive side's length), so that picking a side is arithmetic: random
// signs would make a branch mispredict half the time.
template <typename R>
void sr_f32(int64_t n, const uint32_t* u, const R* rbits, int32_t shift, const uint16_t* below, int64_t below_half,
            const double* mag, const uint8_t* codes, int32_t top_pos, int32_t top_neg, int32_t signed_fmt,
            int32_t rule, int32_t bits, uint8_t* out, uint8_t* rest) {
    const uint32_t mask = (1u << shift) - 1u;
    for (int64_t k = 0; k < n; ++k) {
        const uint32_t v = u[k];
        const uint32_t au = v & 0x7FFFFFFFu;
        const uint32_t negative = v >> 31;
        const int32_t top = negative ? top_neg : top_pos;
        float af;
        std::memcpy(&af, &au, 4);
        const double a = af;
        const int32_t i = below[negative * below_half + odd_index(au, mask, shift)];
        if (au == 0 || au >= 0x7F800000u || (negative & ~uint32_t(signed_fmt)) || a > mag[top]) {
            rest[k] = 1;
            continue;
        }
        rest[k] = 0;
        const double lo = mag[i];
        if (a == lo) {
            out[k] = codes[i];
            continue;
        }
        const double t = a - lo;
        const int32_t log2gap = exponent_of(mag[i + 1] - lo);
        uint64_t r = uint64_t(rbits[k]);
        bool up;
        if (rule == 3) {  // equal
            up = r & 1u;
        } else {
            int32_t d = bits;
            if (d < 0) {  // every source bit the rounding discards (float32: precision 24, emin -126), up to 32
                const int32_t e_a = exponent_of(a);
                const int32_t ulp_exp = (e_a > -126 ? e_a : -126) - 23;
                d = log2gap - ulp_exp;
                d = d < 0 ? 0 : (d > 32 ? 32 : d);
                r &= (uint64_t(1) << d) - 1u;
            }
            if (rule == 1) {  // offset: floor(frac 2^(N+1)) + 2R + 1 >= 2^(N+1)
                const uint64_t sc = uint64_t(t * pow2(d + 1 - log2gap));
                up = sc + 2 * r + 1 >= (uint64_t(1) << (d + 1));
            } else {
                const double scaled = t * pow2(d - log2gap);  // frac * 2^N, exact
                uint64_t sc = uint64_t(scaled);  // floor: scaled >= 0
                if (rule == 2) {  // nearest: ties to even
                    const double rem = scaled - double(sc);
                    sc += rem > 0.5 || (rem == 0.5 && (sc & 1u));
                }
                up = sc + r >= (uint64_t(1) << d);
            }
        }
        out[k] = codes[i + int32_t(up)];  // a < max finite here, so i + 1 <= top
    }
}

}  // namespace

extern "C" {

void fmtsim_sr_f32_r32(int64_t n, const uint32_t* u, const uint32_t* rbits, int32_t shift, const uint16_t* below,
                       int64_t below_half, const double* mag, const uint8_t* codes, int32_t top_pos, int32_t top_neg,
                       int32_t signed_fmt, int32_t rule, int32_t bits, uint8_t* out, uint8_t* rest) {
    sr_f32(n, u, rbits, shift, below, below_half, mag, codes, top_pos, top_neg, signed_fmt, rule, bits, out, rest);
}

void fmtsim_sr_f32_r64(int64_t n, const uint32_t* u, const uint64_t* rbits, int32_t shift, const uint16_t* below,
                       int64_t below_half, const double* mag, const uint8_t* codes, int32_t top_pos, int32_t top_neg,
                       int32_t signed_fmt, int32_t rule, int32_t bits, uint8_t* out, uint8_t* rest) {
    sr_f32(n, u, rbits, shift, below, below_half, mag, codes, top_pos, top_neg, signed_fmt, rule, bits, out, rest);
}

}  // extern "C"
