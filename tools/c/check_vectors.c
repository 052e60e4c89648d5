/* A C consumer of fmtsim's golden vectors, written from vectors/README.md alone.
 *
 * It decodes every E4M3 code with a tiny decoder written from the OCP OFP8 rules and
 * compares with e4m3_to_f32.decode_all.tv, then dequantizes the MXFP4 block file
 * mxfp4.floor.rne.block_mx.bin and compares with its expected values.
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

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "vectors";
    int a = check_decode(dir), b = check_mxfp4(dir);
    if (a == 2 || b == 2) return 2;
    return (a || b) ? 1 : 0;
}
