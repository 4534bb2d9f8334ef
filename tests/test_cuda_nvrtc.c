/*  test_cuda_nvrtc - NVRTC compiles, their cache and `kgym compile`.

    No GPU needed: NVRTC runs in kgym-nvrtc, which links no libcuda and never
    touches the driver. Runs in CI.
*/
#include "testutil.h"
#include "cuda_nvrtc.h"
#include "worker_cache.h"
#include "kgym_compile.h"
#include "cuda_msg.h"
#include "cuda_kernels.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *s_saxpy =
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

//  A fresh cache file in a fresh directory; returns the path (malloc'd).
static char *
s_temp_cache (void)
{
    char dir [] = "/tmp/kgym-nvrtc-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    char *path = malloc (strlen (dir) + 32);
    sprintf (path, "%s/modules.sqlite", dir);
    return path;
}

START_TEST (test_options_allow_list)
{
    char *ok [] = { "-use_fast_math", "--use_fast_math", "-maxrregcount=64", "-lineinfo",
                    "--std=c++20", "-DTILE=32", "-DNDEBUG", "--extra-device-vectorization",
                    "-ftz=true", "-prec-div=false", "-prec-sqrt=true", "-fmad=false" };
    char **norm = NULL;
    size_t n = 0;
    char err [512];
    ck_assert_int_eq (cuda_nvrtc_options (ok, 12, &norm, &n, err, sizeof err), 0);
    ck_assert_uint_eq (n, 12);
    ck_assert_str_eq (norm [0], "--use_fast_math");
    ck_assert_str_eq (norm [1], "--use_fast_math");
    ck_assert_str_eq (norm [2], "--maxrregcount=64");
    ck_assert_str_eq (norm [3], "--generate-line-info");
    ck_assert_str_eq (norm [5], "-DTILE=32");
    ck_assert_str_eq (norm [8], "--ftz=true");
    cuda_nvrtc_options_free (norm, n);

    const char *bad [] = { "--pre-include=/etc/passwd", "-I/etc", "-arch=sm_80", "-maxrregcount=1",
                           "-D A", "-ftz=maybe", "--std=c++98", "-G", "x" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        char *one [] = { (char *) bad [i] };
        ck_assert_msg (cuda_nvrtc_options (one, 1, &norm, &n, err, sizeof err) == -1,
                       "option '%s' was expected to be refused", bad [i]);
        ck_assert_msg (strstr (err, "not allowed") != NULL, "reason names the rule: %s", err);
    }
    //  The worker reads NVRTC's version without linking it (dlopen).
    const char *version = cuda_nvrtc_version ();
    int major = 0, minor = -1;
    ck_assert_msg (sscanf (version, "%d.%d", &major, &minor) == 2 && major >= 11,
                   "nvrtcVersion through dlopen: '%s'", version);
    ck_assert_int_eq (cuda_nvrtc_check_arch ("sm_90"), 0);
    ck_assert_int_eq (cuda_nvrtc_check_arch ("sm_90a"), 0);
    ck_assert_int_eq (cuda_nvrtc_check_arch ("sm_100"), 0);
    ck_assert_int_eq (cuda_nvrtc_check_arch ("compute_90"), -1);
    ck_assert_int_eq (cuda_nvrtc_check_arch ("sm_9"), -1);
}
END_TEST

START_TEST (test_compile_cubin_for_sm90)
{
    cuda_nvrtc_result_t res;
    char err [512] = "";
    int rc = cuda_nvrtc_compile (NULL, "cuda", "saxpy.cu", s_saxpy, NULL, 0, "sm_90", 60,
                                   &res, err, sizeof err);
    ck_assert_msg (rc == NVRTC_OK, "compile: %d %s %s", rc, err, res.log? res.log: "");
    ck_assert_uint_gt (res.size, 100);
    ck_assert_msg (memcmp (res.image, "\x7f" "ELF", 4) == 0, "a cubin (ELF), not PTX");
    ck_assert (!res.is_ptx);
    ck_assert_uint_eq (strlen (res.key), 64);
    cuda_nvrtc_result_free (&res);
}
END_TEST

START_TEST (test_compile_error_has_log)
{
    cuda_nvrtc_result_t res;
    char err [512] = "";
    const char *broken = "extern \"C\" __global__ void k(float *x) { x[0] = undefined_name; }\n";
    int rc = cuda_nvrtc_compile (NULL, "cuda", "broken.cu", broken, NULL, 0, "sm_90", 60,
                                   &res, err, sizeof err);
    ck_assert_int_eq (rc, NVRTC_COMPILE_ERROR);
    ck_assert_ptr_nonnull (res.log);
    ck_assert_msg (strstr (res.log, "undefined_name") != NULL, "log names the error: %s", res.log);
    ck_assert_ptr_null (res.image);
    cuda_nvrtc_result_free (&res);
}
END_TEST

START_TEST (test_disallowed_option_is_invalid)
{
    cuda_nvrtc_result_t res;
    char err [512] = "";
    char *opts [] = { "--pre-include=/etc/passwd" };
    int rc = cuda_nvrtc_compile (NULL, "cuda", "k.cu", s_saxpy, opts, 1, "sm_90", 60,
                                   &res, err, sizeof err);
    ck_assert_int_eq (rc, NVRTC_INVALID);
    ck_assert_msg (strstr (err, "--pre-include") != NULL, "reason names the option: %s", err);
    cuda_nvrtc_result_free (&res);
    rc = cuda_nvrtc_compile (NULL, "cuda", "k.cu", s_saxpy, NULL, 0, "compute_90", 60,
                               &res, err, sizeof err);
    ck_assert_int_eq (rc, NVRTC_INVALID);
    cuda_nvrtc_result_free (&res);
}
END_TEST

START_TEST (test_cache_hit_on_second_compile)
{
    char *path = s_temp_cache ();
    char err [512] = "";
    worker_cache_t *cache = worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, err, sizeof err);
    ck_assert_msg (cache != NULL, "cache: %s", err);
    char *opts [] = { "-use_fast_math" };
    cuda_nvrtc_result_t a, b, c;
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", s_saxpy, opts, 1, "sm_90", 60,
                                            &a, err, sizeof err), NVRTC_OK);
    ck_assert (!a.cache_hit);
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", s_saxpy, opts, 1, "sm_90", 60,
                                            &b, err, sizeof err), NVRTC_OK);
    ck_assert (b.cache_hit);
    ck_assert_str_eq (a.key, b.key);
    ck_assert_uint_eq (a.size, b.size);
    ck_assert (memcmp (a.image, b.image, a.size) == 0);
    printf ("nvrtc: cold compile %.1f ms, cache hit %.3f ms\n", a.seconds * 1e3, b.seconds * 1e3);
    ck_assert_msg (b.seconds < 0.02, "a hit took %.3f ms", b.seconds * 1e3);
    //  The spelling of an option does not change the key; its meaning does.
    char *same [] = { "--use_fast_math" };
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", s_saxpy, same, 1, "sm_90", 60,
                                            &c, err, sizeof err), NVRTC_OK);
    ck_assert (c.cache_hit);
    cuda_nvrtc_result_free (&c);
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", s_saxpy, NULL, 0, "sm_90", 60,
                                            &c, err, sizeof err), NVRTC_OK);
    ck_assert (!c.cache_hit);
    ck_assert_str_ne (c.key, a.key);
    cuda_nvrtc_result_free (&c);
    //  Other arch, other key.
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", s_saxpy, opts, 1, "sm_80", 60,
                                            &c, err, sizeof err), NVRTC_OK);
    ck_assert (!c.cache_hit);
    cuda_nvrtc_result_free (&c);
    //  Compile errors are cached too, with their log.
    const char *broken = "extern \"C\" __global__ void k() { nope; }\n";
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", broken, NULL, 0, "sm_90", 60,
                                            &c, err, sizeof err), NVRTC_COMPILE_ERROR);
    cuda_nvrtc_result_free (&c);
    ck_assert_int_eq (cuda_nvrtc_compile (cache, "cuda", "k.cu", broken, NULL, 0, "sm_90", 60,
                                            &c, err, sizeof err), NVRTC_COMPILE_ERROR);
    ck_assert (c.cache_hit);
    ck_assert (strstr (c.log, "nope") != NULL);
    cuda_nvrtc_result_free (&c);
    cuda_nvrtc_result_free (&a);
    cuda_nvrtc_result_free (&b);
    worker_cache_destroy (&cache);
    free (path);
}
END_TEST

START_TEST (test_toolkit_headers_resolve)
{
    const char *src =
        "#include <cuda_fp16.h>\n"
        "#include <cuda_bf16.h>\n"
        "#include <mma.h>\n"
        "#include <cooperative_groups.h>\n"
        "#include <cuda/pipeline>\n"
        "namespace cg = cooperative_groups;\n"
        "extern \"C\" __global__ void k(const __half *a, __nv_bfloat16 *b, float *c)\n"
        "{\n"
        "    cg::thread_block block = cg::this_thread_block();\n"
        "    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;\n"
        "    nvcuda::wmma::fill_fragment(acc, 0.0f);\n"
        "    nvcuda::wmma::store_matrix_sync(c, acc, 16, nvcuda::wmma::mem_row_major);\n"
        "    b[threadIdx.x] = __float2bfloat16(__half2float(a[threadIdx.x]));\n"
        "    block.sync();\n"
        "}\n";
    cuda_nvrtc_result_t res;
    char err [512] = "";
    int rc = cuda_nvrtc_compile (NULL, "cuda", "headers.cu", src, NULL, 0, "sm_90", 120,
                                   &res, err, sizeof err);
    ck_assert_msg (rc == NVRTC_OK, "headers: %d %s\n%s", rc, err, res.log? res.log: "");
    cuda_nvrtc_result_free (&res);
}
END_TEST

START_TEST (test_sandbox_refuses_host_files)
{
    //  kgym-nvrtc's root holds the toolkit's headers only: an #include of a
    //  host file must not compile, and none of its bytes may reach the log
    //  (the log goes back to the trainer as feedback).
    const char *attacks [] = {
        "#include \"/etc/passwd\"\nextern \"C\" __global__ void k() {}\n",
        "#include </etc/passwd>\nextern \"C\" __global__ void k() {}\n",
        "#include \"../../../../../../etc/passwd\"\nextern \"C\" __global__ void k() {}\n",
        "#include \"/usr/include/stdio.h\"\nextern \"C\" __global__ void k() {}\n",
    };
    for (size_t i = 0; i < sizeof attacks / sizeof attacks [0]; i++) {
        cuda_nvrtc_result_t res;
        char err [512] = "";
        int rc = cuda_nvrtc_compile (NULL, "cuda", "leak.cu", attacks [i], NULL, 0, "sm_90", 60,
                                     &res, err, sizeof err);
        ck_assert_msg (rc == NVRTC_COMPILE_ERROR, "attack %zu: %d %s", i, rc, res.log? res.log: err);
        ck_assert_ptr_nonnull (res.log);
        ck_assert_msg (strstr (res.log, "root:x:") == NULL && strstr (res.log, "printf") == NULL,
                       "attack %zu: host bytes in the log:\n%s", i, res.log);
        cuda_nvrtc_result_free (&res);
    }
}
END_TEST

START_TEST (test_compile_timeout_kills)
{
    //  A full unroll of a huge loop keeps NVRTC busy far past one second.
    const char *src =
        "extern \"C\" __global__ void k(float *x)\n"
        "{\n"
        "#pragma unroll\n"
        "    for (int i = 0; i < 2000000; i++)\n"
        "        x[(i * 7) % 1031] = x[(i * 13) % 1021] * 1.0001f + x[(i * 3) % 1019];\n"
        "}\n";
    cuda_nvrtc_result_t res;
    char err [512] = "";
    double t0 = cuda_now ();
    int rc = cuda_nvrtc_compile (NULL, "cuda", "slow.cu", src, NULL, 0, "sm_90", 1.0,
                                   &res, err, sizeof err);
    double took = cuda_now () - t0;
    ck_assert_msg (rc == NVRTC_TIMEOUT, "expected a timeout, got %d (%s) after %.1f s", rc, err, took);
    ck_assert_str_eq (err, "compile timed out after 1 s");
    ck_assert_msg (took < 3.0, "the compile was killed late: %.1f s", took);
    cuda_nvrtc_result_free (&res);
}
END_TEST

START_TEST (test_internal_kernels_compile)
{
    //  The runner's own generator/compare kernels, with common_philox.h pasted in.
    const char *src = cuda_kernels_source ();
    ck_assert_ptr_nonnull (src);
    ck_assert_ptr_nonnull (strstr (src, "kgym_philox4x32"));
    size_t n = 0;
    while (cuda_kernels_options [n])
        n++;
    cuda_nvrtc_result_t res;
    char err [512] = "";
    int rc = cuda_nvrtc_compile (NULL, "cuda", "kgym_internal.cu", src, (char *const *) cuda_kernels_options,
                                   n, "sm_90", 120, &res, err, sizeof err);
    ck_assert_msg (rc == NVRTC_OK, "internal kernels: %d %s\n%s", rc, err, res.log? res.log: "");
    cuda_nvrtc_result_free (&res);
    rc = cuda_nvrtc_compile (NULL, "cuda", "kgym_selftest.cu", cuda_kernels_selftest_source, NULL, 0,
                               "sm_90", 60, &res, err, sizeof err);
    ck_assert_msg (rc == NVRTC_OK, "self-test probe: %d %s\n%s", rc, err, res.log? res.log: "");
    cuda_nvrtc_result_free (&res);
}
END_TEST

START_TEST (test_ptx_is_passed_through)
{
    const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                      ".visible .entry k() { ret; }\n";
    cuda_nvrtc_result_t res;
    char err [512] = "";
    int rc = cuda_nvrtc_compile (NULL, "ptx", "k.ptx", ptx, NULL, 0, "sm_90", 10, &res, err, sizeof err);
    ck_assert_int_eq (rc, NVRTC_OK);
    ck_assert (res.is_ptx);
    ck_assert_uint_eq (res.size, strlen (ptx) + 1);
    cuda_nvrtc_result_free (&res);
    char *opts [] = { "-use_fast_math" };
    rc = cuda_nvrtc_compile (NULL, "ptx", "k.ptx", ptx, opts, 1, "sm_90", 10, &res, err, sizeof err);
    ck_assert_int_eq (rc, NVRTC_INVALID);
    cuda_nvrtc_result_free (&res);
}
END_TEST

//  Run kgym_compile_main with stdout captured into a file; returns its text.
static char *
s_run_compile (int argc, char **argv, int *status)
{
    char out [] = "/tmp/kgym-compile-out-XXXXXX";
    int fd = mkstemp (out);
    ck_assert_int_ge (fd, 0);
    fflush (stdout);
    int saved = dup (1);
    dup2 (fd, 1);
    *status = kgym_compile_main (argc, argv);
    fflush (stdout);
    dup2 (saved, 1);
    close (saved);
    lseek (fd, 0, SEEK_SET);
    char *text = calloc (1, 1 << 16);
    ssize_t n = read (fd, text, (1 << 16) - 1);
    ck_assert_int_ge (n, 0);
    close (fd);
    unlink (out);
    return text;
}

START_TEST (test_kgym_compile_cli)
{
    char *task = testutil_source_path ("examples/cuda/softmax_f32/task.json");
    char *good = testutil_source_path ("examples/cuda/softmax_f32/candidates/naive.json");
    char *bad = testutil_source_path ("examples/cuda/softmax_f32/candidates/compile_error.json");
    char *opt = testutil_source_path ("examples/cuda/layernorm_f32/candidates/bad_option.json");
    char *cache = s_temp_cache ();
    char *argv [] = { "compile", task, good, bad, opt, "--arch", "sm_90", "--cache", cache };
    int status;
    char *text = s_run_compile (9, argv, &status);
    ck_assert_int_eq (status, 1);
    json_error_t jerr;
    char *save = NULL;
    const char *want [] = { "ok", "compile_error", "invalid" };
    int line = 0;
    for (char *tok = strtok_r (text, "\n", &save); tok; tok = strtok_r (NULL, "\n", &save), line++) {
        json_t *json = json_loads (tok, 0, &jerr);
        ck_assert_msg (json != NULL, "line %d is JSON: %s", line, tok);
        ck_assert_int_lt (line, 3);
        ck_assert_str_eq (json_string_value (json_object_get (json, "status")), want [line]);
        ck_assert (json_is_boolean (json_object_get (json, "cached")));
        ck_assert (json_is_number (json_object_get (json, "compile_s")));
        ck_assert (json_is_string (json_object_get (json, "log")));
        if (line == 0)
            ck_assert_uint_eq (strlen (json_string_value (json_object_get (json, "cache_key"))), 64);
        json_decref (json);
    }
    ck_assert_int_eq (line, 3);
    free (text);
    //  Second time: the good one comes from the cache.
    char *again [] = { "compile", task, good, "--arch", "sm_90", "--cache", cache };
    text = s_run_compile (7, again, &status);
    ck_assert_int_eq (status, 0);
    json_t *json = json_loads (text, JSON_DISABLE_EOF_CHECK, &jerr);
    ck_assert (json_is_true (json_object_get (json, "cached")));
    json_decref (json);
    free (text);
    free (task); free (good); free (bad); free (opt); free (cache);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("cuda_nvrtc");
    TCase *tc = tcase_create ("nvrtc");
    tcase_set_timeout (tc, 300);
    tcase_add_test (tc, test_options_allow_list);
    tcase_add_test (tc, test_compile_cubin_for_sm90);
    tcase_add_test (tc, test_compile_error_has_log);
    tcase_add_test (tc, test_disallowed_option_is_invalid);
    tcase_add_test (tc, test_cache_hit_on_second_compile);
    tcase_add_test (tc, test_toolkit_headers_resolve);
    tcase_add_test (tc, test_sandbox_refuses_host_files);
    tcase_add_test (tc, test_compile_timeout_kills);
    tcase_add_test (tc, test_internal_kernels_compile);
    tcase_add_test (tc, test_ptx_is_passed_through);
    tcase_add_test (tc, test_kgym_compile_cli);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
