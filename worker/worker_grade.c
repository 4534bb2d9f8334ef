/*  worker_grade - the grading core: judging what a backend's runs produced.  */
#include "worker_grade.h"
#include "common_compare.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
worker_grade_tolerance (const common_task_t *task, worker_grade_tolerance_t *tol)
{
    tol->atol = task->atol;
    tol->rtol = task->rtol;
    tol->exact = task->exact;
    tol->threads = 1;           //  the caller's to raise
}

static void
s_mismatch (worker_outcome_t *out, const char *arg, uint32_t size_index, uint32_t trial,
            uint64_t index, double expected, double got)
{
    if (out->nmismatches >= WORKER_MISMATCH_KEEP)
        return;
    worker_mismatch_t *m = &out->mismatches [out->nmismatches++];
    snprintf (m->arg, sizeof m->arg, "%s", arg);
    m->size_index = size_index;
    m->trial = trial;
    m->index = index;
    m->expected = expected;
    m->got = got;
}

int
worker_grade_check (worker_outcome_t *out, const worker_grade_tensor_t *tensors, size_t n,
                    const worker_grade_tolerance_t *tol, uint32_t size_index, uint32_t trial,
                    const char *when)
{
    //  Inputs first: a candidate that wrote into them is wrong whatever it output.
    for (size_t i = 0; i < n; i++) {
        const worker_grade_tensor_t *t = &tensors [i];
        if (t->kind != ARG_INPUT)
            continue;
        size_t esize = common_dtype_size (t->dtype);
        if (memcmp (t->before, t->got, t->count * esize) == 0)
            continue;
        common_compare_t cmp;
        common_compare_bits (t->dtype, t->before, t->got, t->count, &cmp);
        if (cmp.nfirst)
            s_mismatch (out, t->name, size_index, trial, cmp.first [0].index,
                        cmp.first [0].expected, cmp.first [0].got);
        out->bad_elements = cmp.bad;
        worker_outcome_fail (out, STATUS_INCORRECT, "input '%s' was modified by the candidate "
                             "(size %u, %s)", t->name, size_index, when);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const worker_grade_tensor_t *t = &tensors [i];
        if (t->kind != ARG_OUTPUT && t->kind != ARG_INOUT)
            continue;
        common_compare_t cmp;
        common_compare_threads (t->dtype, t->expected, t->got, t->count, tol->atol, tol->rtol,
                                tol->exact, tol->threads, &cmp);
        if (cmp.max_abs > out->max_abs)
            out->max_abs = cmp.max_abs;
        if (cmp.max_rel > out->max_rel)
            out->max_rel = cmp.max_rel;
        if (!cmp.bad)
            continue;
        for (size_t k = 0; k < cmp.nfirst; k++)
            s_mismatch (out, t->name, size_index, trial, cmp.first [k].index,
                        cmp.first [k].expected, cmp.first [k].got);
        out->bad_elements = cmp.bad;
        worker_outcome_fail (out, STATUS_INCORRECT, "output '%s' wrong in %zu of %zu elements "
                             "(size %u, %s)", t->name, cmp.bad, cmp.count, size_index, when);
        return -1;
    }
    return 0;
}

int
worker_grade_reference (worker_outcome_t *out, const worker_grade_tensor_t *tensors, size_t n,
                        uint32_t size_index, unsigned threads)
{
    for (size_t i = 0; i < n; i++) {
        const worker_grade_tensor_t *t = &tensors [i];
        if (t->kind != ARG_OUTPUT && t->kind != ARG_INOUT)
            continue;
        //  Compared with itself, only NaN (poison never overwritten) fails.
        size_t nans = common_compare_nans_threads (t->dtype, t->expected, t->count, threads);
        if (nans) {
            worker_outcome_fail (out, STATUS_INVALID, "the task's reference left %zu elements of "
                                 "'%s' NaN or unwritten (size %u)", nans, t->name, size_index);
            return -1;
        }
    }
    return 0;
}

static int
s_compare_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double
s_median_sorted (const double *v, size_t n)
{
    return n % 2? v [n / 2]: 0.5 * (v [n / 2 - 1] + v [n / 2]);
}

void
worker_grade_timing (worker_timing_t *timing, double *samples_us, size_t n)
{
    memset (timing, 0, sizeof *timing);
    if (n == 0)
        return;
    qsort (samples_us, n, sizeof (double), s_compare_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += samples_us [i];
    double mean = sum / (double) n;
    double var = 0;
    for (size_t i = 0; i < n; i++)
        var += (samples_us [i] - mean) * (samples_us [i] - mean);
    timing->n = (uint32_t) n;
    timing->mean_us = mean;
    timing->std_us = n > 1? sqrt (var / (double) (n - 1)): 0;
    timing->min_us = samples_us [0];
    timing->max_us = samples_us [n - 1];
    timing->median_us = s_median_sorted (samples_us, n);
    //  Outliers by the median absolute deviation: robust where the standard
    //  deviation is not (one preempted run can double it).
    double *dev = malloc (n * sizeof (double));
    if (!dev)
        return;
    for (size_t i = 0; i < n; i++)
        dev [i] = fabs (samples_us [i] - timing->median_us);
    qsort (dev, n, sizeof (double), s_compare_double);
    double mad = s_median_sorted (dev, n);
    free (dev);
    for (size_t i = 0; i < n && mad > 0; i++)
        if (fabs (samples_us [i] - timing->median_us) > 3 * 1.4826 * mad)
            timing->outliers++;
}

//  A distribution-free ~95% interval for the median of sorted v: order
//  statistics n/2 -+ 0.98 sqrt(n) (the binomial's normal approximation).
static void
s_median_interval (const double *v, size_t n, double *lo, double *hi)
{
    double half = 0.98 * sqrt ((double) n);
    double mid = (double) (n - 1) / 2.0;
    long l = (long) floor (mid - half), h = (long) ceil (mid + half);
    *lo = v [l < 0? 0: l];
    *hi = v [h >= (long) n? (long) n - 1: h];
}

double
worker_grade_speedup (double *cand_us, size_t ncand, double *base_us, size_t nbase,
                      double *lo, double *hi)
{
    if (lo)
        *lo = 0;
    if (hi)
        *hi = 0;
    if (!ncand || !nbase)
        return 0;
    qsort (cand_us, ncand, sizeof (double), s_compare_double);
    qsort (base_us, nbase, sizeof (double), s_compare_double);
    double cand = s_median_sorted (cand_us, ncand), base = s_median_sorted (base_us, nbase);
    if (cand <= 0)
        return 0;
    double speedup = base / cand;
    if (lo && hi) {
        double clo, chi, blo, bhi;
        s_median_interval (cand_us, ncand, &clo, &chi);
        s_median_interval (base_us, nbase, &blo, &bhi);
        if (clo > 0 && blo > 0) {
            //  The two medians vary independently: their relative
            //  half-widths add in quadrature on the log scale.
            double down = hypot (log (chi / cand), log (base / blo));
            double up = hypot (log (cand / clo), log (bhi / base));
            *lo = speedup * exp (-down);
            *hi = speedup * exp (up);
        }
    }
    return speedup;
}

double
worker_grade_speedup_paired (const double *cand_us, const double *base_us, size_t n, double *lo, double *hi)
{
    if (lo)
        *lo = 0;
    if (hi)
        *hi = 0;
    double *ratio = n? malloc (n * sizeof (double)): NULL;
    if (!ratio)
        return 0;
    //  Runs 2k and 2k + 1 make a round, one in each order: the geometric mean
    //  of their ratios leaves out what going second costs (or gains). A last
    //  run without its other half is left out, unless it is the only one.
    size_t m = 0;
    for (size_t k = 0; k + 1 < n; k += 2)
        if (cand_us [k] > 0 && base_us [k] > 0 && cand_us [k + 1] > 0 && base_us [k + 1] > 0)
            ratio [m++] = sqrt ((base_us [k] / cand_us [k]) * (base_us [k + 1] / cand_us [k + 1]));
    if (n == 1 && cand_us [0] > 0 && base_us [0] > 0)
        ratio [m++] = base_us [0] / cand_us [0];
    double speedup = 0;
    if (m) {
        qsort (ratio, m, sizeof (double), s_compare_double);
        speedup = s_median_sorted (ratio, m);
        if (lo && hi)
            s_median_interval (ratio, m, lo, hi);
    }
    free (ratio);
    return speedup;
}

void
worker_grade_stop_init (worker_grade_stop_t *rule, uint32_t max_runs, double clip)
{
    memset (rule, 0, sizeof *rule);
    rule->max_runs = max_runs;
    rule->min_runs = WORKER_GRADE_STOP_MIN < max_runs? WORKER_GRADE_STOP_MIN: max_runs;
    rule->precision = WORKER_GRADE_STOP_PRECISION;
    rule->clip = clip > 0 && isfinite (clip)? clip: 0;
    rule->floor = WORKER_GRADE_STOP_FLOOR;
    rule->margin = WORKER_GRADE_STOP_MARGIN;
    rule->next_check = 0;               //  first looked at after min_runs runs
}

worker_grade_stop_why_t
worker_grade_stop_judge (const worker_grade_stop_t *rule, double lo, double speedup, double hi)
{
    if (!(speedup > 0) || !(lo > 0) || !(hi >= lo) || !isfinite (hi))
        return GRADE_STOP_NONE;
    if (rule->clip > 0 && lo >= rule->clip)
        return GRADE_STOP_CLIPPED;
    if (rule->floor > 0 && hi <= rule->floor)
        return GRADE_STOP_SETTLED;
    if (rule->precision > 0
    &&  hi <= speedup * (1 + rule->precision) && lo >= speedup * (1 - rule->precision))
        return GRADE_STOP_PRECISE;
    return GRADE_STOP_NONE;
}

//  Whether the rule looks at its interval after n runs: 1 yes (and when
//  next), 0 not yet, -1 the maximum is reached.
static int
s_stop_looks (worker_grade_stop_t *rule, uint32_t n, uint32_t nbase, uint32_t least)
{
    if (n >= rule->max_runs)
        return -1;
    if (n < least || n < rule->next_check || nbase == 0)
        return 0;
    rule->next_check = n < 32? n + 1: n + n / 16;
    return 1;
}

worker_grade_stop_why_t
worker_grade_stop_check_paired (worker_grade_stop_t *rule, const double *cand_us, const double *base_us,
                                uint32_t n)
{
    //  Looked at on whole rounds only (a run without its other half adds
    //  nothing), from the minimum's last whole round: 4 runs for 5.
    uint32_t least = rule->min_runs > 2? rule->min_runs & ~1u: rule->min_runs;
    if (n % 2 && n < rule->max_runs)
        return GRADE_STOP_NONE;
    //  One round, far past a line: a candidate 100x slower (or faster) than
    //  the baseline needs no second round to say so.
    if (n == 2 && n < least && n < rule->max_runs && rule->margin >= 1) {
        double ratio = worker_grade_speedup_paired (cand_us, base_us, n, NULL, NULL);
        if (rule->clip > 0 && isfinite (ratio) && ratio >= rule->clip * rule->margin)
            return GRADE_STOP_CLIPPED;
        if (rule->floor > 0 && ratio > 0 && ratio <= rule->floor / rule->margin)
            return GRADE_STOP_SETTLED;
        return GRADE_STOP_NONE;
    }
    int looks = s_stop_looks (rule, n, n, least);
    if (looks <= 0)
        return looks < 0? GRADE_STOP_MAX_RUNS: GRADE_STOP_NONE;
    double lo, hi;
    double speedup = worker_grade_speedup_paired (cand_us, base_us, n, &lo, &hi);
    worker_grade_stop_why_t why = worker_grade_stop_judge (rule, lo, speedup, hi);
    //  Precise only over three rounds at least: two rounds' ratios within 1%
    //  of each other by chance would stop it (clipped and settled ask the
    //  whole interval to lie far from the speedup's line, two rounds do).
    if (why == GRADE_STOP_PRECISE && n / 2 < 3)
        return GRADE_STOP_NONE;
    return why;
}

worker_grade_stop_why_t
worker_grade_stop_check_n (worker_grade_stop_t *rule, const double *cand_us, uint32_t ncand,
                           const double *base_us, uint32_t nbase)
{
    uint32_t n = ncand;
    int looks = s_stop_looks (rule, n, nbase, rule->min_runs);
    if (looks <= 0)
        return looks < 0? GRADE_STOP_MAX_RUNS: GRADE_STOP_NONE;
    double *copy = malloc (((size_t) ncand + nbase) * sizeof (double));
    if (!copy)
        return GRADE_STOP_NONE;         //  keep timing: the maximum still ends it
    memcpy (copy, cand_us, ncand * sizeof (double));
    memcpy (copy + ncand, base_us, nbase * sizeof (double));
    double lo, hi;
    double speedup = worker_grade_speedup (copy, ncand, copy + ncand, nbase, &lo, &hi);
    free (copy);
    return worker_grade_stop_judge (rule, lo, speedup, hi);
}

bool
worker_grade_stop_baseline (const worker_grade_stop_t *rule, const double *base_us, uint32_t n)
{
    uint32_t least = rule->min_runs < rule->max_runs? rule->min_runs: rule->max_runs;
    if (n < least || n == 0 || !(rule->precision > 0))
        return false;
    double *copy = malloc (2 * (size_t) n * sizeof (double));
    if (!copy)
        return false;
    memcpy (copy, base_us, n * sizeof (double));
    memcpy (copy + n, base_us, n * sizeof (double));
    //  Against itself: the ratio is 1, its interval sqrt 2 times the median's own.
    double lo, hi;
    worker_grade_speedup (copy, n, copy + n, n, &lo, &hi);
    free (copy);
    return lo > 0 && hi <= 1 + rule->precision && lo >= 1 - rule->precision;
}

static const char *s_stop_names [] = { "", "precise", "clipped", "settled", "max_runs" };

const char *
worker_grade_stop_name (worker_grade_stop_why_t why)
{
    return (unsigned) why <= GRADE_STOP_MAX_RUNS? s_stop_names [why]: "";
}

worker_grade_stop_why_t
worker_grade_stop_from_name (const char *name)
{
    for (int i = 1; name && i <= GRADE_STOP_MAX_RUNS; i++)
        if (strcmp (name, s_stop_names [i]) == 0)
            return (worker_grade_stop_why_t) i;
    return GRADE_STOP_NONE;
}

void
worker_grade_run_failed (worker_outcome_t *out, worker_grade_who_t who, worker_grade_fail_t how,
                         const char *detail)
{
    static const char *names [] = { "candidate", "reference", "baseline" };
    if (how == GRADE_FAIL_OURS) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "could not run the %s: %s", names [who],
                             detail);
        return;
    }
    if (who != GRADE_CANDIDATE) {
        worker_outcome_fail (out, STATUS_INVALID, "the task's %s failed: %s", names [who], detail);
        return;
    }
    worker_outcome_fail (out, how == GRADE_FAIL_TIMEOUT? STATUS_TIMEOUT: STATUS_RUNTIME_ERROR,
                         "%s", detail);
}

void
worker_grade_first_error (const char *log, char *buf, size_t len)
{
    if (!log || !*log) {
        snprintf (buf, len, "(no compiler output)");
        return;
    }
    const char *line = strstr (log, "error");
    if (line)
        while (line > log && line [-1] != '\n')
            line--;
    else
        line = log;
    size_t n = strcspn (line, "\n");
    snprintf (buf, len, "%.*s", (int) (n < 200? n: 200), line);
}

int
worker_grade_compiled (worker_outcome_t *out, worker_grade_who_t who, const worker_grade_build_t *build)
{
    static const char *names [] = { "candidate", "reference", "baseline" };
    out->compile_s += build->seconds;
    out->cache_hit [who] = build->cache_hit;
    if (who == GRADE_CANDIDATE) {
        snprintf (out->cache_key, sizeof out->cache_key, "%s", build->key? build->key: "");
        free (out->compile_log);
        out->compile_log = build->log && *build->log? strdup (build->log): NULL;
    }
    if (build->how == GRADE_BUILD_OK)
        return 0;
    const char *detail = build->detail && *build->detail? build->detail: NULL;
    char line [256];
    worker_grade_first_error (build->log, line, sizeof line);
    if (build->how == GRADE_BUILD_OURS)
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "compiling the %s: %s", names [who],
                             detail? detail: "the compiler could not be run");
    else
    if (build->how == GRADE_BUILD_REFUSED)
        //  Whoever asked for it: an option or target kgym does not allow is no compile error.
        worker_outcome_fail (out, STATUS_INVALID, "%s%s: %s", who == GRADE_CANDIDATE? "": "the task's ",
                             names [who], detail? detail: "refused");
    else
    if (who != GRADE_CANDIDATE)
        worker_outcome_fail (out, STATUS_INVALID, "the task's %s does not compile: %s", names [who],
                             build->how == GRADE_BUILD_TIMEOUT? "timed out": line);
    else
    if (build->how == GRADE_BUILD_TIMEOUT)
        worker_outcome_fail (out, STATUS_COMPILE_ERROR, "%s", detail? detail: "compile timed out");
    else
        worker_outcome_fail (out, STATUS_COMPILE_ERROR, "compile error: %s", line);
    return -1;
}
