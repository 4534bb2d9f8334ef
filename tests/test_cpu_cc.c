/*  test_cpu_cc - compiling candidates with the real compiler in the
    sandbox: the allow-list, good and bad sources, the cache and its key,
    and sources that attack the compiler (root's files, /dev/zero).
*/
#include "testutil.h"
#include "cpu_cc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *s_good =
    "void scale (const float *x, float *y, float a, int n)\n"
    "{ for (int i = 0; i < n; i++) y [i] = a * x [i]; }\n";

static char s_dir [64];
static char s_path [128];

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/kgym-cctest-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/modules.sqlite", s_dir);
}

static void
s_teardown (void)
{
    char cmd [128];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system (cmd) != 0)
        fprintf (stderr, "cannot remove %s\n", s_dir);
}

static int
s_check (const char *option, char *err, size_t errlen)
{
    char *options [] = { (char *) option };
    return cpu_cc_check_options (options, 1, err, errlen);
}

START_TEST (test_allow_list)
{
    const char *good [] = {
        "-O0", "-O3", "-Ofast", "-ffast-math", "-funroll-loops", "-march=native", "-mavx2",
        "-mfma", "-std=c11", "-std=gnu17", "-DN=4", "-DBLOCK", "-D_X=1.5e+3", "-DV=a-b_c", NULL
    };
    const char *bad [] = {
        "-fplugin=x", "-o", "/etc/passwd", "-Wl,-rpath,/tmp", "-include/etc/shadow", "-B/tmp",
        "-DX=$(id)", "-D1X", "-D", "-DX=a b", "-DX=\"s\"", "-specs=x", "-O3 ", "-march=x86-64",
        "--param=x", "@file", "-I/", "-fopenmp", NULL
    };
    char err [256];
    for (int i = 0; good [i]; i++)
        ck_assert_msg (s_check (good [i], err, sizeof err) == 0, "%s refused: %s", good [i], err);
    for (int i = 0; bad [i]; i++)
        ck_assert_msg (s_check (bad [i], err, sizeof err) == -1, "%s allowed", bad [i]);
    ck_assert_int_eq (s_check ("-fplugin=x", err, sizeof err), -1);
    ck_assert_str_eq (err, "option '-fplugin=x' is not allowed");
    ck_assert_int_eq (cpu_cc_check_options (NULL, 0, err, sizeof err), 0);
}
END_TEST

START_TEST (test_identity)
{
    const char *id = cpu_cc_identity ();
    fprintf (stderr, "compiler: %s\n", id);
    ck_assert_ptr_nonnull (strstr (id, " / "));
    ck_assert_ptr_null (strstr (id, "unknown"));
    ck_assert_ptr_eq (cpu_cc_identity (), id);
}
END_TEST

START_TEST (test_compile_good)
{
    cpu_cc_result_t result;
    char err [256];
    char *options [] = { "-O3", "-march=native" };
    ck_assert_int_eq (cpu_cc_compile (NULL, NULL, s_good, options, 2, 60.0, &result, err,
                                         sizeof err), 0);
    ck_assert_uint_gt (result.so_size, 1000);
    ck_assert_mem_eq (result.so, "\177ELF", 4);
    ck_assert (!result.cache_hit);
    ck_assert_uint_eq (strlen (result.key), 64);
    ck_assert_ptr_nonnull (result.log);
    cpu_cc_result_free (&result);
    ck_assert_ptr_null (result.so);
}
END_TEST

START_TEST (test_compile_error)
{
    cpu_cc_result_t result;
    char err [256];
    ck_assert_int_eq (cpu_cc_compile (NULL, NULL, "void f (void) { this is not C; }\n", NULL, 0,
                                         60.0, &result, err, sizeof err), 1);
    ck_assert_ptr_null (result.so);
    ck_assert_msg (result.log && strstr (result.log, "error"), "log: %s", result.log);
    cpu_cc_result_free (&result);
}
END_TEST

START_TEST (test_option_refused)
{
    cpu_cc_result_t result;
    char err [256];
    char *options [] = { "-O2", "-fplugin=x" };
    ck_assert_int_eq (cpu_cc_compile (NULL, NULL, s_good, options, 2, 60.0, &result, err,
                                         sizeof err), -1);
    ck_assert_str_eq (err, "option '-fplugin=x' is not allowed");
}
END_TEST

START_TEST (test_cache_hit_and_key)
{
    char err [256];
    worker_cache_t *cache = worker_cache_new (s_path, 0, err, sizeof err);
    ck_assert_ptr_nonnull (cache);
    cpu_cc_result_t first, second, other, native;
    char *o3 [] = { "-O3" };
    ck_assert_int_eq (cpu_cc_compile (cache, NULL, s_good, o3, 1, 60.0, &first, err, sizeof err), 0);
    ck_assert (!first.cache_hit);
    ck_assert_int_eq (cpu_cc_compile (cache, NULL, s_good, o3, 1, 60.0, &second, err, sizeof err), 0);
    ck_assert (second.cache_hit);
    ck_assert_str_eq (first.key, second.key);
    ck_assert_uint_eq (first.so_size, second.so_size);
    ck_assert_mem_eq (first.so, second.so, first.so_size);
    fprintf (stderr, "compile miss %.1f ms, hit %.3f ms\n", first.seconds * 1e3, second.seconds * 1e3);
    //  Options and -march=native are part of the key.
    char *o2 [] = { "-O2" };
    ck_assert_int_eq (cpu_cc_compile (cache, NULL, s_good, o2, 1, 60.0, &other, err, sizeof err), 0);
    ck_assert (!other.cache_hit);
    ck_assert_str_ne (first.key, other.key);
    char *nat [] = { "-O3", "-march=native" };
    ck_assert_int_eq (cpu_cc_compile (cache, NULL, s_good, nat, 2, 60.0, &native, err, sizeof err), 0);
    ck_assert_str_ne (first.key, native.key);
    cpu_cc_result_free (&first);
    cpu_cc_result_free (&second);
    cpu_cc_result_free (&other);
    cpu_cc_result_free (&native);
    //  A compile error is not cached (it may have been a resource limit).
    cpu_cc_result_t bad;
    ck_assert_int_eq (cpu_cc_compile (cache, NULL, "syntax error", NULL, 0, 60.0, &bad, err, sizeof err), 1);
    cpu_cc_result_free (&bad);
    ck_assert_int_eq (cpu_cc_compile (cache, NULL, "syntax error", NULL, 0, 60.0, &bad, err, sizeof err), 1);
    ck_assert (!bad.cache_hit);
    cpu_cc_result_free (&bad);
    worker_cache_destroy (&cache);
}
END_TEST

//  The compiler's root holds its toolchain only: a candidate that includes
//  or .incbin's a host file gets an error, and no byte of the file reaches
//  the object, the log or the feedback made from it.
START_TEST (test_compile_sees_no_host_file)
{
    static const char *attacks [] = {
        "#include \"/etc/passwd\"\n",
        "#include </etc/shadow>\n",
        "#include \"../../../../../../../../etc/passwd\"\n",
        "__asm__ (\".section .rodata\\n.globl leak\\nleak: .incbin \\\"/etc/passwd\\\"\\n.text\");\n"
        "void k (int *y) { y [0] = 1; }\n",
        "__asm__ (\".incbin \\\"/proc/self/environ\\\"\");\nvoid k (int *y) { y [0] = 1; }\n",
        "#include \"/work/kgym-task-data.json\"\n",
    };
    for (size_t i = 0; i < sizeof attacks / sizeof attacks [0]; i++) {
        cpu_cc_result_t result;
        char err [256];
        int rc = cpu_cc_compile (NULL, NULL, attacks [i], NULL, 0, 60.0, &result, err, sizeof err);
        ck_assert_msg (rc == 1, "attack %zu: rc %d (%s): %s", i, rc, err, result.log? result.log: "");
        ck_assert_msg (strstr (result.log, "No such file") || strstr (result.log, "not found"),
                       "attack %zu: log: %s", i, result.log);
        ck_assert_msg (strstr (result.log, "root:") == NULL, "attack %zu: host bytes in the log: %s",
                       i, result.log);
        ck_assert_ptr_null (result.so);
        cpu_cc_result_free (&result);
    }
    //  What a kernel legitimately includes is there.
    cpu_cc_result_t result;
    char err [256];
    const char *good = "#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <immintrin.h>\n"
                       "void k (float *y) { y [0] = sqrtf (y [0]); }\n";
    ck_assert_msg (cpu_cc_compile (NULL, NULL, good, NULL, 0, 60.0, &result, err, sizeof err) == 0,
                   "good: %s %s", err, result.log? result.log: "");
    cpu_cc_result_free (&result);
}
END_TEST

START_TEST (test_include_dev_zero_bounded)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.mem_bytes = 256ull << 20;
    cpu_cc_result_t result;
    char err [256];
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    int rc = cpu_cc_compile (NULL, &cfg, "#include \"/dev/zero\"\n", NULL, 0, 10.0, &result,
                                err, sizeof err);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    double took = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf (stderr, "#include /dev/zero: rc %d after %.2f s: %.200s\n", rc, took,
             result.log? result.log: err);
    ck_assert_msg (rc == 1 || rc == 2, "rc %d", rc);
    ck_assert (took < 15.0);
    cpu_cc_result_free (&result);
}
END_TEST

START_TEST (test_slow_compile_times_out)
{
    //  Macro expansion that grows 8^8-fold: many seconds of work.
    const char *src =
        "#define X1(x) x x x x x x x x\n"
        "#define X2(x) X1(x) X1(x) X1(x) X1(x) X1(x) X1(x) X1(x) X1(x)\n"
        "#define X3(x) X2(x) X2(x) X2(x) X2(x) X2(x) X2(x) X2(x) X2(x)\n"
        "#define X4(x) X3(x) X3(x) X3(x) X3(x) X3(x) X3(x) X3(x) X3(x)\n"
        "#define X5(x) X4(x) X4(x) X4(x) X4(x) X4(x) X4(x) X4(x) X4(x)\n"
        "#define X6(x) X5(x) X5(x) X5(x) X5(x) X5(x) X5(x) X5(x) X5(x)\n"
        "#define X7(x) X6(x) X6(x) X6(x) X6(x) X6(x) X6(x) X6(x) X6(x)\n"
        "#define X8(x) X7(x) X7(x) X7(x) X7(x) X7(x) X7(x) X7(x) X7(x)\n"
        "int v = X8(1+) 0;\n";
    cpu_cc_result_t result;
    char err [256];
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    int rc = cpu_cc_compile (NULL, NULL, src, NULL, 0, 1.0, &result, err, sizeof err);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    double took = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ck_assert_msg (rc == 2, "rc %d after %.2f s: %s", rc, took, result.log? result.log: err);
    ck_assert_msg (strstr (result.log, "timed out"), "log: %s", result.log);
    ck_assert (took < 5.0);
    cpu_cc_result_free (&result);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("cpu_cc");
    TCase *tc = tcase_create ("cc");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_allow_list);
    tcase_add_test (tc, test_identity);
    tcase_add_test (tc, test_compile_good);
    tcase_add_test (tc, test_compile_error);
    tcase_add_test (tc, test_option_refused);
    tcase_add_test (tc, test_cache_hit_and_key);
    tcase_add_test (tc, test_compile_sees_no_host_file);
    tcase_add_test (tc, test_include_dev_zero_bounded);
    tcase_add_test (tc, test_slow_compile_times_out);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
