/*  test_cuda_plan - jobs into runner plans and back, and the profile's
    arithmetic on synthetic kernel records (no GPU needed).  */
#include "testutil.h"
#include "cuda_plan.h"
#include "cuda_msg.h"
#include "cuda_profile.h"
#include <math.h>
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
    ck_assert_uint_eq (back->time_seed, plan->time_seed);
    //  The timed sets' seed is the job's own, never the eval's: another plan
    //  of the same job and seed draws another.
    cuda_plan_t *again = cuda_plan_from_job (job, 0xFEDCBA9876543210ull, 0, err, sizeof err);
    ck_assert_ptr_nonnull (again);
    ck_assert_uint_ne (again->time_seed, plan->time_seed);
    ck_assert_uint_ne (plan->time_seed, plan->seed);
    cuda_plan_destroy (&again);
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

START_TEST (test_plan_carries_the_timing_rule)
{
    //  The job's reward clip and timed count reach the runner's rule.
    char path [] = "examples/cuda/gelu_f32/task.json";
    json_t *task = testutil_load_json (path);
    json_t *cand = testutil_load_json ("examples/cuda/gelu_f32/candidates/naive.json");
    json_t *jjob = json_pack ("{s:o, s:o, s:{s:i}, s:{s:f}}", "task", task, "candidate", cand,
                              "eval", "timed", 300, "reward", "clip", 3.5);
    char err [512];
    common_job_t *job = common_job_from_json (jjob, err, sizeof err);
    ck_assert_msg (job != NULL, "job: %s", err);
    json_decref (jjob);
    cuda_plan_t *plan = cuda_plan_from_job (job, 1, 0, err, sizeof err);
    ck_assert_msg (plan != NULL, "plan: %s", err);
    ck_assert_uint_eq (plan->timed, 300);
    ck_assert_uint_eq (plan->stop_min, 5);
    ck_assert_double_eq (plan->stop_clip, 3.5);
    ck_assert_double_eq (plan->stop_precision, 0.01);
    ck_assert_double_eq (plan->stop_floor, 0.05);
    ck_assert_double_eq (plan->stop_margin, 2.0);
    json_t *json = cuda_plan_to_json (plan);
    cuda_plan_t *back = cuda_plan_from_json (json, err, sizeof err);
    ck_assert_msg (back != NULL, "from json: %s", err);
    ck_assert_uint_eq (back->stop_min, 5);
    ck_assert_double_eq (back->stop_clip, 3.5);
    ck_assert_double_eq (back->stop_precision, 0.01);
    ck_assert_double_eq (back->stop_floor, 0.05);
    ck_assert_double_eq (back->stop_margin, 2.0);
    cuda_plan_destroy (&back);
    //  Without a rule: every timed run, as before.
    json_t *stop = json_incref (json_object_get (json, "stop"));
    json_object_del (json, "stop");
    back = cuda_plan_from_json (json, err, sizeof err);
    ck_assert_ptr_nonnull (back);
    ck_assert_uint_eq (back->stop_min, 300);
    ck_assert_double_eq (back->stop_precision, 0);
    cuda_plan_destroy (&back);
    //  A rule out of bounds is refused.
    const char *keys [] = { "min", "precision", "clip", "floor", "min", "margin" };
    json_t *bad [] = { json_integer (0), json_real (-0.1), json_string ("2"), json_real (1e7), json_real (5.0),
                       json_real (-2.0) };
    for (int i = 0; i < 6; i++) {
        json_t *broken = json_deep_copy (stop);
        json_object_set_new (broken, keys [i], bad [i]);
        json_object_set_new (json, "stop", broken);
        ck_assert_msg (cuda_plan_from_json (json, err, sizeof err) == NULL, "stop.%s accepted", keys [i]);
    }
    json_object_set_new (json, "stop", json_string ("soon"));
    ck_assert_ptr_null (cuda_plan_from_json (json, err, sizeof err));
    json_decref (stop);
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


//  A job from a task and candidate object, with an eval object (may be NULL).
static common_job_t *
s_job_json (json_t *task, json_t *cand, json_t *eval)
{
    json_t *job = json_pack ("{s:O, s:O}", "task", task, "candidate", cand);
    if (eval)
        json_object_set (job, "eval", eval);
    char err [512];
    common_job_t *parsed = common_job_from_json (job, err, sizeof err);
    ck_assert_msg (parsed != NULL, "job: %s", err);
    json_decref (job);
    return parsed;
}

START_TEST (test_plan_carries_profile_and_roofline_bytes)
{
    json_t *task = testutil_load_json ("examples/cuda/gelu_f32/task.json");
    json_t *cand = testutil_load_json ("examples/cuda/gelu_f32/candidates/naive.json");
    char err [512];
    //  Default bytes: x read once, y written once, at N = 2^25.
    common_job_t *job = s_job_json (task, cand, NULL);
    cuda_plan_t *plan = cuda_plan_from_job (job, 1, 0, err, sizeof err);
    ck_assert_msg (plan != NULL, "plan: %s", err);
    ck_assert (plan->profile);
    ck_assert (!plan->bytes_declared);
    ck_assert_uint_eq (plan->roofline_bytes, 2ull * 4 * 33554432);
    json_t *json = cuda_plan_to_json (plan);
    cuda_plan_t *back = cuda_plan_from_json (json, err, sizeof err);
    ck_assert_msg (back != NULL, "from json: %s", err);
    ck_assert (back->profile);
    ck_assert (!back->bytes_declared);
    ck_assert_uint_eq (back->roofline_bytes, plan->roofline_bytes);
    json_decref (json);
    cuda_plan_destroy (&back);
    cuda_plan_destroy (&plan);
    common_job_destroy (&job);
    //  eval.profile false travels; the task's "bytes" wins over the default.
    json_t *eval = json_pack ("{s:b}", "profile", 0);
    json_object_set_new (task, "bytes", json_string ("N*4*1000"));
    job = s_job_json (task, cand, eval);
    plan = cuda_plan_from_job (job, 1, 0, err, sizeof err);
    ck_assert_msg (plan != NULL, "plan: %s", err);
    ck_assert (!plan->profile);
    ck_assert (plan->bytes_declared);
    ck_assert_uint_eq (plan->roofline_bytes, 4000ull * 33554432);
    json = cuda_plan_to_json (plan);
    back = cuda_plan_from_json (json, err, sizeof err);
    ck_assert_msg (back != NULL, "from json: %s", err);
    ck_assert (!back->profile);
    ck_assert (back->bytes_declared);
    ck_assert_uint_eq (back->roofline_bytes, 4000ull * 33554432);
    json_decref (json);
    cuda_plan_destroy (&back);
    cuda_plan_destroy (&plan);
    common_job_destroy (&job);
    //  A negative byte count is the task's mistake: invalid, with the reason.
    json_object_set_new (task, "bytes", json_string ("0-N"));
    job = s_job_json (task, cand, NULL);
    plan = cuda_plan_from_job (job, 1, 0, err, sizeof err);
    ck_assert_ptr_null (plan);
    ck_assert_msg (strstr (err, "task.bytes") != NULL, "reason: %s", err);
    common_job_destroy (&job);
    json_decref (eval);
    json_decref (cand);
    json_decref (task);
}
END_TEST

START_TEST (test_plan_default_bytes_count_inout_twice)
{
    //  layernorm: x, gamma, beta in, y out at 8192 x 4096.
    common_job_t *job = s_job ("layernorm_f32", "naive");
    char err [512];
    cuda_plan_t *plan = cuda_plan_from_job (job, 1, 0, err, sizeof err);
    ck_assert_msg (plan != NULL, "plan: %s", err);
    ck_assert_uint_eq (plan->roofline_bytes, 2ull * 8192 * 4096 * 4 + 2ull * 4096 * 4);
    common_job_destroy (&job);
    cuda_plan_destroy (&plan);
    json_t *task = testutil_load_json ("examples/cuda/layernorm_f32/task.json");
    json_t *cand = testutil_load_json ("examples/cuda/layernorm_f32/candidates/naive.json");
    //  y made inout: read and written.
    json_object_set_new (json_array_get (json_object_get (task, "args"), 3), "kind", json_string ("inout"));
    job = s_job_json (task, cand, NULL);
    plan = cuda_plan_from_job (job, 1, 0, err, sizeof err);
    ck_assert_msg (plan != NULL, "plan: %s", err);
    ck_assert_uint_eq (plan->roofline_bytes, 3ull * 8192 * 4096 * 4 + 2ull * 4096 * 4);
    cuda_plan_destroy (&plan);
    common_job_destroy (&job);
    json_decref (cand);
    json_decref (task);
}
END_TEST

//  An H200 as its attributes describe it (numbers of the kind the driver gives).
static cuda_profile_device_t
s_h200 (void)
{
    cuda_profile_device_t dev;
    memset (&dev, 0, sizeof dev);
    snprintf (dev.name, sizeof dev.name, "NVIDIA H200");
    dev.sm_count = 132;
    dev.l2_bytes = 60ull << 20;
    dev.mem_clock_khz = 3201000;
    dev.bus_width_bits = 6144;
    dev.warp_size = 32;
    dev.max_threads_sm = 2048;
    dev.max_blocks_sm = 32;
    dev.regs_sm = 65536;
    dev.shared_sm = 233472;
    dev.reserved_shared = 1024;
    cuda_profile_peak (&dev, NULL);
    return dev;
}

static cuda_profile_record_t
s_record (const char *symbol, uint64_t start, uint64_t end, int grid, int block)
{
    cuda_profile_record_t r;
    memset (&r, 0, sizeof r);
    snprintf (r.symbol, sizeof r.symbol, "%s", symbol);
    r.start_ns = start;
    r.end_ns = end;
    r.grid [0] = grid;
    r.grid [1] = r.grid [2] = 1;
    r.block [0] = block;
    r.block [1] = r.block [2] = 1;
    r.registers = 16;
    return r;
}

static cuda_plan_launch_t
s_launch (const char *kernel, int grid, int block)
{
    cuda_plan_launch_t l;
    memset (&l, 0, sizeof l);
    snprintf (l.kernel, sizeof l.kernel, "%s", kernel);
    l.grid [0] = grid;
    l.grid [1] = l.grid [2] = 1;
    l.block [0] = block;
    l.block [1] = l.block [2] = 1;
    return l;
}

START_TEST (test_profile_peak_margin_occupancy_floor)
{
    cuda_profile_device_t dev = s_h200 ();
    //  2 x 3.201 GHz x 6144 bits / 8 = 4917.0 GB/s.
    ck_assert_msg (fabs (dev.peak_bw_gbs - 2.0 * 3201e6 * 6144 / 8 / 1e9) < 1e-6, "peak %f", dev.peak_bw_gbs);
    ck_assert_str_eq (dev.peak_source, "attributes");
    cuda_profile_peak (&dev, "4800");
    ck_assert (dev.peak_bw_gbs == 4800 && strcmp (dev.peak_source, "KGYM_PEAK_BW_GBS") == 0);
    cuda_profile_peak (&dev, "fast");
    ck_assert_str_eq (dev.peak_source, "attributes");
    cuda_profile_device_t none = dev;
    none.mem_clock_khz = 0;
    cuda_profile_peak (&none, NULL);
    ck_assert (none.peak_bw_gbs == 0 && strcmp (none.peak_source, "unknown") == 0);
    ck_assert (cuda_profile_floor_us (&none, 1000) == 0);
    ck_assert (cuda_profile_margin (NULL) == CUDA_PROFILE_MARGIN);
    ck_assert (cuda_profile_margin ("0.1") == 0.1);
    ck_assert (cuda_profile_margin ("2") == CUDA_PROFILE_MARGIN);
    ck_assert (cuda_profile_margin ("x") == CUDA_PROFILE_MARGIN);
    //  8 blocks of 8 warps fill the 64 warp slots; 3 blocks of 100 threads
    //  (4 warps each, the last one partial) hold 12 of 64.
    ck_assert (cuda_profile_occupancy (&dev, 8, 256) == 1.0);
    ck_assert (cuda_profile_occupancy (&dev, 3, 100) == 12.0 / 64);
    ck_assert (isnan (cuda_profile_occupancy (&dev, -1, 256)));
    //  268435456 bytes at 4800 GB/s: 55.92 us.
    cuda_profile_peak (&dev, "4800");
    ck_assert (fabs (cuda_profile_floor_us (&dev, 268435456) - 268435456 / 4.8e6) < 1e-9);
}
END_TEST

START_TEST (test_profile_summary_matches_declared_launches)
{
    cuda_profile_device_t dev = s_h200 ();
    cuda_profile_peak (&dev, "4000");
    cuda_plan_launch_t launches [3] = { s_launch ("main", 1000, 256), s_launch ("rest", 1, 32),
                                        s_launch ("main", 1000, 256) };
    cuda_plan_call_t call = { 0, launches, 3 };
    int blocks [3] = { 8, 32, 8 };
    //  Out of order in the array: the summary sorts by start.
    cuda_profile_record_t records [3] = {
        s_record ("rest", 101000, 103000, 1, 32),
        s_record ("main", 1000, 101000, 1000, 256),
        s_record ("main", 103000, 203000, 1000, 256),
    };
    cuda_profile_input_t in = { records, 3, &call, blocks, &dev, 400000000, 210.0, NULL };
    uint32_t missing = 99;
    json_t *sum = cuda_profile_summarise (&in, &missing);
    ck_assert_ptr_nonnull (sum);
    char *text = json_dumps (sum, JSON_COMPACT);
    printf ("summary: %s\n", text);
    free (text);
    ck_assert_uint_eq (missing, 0);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "observed_launches")), 3);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "declared_launches")), 3);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "extra_kernels")), 0);
    ck_assert (fabs (json_number_value (json_object_get (sum, "total_us")) - 202.0) < 1e-9);
    //  400 MB in 202 us = 1980.2 GB/s = 0.495 of 4000.
    double bw = json_number_value (json_object_get (sum, "dram_bw_gbs"));
    ck_assert_msg (fabs (bw - 400000000.0 / 202000.0) < 1e-6, "bw %f", bw);
    ck_assert (fabs (json_number_value (json_object_get (sum, "dram_bw_fraction")) - bw / 4000) < 1e-9);
    json_t *kernels = json_object_get (sum, "kernels");
    ck_assert_uint_eq (json_array_size (kernels), 2);
    json_t *main_k = json_array_get (kernels, 0), *rest = json_array_get (kernels, 1);
    ck_assert_str_eq (json_string_value (json_object_get (main_k, "name")), "main");
    ck_assert_int_eq (json_integer_value (json_object_get (main_k, "launches")), 2);
    ck_assert (fabs (json_number_value (json_object_get (main_k, "mean_us")) - 100.0) < 1e-9);
    ck_assert (fabs (json_number_value (json_object_get (main_k, "share")) - 200.0 / 202) < 1e-9);
    ck_assert (json_number_value (json_object_get (main_k, "occupancy")) == 1.0);
    ck_assert_int_eq (json_integer_value (json_array_get (json_object_get (main_k, "grid"), 0)), 1000);
    ck_assert_int_eq (json_integer_value (json_array_get (json_object_get (rest, "block"), 0)), 32);
    //  One warp x 32 blocks = 32 of 64 warp slots.
    ck_assert (json_number_value (json_object_get (rest, "occupancy")) == 0.5);
    //  Share-of-time attribution: every kernel shows the program's bandwidth.
    ck_assert (fabs (json_number_value (json_object_get (rest, "dram_bw_gbs")) - bw) < 1e-6);
    ck_assert (json_is_true (json_object_get (rest, "declared")));
    json_t *profile = json_deep_copy (sum);
    json_object_set_new (profile, "roofline_floor_us", json_real (100.0));
    json_object_set_new (profile, "bytes", json_integer (400000000));
    json_object_set_new (profile, "device", cuda_profile_device_json (&dev));
    char msg [512] = "";
    ck_assert (!cuda_profile_verdict (profile, 202.0, 0.2, msg, sizeof msg));
    ck_assert (!cuda_profile_verdict (profile, 81.0, 0.2, msg, sizeof msg));
    ck_assert (!cuda_profile_verdict (profile, 0, 0.2, msg, sizeof msg));     //  not timed
    ck_assert (cuda_profile_verdict (profile, 79.0, 0.2, msg, sizeof msg));
    printf ("roofline verdict: %s\n", msg);
    ck_assert_msg (strstr (msg, "below the roofline floor 100.0 us for 400000000 bytes at 4000 GB/s") != NULL,
                   "message: %s", msg);
    json_decref (profile);
    json_decref (sum);
}
END_TEST

START_TEST (test_profile_stale_cupti_name_is_matched_by_geometry)
{
    //  CUPTI named the candidate's kernel after a kernel of a module unloaded
    //  before (seen on the H200): the launch's record is still found, by its
    //  place and exact geometry, and shown under the declared name.
    cuda_profile_device_t dev = s_h200 ();
    cuda_plan_launch_t launches [1] = { s_launch ("gelu", 131072, 256) };
    cuda_plan_call_t call = { 0, launches, 1 };
    cuda_profile_record_t records [1] = { s_record ("bgr_ref", 1000, 118000, 131072, 256) };
    cuda_profile_input_t in = { records, 1, &call, NULL, &dev, 0, 0, NULL };
    uint32_t missing = 99;
    json_t *sum = cuda_profile_summarise (&in, &missing);
    ck_assert_uint_eq (missing, 0);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "renamed_records")), 1);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "extra_kernels")), 0);
    json_t *k = json_array_get (json_object_get (sum, "kernels"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (k, "symbol")), "gelu");
    ck_assert_str_eq (records [0].symbol, "bgr_ref");     //  the input is left alone
    char msg [512] = "";
    ck_assert (!cuda_profile_verdict (sum, 117.0, 0.2, msg, sizeof msg));
    json_decref (sum);
    //  Another geometry is not it: still missing.
    records [0] = s_record ("bgr_ref", 1000, 118000, 4096, 256);
    sum = cuda_profile_summarise (&in, &missing);
    ck_assert_uint_eq (missing, 1);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "renamed_records")), 0);
    json_decref (sum);
}
END_TEST

START_TEST (test_profile_missing_launch_fails_the_candidate)
{
    cuda_profile_device_t dev = s_h200 ();
    cuda_plan_launch_t launches [2] = { s_launch ("main", 10, 256), s_launch ("rest", 1, 32) };
    cuda_plan_call_t call = { 0, launches, 2 };
    //  Only main ran, and an undeclared kernel (a device-side launch) too.
    cuda_profile_record_t records [2] = {
        s_record ("main", 1000, 2000, 10, 256), s_record ("_Z5childv", 2000, 2500, 1, 1),
    };
    cuda_profile_input_t in = { records, 2, &call, NULL, &dev, 0, 0, NULL };
    uint32_t missing = 0;
    json_t *sum = cuda_profile_summarise (&in, &missing);
    ck_assert_uint_eq (missing, 1);
    ck_assert_int_eq (json_integer_value (json_object_get (sum, "extra_kernels")), 1);
    ck_assert (json_is_null (json_object_get (sum, "dram_bw_gbs")));     //  bytes unknown
    json_t *child = json_array_get (json_object_get (sum, "kernels"), 1);
    ck_assert (json_is_false (json_object_get (child, "declared")));
    ck_assert (json_is_null (json_object_get (child, "occupancy")));
    char msg [512] = "";
    ck_assert (cuda_profile_verdict (sum, 1.5, 0.2, msg, sizeof msg));
    printf ("count verdict: %s\n", msg);
    ck_assert_msg (strstr (msg, "launch 1 ('rest') never reached the GPU") != NULL, "message: %s", msg);
    //  Without a profile (observed_launches null) the count check is off.
    json_object_set_new (sum, "observed_launches", json_null ());
    ck_assert (!cuda_profile_verdict (sum, 1.5, 0.2, msg, sizeof msg));
    json_decref (sum);
    //  No records at all: both launches missing.
    in.nrecords = 0;
    sum = cuda_profile_summarise (&in, &missing);
    ck_assert_uint_eq (missing, 2);
    ck_assert_uint_eq (json_array_size (json_object_get (sum, "kernels")), 0);
    json_decref (sum);
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
    tcase_add_test (tc, test_plan_carries_the_timing_rule);
    tcase_add_test (tc, test_plan_carries_profile_and_roofline_bytes);
    tcase_add_test (tc, test_plan_default_bytes_count_inout_twice);
    tcase_add_test (tc, test_profile_peak_margin_occupancy_floor);
    tcase_add_test (tc, test_profile_summary_matches_declared_launches);
    tcase_add_test (tc, test_profile_missing_launch_fails_the_candidate);
    tcase_add_test (tc, test_profile_stale_cupti_name_is_matched_by_geometry);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
