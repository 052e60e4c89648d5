/* A C consumer of fmtsim's golden vectors, written from vectors/README.md alone.
 *
 * It decodes every E4M3 code with a tiny decoder written from the OCP OFP8 rules and
 * compares with e4m3_to_f32.decode_all.tv, dequantizes the MXFP4 block file
 * mxfp4.floor.rne.block_mx.bin and compares with its expected values, and runs a tiny
 * model of the Blackwell kind::mxf8f6f4 step (E4M3 x E4M3, E8M0 per 32) over the GEMM
 * file sm100_mxf8f6f4.e4m3xe4m3.e8m0x32.gemm.bin, comparing D bit for bit.
 *
 *   cc -std=c99 -O2 -o check_vectors tools/c/check_vectors.c -lm
 *   ./check_vectors vectors        # exit 0: all agree; 1: a mismatch; 2: unreadable input
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* OCP E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits; S.1111.111 is NaN; no Inf. */
static float e4m3_decode(uint8_t c) {
    int s = c >> 7, e = (c >> 3) & 0xF, m = c & 7;
    float v;
    if (e == 15 && m == 7) return s ? -NAN : NAN;
    if (e == 0) v = ldexpf((float)m, -9);             /* subnormal: m/8 * 2^-6 */
    else v = ldexpf(1.0f + m / 8.0f, e - 7);
    return s ? -v : v;
}

/* E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no Inf or NaN. */
static float e2m1_decode(uint8_t c) {
    int s = (c >> 3) & 1, e = (c >> 1) & 3, m = c & 1;
    float v = e == 0 ? 0.5f * m : ldexpf(1.0f + m / 2.0f, e - 1);
    return s ? -v : v;
}

static int same(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return f2u(a) == f2u(b);
}

static int check_decode(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/e4m3_to_f32.decode_all.tv", dir);
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 2; }
    unsigned code, bits, flags;
    int n = 0, bad = 0;
    while (fscanf(f, "%x %x %x", &code, &bits, &flags) == 3) {
        float want; uint32_t b = bits; memcpy(&want, &b, 4);
        float got = e4m3_decode((uint8_t)code);
        if (!same(got, want)) {
            if (bad < 10) fprintf(stderr, "e4m3 %02X: C decoder %08X, vectors %08X\n", code, f2u(got), bits);
            bad++;
        }
        n++;
    }
    fclose(f);
    printf("e4m3 decode: %d codes, %d mismatches\n", n, bad);
    return (n == 256 && bad == 0) ? 0 : 1;
}

static int check_mxfp4(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/mxfp4.floor.rne.block_mx.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 2; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* per row of K = 32: input 32 float32, codes 16 bytes, 1 scale byte, 32 float32 expected */
    const long row_bytes = 32 * 4 + 16 + 1 + 32 * 4;
    if (size <= 0 || size % row_bytes) { fprintf(stderr, "%s: size %ld is not rows * %ld\n", path, size, row_bytes); fclose(f); return 2; }
    long rows = size / row_bytes;
    unsigned char *buf = malloc((size_t)size);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) { fclose(f); free(buf); return 2; }
    fclose(f);
    const unsigned char *codes = buf + rows * 32 * 4;
    const unsigned char *scales = codes + rows * 16;
    const unsigned char *expect = scales + rows;
    int bad = 0;
    for (long r = 0; r < rows; r++) {
        for (int k = 0; k < 32; k++) {
            uint8_t byte = codes[r * 16 + k / 2];
            uint8_t c = (k % 2 == 0) ? (byte & 0xF) : (byte >> 4);  /* element 2i: low nibble */
            uint8_t x = scales[r];
            float v = x == 0xFF ? NAN : e2m1_decode(c) * ldexpf(1.0f, (int)x - 127);
            float want; memcpy(&want, expect + (r * 32 + k) * 4, 4);
            if (!same(v, want)) {
                if (bad < 10) fprintf(stderr, "mxfp4 row %ld elem %d: C %08X, vectors %08X\n", r, k, f2u(v), f2u(want));
                bad++;
            }
        }
    }
    free(buf);
    printf("mxfp4 dequantize: %ld blocks, %d mismatches\n", rows, bad);
    return bad ? 1 : 0;
}

/* E4M3 split as the matrix-unit models align it: value = sign * sig * 2^(exp - 3),
 * exp clamped at the smallest normal exponent -6 (subnormals keep -6, sig < 8). */
static void e4m3_split(uint8_t c, int *neg, int64_t *sig, int *exp, int *nan) {
    int e = (c >> 3) & 0xF, m = c & 7;
    *neg = c >> 7;
    *nan = (e == 15 && m == 7);
    *sig = *nan ? 0 : (e ? (8 | m) : m);
    *exp = e ? e - 7 : -6;
}

/* One kind::mxf8f6f4 step (L = 32, F = 25, e_zero = -133, RZ to fp32): each product times
 * its scale product, products and C aligned to the largest exponent, truncated toward zero
 * 25 bits below it, summed exactly, the sum truncated to fp32 (beyond 2^128: Inf). */
static float mxf8f6f4_step(const uint8_t *a, const uint8_t *b, int bstride, int sa, int sb, float c) {
    int64_t mag[32]; int ex[32], neg[32];
    int any_nan = isnan(c) || sa == 0xFF || sb == 0xFF, any_zero = 0, e_max = -100000;
    for (int k = 0; k < 32; k++) {
        int na, nb, ea, eb, xa, xb; int64_t ma, mb;
        e4m3_split(a[k], &na, &ma, &ea, &xa);
        e4m3_split(b[k * bstride], &nb, &mb, &eb, &xb);
        any_nan |= xa | xb;
        mag[k] = ma * mb; neg[k] = na ^ nb; ex[k] = ea + eb + (sa - 127) + (sb - 127);
        if (mag[k] == 0) any_zero = 1; else if (ex[k] > e_max) e_max = ex[k];
    }
    if (any_nan) return NAN;
    if (isinf(c)) return c;
    uint32_t cb = f2u(c);
    int c_neg = cb >> 31, cf = (cb >> 23) & 0xFF;
    int64_t c_sig = cf ? (int64_t)((cb & 0x7FFFFF) | 0x800000) : (int64_t)(cb & 0x7FFFFF);
    int c_exp = cf ? cf - 127 : -126;
    if (c_sig == 0) any_zero = 1; else if (c_exp > e_max) e_max = c_exp;
    if (any_zero && -133 > e_max) e_max = -133;
    int64_t s = 0;
    for (int k = 0; k < 32; k++) {
        int d = e_max - ex[k];
        int64_t t = mag[k] == 0 || d >= 63 ? 0 : (mag[k] << 19) >> d;  /* 19 = F - 3 - 3 */
        s += neg[k] ? -t : t;
    }
    int sh = c_exp - e_max + 2;  /* F - 23 */
    int64_t tc = sh >= 0 ? c_sig << sh : (-sh >= 63 ? 0 : c_sig >> -sh);
    s += c_neg ? -tc : tc;
    if (s == 0) return 0.0f;
    int sneg = s < 0;
    uint64_t m = sneg ? (uint64_t)(-s) : (uint64_t)s;
    int n = 0;
    while ((m >> n) > 1) n++;  /* m's top bit is 2^n */
    int ev = e_max - 25 + n, ulp = (ev > -126 ? ev : -126) - 23, r = ulp - (e_max - 25);
    uint64_t q = r > 0 ? (r >= 64 ? 0 : m >> r) : m << -r;
    double v = ldexp((double)q, ulp);
    float out = v >= ldexp(1.0, 128) ? INFINITY : (float)v;
    return sneg ? -out : out;
}

static int check_mxf8f6f4(const char *dir) {
    enum { M = 16, N = 8, K = 128, NB = K / 32 };
    char path[4096];
    snprintf(path, sizeof path, "%s/sm100_mxf8f6f4.e4m3xe4m3.e8m0x32.gemm.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 2; }
    /* arrays in order: a_codes M*K, b_codes K*N, a_scales M*NB, b_scales NB*N (uint8),
     * c, d, d_exact, d_bound (float32 M*N) */
    static unsigned char buf[M * K + K * N + M * NB + NB * N + 4 * 4 * M * N];
    size_t got = fread(buf, 1, sizeof buf, f);
    int extra = fgetc(f);
    fclose(f);
    if (got != sizeof buf || extra != EOF) { fprintf(stderr, "%s: not %zu bytes\n", path, sizeof buf); return 2; }
    const uint8_t *a = buf, *b = a + M * K, *sa = b + K * N, *sb = sa + M * NB;
    const unsigned char *cbytes = sb + NB * N, *dbytes = cbytes + 4 * M * N;
    int bad = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc, want;
            memcpy(&acc, cbytes + 4 * (i * N + j), 4);
            memcpy(&want, dbytes + 4 * (i * N + j), 4);
            for (int blk = 0; blk < NB; blk++)
                acc = mxf8f6f4_step(a + i * K + 32 * blk, b + 32 * blk * N + j, N, sa[i * NB + blk],
                                    sb[blk * N + j], acc);
            if (!same(acc, want)) {
                if (bad < 10) fprintf(stderr, "mxf8f6f4 D[%d, %d]: C %08X, vectors %08X\n", i, j, f2u(acc), f2u(want));
                bad++;
            }
        }
    }
    printf("mxf8f6f4 GEMM: %d outputs, %d mismatches\n", M * N, bad);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "vectors";
    int a = check_decode(dir), b = check_mxfp4(dir), c = check_mxf8f6f4(dir);
    if (a == 2 || b == 2 || c == 2) return 2;
    return (a || b || c) ? 1 : 0;
}
