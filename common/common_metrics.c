/*  common_metrics - a registry of Prometheus metrics for kgym's processes.

    Families live in a singly linked list in registration order (the order
    of the exposition); each family holds up to COMMON_METRICS_MAX_SERIES
    series. A series' value is a double kept as its bits in an atomic
    uint64_t (compare-and-swap to add); a histogram series keeps one atomic
    count per bucket (not cumulative: cumulated at render time, which also
    gives _count, so _count always equals the +Inf bucket) and its sum.
*/
#include "common_metrics.h"
#include "common_util.h"
#include "common_log.h"
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

const double common_metrics_default_buckets [] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600
};
const size_t common_metrics_default_nbuckets =
    sizeof (common_metrics_default_buckets) / sizeof (common_metrics_default_buckets [0]);

struct common_series_t {
    common_metric_t *metric;                //  the family (for the type and bounds)
    char *values [COMMON_METRICS_MAX_LABELS]; //  label values, in the family's order
    _Atomic uint64_t bits;                  //  counter/gauge value, as double bits
    _Atomic uint64_t sum_bits;              //  histogram sum, as double bits
    _Atomic uint64_t *buckets;              //  histogram: nbounds + 1 counts (last: +Inf)
};

struct common_metric_t {
    common_metrics_t *registry;             //  owner
    char *name;                             //  Prometheus metric name
    char *help;                             //  # HELP text
    common_metric_type_t type;              //  counter, gauge or histogram
    size_t nlabels;                         //  label names in use
    char *labels [COMMON_METRICS_MAX_LABELS]; //  label names
    double *bounds;                         //  histogram upper bounds, ascending
    size_t nbounds;                         //  ... how many (+Inf not counted)
    pthread_mutex_t mutex;                  //  guards series and nseries
    common_series_t *series [COMMON_METRICS_MAX_SERIES]; //  made on first use
    size_t nseries;                         //  series in use
    bool warned_full;                       //  the "too many series" warning went out
    common_metric_t *next;                  //  next family in registration order
};

struct common_metrics_t {
    pthread_mutex_t mutex;                  //  guards the family list and the health texts
    common_metric_t *first;                 //  families in registration order
    common_metric_t *last;                  //  ... the tail, to append
    bool alive;                             //  /healthz verdict (before the stall check)
    char alive_reason [256];                //  why not alive
    bool ready;                             //  /readyz verdict
    char ready_reason [256];                //  why not ready
    _Atomic uint64_t stall_ns;              //  stall bound in ns, 0: off
    _Atomic uint64_t beat_ns;               //  monotonic time of the last beat
};

static uint64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static uint64_t
s_bits (double value)
{
    uint64_t bits;
    memcpy (&bits, &value, sizeof bits);
    return bits;
}

static double
s_double (uint64_t bits)
{
    double value;
    memcpy (&value, &bits, sizeof value);
    return value;
}

//  Atomically add to a double kept as bits.
static void
s_atomic_add (_Atomic uint64_t *bits, double delta)
{
    uint64_t old = atomic_load_explicit (bits, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit (bits, &old, s_bits (s_double (old) + delta),
                                                   memory_order_relaxed, memory_order_relaxed))
        ;
}

common_metrics_t *
common_metrics_new (void)
{
    common_metrics_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    pthread_mutex_init (&self->mutex, NULL);
    snprintf (self->alive_reason, sizeof self->alive_reason, "starting");
    snprintf (self->ready_reason, sizeof self->ready_reason, "starting");
    atomic_store (&self->beat_ns, s_now_ns ());
    return self;
}

static void
s_series_destroy (common_series_t *series)
{
    for (size_t i = 0; i < COMMON_METRICS_MAX_LABELS; i++)
        free (series->values [i]);
    free ((void *) series->buckets);
    free (series);
}

static void
s_metric_destroy (common_metric_t *metric)
{
    for (size_t i = 0; i < metric->nseries; i++)
        s_series_destroy (metric->series [i]);
    for (size_t i = 0; i < metric->nlabels; i++)
        free (metric->labels [i]);
    pthread_mutex_destroy (&metric->mutex);
    free (metric->name);
    free (metric->help);
    free (metric->bounds);
    free (metric);
}

void
common_metrics_destroy (common_metrics_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    common_metrics_t *self = *self_p;
    common_metric_t *metric = self->first;
    while (metric) {
        common_metric_t *next = metric->next;
        s_metric_destroy (metric);
        metric = next;
    }
    pthread_mutex_destroy (&self->mutex);
    free (self);
    *self_p = NULL;
}

//  [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; no ':' for label names.
static bool
s_valid_name (const char *name, size_t len, bool colon)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name [i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
               || (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

//  Split "a,b" into label names; -1 when one is not valid or there are too many.
static int
s_parse_labels (const char *labels, common_metric_t *metric)
{
    if (!labels || !*labels)
        return 0;
    const char *p = labels;
    while (true) {
        const char *comma = strchr (p, ',');
        size_t len = comma? (size_t) (comma - p): strlen (p);
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        while (len > 0 && p [len - 1] == ' ')
            len--;
        if (metric->nlabels == COMMON_METRICS_MAX_LABELS || !s_valid_name (p, len, false)
        ||  (len >= 2 && p [0] == '_' && p [1] == '_')
        ||  (metric->type == COMMON_METRIC_HISTOGRAM && len == 2 && memcmp (p, "le", 2) == 0))
            return -1;
        metric->labels [metric->nlabels] = strndup (p, len);
        if (!metric->labels [metric->nlabels])
            return -1;
        metric->nlabels++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static bool
s_same_shape (common_metric_t *a, common_metric_t *b)
{
    if (a->type != b->type || a->nlabels != b->nlabels || a->nbounds != b->nbounds)
        return false;
    for (size_t i = 0; i < a->nlabels; i++)
        if (strcmp (a->labels [i], b->labels [i]) != 0)
            return false;
    for (size_t i = 0; i < a->nbounds; i++)
        if (a->bounds [i] != b->bounds [i])
            return false;
    return true;
}

static common_series_t *s_series_lookup (common_metric_t *metric, const char *const *values);

//  Register (or find) a family. NULL with a log line on a programming error.
static common_metric_t *
s_register (common_metrics_t *self, common_metric_type_t type, const char *name,
            const char *help, const char *labels, const double *bounds, size_t nbounds)
{
    if (!self || !name)
        return NULL;
    common_metric_t *metric = calloc (1, sizeof *metric);
    if (!metric)
        return NULL;
    pthread_mutex_init (&metric->mutex, NULL);
    metric->registry = self;
    metric->type = type;
    metric->name = strdup (name);
    metric->help = strdup (help? help: "");
    bool valid = metric->name && metric->help && s_valid_name (name, strlen (name), true)
              && s_parse_labels (labels, metric) == 0;
    if (valid && type == COMMON_METRIC_HISTOGRAM) {
        if (!bounds) {
            bounds = common_metrics_default_buckets;
            nbounds = common_metrics_default_nbuckets;
        }
        valid = nbounds <= COMMON_METRICS_MAX_BUCKETS;
        for (size_t i = 0; valid && i < nbounds; i++)
            valid = isfinite (bounds [i]) && (i == 0 || bounds [i] > bounds [i - 1]);
        if (valid && nbounds) {
            metric->bounds = malloc (nbounds * sizeof (double));
            valid = metric->bounds != NULL;
            if (valid)
                memcpy (metric->bounds, bounds, nbounds * sizeof (double));
        }
        metric->nbounds = nbounds;
    }
    if (!valid) {
        log_error ("metrics", "cannot register metric '%s' (labels '%s'): bad name, labels or buckets",
                   name, labels? labels: "");
        s_metric_destroy (metric);
        return NULL;
    }
    pthread_mutex_lock (&self->mutex);
    for (common_metric_t *other = self->first; other; other = other->next)
        if (strcmp (other->name, name) == 0) {
            pthread_mutex_unlock (&self->mutex);
            bool same = s_same_shape (other, metric);
            if (!same)
                log_error ("metrics", "metric '%s' registered twice with another type or labels", name);
            s_metric_destroy (metric);
            return same? other: NULL;
        }
    if (self->last)
        self->last->next = metric;
    else
        self->first = metric;
    self->last = metric;
    pthread_mutex_unlock (&self->mutex);
    //  A family without labels has exactly one series: make it now, so it
    //  shows (as 0) before anything happened.
    if (metric->nlabels == 0)
        s_series_lookup (metric, NULL);
    return metric;
}

common_metric_t *
common_metrics_counter (common_metrics_t *self, const char *name, const char *help,
                        const char *labels)
{
    return s_register (self, COMMON_METRIC_COUNTER, name, help, labels, NULL, 0);
}

common_metric_t *
common_metrics_gauge (common_metrics_t *self, const char *name, const char *help,
                      const char *labels)
{
    return s_register (self, COMMON_METRIC_GAUGE, name, help, labels, NULL, 0);
}

common_metric_t *
common_metrics_histogram (common_metrics_t *self, const char *name, const char *help,
                          const char *labels, const double *bounds, size_t nbounds)
{
    return s_register (self, COMMON_METRIC_HISTOGRAM, name, help, labels, bounds, nbounds);
}

const char *
common_metric_name (common_metric_t *metric)
{
    return metric? metric->name: NULL;
}

//  Find or make the series for these values (nlabels of them).
static common_series_t *
s_series_lookup (common_metric_t *metric, const char *const *values)
{
    for (size_t i = 0; i < metric->nlabels; i++)
        if (!values [i])
            return NULL;
    pthread_mutex_lock (&metric->mutex);
    for (size_t s = 0; s < metric->nseries; s++) {
        common_series_t *series = metric->series [s];
        size_t i = 0;
        while (i < metric->nlabels && strcmp (series->values [i], values [i]) == 0)
            i++;
        if (i == metric->nlabels) {
            pthread_mutex_unlock (&metric->mutex);
            return series;
        }
    }
    common_series_t *series = NULL;
    if (metric->nseries == COMMON_METRICS_MAX_SERIES) {
        bool warn = !metric->warned_full;
        metric->warned_full = true;
        pthread_mutex_unlock (&metric->mutex);
        if (warn)
            log_warn ("metrics", "metric '%s' has %d series: further label values are dropped",
                      metric->name, COMMON_METRICS_MAX_SERIES);
        return NULL;
    }
    series = calloc (1, sizeof *series);
    bool ok = series != NULL;
    if (ok) {
        series->metric = metric;
        for (size_t i = 0; ok && i < metric->nlabels; i++)
            ok = (series->values [i] = strdup (values [i])) != NULL;
        if (ok && metric->type == COMMON_METRIC_HISTOGRAM)
            ok = (series->buckets = calloc (metric->nbounds + 1, sizeof (_Atomic uint64_t))) != NULL;
    }
    if (ok)
        metric->series [metric->nseries++] = series;
    else
    if (series) {
        s_series_destroy (series);
        series = NULL;
    }
    pthread_mutex_unlock (&metric->mutex);
    return series;
}

common_series_t *
common_metric_series_v (common_metric_t *metric, const char *const *values)
{
    if (!metric || (metric->nlabels && !values))
        return NULL;
    return s_series_lookup (metric, values);
}

//  Read the family's label values from a va_list.
static common_series_t *
s_series_va (common_metric_t *metric, va_list args)
{
    if (!metric)
        return NULL;
    const char *values [COMMON_METRICS_MAX_LABELS];
    for (size_t i = 0; i < metric->nlabels; i++)
        values [i] = va_arg (args, const char *);
    return s_series_lookup (metric, values);
}

common_series_t *
common_metric_series (common_metric_t *metric, ...)
{
    va_list args;
    va_start (args, metric);
    common_series_t *series = s_series_va (metric, args);
    va_end (args);
    return series;
}

void
common_series_add (common_series_t *series, double delta)
{
    if (!series || !(delta >= 0) || series->metric->type == COMMON_METRIC_HISTOGRAM)
        return;
    if (series->metric->type == COMMON_METRIC_COUNTER && isinf (delta))
        return;
    s_atomic_add (&series->bits, delta);
}

void
common_series_inc (common_series_t *series)
{
    common_series_add (series, 1);
}

void
common_series_set (common_series_t *series, double value)
{
    if (!series || series->metric->type != COMMON_METRIC_GAUGE)
        return;
    atomic_store_explicit (&series->bits, s_bits (value), memory_order_relaxed);
}

void
common_series_gauge_add (common_series_t *series, double delta)
{
    if (!series || series->metric->type != COMMON_METRIC_GAUGE)
        return;
    s_atomic_add (&series->bits, delta);
}

void
common_series_observe (common_series_t *series, double value)
{
    if (!series || series->metric->type != COMMON_METRIC_HISTOGRAM || isnan (value))
        return;
    common_metric_t *metric = series->metric;
    //  First bound >= value (Prometheus buckets are "less than or equal").
    size_t lo = 0, hi = metric->nbounds;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (value <= metric->bounds [mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit (&series->buckets [lo], 1, memory_order_relaxed);
    s_atomic_add (&series->sum_bits, value);
}

double
common_series_value (common_series_t *series)
{
    if (!series)
        return 0;
    if (series->metric->type == COMMON_METRIC_HISTOGRAM) {
        uint64_t count;
        common_series_histogram (series, &count, NULL);
        return (double) count;
    }
    return s_double (atomic_load_explicit (&series->bits, memory_order_relaxed));
}

void
common_series_histogram (common_series_t *series, uint64_t *count, double *sum)
{
    uint64_t total = 0;
    if (series && series->metric->type == COMMON_METRIC_HISTOGRAM)
        for (size_t i = 0; i <= series->metric->nbounds; i++)
            total += atomic_load_explicit (&series->buckets [i], memory_order_relaxed);
    if (count)
        *count = total;
    if (sum)
        *sum = series && series->metric->type == COMMON_METRIC_HISTOGRAM?
               s_double (atomic_load_explicit (&series->sum_bits, memory_order_relaxed)): 0;
}

void
common_metric_inc (common_metric_t *metric, ...)
{
    va_list args;
    va_start (args, metric);
    common_series_inc (s_series_va (metric, args));
    va_end (args);
}

void
common_metric_add (common_metric_t *metric, double delta, ...)
{
    va_list args;
    va_start (args, delta);
    common_series_add (s_series_va (metric, args), delta);
    va_end (args);
}

void
common_metric_set (common_metric_t *metric, double value, ...)
{
    va_list args;
    va_start (args, value);
    common_series_set (s_series_va (metric, args), value);
    va_end (args);
}

void
common_metric_observe (common_metric_t *metric, double value, ...)
{
    va_list args;
    va_start (args, value);
    common_series_observe (s_series_va (metric, args), value);
    va_end (args);
}

//  --------------------------------------------------------------------------
//  Exposition

typedef struct {
    char *data;                             //  text so far, NUL-terminated
    size_t len;                             //  bytes used
    size_t cap;                             //  bytes allocated
    bool failed;                            //  an allocation failed
} s_buf_t;

static void
s_append (s_buf_t *buf, const char *text, size_t len)
{
    if (buf->failed)
        return;
    if (buf->len + len + 1 > buf->cap) {
        size_t cap = buf->cap? buf->cap: 4096;
        while (buf->len + len + 1 > cap)
            cap *= 2;
        char *data = realloc (buf->data, cap);
        if (!data) {
            buf->failed = true;
            return;
        }
        buf->data = data;
        buf->cap = cap;
    }
    memcpy (buf->data + buf->len, text, len);
    buf->len += len;
    buf->data [buf->len] = 0;
}

static void
s_puts (s_buf_t *buf, const char *text)
{
    s_append (buf, text, strlen (text));
}

static void
s_printf (s_buf_t *buf, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_printf (s_buf_t *buf, const char *fmt, ...)
{
    char line [512];
    va_list args;
    va_start (args, fmt);
    int n = vsnprintf (line, sizeof line, fmt, args);
    va_end (args);
    if (n > 0)
        s_append (buf, line, (size_t) n < sizeof line? (size_t) n: sizeof line - 1);
}

//  A value as Prometheus reads it: integers without a point, the shortest
//  text that reads back as the same double, +Inf, -Inf, NaN.
static void
s_format_value (char *out, size_t outlen, double value)
{
    if (isnan (value))
        snprintf (out, outlen, "NaN");
    else
    if (isinf (value))
        snprintf (out, outlen, value > 0? "+Inf": "-Inf");
    else
    if (fabs (value) < 9007199254740992.0 && value == (double) (int64_t) value)
        snprintf (out, outlen, "%lld", (long long) (int64_t) value);
    else {
        for (int precision = 6; precision <= 17; precision++) {
            snprintf (out, outlen, "%.*g", precision, value);
            if (strtod (out, NULL) == value)
                break;
        }
    }
}

//  HELP text: backslash and newline escaped.
static void
s_put_help (s_buf_t *buf, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p == '\\')
            s_puts (buf, "\\\\");
        else
        if (*p == '\n')
            s_puts (buf, "\\n");
        else
            s_append (buf, p, 1);
    }
}

//  A label value: backslash, double quote and newline escaped, and bytes
//  that are not UTF-8 as U+FFFD: values come from peers (a backend name in
//  a SUBMIT header), and one bad byte would make Prometheus refuse the page.
static void
s_put_label_value (s_buf_t *buf, const char *text)
{
    const unsigned char *p = (const unsigned char *) text;
    size_t left = strlen (text);
    while (left) {
        size_t used = 1;
        if (*p == '\\')
            s_puts (buf, "\\\\");
        else
        if (*p == '"')
            s_puts (buf, "\\\"");
        else
        if (*p == '\n')
            s_puts (buf, "\\n");
        else
        if ((used = common_utf8_len (p, left)))
            s_append (buf, (const char *) p, used);
        else {
            s_puts (buf, "\xef\xbf\xbd");
            used = 1;
        }
        p += used;
        left -= used;
    }
}

//  name{labels[,le="x"]} value
static void
s_put_sample (s_buf_t *buf, common_series_t *series, const char *suffix, const char *le,
              double value)
{
    common_metric_t *metric = series->metric;
    s_puts (buf, metric->name);
    s_puts (buf, suffix);
    if (metric->nlabels || le) {
        s_puts (buf, "{");
        for (size_t i = 0; i < metric->nlabels; i++) {
            s_printf (buf, "%s%s=\"", i? ",": "", metric->labels [i]);
            s_put_label_value (buf, series->values [i]);
            s_puts (buf, "\"");
        }
        if (le)
            s_printf (buf, "%sle=\"%s\"", metric->nlabels? ",": "", le);
        s_puts (buf, "}");
    }
    char text [64];
    s_format_value (text, sizeof text, value);
    s_printf (buf, " %s\n", text);
}

static void
s_put_family (s_buf_t *buf, common_metric_t *metric)
{
    static const char *types [] = { "counter", "gauge", "histogram" };
    s_printf (buf, "# HELP %s ", metric->name);
    s_put_help (buf, metric->help);
    s_printf (buf, "\n# TYPE %s %s\n", metric->name, types [metric->type]);
    pthread_mutex_lock (&metric->mutex);
    for (size_t s = 0; s < metric->nseries; s++) {
        common_series_t *series = metric->series [s];
        if (metric->type != COMMON_METRIC_HISTOGRAM) {
            s_put_sample (buf, series, "", NULL, common_series_value (series));
            continue;
        }
        uint64_t cumulative = 0;
        char le [64];
        for (size_t i = 0; i <= metric->nbounds; i++) {
            cumulative += atomic_load_explicit (&series->buckets [i], memory_order_relaxed);
            if (i < metric->nbounds)
                s_format_value (le, sizeof le, metric->bounds [i]);
            else
                snprintf (le, sizeof le, "+Inf");
            s_put_sample (buf, series, "_bucket", le, (double) cumulative);
        }
        s_put_sample (buf, series, "_sum", NULL,
                      s_double (atomic_load_explicit (&series->sum_bits, memory_order_relaxed)));
        s_put_sample (buf, series, "_count", NULL, (double) cumulative);
    }
    pthread_mutex_unlock (&metric->mutex);
}

//  One process_* family with a single unlabelled sample.
static void
s_put_process (s_buf_t *buf, const char *name, const char *type, const char *help, double value)
{
    char text [64];
    s_format_value (text, sizeof text, value);
    s_printf (buf, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, type, name, text);
}

//  The usual process_* figures, as the Prometheus client libraries give them.
static void
s_put_process_figures (s_buf_t *buf)
{
    long ticks = sysconf (_SC_CLK_TCK);
    long page = sysconf (_SC_PAGESIZE);
    char stat [1024] = "";
    FILE *file = fopen ("/proc/self/stat", "r");
    if (file) {
        if (!fgets (stat, sizeof stat, file))
            stat [0] = 0;
        fclose (file);
    }
    //  Fields after "(comm)": state is field 3 (a letter, skipped); utime 14,
    //  stime 15, num_threads 20, starttime 22, vsize 23, rss 24.
    char *p = strrchr (stat, ')');
    unsigned long long field [25] = { 0 };
    if (p && ticks > 0 && page > 0) {
        p += 2;
        int index = 3;
        while (*p && index < 25) {
            char *end;
            field [index] = strtoull (p, &end, 10);
            p = end;
            while (*p == ' ')
                p++;
            if (index == 3)
                while (*p && *p != ' ')
                    p++;
            index++;
        }
        //  Start time: starttime counts ticks since boot; boot time is now
        //  less CLOCK_BOOTTIME (no /proc/stat, which hardened units hide).
        struct timespec real, boot;
        clock_gettime (CLOCK_REALTIME, &real);
        clock_gettime (CLOCK_BOOTTIME, &boot);
        double btime = (double) (real.tv_sec - boot.tv_sec) + (real.tv_nsec - boot.tv_nsec) / 1e9;
        s_put_process (buf, "process_cpu_seconds_total", "counter",
                       "Total user and system CPU time spent in seconds.",
                       (double) (field [14] + field [15]) / (double) ticks);
        s_put_process (buf, "process_resident_memory_bytes", "gauge",
                       "Resident memory size in bytes.", (double) field [24] * (double) page);
        s_put_process (buf, "process_virtual_memory_bytes", "gauge",
                       "Virtual memory size in bytes.", (double) field [23]);
        s_put_process (buf, "process_start_time_seconds", "gauge",
                       "Start time of the process since unix epoch in seconds.",
                       btime + (double) field [22] / (double) ticks);
        s_put_process (buf, "process_threads", "gauge", "Number of OS threads in the process.",
                       (double) field [20]);
    }
    DIR *dir = opendir ("/proc/self/fd");
    if (dir) {
        size_t fds = 0;
        struct dirent *entry;
        while ((entry = readdir (dir)))
            if (entry->d_name [0] != '.')
                fds++;
        closedir (dir);
        //  Less the descriptor of the listing itself.
        s_put_process (buf, "process_open_fds", "gauge", "Number of open file descriptors.",
                       (double) (fds? fds - 1: 0));
    }
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) == 0)
        s_put_process (buf, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                       limit.rlim_cur == RLIM_INFINITY? INFINITY: (double) limit.rlim_cur);
}

char *
common_metrics_get_text (common_metrics_t *self)
{
    if (!self)
        return NULL;
    s_buf_t buf = { NULL, 0, 0, false };
    pthread_mutex_lock (&self->mutex);
    for (common_metric_t *metric = self->first; metric; metric = metric->next)
        s_put_family (&buf, metric);
    pthread_mutex_unlock (&self->mutex);
    s_put_process_figures (&buf);
    if (buf.failed || !buf.data) {
        free (buf.data);
        return NULL;
    }
    return buf.data;
}

//  --------------------------------------------------------------------------
//  Health

static void
s_set_verdict (common_metrics_t *self, bool *flag, char *text, size_t textlen,
               bool value, const char *reason)
{
    pthread_mutex_lock (&self->mutex);
    *flag = value;
    snprintf (text, textlen, "%s", reason && *reason? reason: value? "ok": "not ok");
    pthread_mutex_unlock (&self->mutex);
}

void
common_metrics_set_alive (common_metrics_t *self, bool alive, const char *reason)
{
    if (self)
        s_set_verdict (self, &self->alive, self->alive_reason, sizeof self->alive_reason,
                       alive, reason);
}

void
common_metrics_set_ready (common_metrics_t *self, bool ready, const char *reason)
{
    if (self)
        s_set_verdict (self, &self->ready, self->ready_reason, sizeof self->ready_reason,
                       ready, reason);
}

void
common_metrics_set_stall (common_metrics_t *self, double stall_s)
{
    if (!self)
        return;
    common_metrics_beat (self);
    atomic_store (&self->stall_ns, stall_s > 0? (uint64_t) (stall_s * 1e9): 0);
}

void
common_metrics_beat (common_metrics_t *self)
{
    if (self)
        atomic_store_explicit (&self->beat_ns, s_now_ns (), memory_order_relaxed);
}

bool
common_metrics_alive (common_metrics_t *self, char *reason, size_t reasonlen)
{
    if (!self)
        return false;
    pthread_mutex_lock (&self->mutex);
    bool alive = self->alive;
    if (reason && reasonlen)
        snprintf (reason, reasonlen, "%s", alive? "ok": self->alive_reason);
    pthread_mutex_unlock (&self->mutex);
    uint64_t stall = atomic_load (&self->stall_ns);
    uint64_t since = s_now_ns () - atomic_load_explicit (&self->beat_ns, memory_order_relaxed);
    if (alive && stall && since > stall) {
        alive = false;
        if (reason && reasonlen)
            snprintf (reason, reasonlen, "stalled: main loop silent for %.1f s (limit %.1f s)",
                      (double) since / 1e9, (double) stall / 1e9);
    }
    return alive;
}

bool
common_metrics_ready (common_metrics_t *self, char *reason, size_t reasonlen)
{
    if (!self)
        return false;
    pthread_mutex_lock (&self->mutex);
    bool ready = self->ready;
    if (reason && reasonlen)
        snprintf (reason, reasonlen, "%s", ready? "ok": self->ready_reason);
    pthread_mutex_unlock (&self->mutex);
    return ready;
}
