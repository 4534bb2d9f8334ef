/*  test_common_init - init distributions: determinism per (seed, stream,
    index), distinct streams, moments of normal/uniform on both paths,
    ranges, the float path's accuracy against double precision and its
    known answers (what the GPU must reproduce bit for bit), poison.  */
#include "testutil.h"
#include "common_init.h"
#include "common_dtype.h"
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
    for (uint64_t i = 0; i < 1000; i++)
        for (int dt = DTYPE_F16; dt <= DTYPE_F64; dt++) {
            ck_assert (common_init_value (&normal, dt, 42, 7, i) == common_init_value (&normal, dt, 42, 7, i));
            ck_assert (common_init_value (&uniform, dt, 42, 7, i) == common_init_value (&uniform, dt, 42, 7, i));
        }
    //  A fill equals element-wise values (a tail that is not a whole block
    //  too), two fills are equal, and nothing is written past the count.
    common_dtype_t dtypes [] = { DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_F64 };
    for (size_t d = 0; d < 4; d++)
        for (int dist = 0; dist < 2; dist++) {
            common_init_t *init = dist? &uniform: &normal;
            common_dtype_t dt = dtypes [d];
            size_t es = common_dtype_size (dt);
            uint8_t a [258 * 8], b [258 * 8], want [8];
            memset (a, 0xAB, sizeof a);
            common_init_fill (init, dt, a, 255, 9, kgym_stream (1, 2, 3));
            common_init_fill (init, dt, b, 255, 9, kgym_stream (1, 2, 3));
            ck_assert (memcmp (a, b, 255 * es) == 0);
            ck_assert_uint_eq (a [255 * es], 0xAB);
            for (int i = 0; i < 255; i++) {
                common_dtype_set (dt, want, 0, common_init_value (init, dt, 9, kgym_stream (1, 2, 3), i));
                ck_assert_msg (memcmp (a + i * es, want, es) == 0, "%s %s element %d",
                               common_dtype_name (dt), common_init_dist_name (init->dist), i);
            }
        }
    ck_assert (common_init_float_path (&normal, DTYPE_F32) && common_init_float_path (&uniform, DTYPE_BF16));
    ck_assert (!common_init_float_path (&normal, DTYPE_F64));
    common_init_t randint = { INIT_RANDINT, 0, 10 };
    ck_assert (!common_init_float_path (&randint, DTYPE_F32));
}
END_TEST

START_TEST (test_streams_differ)
{
    common_init_t normal = { INIT_NORMAL, 0, 1 };
    double a [64], b [64], c [64];
    for (int i = 0; i < 64; i++) {
        a [i] = common_init_value (&normal, DTYPE_F32, 1, kgym_stream (0, 0, 0), i);
        b [i] = common_init_value (&normal, DTYPE_F32, 1, kgym_stream (0, 0, 1), i);
        c [i] = common_init_value (&normal, DTYPE_F32, 2, kgym_stream (0, 0, 0), i);
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
    //  Both paths: float (f32) and double (f64).
    common_init_t init = { INIT_NORMAL, 3.0, 2.0 };
    common_dtype_t dtypes [] = { DTYPE_F32, DTYPE_F64 };
    for (int d = 0; d < 2; d++) {
        const int n = 100000;
        double sum = 0, sum2 = 0, sum4 = 0;
        int beyond4 = 0, beyond2 = 0;
        for (int i = 0; i < n; i++) {
            double v = common_init_value (&init, dtypes [d], 12345, kgym_stream (0, 0, 4), (uint64_t) i);
            ck_assert (isfinite (v));
            sum += v;
            sum2 += v * v;
            sum4 += pow ((v - 3.0) / 2.0, 4);
            beyond4 += fabs (v - 3.0) > 8.0;
            beyond2 += fabs (v - 3.0) > 4.0;
        }
        double mean = sum / n;
        double std = sqrt (sum2 / n - mean * mean);
        //  Standard error of the mean is 2/sqrt(1e5) = 0.0063: 0.03 is ~5 sigma.
        ck_assert_msg (fabs (mean - 3.0) < 0.03, "mean %g, expected 3", mean);
        ck_assert_msg (fabs (std - 2.0) < 0.03, "std %g, expected 2", std);
        ck_assert_msg (beyond4 < 20, "%d samples beyond 4 sigma", beyond4);
        //  Normal tails and shape: 4.55% beyond 2 sigma, kurtosis 3.
        ck_assert_msg (beyond2 > 4200 && beyond2 < 4900, "%d samples beyond 2 sigma", beyond2);
        ck_assert_msg (fabs (sum4 / n - 3.0) < 0.1, "kurtosis %g", sum4 / n);
    }
}
END_TEST

//  The float path against the same transform in double precision on the
//  same Philox words: a float's worth of agreement, everywhere.
START_TEST (test_float_path_is_accurate)
{
    double worst_ln = 0, worst_trig = 0;
    for (int i = 0; i < 200000; i++) {
        float x = (float) (i + 1) * 5.96046448e-8f * 83.0f;     //  a sweep of (0, 1]
        if (x > 1.0f)
            x = 1.0f - (float) i * 1e-6f;
        double e = fabs ((double) kgym_lnf (x) - log ((double) x));
        double scale = fmax (1.0, fabs (log ((double) x)));
        worst_ln = fmax (worst_ln, e / scale);
        float t = (float) i / 200000.0f, sn, cs;
        kgym_sincos2pif (t, &sn, &cs);
        worst_trig = fmax (worst_trig, fabs (sn - sin (2 * M_PI * t)));
        worst_trig = fmax (worst_trig, fabs (cs - cos (2 * M_PI * t)));
    }
    ck_assert_msg (worst_ln < 4e-7, "ln: relative error %g", worst_ln);
    ck_assert_msg (worst_trig < 4e-7, "sincos: error %g", worst_trig);
    ck_assert_double_eq (kgym_lnf (1.0f), 0.0);
    //  Whole values: Box-Muller in double on the same words.
    common_init_t normal = { INIT_NORMAL, 0, 1 };
    double worst = 0;
    for (uint64_t b = 0; b < 20000; b++) {
        uint32_t w [4];
        kgym_random_words (77, 5, b, w);
        for (int k = 0; k < 4; k++) {
            double u1 = ((w [k & 2] >> 8) + 1) / 16777216.0, u2 = (w [(k & 2) + 1] >> 8) / 16777216.0;
            double r = sqrt (-2 * log (u1)), a = 2 * M_PI * u2;
            double want = r * (k & 1? sin (a): cos (a));
            double got = common_init_value (&normal, DTYPE_F32, 77, 5, b * 4 + (uint64_t) k);
            worst = fmax (worst, fabs (got - want) / fmax (1.0, fabs (want)));
        }
    }
    ck_assert_msg (worst < 2e-6, "float Box-Muller off by %g", worst);
}
END_TEST

//  Known answers of the float path: what the GPU must produce bit for bit
//  (test_cuda_backend compares the GPU with this host code), pinned here
//  so that no compiler or library change moves the host's bits unseen (a
//  build that lets the compiler fuse multiply-adds, -march=native without
//  -ffp-contract=off, changes the first value's last bit). Seed
//  0x1234567890ABCDEF, stream (0, 0, 0); normal(0.5, 2) is 0.206878,
//  -2.16572, 1.63901, -0.277421, 4.0588, 3.48887; uniform(-3, 5) 0.255811,
//  2.86056, 3.30741, 4.23744, -2.46225, -2.11055.
#define S_F32_NORMAL  0x3e53d7d4, 0xc00a9b35, 0x3fd1cb32, 0xbe8e0a10, 0x4081e1a9, 0x405f49a6
#define S_F32_UNIFORM 0x3e82f9a0, 0x40371356, 0x4053ac8e, 0x40879923, 0xc01d9576, 0xc0071336
#define S_F16_UNIFORM 0x3418, 0x41b9, 0x429d, 0x443d, 0xc0ed, 0xc039
#define S_BF16_NORMAL 0x3e54, 0xc00b, 0x3fd2, 0xbe8e, 0x4082, 0x405f
START_TEST (test_float_path_known_answers)
{
    common_init_t normal = { INIT_NORMAL, 0.5, 2.0 }, uniform = { INIT_UNIFORM, -3, 5 };
    uint32_t f32_normal [6], f32_uniform [6];
    uint16_t f16 [6], bf16 [6];
    common_init_fill (&normal, DTYPE_F32, f32_normal, 6, 0x1234567890ABCDEFull, kgym_stream (0, 0, 0));
    common_init_fill (&uniform, DTYPE_F32, f32_uniform, 6, 0x1234567890ABCDEFull, kgym_stream (0, 0, 0));
    common_init_fill (&uniform, DTYPE_F16, f16, 6, 0x1234567890ABCDEFull, kgym_stream (0, 0, 0));
    common_init_fill (&normal, DTYPE_BF16, bf16, 6, 0x1234567890ABCDEFull, kgym_stream (0, 0, 0));
    const uint32_t want_f32_normal [6] = { S_F32_NORMAL };
    const uint32_t want_f32_uniform [6] = { S_F32_UNIFORM };
    const uint16_t want_f16 [6] = { S_F16_UNIFORM };
    const uint16_t want_bf16 [6] = { S_BF16_NORMAL };
    for (int i = 0; i < 6; i++) {
        ck_assert_msg (f32_normal [i] == want_f32_normal [i], "f32 normal %d: 0x%08x", i, f32_normal [i]);
        ck_assert_msg (f32_uniform [i] == want_f32_uniform [i], "f32 uniform %d: 0x%08x", i, f32_uniform [i]);
        ck_assert_msg (f16 [i] == want_f16 [i], "f16 uniform %d: 0x%04x", i, f16 [i]);
        ck_assert_msg (bf16 [i] == want_bf16 [i], "bf16 normal %d: 0x%04x", i, bf16 [i]);
    }
}
END_TEST

START_TEST (test_uniform_and_randint)
{
    common_init_t uniform = { INIT_UNIFORM, 0.5, 1.5 };
    double sum = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double v = common_init_value (&uniform, DTYPE_F64, 5, 6, (uint64_t) i);
        ck_assert (v >= 0.5 && v < 1.5);
        sum += v;
        //  The float path: the same range (high itself only by rounding, as
        //  rounding the double path's value to f32 also can give).
        double f = common_init_value (&uniform, DTYPE_F32, 5, 6, (uint64_t) i);
        ck_assert (f >= 0.5 && f <= 1.5);
    }
    ck_assert_msg (fabs (sum / n - 1.0) < 0.01, "mean %g", sum / n);

    common_init_t randint = { INIT_RANDINT, -3, 4 };
    int hist [7] = { 0 };
    for (int i = 0; i < 70000; i++) {
        double v = common_init_value (&randint, DTYPE_I32, 5, 6, (uint64_t) i);
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
    ck_assert (common_init_value (&zeros, DTYPE_F32, 1, 2, 3) == 0);
    ck_assert (common_init_value (&ones, DTYPE_F32, 1, 2, 3) == 1);
    ck_assert (common_init_value (&arange, DTYPE_F32, 1, 2, 0) == 10);
    ck_assert (common_init_value (&arange, DTYPE_F32, 1, 2, 4) == 12);
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
    tcase_add_test (tc, test_float_path_is_accurate);
    tcase_add_test (tc, test_float_path_known_answers);
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
