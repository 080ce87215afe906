/*
 * d2string.c -- a double as Valkey's replies and listpacks write it (Valkey src/util.c
 * d2string, which addReplyDouble and zzlInsertAt call):
 *
 *   nan | inf | -inf | 0 | -0              fixed texts
 *   integral, |d| <= LLONG_MAX / 2         the integer's digits (double2ll + ll2string)
 *   anything else                          fpconv_dtoa: Grisu2's digits, laid out as
 *                                          integer, decimal or d.ddde+X (emitDigits)
 *
 * Grisu2 (Loitsch, "Printing floating-point numbers quickly and accurately with
 * integers", PLDI 2010): the double and its two rounding boundaries as 64-bit
 * significands, scaled by a cached power of ten into a window of binary exponents
 * [-60, -32] where the integral and fractional parts split at a word boundary; the
 * digits of the upper boundary are generated until the remainder lies inside the
 * boundaries' interval, then the last digit is walked down toward the double itself
 * (roundWeed).  The digits always read back as the same double; they are usually, not
 * always, the shortest such (Grisu2 has no fallback) -- so Valkey's text, not "%.17g"'s.
 *
 * The cached powers are 10^k for k = -348, -340, ..., 340: each the nearest 64-bit
 * significand f (2^63 <= f < 2^64) and binary exponent e with f * 2^e ~ 10^k, computed
 * exactly (model/d2string.py's cached_power builds the same table with Python integers).
 *
 * Conventions: public ks...; no tracing here (callers count the work, t_zset.c).
 */
#include "d2string.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t f;
    int e;
} diyFp;

#define CACHED_FIRST (-348) /* decimal exponent of the first cached power */
#define CACHED_STEP 8       /* decimal exponents between two cached powers */
#define CACHED_COUNT 87
#define ALPHA (-60) /* the scaled upper boundary's binary exponent window */
#define GAMMA (-32)

static const diyFp cachedPowers[CACHED_COUNT] = {
    {18054884314459144840ULL, -1220}, {13451937075301367670ULL, -1193},
    {10022474136428063862ULL, -1166}, {14934650266808366570ULL, -1140},
    {11127181549972568877ULL, -1113}, {16580792590934885855ULL, -1087},
    {12353653155963782858ULL, -1060}, {18408377700990114895ULL, -1034},
    {13715310171984221708ULL, -1007}, {10218702384817765436ULL, -980},
    {15227053142812498563ULL, -954}, {11345038669416679861ULL, -927},
    {16905424996341287883ULL, -901}, {12595523146049147757ULL, -874},
    {9384396036005875287ULL, -847}, {13983839803942852151ULL, -821},
    {10418772551374772303ULL, -794}, {15525180923007089351ULL, -768},
    {11567161174868858868ULL, -741}, {17236413322193710309ULL, -715},
    {12842128665889583758ULL, -688}, {9568131466127621947ULL, -661},
    {14257626930069360058ULL, -635}, {10622759856335341974ULL, -608},
    {15829145694278690180ULL, -582}, {11793632577567316726ULL, -555},
    {17573882009934360870ULL, -529}, {13093562431584567480ULL, -502},
    {9755464219737475723ULL, -475}, {14536774485912137811ULL, -449},
    {10830740992659433045ULL, -422}, {16139061738043178685ULL, -396},
    {12024538023802026127ULL, -369}, {17917957937422433684ULL, -343},
    {13349918974505688015ULL, -316}, {9946464728195732843ULL, -289},
    {14821387422376473014ULL, -263}, {11042794154864902060ULL, -236},
    {16455045573212060422ULL, -210}, {12259964326927110867ULL, -183},
    {18268770466636286478ULL, -157}, {13611294676837538539ULL, -130},
    {10141204801825835212ULL, -103}, {15111572745182864684ULL, -77},
    {11258999068426240000ULL, -50}, {16777216000000000000ULL, -24},
    {12500000000000000000ULL, 3}, {9313225746154785156ULL, 30}, {13877787807814456755ULL, 56},
    {10339757656912845936ULL, 83}, {15407439555097886824ULL, 109},
    {11479437019748901445ULL, 136}, {17105694144590052135ULL, 162},
    {12744735289059618216ULL, 189}, {9495567745759798747ULL, 216},
    {14149498560666738074ULL, 242}, {10542197943230523224ULL, 269},
    {15709099088952724970ULL, 295}, {11704190886730495818ULL, 322},
    {17440603504673385349ULL, 348}, {12994262207056124023ULL, 375},
    {9681479787123295682ULL, 402}, {14426529090290212157ULL, 428},
    {10748601772107342003ULL, 455}, {16016664761464807395ULL, 481},
    {11933345169920330789ULL, 508}, {17782069995880619868ULL, 534},
    {13248674568444952270ULL, 561}, {9871031767461413346ULL, 588},
    {14708983551653345445ULL, 614}, {10959046745042015199ULL, 641},
    {16330252207878254650ULL, 667}, {12166986024289022870ULL, 694},
    {18130221999122236476ULL, 720}, {13508068024458167312ULL, 747},
    {10064294952495520794ULL, 774}, {14996968138956309548ULL, 800},
    {11173611982879273257ULL, 827}, {16649979327439178909ULL, 853},
    {12405201291620119593ULL, 880}, {9242595204427927429ULL, 907},
    {13772540099066387757ULL, 933}, {10261342003245940623ULL, 960},
    {15290591125556738113ULL, 986}, {11392378155556871081ULL, 1013},
    {16975966327722178521ULL, 1039}, {12648080533535911531ULL, 1066}
};
static_assert(CACHED_FIRST + (CACHED_COUNT - 1) * CACHED_STEP == 340, "cached powers cover 10^-348..10^340");

static uint64_t bitsOf(double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof(b));
    return b;
}

/* The double as significand and binary exponent (subnormals unnormalized). */
static diyFp fromDouble(double d) {
    uint64_t b = bitsOf(d), frac = b & 0x000FFFFFFFFFFFFFull;
    int biased = (int)((b >> 52) & 0x7FF);
    if (biased) return (diyFp){frac | (1ull << 52), biased - 1075};
    return (diyFp){frac, -1074};
}

/* Shift left until the hidden bit's position (bit 52) is set, then up to bit 63. */
static diyFp normalized(diyFp x) {
    while (!(x.f & (1ull << 52))) {
        x.f <<= 1;
        x.e--;
    }
    x.f <<= 11;
    x.e -= 11;
    return x;
}

/* m+ and m-: the midpoints to the neighbouring doubles, normalized to a common exponent
 * (m- is closer below a power of two, where the gap below is half the gap above). */
static void boundaries(diyFp v, diyFp *lo, diyFp *hi) {
    diyFp p = {(v.f << 1) + 1, v.e - 1};
    while (!(p.f & (1ull << 53))) {
        p.f <<= 1;
        p.e--;
    }
    p.f <<= 10;
    p.e -= 10;
    int below = v.f == (1ull << 52) ? 2 : 1;
    diyFp m = {(v.f << below) - 1, v.e - below};
    m.f <<= m.e - p.e;
    m.e = p.e;
    *hi = p;
    *lo = m;
}

/* The high 64 bits of the 128-bit product, rounded half up. */
static diyFp times(diyFp a, diyFp b) {
    const uint64_t m32 = 0xFFFFFFFFull;
    uint64_t ah = a.f >> 32, al = a.f & m32, bh = b.f >> 32, bl = b.f & m32;
    uint64_t hh = ah * bh, hl = ah * bl, lh = al * bh, ll = al * bl;
    uint64_t mid = (hl & m32) + (lh & m32) + (ll >> 32) + (1ull << 31);
    return (diyFp){hh + (hl >> 32) + (lh >> 32) + (mid >> 32), a.e + b.e + 64};
}

/* The cached power c with ALPHA <= e + c.e + 64 <= GAMMA; *k its decimal exponent. */
static diyFp cachedFor(int e, int *k) {
    int guess = (int)(-(e + CACHED_COUNT) * 0.30102999566398114); /* log10(2) */
    int i = (guess - CACHED_FIRST) / CACHED_STEP;
    for (;;) {
        int s = e + cachedPowers[i].e + 64;
        if (s < ALPHA) i++;
        else if (s > GAMMA) i--;
        else break;
    }
    *k = CACHED_FIRST + i * CACHED_STEP;
    return cachedPowers[i];
}

/* Walk the last digit down while that moves the text closer to the double (distance `w`
 * below the upper boundary) and stays inside the interval `delta`. */
static void roundWeed(char *digits, int n, uint64_t delta, uint64_t rest, uint64_t unit, uint64_t w) {
    while (rest < w && delta - rest >= unit && (rest + unit < w || w - rest > rest + unit - w)) {
        digits[n - 1]--;
        rest += unit;
    }
}

static const uint64_t pow10u[20] = {1ull,
                                    10ull,
                                    100ull,
                                    1000ull,
                                    10000ull,
                                    100000ull,
                                    1000000ull,
                                    10000000ull,
                                    100000000ull,
                                    1000000000ull,
                                    10000000000ull,
                                    100000000000ull,
                                    1000000000000ull,
                                    10000000000000ull,
                                    100000000000000ull,
                                    1000000000000000ull,
                                    10000000000000000ull,
                                    100000000000000000ull,
                                    1000000000000000000ull,
                                    10000000000000000000ull};

/* The digits of the scaled upper boundary, down to the first that lies within delta of
 * it; *K gets the decimal exponent of the last digit. */
static int digitGen(diyFp w, diyFp hi, diyFp lo, char *digits, int *K) {
    uint64_t dist = hi.f - w.f, delta = hi.f - lo.f;
    const int shift = -hi.e;
    const uint64_t one = 1ull << shift;
    uint64_t p1 = hi.f >> shift, p2 = hi.f & (one - 1);
    int n = 0;
    for (int kappa = 10; kappa > 0;) { /* the integral part: up to 10 digits */
        uint64_t div = pow10u[kappa - 1];
        unsigned d = (unsigned)(p1 / div);
        if (d || n) digits[n++] = (char)('0' + d);
        p1 -= d * div;
        kappa--;
        uint64_t rest = (p1 << shift) + p2;
        if (rest <= delta) {
            *K += kappa;
            roundWeed(digits, n, delta, rest, div << shift, dist);
            return n;
        }
    }
    for (int kappa = 0, u = 0;; u++) { /* the fractional part, a digit at a time */
        p2 *= 10;
        delta *= 10;
        kappa--;
        unsigned d = (unsigned)(p2 >> shift);
        if (d || n) digits[n++] = (char)('0' + d);
        p2 &= one - 1;
        if (p2 < delta) {
            *K += kappa;
            roundWeed(digits, n, delta, p2, one, dist * pow10u[u + 1 < 20 ? u + 1 : 19]); /* wraps as upstream's */
            return n;
        }
    }
}

static int grisu2(double d, char *digits, int *K) {
    diyFp v = fromDouble(d), lo, hi;
    boundaries(v, &lo, &hi);
    v = normalized(v);
    int k;
    diyFp c = cachedFor(hi.e, &k);
    v = times(v, c);
    hi = times(hi, c);
    lo = times(lo, c);
    lo.f++;
    hi.f--;
    *K = -k;
    return digitGen(v, hi, lo, digits, K);
}

/* The digits laid out (fpconv's emit_digits): as an integer while the exponent is
 * small, as a decimal for -7 < K or an exponent below 4, else d.ddde+X (at most 17
 * significant digits when negative, 18 else; the exponent without leading zeros). */
static int emitDigits(const char *digits, int n, char *dest, int K, int neg) {
    int exp = K + n - 1 < 0 ? -(K + n - 1) : K + n - 1;
    if (K >= 0 && exp < n + 7) {
        memcpy(dest, digits, (size_t)n);
        memset(dest + n, '0', (size_t)K);
        return n + K;
    }
    if (K < 0 && (K > -7 || exp < 4)) {
        int point = n + K; /* digits before the decimal point */
        if (point <= 0) {
            dest[0] = '0';
            dest[1] = '.';
            memset(dest + 2, '0', (size_t)-point);
            memcpy(dest + 2 - point, digits, (size_t)n);
            return n + 2 - point;
        }
        memcpy(dest, digits, (size_t)point);
        dest[point] = '.';
        memcpy(dest + point + 1, digits + point, (size_t)(n - point));
        return n + 1;
    }
    int m = n < 18 - neg ? n : 18 - neg, i = 0;
    dest[i++] = digits[0];
    if (m > 1) {
        dest[i++] = '.';
        memcpy(dest + i, digits + 1, (size_t)(m - 1));
        i += m - 1;
    }
    dest[i++] = 'e';
    dest[i++] = K + m - 1 < 0 ? '-' : '+';
    if (exp >= 100) {
        dest[i++] = (char)('0' + exp / 100);
        dest[i++] = (char)('0' + exp / 10 % 10);
    } else if (exp >= 10) {
        dest[i++] = (char)('0' + exp / 10);
    }
    dest[i++] = (char)('0' + exp % 10);
    return i;
}

int ksFpconvDtoa(double d, char dest[24]) {
    int len = 0, neg = (bitsOf(d) >> 63) != 0;
    if (neg) dest[len++] = '-';
    if (d == 0) {
        dest[len] = '0';
        return len + 1;
    }
    if (isnan(d) || isinf(d)) {
        memcpy(dest + len, isnan(d) ? "nan" : "inf", 3);
        return len + 3;
    }
    char digits[18];
    int K = 0, n = grisu2(d, digits, &K);
    return len + emitDigits(digits, n, dest + len, K, neg);
}

int ksDouble2ll(double d, long long *out) {
    if (d < (double)(-LLONG_MAX / 2) || d > (double)(LLONG_MAX / 2)) return 0;
    long long ll = (long long)d;
    if ((double)ll != d) return 0;
    *out = ll;
    return 1;
}

int ksLl2String(char *dst, long long v) {
    char tmp[24];
    unsigned long long u = v < 0 ? (unsigned long long)(-(v + 1)) + 1 : (unsigned long long)v;
    int n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int len = 0;
    if (v < 0) dst[len++] = '-';
    while (n) dst[len++] = tmp[--n];
    dst[len] = 0;
    return len;
}

int ksD2String(char *buf, double value, int *path) {
    long long ll;
    int n;
    *path = KS_D2S_SPECIAL;
    if (isnan(value)) {
        n = 3;
        memcpy(buf, "nan", 4);
    } else if (isinf(value)) {
        n = value < 0 ? 4 : 3;
        memcpy(buf, value < 0 ? "-inf" : "inf", (size_t)n + 1);
    } else if (value == 0) {
        n = signbit(value) ? 2 : 1;
        memcpy(buf, signbit(value) ? "-0" : "0", (size_t)n + 1);
    } else if (ksDouble2ll(value, &ll)) {
        *path = KS_D2S_INTEGER;
        n = ksLl2String(buf, ll);
    } else {
        *path = KS_D2S_GRISU;
        n = ksFpconvDtoa(value, buf);
        buf[n] = 0;
    }
    return n;
}
