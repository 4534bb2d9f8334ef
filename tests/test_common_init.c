/*  test_common_init - init distributions: determinism per (seed, stream,
    index), distinct streams, moments of normal/uniform, ranges, poison.  */
#include "testutil.h"
#include "common_init.h"
#include "common_philox.h"
#include <math.h>
#include <string.h>

START_TEST (test_names)
{
    const char *names [] = { "normal", "uniform", "randint", "zeros", "ones", "arange" };
    for (int i = 0; i < 6; i++) {
        common_init_dist_t dist;
        ck_assert_int_eq (common_init_dist_parse (names [i], &dist), 0);
        ck_assert_int_eq (dist, i);
        ck_assert_str_eq (common_init_dist_name (dist), names [i]);
    }
    common_init_dist_t dist;
    ck_assert_int_eq (common_init_dist_parse ("gauss", &dist), -1);
    ck_assert_int_eq (common_init_dist_parse (NULL, &dist), -1);
}
END_TEST

START_TEST (test_philox_known)
{
    //  Known-answer vectors of Philox4x32-10 (Random123 kat_vectors).
    uint32_t out [4];
    kgym_philox4x32 (0, 0, 0, 0, 0, 0, out);
    ck_assert_uint_eq (out [0], 0x6627e8d5);
    ck_assert_uint_eq (out [1], 0xe169c58d);
    ck_assert_uint_eq (out [2], 0xbc57ac4c);
    ck_assert_uint_eq (out [3], 0x9b00dbd8);
    kgym_philox4x32 (0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, out);
    ck_assert_uint_eq (out [0], 0x408f276d);
    ck_assert_uint_eq (out [1], 0x41c83b0e);
    ck_assert_uint_eq (out [2], 0xa20bc7c6);
    ck_assert_uint_eq (out [3], 0x6d5451fd);
}
END_TEST

START_TEST (test_deterministic)
{
    common_init_t normal = { INIT_NORMAL, 0, 1 };
    common_init_t uniform = { INIT_UNIFORM, -2, 3 };
    for (uint64_t i = 0; i < 1000; i++) {
        ck_assert (common_init_value (&normal, 42, 7, i) == common_init_value (&normal, 42, 7, i));
        ck_assert (common_init_value (&uniform, 42, 7, i) == common_init_value (&uniform, 42, 7, i));
    }
    //  A fill equals element-wise values, and two fills are equal.
    float a [256], b [256];
    common_init_fill (&normal, DTYPE_F32, a, 256, 9, kgym_stream (1, 2, 3));
    common_init_fill (&normal, DTYPE_F32, b, 256, 9, kgym_stream (1, 2, 3));
    ck_assert (memcmp (a, b, sizeof a) == 0);
    for (int i = 0; i < 256; i++)
        ck_assert (a [i] == (float) common_init_value (&normal, 9, kgym_stream (1, 2, 3), i));
}
END_TEST

START_TEST (test_streams_differ)
{
    common_init_t normal = { INIT_NORMAL, 0, 1 };
    double a [64], b [64], c [64];
    for (int i = 0; i < 64; i++) {
        a [i] = common_init_value (&normal, 1, kgym_stream (0, 0, 0), i);
        b [i] = common_init_value (&normal, 1, kgym_stream (0, 0, 1), i);
        c [i] = common_init_value (&normal, 2, kgym_stream (0, 0, 0), i);
    }
    int same_ab = 0, same_ac = 0, same_neighbour = 0;
    for (int i = 0; i < 64; i++) {
        same_ab += a [i] == b [i];
        same_ac += a [i] == c [i];
        same_neighbour += i > 0 && a [i] == a [i - 1];
    }
    ck_assert_int_eq (same_ab, 0);
    ck_assert_int_eq (same_ac, 0);
    ck_assert_int_eq (same_neighbour, 0);
    //  Stream ids of different (size, trial, arg) are different.
    ck_assert (kgym_stream (1, 0, 0) != kgym_stream (0, 1, 0));
    ck_assert (kgym_stream (0, 1, 0) != kgym_stream (0, 0, 1));
}
END_TEST

START_TEST (test_normal_moments)
{
    common_init_t init = { INIT_NORMAL, 3.0, 2.0 };
    const int n = 100000;
    double sum = 0, sum2 = 0;
    int beyond4 = 0;
    for (int i = 0; i < n; i++) {
        double v = common_init_value (&init, 12345, kgym_stream (0, 0, 4), (uint64_t) i);
        ck_assert (isfinite (v));
        sum += v;
        sum2 += v * v;
        beyond4 += fabs (v - 3.0) > 8.0;
    }
    double mean = sum / n;
    double std = sqrt (sum2 / n - mean * mean);
    //  Standard error of the mean is 2/sqrt(1e5) = 0.0063: 0.03 is ~5 sigma.
    ck_assert_msg (fabs (mean - 3.0) < 0.03, "mean %g, expected 3", mean);
    ck_assert_msg (fabs (std - 2.0) < 0.03, "std %g, expected 2", std);
    ck_assert_msg (beyond4 < 20, "%d samples beyond 4 sigma", beyond4);
}
END_TEST

START_TEST (test_uniform_and_randint)
{
    common_init_t uniform = { INIT_UNIFORM, 0.5, 1.5 };
    double sum = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double v = common_init_value (&uniform, 5, 6, (uint64_t) i);
        ck_assert (v >= 0.5 && v < 1.5);
        sum += v;
    }
    ck_assert_msg (fabs (sum / n - 1.0) < 0.01, "mean %g", sum / n);

    common_init_t randint = { INIT_RANDINT, -3, 4 };
    int hist [7] = { 0 };
    for (int i = 0; i < 70000; i++) {
        double v = common_init_value (&randint, 5, 6, (uint64_t) i);
        ck_assert (v == floor (v) && v >= -3 && v <= 3);
        hist [(int) v + 3]++;
    }
    for (int k = 0; k < 7; k++)
        ck_assert_msg (hist [k] > 9000 && hist [k] < 11000, "value %d drawn %d times", k - 3, hist [k]);
}
END_TEST

START_TEST (test_fixed_dists)
{
    common_init_t zeros = { INIT_ZEROS, 0, 0 }, ones = { INIT_ONES, 0, 0 };
    common_init_t arange = { INIT_ARANGE, 10, 0.5 };
    ck_assert (common_init_value (&zeros, 1, 2, 3) == 0);
    ck_assert (common_init_value (&ones, 1, 2, 3) == 1);
    ck_assert (common_init_value (&arange, 1, 2, 0) == 10);
    ck_assert (common_init_value (&arange, 1, 2, 4) == 12);
    int32_t ints [5];
    common_init_t ar = { INIT_ARANGE, 0, 1 };
    common_init_fill (&ar, DTYPE_I32, ints, 5, 0, 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq (ints [i], i);
    //  Integer dtypes round and saturate the values.
    int8_t small [3];
    common_init_t big = { INIT_ARANGE, 126, 1 };
    common_init_fill (&big, DTYPE_I8, small, 3, 0, 0);
    ck_assert_int_eq (small [0], 126);
    ck_assert_int_eq (small [1], 127);
    ck_assert_int_eq (small [2], 127);
}
END_TEST

START_TEST (test_poison)
{
    uint16_t h [5];
    common_init_poison (DTYPE_F16, h, 5, 1, 2);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq (h [i], 0x7E00);
    common_init_poison (DTYPE_BF16, h, 5, 1, 2);
    ck_assert_uint_eq (h [4], 0x7FC0);
    float f [3];
    common_init_poison (DTYPE_F32, f, 3, 1, 2);
    ck_assert (isnan (f [0]) && isnan (f [2]));
    double d [3];
    common_init_poison (DTYPE_F64, d, 3, 1, 2);
    ck_assert (isnan (d [0]) && isnan (d [2]));

    //  Integers: random bits, deterministic, different per stream, and the
    //  count is respected (no write past the end).
    int32_t a [9], b [9], c [9];
    a [8] = b [8] = 0x55555555;
    common_init_poison (DTYPE_I32, a, 8, 1, 2);
    common_init_poison (DTYPE_I32, b, 8, 1, 2);
    common_init_poison (DTYPE_I32, c, 8, 1, 3);
    ck_assert (memcmp (a, b, 8 * sizeof (int32_t)) == 0);
    ck_assert (memcmp (a, c, 8 * sizeof (int32_t)) != 0);
    ck_assert_int_eq (a [8], 0x55555555);
    int zeros = 0;
    for (int i = 0; i < 8; i++)
        zeros += a [i] == 0;
    ck_assert_int_lt (zeros, 2);
    uint8_t bytes [17];
    bytes [16] = 0xAA;
    common_init_poison (DTYPE_U8, bytes, 16, 7, 7);
    ck_assert_uint_eq (bytes [16], 0xAA);
    uint32_t w [4];
    kgym_random_words (7, 7, 0, w);
    ck_assert_uint_eq (bytes [0], w [0] & 0xFF);
    ck_assert_uint_eq (bytes [5], (w [1] >> 8) & 0xFF);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_init");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_names);
    tcase_add_test (tc, test_philox_known);
    tcase_add_test (tc, test_deterministic);
    tcase_add_test (tc, test_streams_differ);
    tcase_add_test (tc, test_normal_moments);
    tcase_add_test (tc, test_uniform_and_randint);
    tcase_add_test (tc, test_fixed_dists);
    tcase_add_test (tc, test_poison);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
