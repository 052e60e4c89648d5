// Block conversions of float32 blocks in one pass per block, each held bit for bit to its numpy
// twin by a test (compiled on the user's machine by fmtsim.native):
//
// OCP MX (fmtsim.mx.quantize, tests/test_mx_compiled.py): the block's amax, its E8M0 scale by
// the scale rule, and each element scaled by the power of two and encoded through fmtsim's own
// encode table (rounding.table_f32: the code of every round-to-odd index, built by the exact
// encoder). Every step is the numpy path's, on the same bits:
//   amax         the largest |x| as an integer (magnitudes order as their bit patterns;
//                NaN's above Inf's)
//   scale code   mx.scale_codes' float32 branch for the four rules
//   scaled       x * 2^(127 - code) in float32 (exact unless it underflows; a nonzero that
//                underflows to zero keeps its sign and nonzero-ness as the smallest subnormal)
//   code         table[(u | ((u & mask) + mask)) >> s]: u >> s with the sticky bit or-ed in
//
// NVIDIA NVFP4 (fmtsim.nvfp4.quantize, tests/test_nvfp4_compiled.py): the block's amax, its
// UE4M3 scale by the recipe's float32 steps in their order (TransformerEngine's reference or
// torchao's), encoded and decoded through tables, then each element times the recipe's
// multiplier, clamped to +-6 and encoded to E2M1 through its table.

#include <cstdint>

namespace {

constexpr uint32_t kMag = 0x7FFFFFFFu;
constexpr uint32_t kInf = 0x7F800000u;
constexpr uint8_t kNanScale = 0xFF;

enum Rule : int32_t { kFloor = 0, kCeil = 1, kEven = 2, kRceil = 3 };

inline float from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }
inline uint32_t to_bits(float f) { return __builtin_bit_cast(uint32_t, f); }

// mx.scale_codes for one float32 amax (its magnitude bits)
inline uint8_t scale_code(uint32_t amax, int32_t rule, int32_t emax, uint32_t even_add, float rceil_recip) {
    const bool finite = amax < kInf;
    if (!finite) return kNanScale;
    if (rule == kRceil) {
        const uint32_t du = to_bits(from_bits(amax) * rceil_recip) & kMag;
        const uint32_t dexp = du >> 23, dman = du & 0x7FFFFFu;
        // ceil to a power of two; float32 subnormals: byte 0 is 2^-127, above it byte 1
        const uint32_t code = dexp + (dexp == 0 ? dman > 0x400000u : dman != 0);
        return du < kInf && code <= 254 ? uint8_t(code) : kNanScale;
    }
    uint32_t u = amax;
    if (rule == kEven) u = (u + even_add) & kInf;  // 2^128 has exponent field 255: 128 - emax
    int32_t e = int32_t(u >> 23) - 127;
    if (rule == kCeil) e += (u & 0x7FFFFFu) != 0;
    e -= emax;
    if (e < -127) e = -127;
    return e <= 127 ? uint8_t(e + 127) : kNanScale;
}

// 2^x as a float32, -127 <= x <= 127 (2^-127 is a subnormal, exactly representable)
inline float pow2f(int32_t x) {
    return x >= -126 ? from_bits(uint32_t(x + 127) << 23) : from_bits(1u << (x + 149));
}

// The blocks of one call, BLEN elements each (0: the run-time blen). Each loop runs along a
// block's elements with no branch, so that the compiler vectorises it; the table lookups, which
// it would not, run over indices already computed.
template <int BLEN, bool FLUSH>
void blocks(int64_t n_blocks, int64_t blen_rt, const uint32_t* data, const uint8_t* table, int32_t shift,
            int32_t rule, int32_t emax, uint32_t even_add, float rceil_recip, uint8_t* codes, uint8_t* scales) {
    const int64_t blen = BLEN ? BLEN : blen_rt;
    const uint32_t mask = (1u << shift) - 1u;
    const uint8_t zero_code = table[0];
    constexpr int64_t kChunk = 256;  // indices computed before their lookups
    alignas(64) uint32_t idx[kChunk];
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint32_t* x = data + b * blen;
        uint8_t* out = codes + b * blen;
        uint32_t amax = 0;
        for (int64_t i = 0; i < blen; ++i) {
            uint32_t m = x[i] & kMag;
            if (FLUSH) m = m < 0x00800000u ? 0u : m;
            amax = m > amax ? m : amax;
        }
        const uint8_t sc = scale_code(amax, rule, emax, even_add, rceil_recip);
        scales[b] = sc;
        if (sc == kNanScale) {  // NaN scale: the block decodes to NaN; its elements are written as 0
            for (int64_t i = 0; i < blen; ++i) out[i] = zero_code;
            continue;
        }
        const float factor = pow2f(127 - int32_t(sc));
        for (int64_t i0 = 0; i0 < blen; i0 += kChunk) {
            const int64_t w = blen - i0 < kChunk ? blen - i0 : kChunk;
            for (int64_t i = 0; i < w; ++i) {
                uint32_t u = x[i0 + i];
                if (FLUSH) u = (u & kMag) < 0x00800000u ? u & 0x80000000u : u;
                uint32_t s = to_bits(from_bits(u) * factor);
                // a nonzero lost to underflow: the smallest subnormal of its sign
                s = (s & kMag) == 0 && (u & kMag) != 0 ? (u & 0x80000000u) | 1u : s;
                idx[i] = (s | ((s & mask) + mask)) >> shift;
            }
            for (int64_t i = 0; i < w; ++i) out[i0 + i] = table[idx[i]];
        }
    }
}

// the table's code for the float32 value with bits u (rounding.table_f32's index)
inline uint8_t lookup(const uint8_t* table, uint32_t mask, int32_t shift, uint32_t u) {
    return table[(u | ((u & mask) + mask)) >> shift];
}

// lo <= x <= hi by comparisons, as numpy's clip: a NaN stays NaN, -0.0 stays -0.0
inline float clip(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

constexpr float kFltMax = 3.40282347e38f;

// The NVFP4 blocks, BLEN elements each (0: the run-time blen; 16 or 256 for 16x16 tiles).
template <int BLEN>
void nvfp4_blocks(int64_t n_blocks, int64_t blen_rt, const uint32_t* data, int32_t torchao, float mult, float g,
                  float inv_g, const uint8_t* s_table, int32_t s_shift, const float* s_values,
                  const uint8_t* e_table, int32_t e_shift, uint8_t* codes, uint8_t* scales) {
    const int64_t blen = BLEN ? BLEN : blen_rt;
    const uint32_t s_mask = (1u << s_shift) - 1u, e_mask = (1u << e_shift) - 1u;
    constexpr int64_t kChunk = 256;
    alignas(64) uint32_t idx[kChunk];
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint32_t* x = data + b * blen;
        uint8_t* out = codes + b * blen;
        uint32_t amax_bits = 0;  // the input is finite (checked by the caller)
        for (int64_t i = 0; i < blen; ++i) {
            const uint32_t m = x[i] & kMag;
            amax_bits = m > amax_bits ? m : amax_bits;
        }
        const float bmax = from_bits(amax_bits);
        uint8_t sc;
        float factor;
        if (!torchao) {  // te: s = clip(min(bmax * (S / 6), FLT_MAX)); m = min(1 / (s * G), FLT_MAX)
            float s = bmax * mult;
            s = s > kFltMax ? kFltMax : s;
            s = clip(s, -448.0f, 448.0f);
            sc = lookup(s_table, s_mask, s_shift, to_bits(s));
            const float p = s_values[sc] * g;
            factor = 1.0f / p;
            factor = factor > kFltMax ? kFltMax : factor;
        } else {  // torchao: s = clip((bmax / 6) / G, 2^-6, 448) (NaN for G = 0); r = (1 / G) / s
            float s = (bmax / 6.0f) / g;
            s = clip(s, 0.015625f, 448.0f);
            sc = s != s ? uint8_t(0x7F) : lookup(s_table, s_mask, s_shift, to_bits(s));
            factor = inv_g / s_values[sc];
        }
        scales[b] = sc;
        for (int64_t i0 = 0; i0 < blen; i0 += kChunk) {
            const int64_t w = blen - i0 < kChunk ? blen - i0 : kChunk;
            for (int64_t i = 0; i < w; ++i) {
                float y = clip(from_bits(x[i0 + i]) * factor, -6.0f, 6.0f);
                y = y != y ? 0.0f : y;  // a NaN product (torchao, G = 0) is written as code 0
                const uint32_t u = to_bits(y);
                idx[i] = (u | ((u & e_mask) + e_mask)) >> e_shift;
            }
            for (int64_t i = 0; i < w; ++i) out[i0 + i] = e_table[idx[i]];
        }
    }
}

}  // namespace

extern "C" {

// NVFP4: data n_blocks * blen float32 bit patterns; torchao: 0 for TE's recipe, 1 for torchao's;
// mult (te: S * fl(1/6)), g (the global scale), inv_g (torchao: fl(1 / G)); s_table / s_shift:
// the E4M3 encode table; s_values: the 128 UE4M3 values (0x7F: NaN); e_table / e_shift: the
// E2M1 encode table. Writes blen E2M1 codes per block to codes and a UE4M3 code per block to scales.
void fmtsim_nvfp4_f32(int64_t n_blocks, int64_t blen, const uint32_t* data, int32_t torchao, float mult, float g,
                      float inv_g, const uint8_t* s_table, int32_t s_shift, const float* s_values,
                      const uint8_t* e_table, int32_t e_shift, uint8_t* codes, uint8_t* scales) {
    auto run = [&](auto kernel) {
        kernel(n_blocks, blen, data, torchao, mult, g, inv_g, s_table, s_shift, s_values, e_table, e_shift, codes,
               scales);
    };
    if (blen == 16) {
        run(nvfp4_blocks<16>);
    } else {
        run(nvfp4_blocks<0>);
    }
}


// data: n_blocks * blen float32 bit patterns, block after block; table / shift: the element's
// encode table (rounding.table_f32); flush: subnormal inputs to signed zero first.
// Writes blen element codes per block to codes and one E8M0 code per block to scales.
void fmtsim_mx_f32(int64_t n_blocks, int64_t blen, const uint32_t* data, const uint8_t* table, int32_t shift,
                   int32_t rule, int32_t emax, uint32_t even_add, float rceil_recip, int32_t flush,
                   uint8_t* codes, uint8_t* scales) {
    auto run = [&](auto kernel) {
        kernel(n_blocks, blen, data, table, shift, rule, emax, even_add, rceil_recip, codes, scales);
    };
    if (blen == 32) {
        flush ? run(blocks<32, true>) : run(blocks<32, false>);
    } else if (blen == 16) {
        flush ? run(blocks<16, true>) : run(blocks<16, false>);
    } else {
        flush ? run(blocks<0, true>) : run(blocks<0, false>);
    }
}

}  // extern "C"
