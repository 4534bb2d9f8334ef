/*  broker_verdict - what a result says, checked against the protocol.  */
#include "broker_verdict.h"
#include "common_reward.h"
#include "common_util.h"
#include "proto_mpk.h"
#include <math.h>
#include <string.h>
#include <stdio.h>

const char *const broker_verdict_statuses [BROKER_VERDICT_STATUSES] = {
    "ok", "compile_error", "incorrect", "runtime_error", "timeout", "invalid", "internal_error"
};

#define S_OK 0                  //  index of "ok"
#define S_INVALID 5             //  first status without a reward (invalid, internal_error)

size_t
broker_verdict_status_index (const char *status)
{
    for (size_t i = 0; status && i < BROKER_VERDICT_STATUSES; i++)
        if (streq (status, broker_verdict_statuses [i]))
            return i;
    return BROKER_VERDICT_STATUSES;
}

bool
broker_verdict_rewarded (const char *status)
{
    return broker_verdict_status_index (status) < S_INVALID;
}

int
broker_verdict_settings (json_t *job, common_reward_t *params)
{
    if (!json_is_object (job)) {
        common_reward_from_json (NULL, params, NULL, 0);
        return -1;
    }
    char err [256];
    return common_reward_from_json (json_object_get (job, "reward"), params, err, sizeof err);
}

//  A value that must be a number or null (absent counts as null): 0 with
//  *value (NAN for null), or -1 with why.
static int
s_number_or_null (json_t *map, const char *key, double *value, char *err, size_t errlen)
{
    json_t *item = json_object_get (map, key);
    *value = NAN;
    if (!item || json_is_null (item))
        return 0;
    if (!json_is_number (item)) {
        snprintf (err, errlen, "'%s' is neither a number nor null", key);
        return -1;
    }
    *value = json_number_value (item);
    return 0;
}

int
broker_verdict_parse (const void *data, size_t size, const char *header_status,
                      broker_verdict_t *verdict, char *err, size_t errlen)
{
    verdict->status [0] = 0;
    verdict->reward = verdict->speedup = NAN;
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    char why [128];
    json_t *doc = proto_mpk_decode (data, size, &limits, why, sizeof why);
    if (!doc) {
        snprintf (err, errlen, "the body does not decode: %s", why);
        return -1;
    }
    int rc = -1;
    const char *status = json_string_value (json_object_get (doc, "status"));
    size_t index = broker_verdict_status_index (status);
    if (!json_is_object (doc))
        snprintf (err, errlen, "the body is not a map");
    else
    if (!status)
        snprintf (err, errlen, "no 'status' string");
    else
    if (index == BROKER_VERDICT_STATUSES) {
        char text [40];
        common_utf8_copy (text, sizeof text, status);
        snprintf (err, errlen, "status '%s' is not a result status", text);
    }
    else
    if (header_status && *header_status && !streq (header_status, status)) {
        char text [40];
        common_utf8_copy (text, sizeof text, header_status);
        snprintf (err, errlen, "the header's status '%s' is not the body's '%s'", text, status);
    }
    else
    if (s_number_or_null (doc, "reward", &verdict->reward, err, errlen) == 0
    &&  s_number_or_null (doc, "speedup", &verdict->speedup, err, errlen) == 0) {
        bool rewarded = index < S_INVALID;
        if (rewarded && isnan (verdict->reward))
            snprintf (err, errlen, "status %s without a reward", status);
        else
        if (!rewarded && !isnan (verdict->reward))
            snprintf (err, errlen, "status %s with reward %g: it carries none", status,
                      verdict->reward);
        else
        if (index != S_OK && !isnan (verdict->speedup))
            snprintf (err, errlen, "status %s with speedup %g: only ok has one", status,
                      verdict->speedup);
        else
        if (index == S_OK && !isnan (verdict->speedup) && !(verdict->speedup > 0))
            snprintf (err, errlen, "speedup %g: must be > 0 (or null: not timed)",
                      verdict->speedup);
        else
            rc = 0;
    }
    //  What was read stays readable (the status above all), checked or not.
    if (index < BROKER_VERDICT_STATUSES)
        snprintf (verdict->status, sizeof verdict->status, "%s", status);
    json_decref (doc);
    return rc;
}

int
broker_verdict_judge (const broker_verdict_t *verdict, const common_reward_t *params,
                      char *err, size_t errlen)
{
    if (!broker_verdict_rewarded (verdict->status))
        return 0;           //  parse saw to it that it carries none
    if (!params) {
        snprintf (err, errlen, "status %s for a job that cannot be graded (its body is not a "
                  "job, or its reward settings are not valid): only invalid or internal_error "
                  "fit", verdict->status);
        return -1;
    }
    double expected;
    common_reward_for (params, verdict->status, verdict->speedup, &expected);
    bool ok = streq (verdict->status, "ok")?
              fabs (verdict->reward - expected) <= BROKER_VERDICT_TOLERANCE * fabs (expected):
              verdict->reward == expected;
    if (ok)
        return 0;
    if (streq (verdict->status, "ok"))
        snprintf (err, errlen, "reward %g is not the %g the job's reward settings give for ok "
                  "with speedup %g", verdict->reward, expected,
                  isnan (verdict->speedup)? 1.0: verdict->speedup);
    else
        snprintf (err, errlen, "reward %g is not the %g the job's reward settings give for %s",
                  verdict->reward, expected, verdict->status);
    return -1;
}

zframe_t *
broker_verdict_make (const char *message)
{
    //  The message may quote peers' header strings: jansson takes only UTF-8.
    char text [512];
    common_utf8_copy (text, sizeof text, message? message: "");
    json_t *json = json_pack ("{s:s, s:n, s:n, s:s}", "status", "internal_error", "reward",
                              "speedup", "message", text);
    char *data = NULL;
    size_t size = 0;
    zframe_t *result = NULL;
    if (json && proto_mpk_encode (json, &data, &size) == 0)
        result = zframe_new (data, size);
    free (data);
    json_decref (json);
    return result;
}

void
broker_verdict_of (json_t *doc, broker_verdict_t *verdict)
{
    verdict->status [0] = 0;
    verdict->reward = verdict->speedup = NAN;
    const char *value = json_string_value (json_object_get (doc, "status"));
    if (value) {
        size_t index = broker_verdict_status_index (value);
        snprintf (verdict->status, sizeof verdict->status, "%s",
                  index < BROKER_VERDICT_STATUSES? broker_verdict_statuses [index]: "unknown");
    }
    json_t *number = json_object_get (doc, "reward");
    if (json_is_number (number))
        verdict->reward = json_number_value (number);
    number = json_object_get (doc, "speedup");
    if (json_is_number (number))
        verdict->speedup = json_number_value (number);
}
