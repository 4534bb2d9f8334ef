/*  client_format - results for people: the readable table behind --profile.  */
#include "client_format.h"
#include <math.h>
#include <string.h>

static double
s_num (json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    return json_is_number (value)? json_number_value (value): NAN;
}

static void
s_cell (char *buf, size_t len, double value, const char *fmt)
{
    if (isfinite (value))
        snprintf (buf, len, fmt, value);
    else
        snprintf (buf, len, "-");
}

static void
s_dims (json_t *dims, char *buf, size_t len)
{
    if (!json_is_array (dims)) {
        snprintf (buf, len, "-");
        return;
    }
    size_t at = 0;
    buf [0] = 0;
    for (size_t i = 0; i < json_array_size (dims) && at < len; i++)
        at += (size_t) snprintf (buf + at, len - at, i? "x%lld": "%lld",
                                 (long long) json_integer_value (json_array_get (dims, i)));
}

//  One program's kernels as table rows.
static void
s_kernels (json_t *kernels, const char *who, FILE *out)
{
    size_t i;
    json_t *k;
    json_array_foreach (kernels, i, k) {
        char total [32], mean [32], share [32], occ [32], bw [32], grid [48], block [48];
        s_cell (total, sizeof total, s_num (k, "total_us"), "%.1f");
        s_cell (mean, sizeof mean, s_num (k, "mean_us"), "%.1f");
        s_cell (share, sizeof share, 100 * s_num (k, "share"), "%.0f%%");
        s_cell (occ, sizeof occ, 100 * s_num (k, "occupancy"), "%.0f%%");
        s_cell (bw, sizeof bw, 100 * s_num (k, "dram_bw_fraction"), "%.0f%%");
        s_dims (json_object_get (k, "grid"), grid, sizeof grid);
        s_dims (json_object_get (k, "block"), block, sizeof block);
        const char *name = json_string_value (json_object_get (k, "name"));
        fprintf (out, "  %-10s %-28.28s %4lld %10s %10s %6s %14s %10s %5s %6s\n", who,
                 name? name: "?", (long long) json_integer_value (json_object_get (k, "launches")),
                 total, mean, share, grid, block, occ, bw);
    }
}

void
client_format_profile (json_t *result, const char *candidate, FILE *out)
{
    const char *status = json_string_value (json_object_get (result, "status"));
    char reward [32], speedup [32];
    s_cell (reward, sizeof reward, s_num (result, "reward"), "%.3f");
    s_cell (speedup, sizeof speedup, s_num (result, "speedup"), "%.2fx");
    fprintf (out, "%s: %s  reward %s  speedup %s\n", candidate? candidate: "(job)",
             status? status: "?", reward, speedup);
    const char *feedback = json_string_value (json_object_get (result, "feedback"));
    if (feedback && *feedback) {
        //  Indent every line of the feedback.
        const char *line = feedback;
        while (*line) {
            size_t n = strcspn (line, "\n");
            fprintf (out, "  | %.*s\n", (int) n, line);
            line += n;
            if (*line)
                line++;
        }
    }
    json_t *profile = json_object_get (result, "profile");
    if (!json_is_object (profile)) {
        fprintf (out, "  (no profile)\n\n");
        return;
    }
    json_t *available = json_object_get (profile, "available");
    if (json_is_false (available)) {
        const char *reason = json_string_value (json_object_get (profile, "reason"));
        fprintf (out, "  (profile unavailable: %s)\n\n", reason? reason: "no reason given");
        return;
    }
    fprintf (out, "  %-10s %-28s %4s %10s %10s %6s %14s %10s %5s %6s\n", "program", "kernel", "runs",
             "total_us", "mean_us", "share", "grid", "block", "occ", "bw");
    s_kernels (json_object_get (profile, "kernels"), "candidate", out);
    json_t *reference = json_object_get (profile, "reference");
    json_t *baseline = json_object_get (profile, "baseline");
    if (json_is_object (baseline))
        s_kernels (json_object_get (baseline, "kernels"), "baseline", out);
    if (json_is_object (reference))
        s_kernels (json_object_get (reference, "kernels"), "reference", out);
    double floor_us = s_num (profile, "roofline_floor_us");
    if (isfinite (floor_us))
        fprintf (out, "  roofline floor %.1f us for %.0f bytes; timed median %.1f us\n", floor_us,
                 s_num (profile, "bytes"), s_num (profile, "timed_median_us"));
    fprintf (out, "\n");
}
