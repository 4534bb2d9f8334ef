/*  test_common_dtype - names, sizes and exact half conversions: known bit
    patterns, ties to even, subnormals, infinities, NaN, saturation.  */
#include "testutil.h"
#include "common_dtype.h"
#include <math.h>
#include <string.h>

static float
s_float (uint32_t bits)
{
    float f;
    memcpy (&f, &bits, sizeof f);
    return f;
}

START_TEST (test_names)
{
    const char *names [] = { "f16", "bf16", "f32", "f64", "i8", "u8", "i32", "i64" };
    size_t sizes [] = { 2, 2, 4, 8, 1, 1, 4, 8 };
    for (int i = 0; i < 8; i++) {
        common_dtype_t t = common_dtype_parse (names [i]);
        ck_assert_int_ne (t, DTYPE_INVALID);
        ck_assert_str_eq (common_dtype_name (t), names [i]);
        ck_assert_uint_eq (common_dtype_size (t), sizes [i]);
        ck_assert (common_dtype_is_float (t) == (i < 4));
    }
    ck_assert_int_eq (common_dtype_parse ("F32"), DTYPE_INVALID);
    ck_assert_int_eq (common_dtype_parse ("float"), DTYPE_INVALID);
    ck_assert_int_eq (common_dtype_parse (""), DTYPE_INVALID);
    ck_assert_int_eq (common_dtype_parse (NULL), DTYPE_INVALID);
    ck_assert_str_eq (common_dtype_name (DTYPE_INVALID), "invalid");
    ck_assert_uint_eq (common_dtype_size (DTYPE_INVALID), 0);
}
END_TEST

START_TEST (test_f16_known)
{
    ck_assert_uint_eq (common_f32_to_f16 (0.0f), 0x0000);
    ck_assert_uint_eq (common_f32_to_f16 (-0.0f), 0x8000);
    ck_assert_uint_eq (common_f32_to_f16 (1.0f), 0x3C00);
    ck_assert_uint_eq (common_f32_to_f16 (-2.0f), 0xC000);
    ck_assert_uint_eq (common_f32_to_f16 (0.5f), 0x3800);
    ck_assert_uint_eq (common_f32_to_f16 (65504.0f), 0x7BFF);     //  largest finite
    ck_assert_uint_eq (common_f32_to_f16 (0.333333343f), 0x3555);
    ck_assert_uint_eq (common_f32_to_f16 (6.103515625e-05f), 0x0400);  //  smallest normal
    ck_assert_uint_eq (common_f32_to_f16 (5.9604645e-08f), 0x0001);    //  smallest subnormal
    ck_assert_uint_eq (common_f32_to_f16 (INFINITY), 0x7C00);
    ck_assert_uint_eq (common_f32_to_f16 (-INFINITY), 0xFC00);
    //  Overflow: 65520 is the tie between 65504 and 65536 (inf): even is inf.
    ck_assert_uint_eq (common_f32_to_f16 (65519.0f), 0x7BFF);
    ck_assert_uint_eq (common_f32_to_f16 (65520.0f), 0x7C00);
    ck_assert_uint_eq (common_f32_to_f16 (1e10f), 0x7C00);
    //  Decoding.
    ck_assert (common_f16_to_f32 (0x3C00) == 1.0f);
    ck_assert (common_f16_to_f32 (0x7BFF) == 65504.0f);
    ck_assert (common_f16_to_f32 (0x0001) == ldexpf (1.0f, -24));
    ck_assert (common_f16_to_f32 (0x03FF) == ldexpf (1023.0f, -24));
    ck_assert (isinf (common_f16_to_f32 (0xFC00)) && common_f16_to_f32 (0xFC00) < 0);
    ck_assert (signbit (common_f16_to_f32 (0x8000)) && common_f16_to_f32 (0x8000) == 0);
}
END_TEST

START_TEST (test_f16_ties_and_subnormals)
{
    //  1 + 2^-11 is halfway between 1 and 1+2^-10: ties to even (1).
    ck_assert_uint_eq (common_f32_to_f16 (1.0f + ldexpf (1, -11)), 0x3C00);
    //  1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: up.
    ck_assert_uint_eq (common_f32_to_f16 (1.0f + 3 * ldexpf (1, -11)), 0x3C02);
    //  Just above the tie rounds up.
    ck_assert_uint_eq (common_f32_to_f16 (1.0f + ldexpf (1, -11) + ldexpf (1, -20)), 0x3C01);
    //  Half the smallest subnormal is a tie with 0: even is 0; just above is 1.
    ck_assert_uint_eq (common_f32_to_f16 (ldexpf (1, -25)), 0x0000);
    ck_assert_uint_eq (common_f32_to_f16 (ldexpf (1.0f + ldexpf (1, -10), -25)), 0x0001);
    ck_assert_uint_eq (common_f32_to_f16 (-ldexpf (1, -26)), 0x8000);
    //  1.5 * smallest subnormal is a tie between 1 and 2: even is 2.
    ck_assert_uint_eq (common_f32_to_f16 (ldexpf (3, -25)), 0x0002);
    //  Rounding up out of the subnormals reaches the smallest normal.
    ck_assert_uint_eq (common_f32_to_f16 (ldexpf (1023.75f, -24)), 0x0400);
    //  Float subnormals are far below f16's range.
    ck_assert_uint_eq (common_f32_to_f16 (s_float (0x00000001)), 0x0000);
    ck_assert_uint_eq (common_f32_to_f16 (s_float (0x80400000)), 0x8000);
    //  Every finite half survives a round trip, bit for bit.
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00)
            continue;
        float f = common_f16_to_f32 ((uint16_t) h);
        ck_assert_msg (common_f32_to_f16 (f) == h, "0x%04x -> %g -> 0x%04x", h, f,
                       common_f32_to_f16 (f));
    }
}
END_TEST

START_TEST (test_nan)
{
    ck_assert (isnan (common_f16_to_f32 (common_f32_to_f16 (NAN))));
    ck_assert (isnan (common_bf16_to_f32 (common_f32_to_bf16 (NAN))));
    //  A NaN whose payload sits only in the low bits must not become inf.
    float low_nan = s_float (0x7F800001);
    ck_assert (isnan (low_nan));
    uint16_t h = common_f32_to_f16 (low_nan);
    ck_assert_msg ((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0, "got 0x%04x", h);
    uint16_t b = common_f32_to_bf16 (low_nan);
    ck_assert_msg ((b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0, "got 0x%04x", b);
    b = common_f32_to_bf16 (s_float (0xFFFFFFFF));
    ck_assert (isnan (common_bf16_to_f32 (b)));
    ck_assert (isnan (common_f16_to_f32 (0x7E00)));
    ck_assert (isnan (common_f16_to_f32 (0x7C01)));
    ck_assert (isnan (common_bf16_to_f32 (0x7FC0)));
}
END_TEST

START_TEST (test_bf16)
{
    ck_assert_uint_eq (common_f32_to_bf16 (1.0f), 0x3F80);
    ck_assert_uint_eq (common_f32_to_bf16 (-2.0f), 0xC000);
    ck_assert_uint_eq (common_f32_to_bf16 (3.14159265f), 0x4049);
    ck_assert_uint_eq (common_f32_to_bf16 (INFINITY), 0x7F80);
    ck_assert_uint_eq (common_f32_to_bf16 (-0.0f), 0x8000);
    //  Ties to even on the low 16 bits.
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x3F808000)), 0x3F80);
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x3F818000)), 0x3F82);
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x3F808001)), 0x3F81);
    //  The largest float rounds to infinity; the largest bf16 stays.
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x7F7FFFFF)), 0x7F80);
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x7F7F0000)), 0x7F7F);
    //  Subnormals keep their bits.
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x00010000)), 0x0001);
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x00008000)), 0x0000);
    ck_assert_uint_eq (common_f32_to_bf16 (s_float (0x00018000)), 0x0002);
    ck_assert (common_bf16_to_f32 (0x3F80) == 1.0f);
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7F80) == 0x7F80 && (h & 0x7F))
            continue;
        ck_assert_uint_eq (common_f32_to_bf16 (common_bf16_to_f32 ((uint16_t) h)), h);
    }
}
END_TEST

START_TEST (test_get_set)
{
    uint8_t buf [64];
    common_dtype_t floats [] = { DTYPE_F16, DTYPE_BF16, DTYPE_F32, DTYPE_F64 };
    for (int k = 0; k < 4; k++) {
        common_dtype_set (floats [k], buf, 3, -1.5);
        ck_assert (common_dtype_get (floats [k], buf, 3) == -1.5);
    }
    common_dtype_set (DTYPE_F16, buf, 0, 1e6);
    ck_assert (isinf (common_dtype_get (DTYPE_F16, buf, 0)));
    common_dtype_set (DTYPE_F64, buf, 1, 0.1);
    ck_assert (common_dtype_get (DTYPE_F64, buf, 1) == 0.1);
    common_dtype_set (DTYPE_F32, buf, 1, 0.1);
    ck_assert (common_dtype_get (DTYPE_F32, buf, 1) == (double) 0.1f);

    //  Integers round to nearest even and saturate; NaN becomes 0.
    common_dtype_set (DTYPE_I8, buf, 0, 300);
    ck_assert (common_dtype_get (DTYPE_I8, buf, 0) == 127);
    common_dtype_set (DTYPE_I8, buf, 0, -300);
    ck_assert (common_dtype_get (DTYPE_I8, buf, 0) == -128);
    common_dtype_set (DTYPE_U8, buf, 0, -5);
    ck_assert (common_dtype_get (DTYPE_U8, buf, 0) == 0);
    common_dtype_set (DTYPE_U8, buf, 0, 255.4);
    ck_assert (common_dtype_get (DTYPE_U8, buf, 0) == 255);
    common_dtype_set (DTYPE_I32, buf, 2, 2.5);
    ck_assert (common_dtype_get (DTYPE_I32, buf, 2) == 2);
    common_dtype_set (DTYPE_I32, buf, 2, 3.5);
    ck_assert (common_dtype_get (DTYPE_I32, buf, 2) == 4);
    common_dtype_set (DTYPE_I32, buf, 2, -2.6);
    ck_assert (common_dtype_get (DTYPE_I32, buf, 2) == -3);
    common_dtype_set (DTYPE_I32, buf, 2, 1e12);
    ck_assert (common_dtype_get (DTYPE_I32, buf, 2) == INT32_MAX);
    common_dtype_set (DTYPE_I32, buf, 2, NAN);
    ck_assert (common_dtype_get (DTYPE_I32, buf, 2) == 0);
    common_dtype_set (DTYPE_I32, buf, 2, -INFINITY);
    ck_assert (common_dtype_get (DTYPE_I32, buf, 2) == INT32_MIN);
    int64_t v;
    common_dtype_set (DTYPE_I64, buf, 1, 1e30);
    memcpy (&v, buf + 8, 8);
    ck_assert (v == INT64_MAX);
    common_dtype_set (DTYPE_I64, buf, 1, -1e30);
    memcpy (&v, buf + 8, 8);
    ck_assert (v == INT64_MIN);
    common_dtype_set (DTYPE_I64, buf, 1, 0x1p63);
    memcpy (&v, buf + 8, 8);
    ck_assert (v == INT64_MAX);
    common_dtype_set (DTYPE_I64, buf, 1, -0x1p63);
    memcpy (&v, buf + 8, 8);
    ck_assert (v == INT64_MIN);
    common_dtype_set (DTYPE_I64, buf, 1, NAN);
    memcpy (&v, buf + 8, 8);
    ck_assert (v == 0);
    common_dtype_set (DTYPE_I64, buf, 1, 123456789012.0);
    ck_assert (common_dtype_get (DTYPE_I64, buf, 1) == 123456789012.0);
    //  Half elements land at index * 2.
    memset (buf, 0, sizeof buf);
    common_dtype_set (DTYPE_F16, buf, 2, 1.0);
    uint16_t h;
    memcpy (&h, buf + 4, 2);
    ck_assert_uint_eq (h, 0x3C00);
    ck_assert (isnan (common_dtype_get (DTYPE_INVALID, buf, 0)));
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_dtype");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_names);
    tcase_add_test (tc, test_f16_known);
    tcase_add_test (tc, test_f16_ties_and_subnormals);
    tcase_add_test (tc, test_nan);
    tcase_add_test (tc, test_bf16);
    tcase_add_test (tc, test_get_set);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
