/*  test_broker_trajectories - per-trajectory state: versions, conflicts,
    close, and the count and byte bounds (least recently used first).  */
#include "testutil.h"
#include "broker_trajectories.h"

static json_t *
s_state (int attempts)
{
    return json_pack ("{s:s, s:i}", "task", "cpu/gelu_f32", "attempts", attempts);
}

static int
s_attempts (json_t *state)
{
    ck_assert_ptr_nonnull (state);
    return (int) json_integer_value (json_object_get (state, "attempts"));
}

START_TEST (test_versions_and_conflicts)
{
    broker_trajectories_t *self = broker_trajectories_new (10, 1 << 20);
    uint64_t version;
    ck_assert_ptr_null (broker_trajectories_get (self, "t1", &version));
    ck_assert_uint_eq (version, 0);
    json_t *state = s_state (0);
    //  "Only if not there yet", then "only if still version 1".
    ck_assert_int_eq (broker_trajectories_put (self, "t1", state, 40, UINT64_MAX, &version), 0);
    ck_assert_uint_eq (version, 1);
    ck_assert_int_eq (broker_trajectories_put (self, "t1", state, 40, UINT64_MAX, &version), -2);
    ck_assert_uint_eq (version, 1);
    json_decref (state);
    state = s_state (1);
    ck_assert_int_eq (broker_trajectories_put (self, "t1", state, 40, 1, &version), 0);
    ck_assert_uint_eq (version, 2);
    //  A writer that read version 1 comes too late.
    ck_assert_int_eq (broker_trajectories_put (self, "t1", state, 40, 1, &version), -2);
    ck_assert_uint_eq (version, 2);
    json_decref (state);
    ck_assert_int_eq (s_attempts (broker_trajectories_get (self, "t1", &version)), 1);
    ck_assert_uint_eq (version, 2);
    //  Unconditional put; close hands back the last state and forgets it.
    state = s_state (5);
    ck_assert_int_eq (broker_trajectories_put (self, "t1", state, 40, 0, &version), 0);
    ck_assert_uint_eq (version, 3);
    json_decref (state);
    json_t *last = broker_trajectories_close (self, "t1");
    ck_assert_int_eq (s_attempts (last), 5);
    json_decref (last);
    ck_assert_ptr_null (broker_trajectories_close (self, "t1"));
    ck_assert_ptr_null (broker_trajectories_get (self, "t1", &version));
    ck_assert_uint_eq (broker_trajectories_size (self), 0);
    ck_assert_uint_eq (broker_trajectories_bytes (self), 0);
    broker_trajectories_destroy (&self);
    broker_trajectories_destroy (&self);
}
END_TEST

START_TEST (test_bounds_evict_least_recently_used)
{
    //  By count: three entries, the least recently used goes.
    broker_trajectories_t *self = broker_trajectories_new (3, 0);
    uint64_t version;
    json_t *state = s_state (0);
    ck_assert_int_eq (broker_trajectories_put (self, "a", state, 10, 0, &version), 0);
    ck_assert_int_eq (broker_trajectories_put (self, "b", state, 10, 0, &version), 0);
    ck_assert_int_eq (broker_trajectories_put (self, "c", state, 10, 0, &version), 0);
    ck_assert_ptr_nonnull (broker_trajectories_get (self, "a", &version));     //  a is recent now
    ck_assert_int_eq (broker_trajectories_put (self, "d", state, 10, 0, &version), 0);
    ck_assert_ptr_null (broker_trajectories_get (self, "b", &version));
    ck_assert_ptr_nonnull (broker_trajectories_get (self, "a", &version));
    ck_assert_uint_eq (broker_trajectories_size (self), 3);
    ck_assert_uint_eq (broker_trajectories_evicted (self), 1);
    //  Replacing one does not evict another.
    ck_assert_int_eq (broker_trajectories_put (self, "c", state, 10, 0, &version), 0);
    ck_assert_uint_eq (broker_trajectories_evicted (self), 1);
    broker_trajectories_destroy (&self);

    //  By bytes: each entry costs its size plus overhead; room is made oldest first.
    self = broker_trajectories_new (1000, 3000);
    ck_assert_int_eq (broker_trajectories_put (self, "x", state, 1000, 0, &version), 0);
    ck_assert_int_eq (broker_trajectories_put (self, "y", state, 1000, 0, &version), 0);
    ck_assert_int_eq (broker_trajectories_put (self, "z", state, 1000, 0, &version), 0);
    ck_assert_ptr_null (broker_trajectories_get (self, "x", &version));
    ck_assert_ptr_nonnull (broker_trajectories_get (self, "z", &version));
    ck_assert (broker_trajectories_bytes (self) <= 3000);
    //  Too large alone, or past the per-state limit: refused, nothing evicted.
    uint64_t evicted = broker_trajectories_evicted (self);
    ck_assert_int_eq (broker_trajectories_put (self, "big", state, 5000, 0, &version), -1);
    ck_assert_int_eq (broker_trajectories_put (self, "big", state, BROKER_TRAJECTORY_MAX_STATE + 1, 0,
                                               &version), -1);
    ck_assert_uint_eq (broker_trajectories_evicted (self), evicted);
    ck_assert_ptr_nonnull (broker_trajectories_get (self, "y", &version));
    json_decref (state);
    broker_trajectories_destroy (&self);
}
END_TEST

START_TEST (test_many_stay_within_bounds)
{
    broker_trajectories_t *self = broker_trajectories_new (1000, 200000);
    json_t *state = s_state (1);
    for (int i = 0; i < 20000; i++) {
        char id [32];
        snprintf (id, sizeof id, "traj-%d", i);
        uint64_t version;
        ck_assert_int_eq (broker_trajectories_put (self, id, state, 64 + i % 100, 0, &version), 0);
        ck_assert (broker_trajectories_size (self) <= 1000);
        ck_assert (broker_trajectories_bytes (self) <= 200000);
    }
    uint64_t version;
    ck_assert_ptr_nonnull (broker_trajectories_get (self, "traj-19999", &version));
    ck_assert_ptr_null (broker_trajectories_get (self, "traj-0", &version));
    ck_assert_uint_eq (broker_trajectories_evicted (self) + broker_trajectories_size (self), 20000);
    json_decref (state);
    broker_trajectories_destroy (&self);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_trajectories");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_versions_and_conflicts);
    tcase_add_test (tc, test_bounds_evict_least_recently_used);
    tcase_add_test (tc, test_many_stay_within_bounds);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
