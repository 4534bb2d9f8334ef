/*  test_broker_verdict - a result is checked against the protocol and the
    job's own reward settings before the broker believes it; the results the
    broker makes pass the same check.  */
#include "testutil.h"
#include "broker_verdict.h"
#include "proto_mpk.h"
#include <math.h>
#include <string.h>

//  The verdict of a result given as JSON text (encoded to msgpack first):
//  0 or -1 from parse, then judge with params; why gets the reason.
static int
s_check (const char *json_text, const char *header, const common_reward_t *params,
         broker_verdict_t *verdict, char *why, size_t whylen)
{
    json_error_t error;
    json_t *json = json_loads (json_text, JSON_DECODE_ANY, &error);
    ck_assert_msg (json != NULL, "bad test JSON %s: %s", json_text, error.text);
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (json, &data, &size), 0);
    json_decref (json);
    why [0] = 0;
    int rc = broker_verdict_parse (data, size, header, verdict, why, whylen);
    if (rc == 0)
        rc = broker_verdict_judge (verdict, params, why, whylen);
    free (data);
    return rc;
}

static common_reward_t
s_settings (const char *job_text)
{
    json_t *job = json_loads (job_text, 0, NULL);
    ck_assert_ptr_nonnull (job);
    common_reward_t params;
    ck_assert_int_eq (broker_verdict_settings (job, &params), 0);
    json_decref (job);
    return params;
}

START_TEST (test_settings_are_the_jobs_reward_with_defaults)
{
    common_reward_t params = s_settings ("{\"task\": {}, \"candidate\": {}}");
    ck_assert_double_eq (params.compile_error, -1.0);
    ck_assert_double_eq (params.timeout, -0.5);
    ck_assert_double_eq (params.clip, 2.0);
    params = s_settings ("{\"reward\": {\"clip\": 4, \"shape\": \"log\", \"incorrect\": -0.25}}");
    ck_assert_double_eq (params.clip, 4.0);
    ck_assert (params.log_shape);
    ck_assert_double_eq (params.incorrect, -0.25);
    //  Not a job a worker could grade: no settings.
    json_t *bad = json_pack ("{s:{s:f}}", "reward", "timeout", 0.5);
    ck_assert_int_eq (broker_verdict_settings (bad, &params), -1);
    json_decref (bad);
    bad = json_pack ("[i]", 1);
    ck_assert_int_eq (broker_verdict_settings (bad, &params), -1);
    json_decref (bad);
    ck_assert_int_eq (broker_verdict_settings (NULL, &params), -1);
}
END_TEST

START_TEST (test_honest_results_pass)
{
    common_reward_t params = s_settings ("{}");
    broker_verdict_t v;
    char why [256];
    ck_assert_int_eq (s_check ("{\"status\": \"ok\", \"reward\": 1.5, \"speedup\": 1.5}", "ok",
                               &params, &v, why, sizeof why), 0);
    ck_assert_str_eq (v.status, "ok");
    ck_assert_double_eq (v.reward, 1.5);
    ck_assert_double_eq (v.speedup, 1.5);
    //  Clipped, untimed (null or absent speedup counts 1.0), integer rewards.
    ck_assert_int_eq (s_check ("{\"status\": \"ok\", \"reward\": 2.0, \"speedup\": 9}", NULL,
                               &params, &v, why, sizeof why), 0);
    ck_assert_int_eq (s_check ("{\"status\": \"ok\", \"reward\": 1, \"speedup\": null}", "",
                               &params, &v, why, sizeof why), 0);
    ck_assert (isnan (v.speedup));
    ck_assert_int_eq (s_check ("{\"status\": \"ok\", \"reward\": 1}", NULL, &params, &v, why,
                               sizeof why), 0);
    const char *failures [] = {
        "{\"status\": \"compile_error\", \"reward\": -1, \"speedup\": null}",
        "{\"status\": \"incorrect\", \"reward\": -0.5, \"speedup\": null}",
        "{\"status\": \"runtime_error\", \"reward\": -0.5}",
        "{\"status\": \"timeout\", \"reward\": -0.5, \"speedup\": null, \"message\": \"slow\"}",
        "{\"status\": \"invalid\", \"reward\": null, \"speedup\": null}",
        "{\"status\": \"internal_error\"}",
    };
    for (size_t i = 0; i < sizeof failures / sizeof failures [0]; i++)
        ck_assert_msg (s_check (failures [i], NULL, &params, &v, why, sizeof why) == 0,
                       "%s: %s", failures [i], why);
    //  A job that cannot be graded still takes invalid and internal_error.
    ck_assert_int_eq (s_check ("{\"status\": \"invalid\", \"reward\": null}", NULL, NULL, &v,
                               why, sizeof why), 0);
    //  Log shape: log(1 + min(speedup, clip)).
    params = s_settings ("{\"reward\": {\"shape\": \"log\", \"clip\": 4}}");
    char text [128];
    snprintf (text, sizeof text, "{\"status\": \"ok\", \"reward\": %.17g, \"speedup\": 3}", log (4.0));
    ck_assert_int_eq (s_check (text, NULL, &params, &v, why, sizeof why), 0);
}
END_TEST

START_TEST (test_each_rule_rejects_with_its_reason)
{
    common_reward_t params = s_settings ("{}");
    static const struct {
        const char *json;
        const char *header;
        const char *why;
    } cases [] = {
        { "[1, 2]", NULL, "not a map" },
        { "\"ok\"", NULL, "not a map" },
        { "{\"reward\": 1}", NULL, "no 'status'" },
        { "{\"status\": 1, \"reward\": 1}", NULL, "no 'status'" },
        { "{\"status\": \"great\", \"reward\": 1}", NULL, "not a result status" },
        { "{\"status\": \"ok\", \"reward\": 1}", "incorrect", "header's status 'incorrect'" },
        { "{\"status\": \"ok\", \"reward\": \"1\"}", NULL, "neither a number nor null" },
        { "{\"status\": \"ok\", \"reward\": 1, \"speedup\": true}", NULL, "neither a number" },
        { "{\"status\": \"ok\", \"speedup\": 1}", NULL, "without a reward" },
        { "{\"status\": \"incorrect\", \"reward\": null}", NULL, "without a reward" },
        { "{\"status\": \"invalid\", \"reward\": 0}", NULL, "it carries none" },
        { "{\"status\": \"internal_error\", \"reward\": -1}", NULL, "it carries none" },
        { "{\"status\": \"timeout\", \"reward\": -0.5, \"speedup\": 2}", NULL, "only ok has one" },
        { "{\"status\": \"invalid\", \"speedup\": 2}", NULL, "only ok has one" },
        { "{\"status\": \"ok\", \"reward\": 1, \"speedup\": 0}", NULL, "must be > 0" },
        { "{\"status\": \"ok\", \"reward\": 1, \"speedup\": -3}", NULL, "must be > 0" },
        { "{\"status\": \"ok\", \"reward\": 99}", "ok", "reward 99 is not the 1" },
        { "{\"status\": \"ok\", \"reward\": 1.5, \"speedup\": 3}", NULL, "is not the 2" },
        { "{\"status\": \"ok\", \"reward\": 1.50001, \"speedup\": 1.5}", NULL, "is not the 1.5" },
        { "{\"status\": \"compile_error\", \"reward\": -0.5}", NULL, "is not the -1" },
        { "{\"status\": \"incorrect\", \"reward\": -0.5000001}", NULL, "is not the -0.5" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        broker_verdict_t v;
        char why [256];
        ck_assert_msg (s_check (cases [i].json, cases [i].header, &params, &v, why, sizeof why) == -1,
                       "%s was taken", cases [i].json);
        ck_assert_msg (strstr (why, cases [i].why), "%s: expected '%s' in the reason, got '%s'",
                       cases [i].json, cases [i].why, why);
    }
    //  A job that cannot be graded takes no graded status.
    broker_verdict_t v;
    char why [256];
    ck_assert_int_eq (s_check ("{\"status\": \"ok\", \"reward\": 1}", NULL, NULL, &v, why,
                               sizeof why), -1);
    ck_assert (strstr (why, "cannot be graded"));
}
END_TEST

START_TEST (test_bodies_that_do_not_decode)
{
    static const struct {
        const char *data;
        size_t size;
    } bodies [] = {
        { "not msgpack", 11 },
        { "\xdf\xff\xff\xff\xff", 5 },          //  a map claiming 4G entries
        { "\x81\xa6status", 8 },                //  truncated
        { "\x81\xa6status\xa2ok\xc0", 12 },     //  trailing bytes
        { "\x81\x01\x02", 3 },                  //  an integer key
        { "\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00", 9 },  //  NaN
        { "", 0 },
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies [0]; i++) {
        broker_verdict_t v;
        char why [256] = "";
        ck_assert_int_eq (broker_verdict_parse (bodies [i].data, bodies [i].size, NULL, &v, why,
                                                sizeof why), -1);
        ck_assert_msg (strstr (why, "does not decode"), "body %zu: %s", i, why);
        ck_assert_str_eq (v.status, "");
    }
    //  Nested deeper than the section-5 limit (32).
    char deep [64];
    memset (deep, 0x91, 40);
    deep [40] = (char) 0xc0;
    broker_verdict_t v;
    char why [256];
    ck_assert_int_eq (broker_verdict_parse (deep, 41, NULL, &v, why, sizeof why), -1);
    //  Over 16 MiB: refused by the limits before anything is built.
    size_t big = (16u << 20) + 16;
    char *huge = (char *) calloc (1, big);
    ck_assert_ptr_nonnull (huge);
    huge [0] = (char) 0xc6;                     //  bin 32 of (almost) all the rest
    uint32_t n = (uint32_t) (big - 5);
    huge [1] = (char) (n >> 24); huge [2] = (char) (n >> 16); huge [3] = (char) (n >> 8);
    huge [4] = (char) n;
    ck_assert_int_eq (broker_verdict_parse (huge, big, NULL, &v, why, sizeof why), -1);
    free (huge);
}
END_TEST

START_TEST (test_made_results_pass_the_check)
{
    common_reward_t params = s_settings ("{}");
    const char *messages [] = {
        "worker lost 3 times while running this job",
        "no worker serves backend 'cuda' (none joined within 60 s)",
        "the result from worker \xff\xfe was rejected: the header's status '\xc3' is not ...",
        "",
    };
    for (size_t i = 0; i < sizeof messages / sizeof messages [0]; i++) {
        zframe_t *made = broker_verdict_make (messages [i]);
        ck_assert_ptr_nonnull (made);
        broker_verdict_t v;
        char why [256] = "";
        ck_assert_msg (broker_verdict_parse (zframe_data (made), zframe_size (made),
                                             "internal_error", &v, why, sizeof why) == 0, "%s", why);
        ck_assert_int_eq (broker_verdict_judge (&v, &params, why, sizeof why), 0);
        ck_assert_int_eq (broker_verdict_judge (&v, NULL, why, sizeof why), 0);
        ck_assert_str_eq (v.status, "internal_error");
        ck_assert (isnan (v.reward) && isnan (v.speedup));
        json_t *doc = proto_mpk_decode (zframe_data (made), zframe_size (made), NULL, NULL, 0);
        ck_assert_ptr_nonnull (json_string_value (json_object_get (doc, "message")));
        ck_assert (json_is_null (json_object_get (doc, "reward")));
        ck_assert (json_is_null (json_object_get (doc, "speedup")));
        json_decref (doc);
        zframe_destroy (&made);
    }
    zframe_t *made = broker_verdict_make (NULL);
    ck_assert_ptr_nonnull (made);
    zframe_destroy (&made);
}
END_TEST

START_TEST (test_statuses_and_lenient_read)
{
    ck_assert_uint_eq (broker_verdict_status_index ("ok"), 0);
    ck_assert_uint_eq (broker_verdict_status_index ("internal_error"), 6);
    ck_assert_uint_eq (broker_verdict_status_index ("OK"), BROKER_VERDICT_STATUSES);
    ck_assert_uint_eq (broker_verdict_status_index (NULL), BROKER_VERDICT_STATUSES);
    ck_assert (broker_verdict_rewarded ("timeout"));
    ck_assert (!broker_verdict_rewarded ("invalid"));
    ck_assert (!broker_verdict_rewarded ("whatever"));
    broker_verdict_t v;
    json_t *doc = json_pack ("{s:s, s:f}", "status", "weird", "reward", 3.0);
    broker_verdict_of (doc, &v);
    ck_assert_str_eq (v.status, "unknown");
    ck_assert_double_eq (v.reward, 3.0);
    ck_assert (isnan (v.speedup));
    json_decref (doc);
    broker_verdict_of (NULL, &v);
    ck_assert_str_eq (v.status, "");
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_verdict");
    TCase *tc = tcase_create ("verdict");
    tcase_add_test (tc, test_settings_are_the_jobs_reward_with_defaults);
    tcase_add_test (tc, test_honest_results_pass);
    tcase_add_test (tc, test_each_rule_rejects_with_its_reason);
    tcase_add_test (tc, test_bodies_that_do_not_decode);
    tcase_add_test (tc, test_made_results_pass_the_check);
    tcase_add_test (tc, test_statuses_and_lenient_read);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
