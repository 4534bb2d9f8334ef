/*  test_common_compare - the correctness gate: tolerance edges, NaN poison,
    infinities, statistics and the first failures kept in index order.  */
#include "testutil.h"
#include "common_compare.h"
#include "common_init.h"
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

START_TEST (test_equal_passes)
{
    float e [4] = { 1, -2, 0, 1e30f }, g [4] = { 1, -2, 0, 1e30f };
    common_compare_t out;
    common_compare (DTYPE_F32, e, g, 4, 0, 0, &out);
    ck_assert_uint_eq (out.count, 4);
    ck_assert_uint_eq (out.bad, 0);
    ck_assert_uint_eq (out.nfirst, 0);
    ck_assert (out.max_abs == 0 && out.max_rel == 0);
}
END_TEST

START_TEST (test_tolerance_edges)
{
    //  |g - e| <= atol + rtol * |e|: exact binary values so the edge is exact.
    double e [4] = { 1.0, 1.0, -4.0, -4.0 };
    double g [4] = { 1.375, 1.5, -3.0, -2.75 };
    common_compare_t out;
    //  Bound for e=1: 0.25 + 0.125 = 0.375; for e=-4: 0.25 + 0.5 = 0.75... 1.0 fails.
    common_compare (DTYPE_F64, e, g, 4, 0.25, 0.125, &out);
    ck_assert_uint_eq (out.bad, 3);
    ck_assert_uint_eq (out.first [0].index, 1);
    ck_assert_uint_eq (out.first [1].index, 2);
    ck_assert_uint_eq (out.first [2].index, 3);
    ck_assert (out.first [0].expected == 1.0 && out.first [0].got == 1.5);
    ck_assert (out.max_abs == 1.25);
    ck_assert (out.max_rel == 0.5);
    //  Loosen rtol to 0.25: bound for e=-4 becomes 1.25, both pass.
    common_compare (DTYPE_F64, e, g, 4, 0.25, 0.25, &out);
    ck_assert_uint_eq (out.bad, 0);
    //  The bound scales with |expected|, not |got|.
    double e2 [1] = { 0.0 }, g2 [1] = { 100.0 };
    common_compare (DTYPE_F64, e2, g2, 1, 0.0, 0.5, &out);
    ck_assert_uint_eq (out.bad, 1);
    ck_assert (out.max_rel == 0);       //  expected == 0: no relative error
}
END_TEST

START_TEST (test_nan_fails)
{
    //  A poisoned output never written fails even with huge tolerances.
    float e [8], g [8];
    common_init_t ones = { INIT_ONES, 0, 0 };
    common_init_fill (&ones, DTYPE_F32, e, 8, 0, 0);
    common_init_poison (DTYPE_F32, g, 8, 0, 0);
    g [3] = 1.0f;
    common_compare_t out;
    common_compare (DTYPE_F32, e, g, 8, 1e30, 1e30, &out);
    ck_assert_uint_eq (out.bad, 7);
    ck_assert (out.max_abs == 0);       //  NaN pairs are left out of the statistics
    //  NaN expected fails too, even against NaN.
    common_compare (DTYPE_F32, g, g, 8, 1e30, 1e30, &out);
    ck_assert_uint_eq (out.bad, 7);
    uint16_t he [1] = { 0x7E00 }, hg [1] = { 0x7E00 };
    common_compare (DTYPE_F16, he, hg, 1, 1, 1, &out);
    ck_assert_uint_eq (out.bad, 1);
    he [0] = hg [0] = 0x7FC0;
    common_compare (DTYPE_BF16, he, hg, 1, 1, 1, &out);
    ck_assert_uint_eq (out.bad, 1);
}
END_TEST

START_TEST (test_infinities)
{
    double e [5] = { INFINITY, INFINITY, -INFINITY, 1.0, 1e308 };
    double g [5] = { INFINITY, -INFINITY, -INFINITY, INFINITY, -1e308 };
    common_compare_t out;
    common_compare (DTYPE_F64, e, g, 5, 1e-3, 1e-3, &out);
    //  Equal infinities pass; an inf against anything else fails; a
    //  difference overflowing to inf fails.
    ck_assert_uint_eq (out.bad, 3);
    ck_assert_uint_eq (out.first [0].index, 1);
    ck_assert_uint_eq (out.first [1].index, 3);
    ck_assert_uint_eq (out.first [2].index, 4);
    ck_assert (isinf (out.max_abs));    //  the overflowing finite pair counts
    //  However loose the tolerance, inf only matches the same inf.
    common_compare (DTYPE_F64, e, g, 4, 1e300, 1e300, &out);
    ck_assert_uint_eq (out.bad, 2);
}
END_TEST

START_TEST (test_integers_and_keep)
{
    int32_t e [20], g [20];
    for (int i = 0; i < 20; i++) {
        e [i] = i;
        g [i] = i % 2 ? i + 1 : i;      //  every odd index is off by one
    }
    common_compare_t out;
    common_compare (DTYPE_I32, e, g, 20, 0, 0, &out);
    ck_assert_uint_eq (out.bad, 10);
    ck_assert_uint_eq (out.nfirst, COMMON_COMPARE_KEEP);
    for (size_t k = 0; k < COMMON_COMPARE_KEEP; k++) {
        ck_assert_uint_eq (out.first [k].index, 2 * k + 1);
        ck_assert (out.first [k].got == out.first [k].expected + 1);
    }
    ck_assert (out.max_abs == 1);
    ck_assert (out.max_rel == 1);       //  |2-1|/1
    common_compare (DTYPE_I32, e, g, 20, 1, 0, &out);
    ck_assert_uint_eq (out.bad, 0);
    common_compare (DTYPE_I32, e, g, 0, 0, 0, &out);
    ck_assert_uint_eq (out.count, 0);
    ck_assert_uint_eq (out.bad, 0);
}
END_TEST

//  Issue #12, class 5: int64 values near 2^54 that differ by one are equal
//  as doubles; they must not pass, at any tolerance smaller than one.
START_TEST (test_int64_exact)
{
    int64_t e [3] = { (1ll << 54) + 1, -(1ll << 60) + 3, INT64_MAX };
    int64_t g [3] = { (1ll << 54),     -(1ll << 60) + 2, INT64_MIN };
    ck_assert ((double) e [0] == (double) g [0]);       //  what the old rule compared
    common_compare_t out;
    common_compare (DTYPE_I64, e, g, 3, 0, 0, &out);
    ck_assert_uint_eq (out.bad, 3);
    common_compare (DTYPE_I64, e, g, 3, 0.5, 1e-19, &out);
    ck_assert_uint_eq (out.bad, 3);
    common_compare (DTYPE_I64, e, g, 2, 1, 0, &out);    //  atol 1 still widens integers
    ck_assert_uint_eq (out.bad, 0);
    common_compare (DTYPE_I64, e, e, 3, 0, 0, &out);
    ck_assert_uint_eq (out.bad, 0);
    uint8_t eu [2] = { 255, 0 }, gu [2] = { 254, 0 };
    common_compare (DTYPE_U8, eu, gu, 2, 0, 0, &out);
    ck_assert_uint_eq (out.bad, 1);
}
END_TEST

//  tolerance.exact: bit for bit, so -0.0 and a NaN payload differ.
START_TEST (test_bits)
{
    float e [4] = { 1.0f, 0.0f, 2.0f, 3.0f }, g [4] = { 1.0f, -0.0f, 2.0f, 3.0000002f };
    common_compare_t out;
    common_compare_bits (DTYPE_F32, e, g, 4, &out);
    ck_assert_uint_eq (out.bad, 2);
    ck_assert_uint_eq (out.first [0].index, 1);
    ck_assert_uint_eq (out.first [1].index, 3);
    common_compare (DTYPE_F32, e, g, 4, 1e-6, 1e-6, &out);
    ck_assert_uint_eq (out.bad, 0);
    common_compare_bits (DTYPE_F32, e, e, 4, &out);
    ck_assert_uint_eq (out.bad, 0);
}
END_TEST

//  The f32 fast pass and the exact loop agree: every verdict, count and
//  statistic, on arrays that pass and on arrays with NaN, infinities,
//  out-of-tolerance elements and an infinite expected value against a
//  finite one (inf <= atol + rtol * inf must not pass), aligned or not.
static size_t
s_rule_bad (const float *e, const float *g, size_t n, double atol, double rtol)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double ev = e [i], gv = g [i];
        bool ok = !isnan (ev) && !isnan (gv)
               && (isinf (ev) || isinf (gv)? ev == gv: fabs (gv - ev) <= atol + rtol * fabs (ev));
        bad += !ok;
    }
    return bad;
}

START_TEST (test_fast_pass_agrees)
{
    size_t n = 4099;
    float *e = malloc ((n + 1) * sizeof (float)), *g = malloc ((n + 1) * sizeof (float));
    ck_assert (e && g);
    const float specials [] = { NAN, INFINITY, -INFINITY, 1e30f, 0.0f };
    for (int round = 0; round < 60; round++) {
        unsigned seed = (unsigned) round * 7919u + 1;
        for (size_t i = 0; i <= n; i++) {
            seed = seed * 1103515245u + 12345u;
            e [i] = (float) ((int) (seed >> 8) % 2001 - 1000) / 100.0f;
            g [i] = e [i] * (1.0f + 1e-7f);
        }
        //  Rounds past the first few spoil one to three places.
        for (int k = 0; round >= 5 && k < 1 + round % 3; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 4) % n;
            int what = round % 7;
            if (what < 5)
                g [at] = specials [what];
            else
            if (what == 5) {
                e [at] = INFINITY;
                g [at] = 1.0f;
            }
            else
                g [at] += 1.0f;
        }
        for (int shift = 0; shift < 2; shift++) {
            common_compare_t out;
            common_compare (DTYPE_F32, e + shift, g + shift, n, 1e-5, 1e-5, &out);
            ck_assert_uint_eq (out.bad, s_rule_bad (e + shift, g + shift, n, 1e-5, 1e-5));
            ck_assert_uint_eq (out.count, n);
            if (!out.bad)
                ck_assert (out.max_abs > 0 && out.max_rel > 0 && out.max_rel < 1e-6);
        }
    }
    free (e);
    free (g);
}
END_TEST

START_TEST (test_nans_counted)
{
    float v [5] = { 1, NAN, 2, NAN, INFINITY };
    ck_assert_uint_eq (common_compare_nans (DTYPE_F32, v, 5), 2);
    ck_assert_uint_eq (common_compare_nans (DTYPE_F32, (const char *) v + 1, 0), 0);
    double d [3] = { NAN, 0, -NAN };
    ck_assert_uint_eq (common_compare_nans (DTYPE_F64, d, 3), 2);
    int32_t i [2] = { -1, 0x7fc00000 };
    ck_assert_uint_eq (common_compare_nans (DTYPE_I32, i, 2), 0);
}
END_TEST

//  Split over threads, every outcome is the serial pass's: the failures'
//  count and the first ones by index (across parts), the largest errors,
//  the NaN count; for f32 (the fast pass), f16, i32 and bit for bit.
START_TEST (test_threads_agree)
{
    const size_t n = (5u << 20) + 12345;        //  five parts and a ragged end
    const common_dtype_t types [] = { DTYPE_F32, DTYPE_F16, DTYPE_I32 };
    for (size_t t = 0; t < 3; t++) {
        common_dtype_t dtype = types [t];
        size_t esize = common_dtype_size (dtype);
        uint8_t *e = malloc (n * esize), *g = malloc (n * esize);
        ck_assert (e && g);
        for (size_t i = 0; i < n; i++) {
            double v = (double) ((i * 2654435761u) % 2001) / 100.0 - 10.0;
            common_dtype_set (dtype, e, i, v);
            common_dtype_set (dtype, g, i, v + ((i % 7) == 0? 0.001: 0));
        }
        for (int round = 0; round < 3; round++) {
            //  Round 0: all pass; 1: failures in later parts only; 2: everywhere, NaNs too.
            if (round == 1)
                for (size_t i = (3u << 20) + 5; i < n; i += 100003)
                    common_dtype_set (dtype, g, i, 1000.0);
            if (round == 2)
                for (size_t i = 17; i < n; i += 333331)
                    common_dtype_set (dtype, g, i, dtype == DTYPE_I32? -77.0: NAN);
            for (int exact = 0; exact < 2; exact++) {
                common_compare_t one, many;
                if (exact)
                    common_compare_bits (dtype, e, g, n, &one);
                else
                    common_compare (dtype, e, g, n, 0.01, 0.01, &one);
                common_compare_threads (dtype, e, g, n, 0.01, 0.01, exact, 8, &many);
                ck_assert_uint_eq (many.count, one.count);
                ck_assert_uint_eq (many.bad, one.bad);
                ck_assert (round == 0 || exact || one.bad > 0);
                ck_assert (many.max_abs == one.max_abs && many.max_rel == one.max_rel);
                ck_assert_uint_eq (many.nfirst, one.nfirst);
                for (size_t k = 0; k < one.nfirst; k++)
                    ck_assert_uint_eq (many.first [k].index, one.first [k].index);
            }
            ck_assert_uint_eq (common_compare_nans_threads (dtype, g, n, 8),
                               common_compare_nans (dtype, g, n));
        }
        free (e);
        free (g);
    }
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_compare");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_equal_passes);
    tcase_add_test (tc, test_tolerance_edges);
    tcase_add_test (tc, test_nan_fails);
    tcase_add_test (tc, test_infinities);
    tcase_add_test (tc, test_integers_and_keep);
    tcase_add_test (tc, test_int64_exact);
    tcase_add_test (tc, test_bits);
    tcase_add_test (tc, test_fast_pass_agrees);
    tcase_add_test (tc, test_nans_counted);
    tcase_add_test (tc, test_threads_agree);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
