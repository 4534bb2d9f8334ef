/*  test_worker_feedback - the feedback writer on recorded results, both backends.  */
#include "testutil.h"
#include "worker_feedback.h"
#include <string.h>

static char *
s_feedback (const char *result_json, const common_job_t *job, size_t max)
{
    json_error_t error;
    json_t *result = json_loads (result_json, 0, &error);
    ck_assert_msg (result != NULL, "fixture: %s", error.text);
    char *text = worker_feedback (result, job, max);
    json_decref (result);
    ck_assert_ptr_nonnull (text);
    return text;
}

static void
s_has (const char *text, const char *needle)
{
    ck_assert_msg (strstr (text, needle) != NULL, "feedback lacks '%s':\n%s", needle, text);
}

//  A job with a [M, N] output, for coordinates and sizes.
static common_job_t *
s_job (void)
{
    json_t *task = testutil_load_json ("examples/cpu/softmax_f32/task.json");
    json_t *candidate = testutil_load_json ("examples/cpu/softmax_f32/candidates/tail_bug.json");
    json_t *json = json_pack ("{s:o, s:o}", "task", task, "candidate", candidate);
    char err [256];
    common_job_t *job = common_job_from_json (json, err, sizeof err);
    ck_assert_msg (job != NULL, "job: %s", err);
    json_decref (json);
    return job;
}

START_TEST (test_cpu_tail_bug_is_called_a_tail)
{
    common_job_t *job = s_job ();
    char *text = s_feedback (
        "{\"status\":\"incorrect\",\"message\":\"output 'y' wrong in 19 of 7021 elements (size 1, trial 0)\","
        "\"bad_elements\":19,\"max_abs_err\":0.0067,"
        "\"mismatches\":[{\"arg\":\"y\",\"size\":1,\"trial\":0,\"index\":1000,\"expected\":4.7e-05,\"got\":0.00025},"
        "{\"arg\":\"y\",\"size\":1,\"trial\":0,\"index\":1001,\"expected\":2.3e-05,\"got\":0.00012},"
        "{\"arg\":\"y\",\"size\":1,\"trial\":0,\"index\":2003,\"expected\":0.0002,\"got\":0.0005}]}", job, 2048);
    s_has (text, "y[0,1000]");
    s_has (text, "y[1,1000]");
    s_has (text, "tail of the innermost dimension");
    s_has (text, "N=1003");
    free (text);
    common_job_destroy (&job);
}
END_TEST

START_TEST (test_wrong_everywhere_is_not_a_tail)
{
    common_job_t *job = s_job ();
    char *text = s_feedback (
        "{\"status\":\"incorrect\",\"message\":\"output 'y' wrong in 262144 of 262144 elements (size 0, trial 0)\","
        "\"bad_elements\":262144,\"max_abs_err\":0,"
        "\"mismatches\":[{\"arg\":\"y\",\"size\":0,\"trial\":0,\"index\":0,\"expected\":1.6e-05,\"got\":\"nan\"},"
        "{\"arg\":\"y\",\"size\":0,\"trial\":0,\"index\":1,\"expected\":9e-04,\"got\":\"nan\"}]}", job, 2048);
    ck_assert_msg (strstr (text, "tail") == NULL, "not a tail bug:\n%s", text);
    s_has (text, "never written");
    free (text);
    common_job_destroy (&job);
}
END_TEST

START_TEST (test_replayed_answer_is_called_state)
{
    char *text = s_feedback (
        "{\"status\":\"incorrect\",\"message\":\"output 'C' wrong in 16384 of 16384 elements (size 0, trial 1)\","
        "\"bad_elements\":16384,\"max_abs_err\":61.1,"
        "\"mismatches\":[{\"arg\":\"C\",\"size\":0,\"trial\":1,\"index\":0,\"expected\":-3.3,\"got\":1.4}]}", NULL, 2048);
    s_has (text, "keep state between calls");
    s_has (text, "C[0]: expected -3.3, got 1.4");
    free (text);
}
END_TEST

START_TEST (test_gcc_errors_quote_the_source_line)
{
    json_t *json = json_pack ("{s:s, s:[{s:s}]}", "source", "void k(float *y)\n{\n  y[0] = ;\n}\n",
                              "launches", "kernel", "k");
    char err [256];
    common_program_t *program = common_program_from_json (json, "cpu", err, sizeof err);
    ck_assert_ptr_nonnull (program);
    common_job_t job = { .candidate = program };
    char *text = s_feedback (
        "{\"status\":\"compile_error\",\"message\":\"compile error: k.c:3:10: error: expected expression before ';' token\","
        "\"compile_log\":\"k.c: In function 'k':\\nk.c:3:10: error: expected expression before ';' token\\n    3 |   y[0] = ;\\n\"}",
        &job, 2048);
    s_has (text, "line 3: error: expected expression");
    s_has (text, "3 | y[0] = ;");
    free (text);
    common_program_destroy (&program);
    json_decref (json);
}
END_TEST

START_TEST (test_nvrtc_errors_are_parsed_too)
{
    char *text = s_feedback (
        "{\"status\":\"compile_error\",\"message\":\"compile error\","
        "\"compile_log\":\"candidate.cu(12): error: identifier \\\"foo\\\" is undefined\\n\\n1 error detected\\n\"}",
        NULL, 2048);
    s_has (text, "line 12: error: identifier \"foo\" is undefined");
    free (text);
}
END_TEST

//  A PyTorch candidate's extension build fails in files load_inline wrote
//  (torch adds its own lines at their top): the feedback names the file and
//  quotes the compiler's echo of the line, never the candidate's .py line of
//  the same number.
START_TEST (test_extension_errors_name_their_file)
{
    common_program_t program = { .source = "import torch\n" "l2\n" "l3\n" "l4\n" "l5\n" "l6\n" "l7\n" "l8\n"
                                           "l9\n" "python_line_ten = 1\n" };
    common_task_t task = { .is_module = true };
    common_job_t job = { .task = &task, .candidate = &program };
    char *text = s_feedback (
        "{\"status\":\"compile_error\",\"message\":\"candidate: the candidate's module does not import\","
        "\"compile_log\":\"RuntimeError: Error building extension 'relu_ext': [1/2] c++ -c main.cpp\\n"
        "/kgym/extensions/relu_ext/main.cpp: In function 'at::Tensor relu_cpp(at::Tensor)':\\n"
        "/kgym/extensions/relu_ext/main.cpp:10:5: error: expected ';' before '}' token\\n"
        "   10 |     return y\\n"
        "/kgym/extensions/relu_ext/cuda.cu(7): error: identifier \\\"foo\\\" is undefined\\n\"}",
        &job, 2048);
    s_has (text, "main.cpp line 10: error: expected ';' before '}' token");
    s_has (text, "   10 |     return y");
    s_has (text, "cuda.cu line 7: error: identifier \"foo\" is undefined");
    ck_assert_msg (strstr (text, "python_line_ten") == NULL, "quoted the .py's line:\n%s", text);
    free (text);
}
END_TEST

START_TEST (test_faults_say_what_happened)
{
    char *text = s_feedback ("{\"status\":\"runtime_error\",\"message\":\"CUDA_ERROR_ILLEGAL_ADDRESS: an illegal address was encountered\"}",
                             NULL, 2048);
    s_has (text, "illegal memory access");
    free (text);
    text = s_feedback ("{\"status\":\"runtime_error\",\"message\":\"killed by SIGSEGV\"}", NULL, 2048);
    s_has (text, "segmentation fault");
    free (text);
    text = s_feedback ("{\"status\":\"timeout\",\"message\":\"the candidate ran past its 2 s budget\"}", NULL, 2048);
    s_has (text, "hung");
    free (text);
    text = s_feedback ("{\"status\":\"invalid\",\"message\":\"candidate: option '-x' is not allowed\"}", NULL, 2048);
    s_has (text, "not the kernel's fault");
    free (text);
}
END_TEST

START_TEST (test_correct_with_profile_gives_one_hint)
{
    char *text = s_feedback (
        "{\"status\":\"ok\",\"speedup\":1.8,\"timings\":{\"baseline_kind\":\"baseline\","
        "\"candidate\":{\"median_us\":100,\"cv\":0.01},\"baseline\":{\"median_us\":180,\"cv\":0.01}},"
        "\"profile\":{\"kernels\":[{\"name\":\"rmsnorm\",\"share\":0.9,\"occupancy\":0.12,\"dram_bw_fraction\":0.5},"
        "{\"name\":\"reduce\",\"share\":0.1}]}}", NULL, 2048);
    s_has (text, "Speedup 1.80x over the baseline");
    s_has (text, "Most time: rmsnorm (90% of the candidate's time");
    s_has (text, "occupancy is low");
    free (text);
}
END_TEST

START_TEST (test_length_is_bounded)
{
    char log [8192];
    size_t at = 0;
    for (int i = 1; i <= 100 && at < sizeof log - 100; i++)
        at += (size_t) snprintf (log + at, sizeof log - at, "k.c:%d:1: error: something quite long is wrong here\\n", i);
    char result [9000];
    snprintf (result, sizeof result, "{\"status\":\"compile_error\",\"message\":\"x\",\"compile_log\":\"%s\"}", log);
    char *text = s_feedback (result, NULL, 64);
    ck_assert_msg (strlen (text) <= 64, "%zu bytes", strlen (text));
    ck_assert (strlen (text) > 0);
    free (text);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("worker_feedback");
    TCase *tc = tcase_create ("feedback");
    tcase_add_test (tc, test_cpu_tail_bug_is_called_a_tail);
    tcase_add_test (tc, test_wrong_everywhere_is_not_a_tail);
    tcase_add_test (tc, test_replayed_answer_is_called_state);
    tcase_add_test (tc, test_gcc_errors_quote_the_source_line);
    tcase_add_test (tc, test_nvrtc_errors_are_parsed_too);
    tcase_add_test (tc, test_extension_errors_name_their_file);
    tcase_add_test (tc, test_faults_say_what_happened);
    tcase_add_test (tc, test_correct_with_profile_gives_one_hint);
    tcase_add_test (tc, test_length_is_bounded);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
