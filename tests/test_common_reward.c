/*  test_common_reward - the gated reward: gate, shape, clip, no reward for our faults.  */
#include "testutil.h"
#include "common_reward.h"
#include <math.h>

static common_reward_t
s_defaults (void)
{
    common_reward_t params;
    char err [256];
    ck_assert_int_eq (common_reward_from_json (NULL, &params, err, sizeof err), 0);
    return params;
}

START_TEST (test_defaults_gate_every_status)
{
    common_reward_t params = s_defaults ();
    double r;
    ck_assert (common_reward_for (&params, "compile_error", 0, &r));
    ck_assert_double_eq (r, -1.0);
    ck_assert (common_reward_for (&params, "incorrect", 0, &r));
    ck_assert_double_eq (r, -0.5);
    ck_assert (common_reward_for (&params, "runtime_error", 0, &r));
    ck_assert_double_eq (r, -0.5);
    ck_assert (common_reward_for (&params, "timeout", 0, &r));
    ck_assert_double_eq (r, -0.5);
    ck_assert_msg (!common_reward_for (&params, "invalid", 3.0, &r), "invalid must carry no reward");
    ck_assert_msg (!common_reward_for (&params, "internal_error", 3.0, &r),
                   "internal_error must carry no reward");
    ck_assert_msg (!common_reward_for (&params, "unknown", 3.0, &r) && r == 0,
                   "a name outside the statuses carries no reward");
    ck_assert (!common_reward_for (&params, NULL, 3.0, &r));
}
END_TEST

START_TEST (test_correct_is_clipped_speedup)
{
    common_reward_t params = s_defaults ();
    double r;
    ck_assert (common_reward_for (&params, "ok", 1.5, &r));
    ck_assert_double_eq_tol (r, 1.5, 1e-12);
    ck_assert (common_reward_for (&params, "ok", 7.0, &r));
    ck_assert_double_eq_tol (r, 2.0, 1e-12);
    //  Even a very slow correct kernel outscores every failure.
    ck_assert (common_reward_for (&params, "ok", 1e-6, &r));
    ck_assert (r > 0);
    //  Untimed (check-only) counts as par.
    ck_assert (common_reward_for (&params, "ok", 0, &r));
    ck_assert_double_eq_tol (r, 1.0, 1e-12);
}
END_TEST

START_TEST (test_log_shape_and_custom_clip)
{
    json_t *json = json_pack ("{s:s, s:f, s:f}", "shape", "log", "clip", 4.0, "incorrect", -0.25);
    common_reward_t params;
    char err [256];
    ck_assert_int_eq (common_reward_from_json (json, &params, err, sizeof err), 0);
    double r;
    ck_assert (common_reward_for (&params, "ok", 3.0, &r));
    ck_assert_double_eq_tol (r, log (4.0), 1e-12);
    ck_assert (common_reward_for (&params, "ok", 10.0, &r));
    ck_assert_double_eq_tol (r, log (5.0), 1e-12);
    ck_assert (common_reward_for (&params, "incorrect", 0, &r));
    ck_assert_double_eq (r, -0.25);
    json_decref (json);
}
END_TEST

START_TEST (test_positive_failure_reward_rejected)
{
    json_t *json = json_pack ("{s:f}", "timeout", 0.5);
    common_reward_t params;
    char err [256] = "";
    ck_assert_int_eq (common_reward_from_json (json, &params, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "timeout") != NULL, "reason should name the key, got '%s'", err);
    json_decref (json);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("common_reward");
    TCase *tc = tcase_create ("reward");
    tcase_add_test (tc, test_defaults_gate_every_status);
    tcase_add_test (tc, test_correct_is_clipped_speedup);
    tcase_add_test (tc, test_log_shape_and_custom_clip);
    tcase_add_test (tc, test_positive_failure_reward_rejected);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
