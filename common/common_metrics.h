/*  common_metrics - a registry of Prometheus metrics for kgym's processes.

    The broker and each worker hold one registry; common_metrics_http serves
    it as Prometheus text (/metrics) with /healthz and /readyz beside it.
    Families (counter, gauge, histogram) are registered once at start-up
    with a fixed list of label names; each distinct tuple of label values is
    a series, made on first use and kept for the registry's life. Labels must
    stay small: a family holds at most COMMON_METRICS_MAX_SERIES series, and
    further tuples are dropped (with one warning), so a job id or a hash used
    as a label can never grow the registry without bound.

    This is the one place in kgym where threads share mutable state, on
    purpose: job threads bump figures and the HTTP thread reads them, and an
    actor round trip per increment would cost more than the work measured.
    Values are C11 atomics (lock-free on the hot path once a series handle is
    held); the family's series list and the registry's family list are
    guarded by mutexes. Every call below is safe from any thread.

    Typical use (a few lines per figure):

        common_metrics_t *metrics = common_metrics_new ();
        common_metric_t *done = common_metrics_counter (metrics,
            "kgym_jobs_completed_total", "Jobs answered to clients, by status.", "status");
        common_metric_inc (done, "pass");                   //  label values in order
        common_series_t *depth = common_metric_series (common_metrics_gauge (metrics,
            "kgym_queue_depth", "Jobs waiting for a worker.", NULL));
        common_series_set (depth, 12);                     //  no lookup, one atomic store
*/
#ifndef COMMON_METRICS_H
#define COMMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COMMON_METRICS_MAX_LABELS 4         //  label names per family
#define COMMON_METRICS_MAX_SERIES 128       //  label-value tuples per family
#define COMMON_METRICS_MAX_BUCKETS 32       //  histogram bounds (+Inf added)

typedef enum {
    COMMON_METRIC_COUNTER = 0,
    COMMON_METRIC_GAUGE,
    COMMON_METRIC_HISTOGRAM
} common_metric_type_t;

typedef struct common_metrics_t common_metrics_t;  //  the registry
typedef struct common_metric_t common_metric_t;    //  one family: name, help, type, label names
typedef struct common_series_t common_series_t;    //  one series: a family and label values

//  A registry, with the process_* figures (from /proc/self) rendered at
//  each scrape. Not alive (see common_metrics_set_alive) and not ready.
common_metrics_t *common_metrics_new (void);
void common_metrics_destroy (common_metrics_t **self_p);

//  Register a family, or return the one already registered under that name
//  when its type and labels match. labels: comma-separated label names
//  ("status", "gpu,UUID") or NULL. NULL for a name or labels that are not
//  valid Prometheus names, too many labels, or a clash with an existing
//  family (programming errors; logged).
common_metric_t *common_metrics_counter (common_metrics_t *self, const char *name,
                                         const char *help, const char *labels);
common_metric_t *common_metrics_gauge (common_metrics_t *self, const char *name,
                                       const char *help, const char *labels);
//  bounds: ascending upper bounds, +Inf implied; NULL for
//  common_metrics_default_buckets (0.005 s to 600 s).
common_metric_t *common_metrics_histogram (common_metrics_t *self, const char *name,
                                           const char *help, const char *labels,
                                           const double *bounds, size_t nbounds);
extern const double common_metrics_default_buckets [];
extern const size_t common_metrics_default_nbuckets;

//  The series for these label values, one const char * per label name, in
//  the order registered (none for a family without labels). Made on first
//  use. NULL when metric is NULL, a value is NULL, or the family is full;
//  every operation below ignores a NULL series, so a failed registration
//  never crashes the figure's owner.
common_series_t *common_metric_series (common_metric_t *metric, ...);
common_series_t *common_metric_series_v (common_metric_t *metric, const char *const *values);

//  Counters: add a non-negative amount (a negative one is ignored).
void common_series_add (common_series_t *series, double delta);
void common_series_inc (common_series_t *series);
//  Gauges: set, or add a signed amount.
void common_series_set (common_series_t *series, double value);
void common_series_gauge_add (common_series_t *series, double delta);
//  Histograms: count one observation.
void common_series_observe (common_series_t *series, double value);

//  Read back: a counter's or gauge's value; a histogram's count and sum.
double common_series_value (common_series_t *series);
void common_series_histogram (common_series_t *series, uint64_t *count, double *sum);

//  Shorthands: look the series up by label values (after the number, for
//  add/set/observe) and apply. For figures bumped per job or rarer; keep a
//  common_series_t for anything hotter.
void common_metric_inc (common_metric_t *metric, ...);
void common_metric_add (common_metric_t *metric, double delta, ...);
void common_metric_set (common_metric_t *metric, double value, ...);
void common_metric_observe (common_metric_t *metric, double value, ...);

//  The family's name (borrowed).
const char *common_metric_name (common_metric_t *metric);

//  The registry as Prometheus text exposition format 0.0.4: families in
//  registration order, each with # HELP and # TYPE, then process_*.
//  Caller frees. NULL when out of memory.
char *common_metrics_get_text (common_metrics_t *self);

//  Health, read by /healthz. alive false: 503 with the reason (a process
//  that is still starting, e.g. warming up CUDA, says "starting: ..."). The
//  registry starts not alive with reason "starting".
void common_metrics_set_alive (common_metrics_t *self, bool alive, const char *reason);
//  Readiness, read by /readyz (worker: connected and its backend up;
//  broker: sockets bound, store open). Starts not ready, reason "starting".
void common_metrics_set_ready (common_metrics_t *self, bool ready, const char *reason);
//  Stall detection: with stall_s > 0, /healthz also fails when
//  common_metrics_beat was not called for stall_s seconds (a wedged main
//  loop). The owner's loop calls beat once per turn (one atomic store).
void common_metrics_set_stall (common_metrics_t *self, double stall_s);
void common_metrics_beat (common_metrics_t *self);

//  The current verdicts; reason (may be NULL) gets "ok" or why not.
bool common_metrics_alive (common_metrics_t *self, char *reason, size_t reasonlen);
bool common_metrics_ready (common_metrics_t *self, char *reason, size_t reasonlen);

#endif
