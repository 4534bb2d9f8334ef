/*  test_common_expr - integer expressions: precedence, functions, limits,
    and that every bad input is an error with a reason, never a crash.  */
#include "testutil.h"
#include "common_expr.h"
#include <stdio.h>
#include <string.h>

static const common_expr_var_t s_vars [] = {
    { "M", 512 }, { "N", 1000 }, { "K_2", 7 }, { "zero", 0 }, { "big", INT64_MAX },
    { "small", INT64_MIN }
};
#define NVARS (sizeof s_vars / sizeof s_vars [0])

//  Evaluate text that must succeed.
static int64_t
s_eval (const char *text)
{
    int64_t v = -12345;
    char err [256];
    int rc = common_expr_eval (text, s_vars, NVARS, &v, err, sizeof err);
    ck_assert_msg (rc == 0, "'%s' failed: %s", text, err);
    return v;
}

//  Evaluate text that must fail with a reason containing want.
static void
s_fails (const char *text, const char *want)
{
    int64_t v = 0;
    char err [256] = "unset";
    int rc = common_expr_eval (text, s_vars, NVARS, &v, err, sizeof err);
    ck_assert_msg (rc == -1, "'%s' should fail, gave %lld", text, (long long) v);
    ck_assert_msg (strstr (err, want) != NULL, "'%s': expected '%s' in '%s'", text, want, err);
}

START_TEST (test_precedence)
{
    ck_assert_int_eq (s_eval ("1+2*3"), 7);
    ck_assert_int_eq (s_eval ("(1+2)*3"), 9);
    ck_assert_int_eq (s_eval ("10-4-3"), 3);            //  left associative
    ck_assert_int_eq (s_eval ("100/10/5"), 2);
    ck_assert_int_eq (s_eval ("2*3%4"), 2);             //  (2*3)%4
    ck_assert_int_eq (s_eval ("-2*3"), -6);
    ck_assert_int_eq (s_eval ("--5"), 5);
    ck_assert_int_eq (s_eval ("3 - -2"), 5);
    ck_assert_int_eq (s_eval (" M * N + K_2 "), 512007);
    ck_assert_int_eq (s_eval ("-7/2"), -3);             //  truncates like C
    ck_assert_int_eq (s_eval ("-7%2"), -1);
    ck_assert_int_eq (s_eval ("0"), 0);
    ck_assert_int_eq (s_eval ("9223372036854775807"), INT64_MAX);
}
END_TEST

START_TEST (test_functions)
{
    ck_assert_int_eq (s_eval ("cdiv(M,4)"), 128);
    ck_assert_int_eq (s_eval ("cdiv(N, 3)"), 334);
    ck_assert_int_eq (s_eval ("cdiv(0,5)"), 0);
    ck_assert_int_eq (s_eval ("cdiv(-7,2)"), -3);       //  ceil toward +inf
    ck_assert_int_eq (s_eval ("cdiv(-8,2)"), -4);
    ck_assert_int_eq (s_eval ("cdiv(small,1)"), INT64_MIN);
    ck_assert_int_eq (s_eval ("cdiv(big,2)"), INT64_MAX / 2 + 1);
    ck_assert_int_eq (s_eval ("min(M,N)"), 512);
    ck_assert_int_eq (s_eval ("max(M, N, 3000, -1)"), 3000);
    ck_assert_int_eq (s_eval ("min(5)"), 5);
    ck_assert_int_eq (s_eval ("max(1,2,3,4,5,6,7,8)"), 8);
    ck_assert_int_eq (s_eval ("min(max(1,2),cdiv(9,2))*2"), 4);
    s_fails ("max(1,2,3,4,5,6,7,8,9)", "at most 8");
    s_fails ("min()", "unexpected ')'");
    s_fails ("cdiv(1)", "cdiv takes 2");
    s_fails ("cdiv(5,0)", "cdiv divisor must be > 0");
    s_fails ("cdiv(5,-1)", "cdiv divisor must be > 0");
    s_fails ("pow(2,3)", "unknown function 'pow'");
}
END_TEST

START_TEST (test_overflow_and_division)
{
    s_fails ("N/0", "division by zero in 'N/0'");
    s_fails ("N/zero", "division by zero");
    s_fails ("N%0", "modulo by zero");
    s_fails ("big+1", "overflow");
    s_fails ("small-1", "overflow");
    s_fails ("big*2", "overflow");
    s_fails ("-small", "overflow");
    s_fails ("small/-1", "overflow");
    s_fails ("9223372036854775808", "integer too large");
    s_fails ("M*M*M*M*M*M*M*M", "overflow");
    ck_assert_int_eq (s_eval ("small%-1"), 0);      //  exact, and must not trap
    ck_assert_int_eq (s_eval ("small/1"), INT64_MIN);
    ck_assert_int_eq (s_eval ("-big-1"), INT64_MIN);
}
END_TEST

START_TEST (test_syntax_errors)
{
    s_fails ("K", "unknown name 'K'");
    s_fails ("m", "unknown name 'm'");          //  names are case sensitive
    s_fails ("(M+N))", "unexpected ')' at 5");
    s_fails ("M+", "unexpected end at 2");
    s_fails ("(M", "unexpected end");
    s_fails ("", "empty expression");
    s_fails ("   ", "empty expression");
    s_fails ("1.5", "unexpected '.' at 1");
    s_fails ("0x10", "unexpected 'x' at 1");
    s_fails ("2M", "unexpected 'M' at 1");
    s_fails ("M N", "unexpected 'N' at 2");
    s_fails ("M,N", "unexpected ','");
    s_fails ("+1", "unexpected '+' at 0");
    s_fails ("1\x01", "unexpected byte 0x01 at 1");
    s_fails ("min(1 2)", "unexpected '2'");
    s_fails (NULL, "no expression");
}
END_TEST

START_TEST (test_depth_and_length)
{
    char text [COMMON_EXPR_MAX_LEN + 64];
    //  Nesting below the limit works ...
    int n = 0;
    for (int i = 0; i < 60; i++)
        text [n++] = '(';
    text [n++] = '1';
    for (int i = 0; i < 60; i++)
        text [n++] = ')';
    text [n] = '\0';
    ck_assert_int_eq (s_eval (text), 1);
    //  ... and beyond it is an error, not a stack overflow.
    n = 0;
    for (int i = 0; i < 500; i++)
        text [n++] = '(';
    text [n++] = '1';
    for (int i = 0; i < 500; i++)
        text [n++] = ')';
    text [n] = '\0';
    s_fails (text, "nested deeper than 64");
    memset (text, '-', 200);
    strcpy (text + 200, "1");
    s_fails (text, "nested deeper than 64");

    //  Exactly the maximum length is accepted; one more byte is not.
    memset (text, ' ', COMMON_EXPR_MAX_LEN - 1);
    text [COMMON_EXPR_MAX_LEN - 1] = '7';
    text [COMMON_EXPR_MAX_LEN] = '\0';
    ck_assert_int_eq (s_eval (text), 7);
    memset (text, ' ', COMMON_EXPR_MAX_LEN);
    text [COMMON_EXPR_MAX_LEN] = '7';
    text [COMMON_EXPR_MAX_LEN + 1] = '\0';
    s_fails (text, "longer than 1024");

    //  A long failing text keeps the message short.
    n = 0;
    for (int i = 0; i < 300; i++)
        text [n++] = '1', text [n++] = '+';
    strcpy (text + n, "1/0");
    char err [128];
    int64_t v;
    ck_assert_int_eq (common_expr_eval (text, NULL, 0, &v, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "division by zero") && strlen (err) < 100, "got '%s'", err);
}
END_TEST

START_TEST (test_error_buffer)
{
    //  A tiny buffer is still NUL-terminated; a zero-size one is not touched.
    char err [8];
    memset (err, 'x', sizeof err);
    int64_t v;
    ck_assert_int_eq (common_expr_eval ("K", s_vars, NVARS, &v, err, sizeof err), -1);
    ck_assert_int_eq (err [7], '\0');
    char none = 'z';
    ck_assert_int_eq (common_expr_eval ("K", s_vars, NVARS, &v, &none, 0), -1);
    ck_assert_int_eq (none, 'z');
    ck_assert_int_eq (common_expr_eval ("K", s_vars, NVARS, &v, NULL, 0), -1);
}
END_TEST

START_TEST (test_check)
{
    const char *names [] = { "M", "N" };
    char err [256];
    ck_assert_int_eq (common_expr_check ("cdiv(M,4)*N", names, 2, err, sizeof err), 0);
    //  Values are unknown when checking: no arithmetic errors.
    ck_assert_int_eq (common_expr_check ("M/(N-N)", names, 2, err, sizeof err), 0);
    ck_assert_int_eq (common_expr_check ("M*K", names, 2, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "unknown name 'K'"), "got '%s'", err);
    ck_assert_int_eq (common_expr_check ("M*", names, 2, err, sizeof err), -1);
    ck_assert_int_eq (common_expr_check ("foo(M)", names, 2, err, sizeof err), -1);
    ck_assert_int_eq (common_expr_check ("1", NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq (common_expr_check ("M", NULL, 0, err, sizeof err), -1);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_expr");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_precedence);
    tcase_add_test (tc, test_functions);
    tcase_add_test (tc, test_overflow_and_division);
    tcase_add_test (tc, test_syntax_errors);
    tcase_add_test (tc, test_depth_and_length);
    tcase_add_test (tc, test_error_buffer);
    tcase_add_test (tc, test_check);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
