/*  common_compare - compare an output against the reference's.

    The correctness gate of the reward: the worker compares every output
    and inout tensor element by element. The rule is in common_compare.h;
    here it is applied in one pass that also gathers the error statistics
    shown to the user (largest errors, first failing elements).
*/
#include "common_compare.h"
#include "common_util.h"
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

//  The passes over every element of an output (hundreds of MB) are worth
//  vectorising whatever the build's level (-O2 does not: 1.8x on a pass
//  of 32 M floats, 5x on the NaN count).
#if defined (__GNUC__) && !defined (__clang__)
#   define S_HOT __attribute__ ((optimize ("O3")))
#else
#   define S_HOT
#endif

#define S_PART_MIN  (1u << 20)  //  elements a thread takes at least
#define S_PARTS_MAX 64          //  threads a comparison uses at most

//  True when got is within tolerance of expected.
static bool
s_close (double expected, double got, double atol, double rtol)
{
    if (isnan (expected) || isnan (got))
        return false;
    if (isinf (expected) || isinf (got))
        return expected == got;
    //  A difference that overflows to inf fails here too, as it should.
    return fabs (got - expected) <= atol + rtol * fabs (expected);
}

//  Element i of an integer buffer, exactly.
static int64_t
s_int (common_dtype_t dtype, const void *buf, size_t i)
{
    switch (dtype) {
        case DTYPE_I8:  return ((const int8_t *) buf) [i];
        case DTYPE_U8:  return ((const uint8_t *) buf) [i];
        case DTYPE_I32: return ((const int32_t *) buf) [i];
        default:        return ((const int64_t *) buf) [i];
    }
}

//  Integers as integers: the difference and the allowance in 64-bit
//  mantissa arithmetic, so an i64 near 2^54 off by one never passes as a
//  double would let it.
static bool
s_close_int (int64_t expected, int64_t got, double atol, double rtol)
{
    if (expected == got)
        return true;
    uint64_t diff = got > expected? (uint64_t) got - (uint64_t) expected
                                  : (uint64_t) expected - (uint64_t) got;
    long double allowed = (long double) atol
                        + (long double) rtol * (expected < 0? -(long double) expected: (long double) expected);
    return (long double) diff <= allowed;
}

static void
s_keep (common_compare_t *out, size_t i, double e, double g)
{
    if (out->nfirst < COMMON_COMPARE_KEEP) {
        out->first [out->nfirst].index = i;
        out->first [out->nfirst].expected = e;
        out->first [out->nfirst].got = g;
        out->nfirst++;
    }
    out->bad++;
}

void
common_compare_bits (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                     common_compare_t *out)
{
    memset (out, 0, sizeof *out);
    out->count = count;
    size_t size = common_dtype_size (dtype);
    if (memcmp (expected, got, count * size) == 0)
        return;                 //  equal: no error at all
    for (size_t i = 0; i < count; i++) {
        const uint8_t *e = (const uint8_t *) expected + i * size, *g = (const uint8_t *) got + i * size;
        double ev = common_dtype_get (dtype, expected, i), gv = common_dtype_get (dtype, got, i);
        if (isfinite (ev) && isfinite (gv) && fabs (gv - ev) > out->max_abs)
            out->max_abs = fabs (gv - ev);
        if (memcmp (e, g, size) != 0)
            s_keep (out, i, ev, gv);
    }
}

//  f32 when every element passes, branch-free: true with the statistics
//  set; false as soon as one may not (NaN, an infinity, out of tolerance),
//  and the exact loop then says which and why.
static S_HOT bool
s_all_close_f32 (const float *expected, const float *got, size_t count, double atol, double rtol,
                 common_compare_t *out)
{
    double max_abs = 0, max_rel = 0;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double e = expected [i], g = got [i];
        double diff = fabs (g - e), size = fabs (e);
        //  False for NaN and for an infinite expected value.
        bad += !((diff <= atol + rtol * size) & (size <= DBL_MAX));
        double rel = diff / (size > 0? size: INFINITY);
        max_abs = diff > max_abs? diff: max_abs;
        max_rel = rel > max_rel? rel: max_rel;
    }
    out->max_abs = max_abs;
    out->max_rel = max_rel;
    return bad == 0;
}

void
common_compare (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                double atol, double rtol, common_compare_t *out)
{
    memset (out, 0, sizeof *out);
    out->count = count;
    if (dtype == DTYPE_F32 && ((uintptr_t) expected | (uintptr_t) got) % sizeof (float) == 0
    &&  s_all_close_f32 (expected, got, count, atol, rtol, out))
        return;
    out->max_abs = out->max_rel = 0;
    for (size_t i = 0; i < count; i++) {
        double e = common_dtype_get (dtype, expected, i);
        double g = common_dtype_get (dtype, got, i);
        if (isfinite (e) && isfinite (g)) {
            double diff = fabs (g - e);
            if (diff > out->max_abs)
                out->max_abs = diff;
            if (e != 0) {
                double rel = diff / fabs (e);
                if (rel > out->max_rel)
                    out->max_rel = rel;
            }
        }
        bool close = common_dtype_is_float (dtype)
                   ? s_close (e, g, atol, rtol)
                   : s_close_int (s_int (dtype, expected, i), s_int (dtype, got, i), atol, rtol);
        if (!close)
            s_keep (out, i, e, g);
    }
}

static S_HOT size_t
s_nans_f32 (const float *v, size_t count)
{
    size_t nans = 0;
    for (size_t i = 0; i < count; i++)
        nans += v [i] != v [i];
    return nans;
}

size_t
common_compare_nans (common_dtype_t dtype, const void *buf, size_t count)
{
    size_t nans = 0;
    if (!common_dtype_is_float (dtype))
        return 0;
    if (dtype == DTYPE_F32 && (uintptr_t) buf % sizeof (float) == 0)
        return s_nans_f32 (buf, count);
    for (size_t i = 0; i < count; i++)
        nans += isnan (common_dtype_get (dtype, buf, i));
    return nans;
}

//  --- the same, split over threads ---
//
//  Each part is compared by the serial pass on its own slice; the parts'
//  outcomes merge in index order, so the first failures kept are the
//  serial pass's and every statistic is the same.

typedef enum { S_TOLERANCE, S_BITS, S_NANS } s_what_t;

typedef struct {
    s_what_t what;
    common_dtype_t dtype;
    const uint8_t *expected, *got;  //  the part's slices
    size_t begin, count;            //  its first element and how many
    double atol, rtol;
    common_compare_t out;
    size_t nans;
} s_part_t;

static void *
s_part_run (void *arg)
{
    s_part_t *p = arg;
    if (p->what == S_NANS)
        p->nans = common_compare_nans (p->dtype, p->expected, p->count);
    else
    if (p->what == S_BITS)
        common_compare_bits (p->dtype, p->expected, p->got, p->count, &p->out);
    else
        common_compare (p->dtype, p->expected, p->got, p->count, p->atol, p->rtol, &p->out);
    return NULL;
}

//  How many parts for count elements on up to threads threads (1: serial).
static unsigned
s_parts (size_t count, unsigned threads)
{
    size_t n = count / S_PART_MIN;
    if (n > threads)
        n = threads;
    if (n > S_PARTS_MAX)
        n = S_PARTS_MAX;
    return n < 1? 1: (unsigned) n;
}

static void
s_split (s_part_t *parts, unsigned n, s_what_t what, common_dtype_t dtype, const void *expected,
         const void *got, size_t count, double atol, double rtol)
{
    size_t esize = common_dtype_size (dtype), step = count / n;
    for (unsigned i = 0; i < n; i++) {
        size_t begin = i * step;
        parts [i] = (s_part_t) { .what = what, .dtype = dtype, .begin = begin,
            .count = i + 1 < n? step: count - begin, .atol = atol, .rtol = rtol,
            .expected = (const uint8_t *) expected + begin * esize,
            .got = got? (const uint8_t *) got + begin * esize: NULL };
    }
}

void
common_compare_threads (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                        double atol, double rtol, bool exact, unsigned threads, common_compare_t *out)
{
    unsigned n = s_parts (count, threads);
    if (n == 1) {
        if (exact)
            common_compare_bits (dtype, expected, got, count, out);
        else
            common_compare (dtype, expected, got, count, atol, rtol, out);
        return;
    }
    s_part_t parts [S_PARTS_MAX];
    s_split (parts, n, exact? S_BITS: S_TOLERANCE, dtype, expected, got, count, atol, rtol);
    common_run_parts (s_part_run, parts, sizeof parts [0], n);
    memset (out, 0, sizeof *out);
    out->count = count;
    for (unsigned i = 0; i < n; i++) {
        const common_compare_t *c = &parts [i].out;
        out->bad += c->bad;
        out->max_abs = c->max_abs > out->max_abs? c->max_abs: out->max_abs;
        out->max_rel = c->max_rel > out->max_rel? c->max_rel: out->max_rel;
        for (size_t k = 0; k < c->nfirst && out->nfirst < COMMON_COMPARE_KEEP; k++) {
            out->first [out->nfirst] = c->first [k];
            out->first [out->nfirst++].index += parts [i].begin;
        }
    }
}

size_t
common_compare_nans_threads (common_dtype_t dtype, const void *buf, size_t count, unsigned threads)
{
    unsigned n = common_dtype_is_float (dtype)? s_parts (count, threads): 1;
    if (n == 1)
        return common_compare_nans (dtype, buf, count);
    s_part_t parts [S_PARTS_MAX];
    s_split (parts, n, S_NANS, dtype, buf, NULL, count, 0, 0);
    common_run_parts (s_part_run, parts, sizeof parts [0], n);
    size_t nans = 0;
    for (unsigned i = 0; i < n; i++)
        nans += parts [i].nans;
    return nans;
}
