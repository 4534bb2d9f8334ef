/*  test_worker_host - usable cores and GPUs, what pool defaults are sized from.  */
#include "testutil.h"
#include "worker_host.h"
#include <sched.h>

START_TEST (test_quota_lines)
{
    ck_assert_uint_eq (worker_host_quota_cores ("max 100000\n"), 0);
    ck_assert_uint_eq (worker_host_quota_cores ("100000 100000\n"), 1);
    ck_assert_uint_eq (worker_host_quota_cores ("250000 100000\n"), 3);     //  rounded up
    ck_assert_uint_eq (worker_host_quota_cores ("50000 100000"), 1);
    ck_assert_uint_eq (worker_host_quota_cores ("1600000 100000"), 16);
    //  Not a cpu.max line: no limit, never a crash.
    ck_assert_uint_eq (worker_host_quota_cores (""), 0);
    ck_assert_uint_eq (worker_host_quota_cores (NULL), 0);
    ck_assert_uint_eq (worker_host_quota_cores ("100000"), 0);
    ck_assert_uint_eq (worker_host_quota_cores ("100000 0"), 0);
    ck_assert_uint_eq (worker_host_quota_cores ("-5 100000"), 0);
    ck_assert_uint_eq (worker_host_quota_cores ("12x 100000"), 0);
    ck_assert_uint_eq (worker_host_quota_cores ("0 100000"), 0);
}
END_TEST

START_TEST (test_cores_follow_affinity)
{
    uint32_t all = worker_host_cores ();
    ck_assert_uint_ge (all, 1);
    cpu_set_t was, one;
    ck_assert_int_eq (sched_getaffinity (0, sizeof was, &was), 0);
    ck_assert_uint_le (all, (uint32_t) CPU_COUNT (&was));
    //  Pinned to one core, the worker counts one.
    int first = 0;
    while (!CPU_ISSET (first, &was))
        first++;
    CPU_ZERO (&one);
    CPU_SET (first, &one);
    ck_assert_int_eq (sched_setaffinity (0, sizeof one, &one), 0);
    ck_assert_uint_eq (worker_host_cores (), 1);
    ck_assert_uint_eq (worker_host_cores_per_gpu (), 1);
    ck_assert_int_eq (sched_setaffinity (0, sizeof was, &was), 0);
    ck_assert_uint_eq (worker_host_cores (), all);
    //  Shared by the host's GPUs (none here: all of them), never below one.
    uint32_t gpus = worker_host_gpus ();
    uint32_t per = worker_host_cores_per_gpu ();
    ck_assert_uint_ge (per, 1);
    ck_assert_uint_eq (per, gpus > 1? (all / gpus? all / gpus: 1): all);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("worker_host");
    TCase *tc = tcase_create ("host");
    tcase_add_test (tc, test_quota_lines);
    tcase_add_test (tc, test_cores_follow_affinity);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
