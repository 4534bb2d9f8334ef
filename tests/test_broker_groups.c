/*  test_broker_groups - GRPO group summaries: a declared size completes at
    exactly its size-th end and is forgotten, an undeclared group completes
    whenever nothing of it is unfinished and repeats cumulatively, cancelled
    jobs end without counting, zero variance, owners kept apart, the bound
    on groups, a group known only from a finish, best_job, and the
    statistics against hand-computed values.  */
#include "testutil.h"
#include "broker_groups.h"
#include "common_log.h"
#include <math.h>
#include <string.h>
#include <stdlib.h>

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
}

static broker_groups_t *
s_new (size_t max_groups)
{
    broker_groups_t *groups = broker_groups_new (max_groups);
    ck_assert_ptr_nonnull (groups);
    return groups;
}

static void
s_add (broker_groups_t *groups, const char *owner, const char *group, uint32_t size)
{
    ck_assert_int_eq (broker_groups_add (groups, owner, group, size), 0);
}

//  A finish that must not complete the group.
static void
s_finish_open (broker_groups_t *groups, const char *owner, const char *group, uint64_t job,
               const char *status, double reward, bool counted)
{
    json_t *summary = broker_groups_finish (groups, owner, group, job, status, reward, counted);
    ck_assert_msg (summary == NULL, "job %llu of %s/%s: a summary came before the group's end",
                   (unsigned long long) job, owner, group);
}

//  A finish that must complete it: the summary.
static json_t *
s_finish_last (broker_groups_t *groups, const char *owner, const char *group, uint64_t job,
               const char *status, double reward, bool counted)
{
    json_t *summary = broker_groups_finish (groups, owner, group, job, status, reward, counted);
    ck_assert_msg (summary != NULL, "job %llu of %s/%s: no summary at the group's end",
                   (unsigned long long) job, owner, group);
    return summary;
}

static long long
s_int (json_t *object, const char *key)
{
    json_t *value = json_object_get (object, key);
    ck_assert_msg (json_is_integer (value), "'%s' is not an integer", key);
    return json_integer_value (value);
}

static void
s_assert_near (json_t *object, const char *key, double expected)
{
    json_t *value = json_object_get (object, key);
    ck_assert_msg (json_is_number (value), "'%s' is not a number", key);
    double got = json_number_value (value);
    ck_assert_msg (fabs (got - expected) < 1e-12, "%s: expected %.15g, got %.15g", key,
                   expected, got);
}

static void
s_assert_null (json_t *object, const char *key)
{
    json_t *value = json_object_get (object, key);
    ck_assert_msg (value && json_is_null (value), "%s: expected null", key);
}

//  The jobs array as "1,2,3".
static void
s_assert_jobs (json_t *summary, const char *expected)
{
    char got [256] = "";
    size_t i;
    json_t *job;
    json_array_foreach (json_object_get (summary, "jobs"), i, job) {
        size_t used = strlen (got);
        snprintf (got + used, sizeof (got) - used, "%s%lld", i? ",": "", json_integer_value (job));
    }
    ck_assert_msg (strcmp (got, expected) == 0, "jobs: expected %s, got %s", expected, got);
}

static long long
s_status (json_t *summary, const char *status)
{
    return s_int (json_object_get (summary, "statuses"), status);
}

START_TEST (test_declared_size_completes_at_its_size_and_is_forgotten)
{
    broker_groups_t *groups = s_new (100);
    s_add (groups, "alice", "g", 3);
    s_add (groups, "alice", "g", 0);
    s_add (groups, "alice", "g", 5);                //  the first non-zero size wins
    ck_assert_uint_eq (broker_groups_size (groups), 1);
    s_finish_open (groups, "alice", "g", 1, "ok", 1.0, true);
    s_finish_open (groups, "alice", "g", 2, "incorrect", -0.5, true);
    json_t *summary = s_finish_last (groups, "alice", "g", 3, "ok", 2.0, true);
    ck_assert_str_eq (json_string_value (json_object_get (summary, "group")), "g");
    ck_assert_int_eq (s_int (summary, "count"), 3);
    ck_assert_int_eq (s_int (summary, "declared_size"), 3);
    ck_assert_int_eq (s_int (summary, "cancelled"), 0);
    s_assert_jobs (summary, "1,2,3");
    ck_assert (json_is_false (json_object_get (summary, "jobs_truncated")));
    ck_assert_uint_eq (json_object_size (summary), 15);
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_size (groups), 0);

    //  Declared size reached before every accepted job ended: complete all
    //  the same, without waiting for the unfinished ones.
    s_add (groups, "alice", "h", 2);
    s_add (groups, "alice", "h", 2);
    s_add (groups, "alice", "h", 2);
    s_finish_open (groups, "alice", "h", 4, "ok", 1.0, true);
    summary = s_finish_last (groups, "alice", "h", 5, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), 2);
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_size (groups), 0);
    broker_groups_destroy (&groups);
    broker_groups_destroy (&groups);
    ck_assert_ptr_null (groups);
}
END_TEST

START_TEST (test_undeclared_completes_when_nothing_is_unfinished_and_repeats)
{
    broker_groups_t *groups = s_new (100);
    s_add (groups, "alice", "g", 0);
    s_add (groups, "alice", "g", 0);
    s_finish_open (groups, "alice", "g", 1, "ok", 1.0, true);
    json_t *summary = s_finish_last (groups, "alice", "g", 2, "incorrect", -0.5, true);
    ck_assert_int_eq (s_int (summary, "count"), 2);
    s_assert_null (summary, "declared_size");
    s_assert_jobs (summary, "1,2");
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_size (groups), 1);         //  kept for later jobs

    s_add (groups, "alice", "g", 0);
    s_add (groups, "alice", "g", 0);
    s_finish_open (groups, "alice", "g", 4, "ok", 3.0, true);
    summary = s_finish_last (groups, "alice", "g", 3, "timeout", -0.5, true);
    //  Cumulative: every job so far, in finishing order.
    ck_assert_int_eq (s_int (summary, "count"), 4);
    s_assert_jobs (summary, "1,2,4,3");
    ck_assert_int_eq (s_status (summary, "ok"), 2);
    ck_assert_int_eq (s_status (summary, "timeout"), 1);
    ck_assert_int_eq (s_int (summary, "best_job"), 4);
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_size (groups), 1);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_cancelled_jobs_end_without_counting)
{
    broker_groups_t *groups = s_new (100);
    for (int i = 0; i < 3; i++)
        s_add (groups, "alice", "g", 3);
    s_finish_open (groups, "alice", "g", 1, "ok", 1.0, true);
    s_finish_open (groups, "alice", "g", 2, "ok", 5.0, false);  //  cancelled
    json_t *summary = s_finish_last (groups, "alice", "g", 3, "incorrect", -0.5, true);
    ck_assert_int_eq (s_int (summary, "count"), 2);
    ck_assert_int_eq (s_int (summary, "cancelled"), 1);
    ck_assert_int_eq (s_int (summary, "rewards"), 2);
    s_assert_near (summary, "pass_rate", 0.5);
    s_assert_near (summary, "reward_max", 1.0);
    ck_assert_int_eq (s_int (summary, "best_job"), 1);
    s_assert_jobs (summary, "1,3");
    json_decref (summary);

    //  All cancelled: the summary still comes, with nothing to average.
    s_add (groups, "alice", "k", 0);
    s_add (groups, "alice", "k", 0);
    s_finish_open (groups, "alice", "k", 7, NULL, NAN, false);
    summary = s_finish_last (groups, "alice", "k", 8, NULL, NAN, false);
    ck_assert_int_eq (s_int (summary, "count"), 0);
    ck_assert_int_eq (s_int (summary, "cancelled"), 2);
    ck_assert_int_eq (s_int (summary, "rewards"), 0);
    const char *nulls [] = {
        "pass_rate", "reward_mean", "reward_std", "reward_min", "reward_max", "best_job"
    };
    for (size_t i = 0; i < sizeof (nulls) / sizeof (nulls [0]); i++)
        s_assert_null (summary, nulls [i]);
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    s_assert_jobs (summary, "");
    json_decref (summary);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_zero_variance)
{
    broker_groups_t *groups = s_new (100);
    //  Equal within 1e-12 (one differs by 1e-13), the null reward ignored: dead.
    for (int i = 0; i < 4; i++)
        s_add (groups, "o", "dead", 4);
    s_finish_open (groups, "o", "dead", 1, "incorrect", -0.5, true);
    s_finish_open (groups, "o", "dead", 2, "incorrect", -0.5, true);
    s_finish_open (groups, "o", "dead", 3, "internal_error", NAN, true);
    json_t *summary = s_finish_last (groups, "o", "dead", 4, "incorrect", -0.5 + 1e-13, true);
    ck_assert (json_is_true (json_object_get (summary, "zero_variance")));
    ck_assert_int_eq (s_int (summary, "rewards"), 3);
    ck_assert_int_eq (s_int (summary, "count"), 4);
    json_decref (summary);

    //  Apart by more: alive.
    s_add (groups, "o", "alive", 2);
    s_add (groups, "o", "alive", 2);
    s_finish_open (groups, "o", "alive", 5, "incorrect", -0.5, true);
    summary = s_finish_last (groups, "o", "alive", 6, "incorrect", -0.5 + 1e-9, true);
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    json_decref (summary);

    //  No reward at all: not "dead", just unknown.
    s_add (groups, "o", "none", 1);
    summary = s_finish_last (groups, "o", "none", 7, "invalid", NAN, true);
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    ck_assert_int_eq (s_status (summary, "invalid"), 1);
    json_decref (summary);

    //  A single reward is trivially equal to itself.
    s_add (groups, "o", "one", 1);
    summary = s_finish_last (groups, "o", "one", 8, "ok", 1.5, true);
    ck_assert (json_is_true (json_object_get (summary, "zero_variance")));
    s_assert_near (summary, "reward_std", 0.0);
    json_decref (summary);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_owners_are_kept_apart)
{
    broker_groups_t *groups = s_new (100);
    s_add (groups, "alice", "g", 2);
    s_add (groups, "alice", "g", 2);
    s_add (groups, "bob", "g", 0);
    ck_assert_uint_eq (broker_groups_size (groups), 2);
    //  Bob's only job ends: his group is complete, alice's is not touched.
    json_t *summary = s_finish_last (groups, "bob", "g", 10, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), 1);
    s_assert_jobs (summary, "10");
    json_decref (summary);
    s_finish_open (groups, "alice", "g", 1, "ok", 1.0, true);
    summary = s_finish_last (groups, "alice", "g", 2, "ok", 1.0, true);
    s_assert_jobs (summary, "1,2");
    json_decref (summary);

    //  The key cannot be forged by moving bytes between owner and group.
    s_add (groups, "a", "bc", 0);
    s_add (groups, "ab", "c", 0);
    s_add (groups, NULL, "abc", 0);
    ck_assert_uint_eq (broker_groups_size (groups), 4);         //  bob's g stays too
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_bound_on_groups)
{
    broker_groups_t *groups = s_new (3);
    s_add (groups, "o", "g1", 0);
    s_add (groups, "o", "g2", 0);
    s_add (groups, "o", "g3", 0);
    s_add (groups, "o", "g1", 0);                           //  touched: now g2 is the oldest
    s_add (groups, "o", "g4", 0);
    ck_assert_uint_eq (broker_groups_size (groups), 3);
    ck_assert_uint_eq (broker_groups_dropped (groups), 1);
    //  g2 was dropped: its job's end makes a new group of that one job.
    json_t *summary = s_finish_last (groups, "o", "g2", 2, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), 1);
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_dropped (groups), 2);      //  g3 made room for it
    //  g1 still has both its jobs (no summary after the first end).
    s_finish_open (groups, "o", "g1", 11, "ok", 1.0, true);
    summary = s_finish_last (groups, "o", "g1", 12, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), 2);
    json_decref (summary);

    //  Now g2 and g1 are idle (summaries sent), g4 waits for its job: room
    //  is made from the idle ones first, oldest first, and not counted.
    s_add (groups, "o", "g5", 0);
    ck_assert_uint_eq (broker_groups_size (groups), 3);
    ck_assert_uint_eq (broker_groups_dropped (groups), 2);
    summary = s_finish_last (groups, "o", "g1", 13, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), 3);         //  g1 was kept ...
    json_decref (summary);
    summary = s_finish_last (groups, "o", "g4", 14, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), 1);         //  ... and g4 too
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_dropped (groups), 2);  //  the idle g2 made room for g5
    ck_assert_uint_eq (broker_groups_size (groups), 3);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_unknown_group_finishing)
{
    broker_groups_t *groups = s_new (100);
    json_t *summary = s_finish_last (groups, "o", "ghost", 7, "ok", 1.25, true);
    ck_assert_str_eq (json_string_value (json_object_get (summary, "group")), "ghost");
    ck_assert_int_eq (s_int (summary, "count"), 1);
    s_assert_null (summary, "declared_size");
    s_assert_jobs (summary, "7");
    ck_assert_int_eq (s_int (summary, "best_job"), 7);
    s_assert_near (summary, "reward_mean", 1.25);
    json_decref (summary);
    ck_assert_uint_eq (broker_groups_size (groups), 1);
    //  A second stray end adds to it (a restart lost both adds).
    summary = s_finish_last (groups, "o", "ghost", 8, "incorrect", -0.5, true);
    ck_assert_int_eq (s_int (summary, "count"), 2);
    s_assert_jobs (summary, "7,8");
    json_decref (summary);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_best_job_is_the_first_highest)
{
    broker_groups_t *groups = s_new (100);
    for (int i = 0; i < 4; i++)
        s_add (groups, "o", "g", 4);
    s_finish_open (groups, "o", "g", 10, "ok", 0.2, true);
    s_finish_open (groups, "o", "g", 11, "ok", 1.5, true);
    s_finish_open (groups, "o", "g", 12, "ok", 1.5, true);
    json_t *summary = s_finish_last (groups, "o", "g", 13, "compile_error", -1.0, true);
    ck_assert_int_eq (s_int (summary, "best_job"), 11);
    s_assert_near (summary, "reward_min", -1.0);
    s_assert_near (summary, "reward_max", 1.5);
    json_decref (summary);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_statistics_against_hand_computed)
{
    broker_groups_t *groups = s_new (100);
    for (int i = 0; i < 6; i++)
        s_add (groups, "o", "g", 6);
    s_finish_open (groups, "o", "g", 1, "ok", 2.0, true);
    s_finish_open (groups, "o", "g", 2, "ok", 1.0, true);
    s_finish_open (groups, "o", "g", 3, "incorrect", -0.5, true);
    s_finish_open (groups, "o", "g", 4, "compile_error", -1.0, true);
    s_finish_open (groups, "o", "g", 5, "internal_error", NAN, true);
    json_t *summary = s_finish_last (groups, "o", "g", 6, "timeout", -0.5, true);
    ck_assert_int_eq (s_int (summary, "count"), 6);
    ck_assert_int_eq (s_int (summary, "rewards"), 5);
    s_assert_near (summary, "pass_rate", 2.0 / 6.0);
    //  Rewards 2, 1, -0.5, -1, -0.5: mean 0.2, population variance 6.3 / 5 = 1.26.
    s_assert_near (summary, "reward_mean", 0.2);
    s_assert_near (summary, "reward_std", sqrt (1.26));
    s_assert_near (summary, "reward_min", -1.0);
    s_assert_near (summary, "reward_max", 2.0);
    ck_assert_int_eq (s_int (summary, "best_job"), 1);
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    const char *statuses [] = {
        "ok", "compile_error", "incorrect", "runtime_error", "timeout", "invalid",
        "internal_error"
    };
    long long expected [] = { 2, 1, 1, 0, 1, 0, 1 };
    for (size_t i = 0; i < 7; i++)
        ck_assert_msg (s_status (summary, statuses [i]) == expected [i], "%s: expected %lld, got %lld",
                       statuses [i], expected [i], s_status (summary, statuses [i]));
    ck_assert_uint_eq (json_object_size (json_object_get (summary, "statuses")), 7);
    json_decref (summary);

    //  An unknown status counts as internal_error (kgym's fault, not the kernel's).
    s_add (groups, "o", "u", 1);
    summary = s_finish_last (groups, "o", "u", 9, "exploded", NAN, true);
    ck_assert_int_eq (s_status (summary, "internal_error"), 1);
    json_decref (summary);
    broker_groups_destroy (&groups);
}
END_TEST

START_TEST (test_jobs_list_is_capped)
{
    broker_groups_t *groups = s_new (10);
    size_t total = BROKER_GROUPS_JOBS_MAX + 6;
    for (size_t i = 0; i < total; i++)
        s_add (groups, "o", "big", 0);
    for (size_t i = 1; i < total; i++)
        s_finish_open (groups, "o", "big", i, "ok", 1.0, true);
    json_t *summary = s_finish_last (groups, "o", "big", total, "ok", 1.0, true);
    ck_assert_int_eq (s_int (summary, "count"), (long long) total);
    json_t *jobs = json_object_get (summary, "jobs");
    ck_assert_uint_eq (json_array_size (jobs), BROKER_GROUPS_JOBS_MAX);
    ck_assert_int_eq (json_integer_value (json_array_get (jobs, BROKER_GROUPS_JOBS_MAX - 1)),
                      BROKER_GROUPS_JOBS_MAX);                  //  the first ones are kept
    ck_assert (json_is_true (json_object_get (summary, "jobs_truncated")));
    json_decref (summary);
    broker_groups_destroy (&groups);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_groups");
    TCase *tc = tcase_create ("groups");
    tcase_add_checked_fixture (tc, s_setup, NULL);
    tcase_add_test (tc, test_declared_size_completes_at_its_size_and_is_forgotten);
    tcase_add_test (tc, test_undeclared_completes_when_nothing_is_unfinished_and_repeats);
    tcase_add_test (tc, test_cancelled_jobs_end_without_counting);
    tcase_add_test (tc, test_zero_variance);
    tcase_add_test (tc, test_owners_are_kept_apart);
    tcase_add_test (tc, test_bound_on_groups);
    tcase_add_test (tc, test_unknown_group_finishing);
    tcase_add_test (tc, test_best_job_is_the_first_highest);
    tcase_add_test (tc, test_statistics_against_hand_computed);
    tcase_add_test (tc, test_jobs_list_is_capped);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
