/*  test_cuda_plan - jobs into runner plans and back (no GPU needed).  */
#include "testutil.h"
#include "cuda_plan.h"
#include "cuda_msg.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

//  The job of an example task with one of its candidates.
static common_job_t *
s_job (const char *task_dir, const char *candidate)
{
    char path [256];
    snprintf (path, sizeof path, "examples/cuda/%s/task.json", task_dir);
    json_t *task = testutil_load_json (path);
    snprintf (path, sizeof path, "examples/cuda/%s/candidates/%s.json", task_dir, candidate);
    json_t *cand = testutil_load_json (path);
    json_t *job = json_pack ("{s:o, s:o}", "task", task, "candidate", cand);
    char err [512];
    common_job_t *parsed = common_job_from_json (job, err, sizeof err);
    ck_assert_msg (parsed != NULL, "job: %s", err);
    json_decref (job);
    return parsed;
}

START_TEST (test_plan_round_trip)
{
    common_job_t *job = s_job ("gemm_f16", "naive");
    char err [512];
    cuda_plan_t *plan = cuda_plan_from_job (job, 0xFEDCBA9876543210ull, 0, err, sizeof err);
    ck_assert_msg (plan != NULL, "plan: %s", err);
    ck_assert (plan->has_baseline);
    ck_assert_uint_eq (plan->nsizes, job->task->nsizes);
    //  gemm 2048^3: A, B f16, C f32.
    ck_assert_uint_eq (plan->sizes [0].bytes [0], 2048ull * 2048 * 2);
    ck_assert_uint_eq (plan->sizes [0].bytes [2], 2048ull * 2048 * 4);
    ck_assert_uint_eq (plan->sizes [0].bits [3], 2048);
    ck_assert_int_eq (plan->sizes [0].call [PLAN_CANDIDATE].launches [0].grid [0], 128);
    strcpy (plan->keys [PLAN_CANDIDATE], "abc");
    json_t *json = cuda_plan_to_json (plan);
    ck_assert_ptr_nonnull (json);
    cuda_plan_t *back = cuda_plan_from_json (json, err, sizeof err);
    ck_assert_msg (back != NULL, "from json: %s", err);
    ck_assert_uint_eq (back->seed, plan->seed);
    ck_assert_str_eq (back->keys [PLAN_CANDIDATE], "abc");
    ck_assert_uint_eq (back->nargs, plan->nargs);
    for (uint32_t s = 0; s < plan->nsizes; s++) {
        ck_assert (memcmp (back->sizes [s].bytes, plan->sizes [s].bytes, sizeof plan->sizes [s].bytes) == 0);
        ck_assert (memcmp (back->sizes [s].bits, plan->sizes [s].bits, sizeof plan->sizes [s].bits) == 0);
        for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
            ck_assert_uint_eq (back->sizes [s].call [p].nlaunches, plan->sizes [s].call [p].nlaunches);
            for (uint32_t l = 0; l < plan->sizes [s].call [p].nlaunches; l++)
                ck_assert (memcmp (&back->sizes [s].call [p].launches [l],
                                   &plan->sizes [s].call [p].launches [l], sizeof (cuda_plan_launch_t)) == 0);
        }
    }
    json_decref (json);
    cuda_plan_destroy (&back);
    cuda_plan_destroy (&plan);
    cuda_plan_destroy (&plan);
    common_job_destroy (&job);
}
END_TEST

START_TEST (test_plan_memory_cap_is_enforced)
{
    common_job_t *job = s_job ("gelu_f32", "naive");
    char err [512];
    cuda_plan_t *plan = cuda_plan_from_job (job, 1, 1 << 20, err, sizeof err);
    ck_assert_ptr_null (plan);
    ck_assert_msg (strstr (err, "limit") != NULL, "reason: %s", err);
    common_job_destroy (&job);
}
END_TEST

START_TEST (test_plan_rejects_malformed_json)
{
    common_job_t *job = s_job ("sum_f32", "naive");
    char err [512];
    cuda_plan_t *plan = cuda_plan_from_job (job, 7, 0, err, sizeof err);
    ck_assert_ptr_nonnull (plan);
    json_t *json = cuda_plan_to_json (plan);
    //  A launch arg pointing past the task's args must not pass.
    json_t *args = json_object_get (json_array_get (json_object_get (
        json_array_get (json_object_get (json_array_get (json_object_get (json, "sizes"), 0), "calls"), 0),
        "launches"), 0), "args");
    json_array_set_new (args, 0, json_integer (99));
    cuda_plan_t *back = cuda_plan_from_json (json, err, sizeof err);
    ck_assert_ptr_null (back);
    json_object_set_new (json, "sizes", json_string ("x"));
    ck_assert_ptr_null (cuda_plan_from_json (json, err, sizeof err));
    json_decref (json);
    cuda_plan_destroy (&plan);
    common_job_destroy (&job);
}
END_TEST

START_TEST (test_msg_framing)
{
    int sv [2];
    ck_assert_int_eq (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const void *blobs [2] = { "abc", "" };
    size_t sizes [2] = { 3, 0 };
    ck_assert_int_eq (cuda_msg_send_text (sv [0], CUDA_MSG_JOB, "{\"a\":1}", 2, blobs, sizes), 0);
    cuda_msg_t msg;
    char err [256];
    ck_assert_int_eq (cuda_msg_recv (sv [1], &msg, 1.0, err, sizeof err), 0);
    ck_assert_uint_eq (msg.type, CUDA_MSG_JOB);
    ck_assert_uint_eq (msg.nparts, 3);
    ck_assert_str_eq ((char *) msg.part [0], "{\"a\":1}");
    ck_assert_uint_eq (msg.size [1], 3);
    ck_assert_uint_eq (msg.size [2], 0);
    cuda_msg_free (&msg);
    //  Nothing more: a timeout, not a hang.
    ck_assert_int_eq (cuda_msg_recv (sv [1], &msg, 0.05, err, sizeof err), 1);
    //  Garbage header: malformed, never an allocation of a huge size.
    uint32_t junk [4] = { 0xdeadbeef, 1, 2, 0 };
    ck_assert_int_eq (write (sv [0], junk, sizeof junk), (ssize_t) sizeof junk);
    ck_assert_int_eq (cuda_msg_recv (sv [1], &msg, 1.0, err, sizeof err), -2);
    uint32_t big [4] = { CUDA_MSG_MAGIC, 1, 1, 0 };
    uint64_t huge = 1ull << 40;
    ck_assert_int_eq (write (sv [0], big, sizeof big), (ssize_t) sizeof big);
    ck_assert_int_eq (write (sv [0], &huge, 8), 8);
    ck_assert_int_eq (cuda_msg_recv (sv [1], &msg, 1.0, err, sizeof err), -2);
    close (sv [0]);
    ck_assert_int_eq (cuda_msg_recv (sv [1], &msg, 1.0, err, sizeof err), -1);
    close (sv [1]);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("cuda_plan");
    TCase *tc = tcase_create ("plan");
    tcase_add_test (tc, test_plan_round_trip);
    tcase_add_test (tc, test_plan_memory_cap_is_enforced);
    tcase_add_test (tc, test_plan_rejects_malformed_json);
    tcase_add_test (tc, test_msg_framing);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
