/*  worker_feedback - a short plain-text message about a result, for a model.  */
#include "worker_feedback.h"
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_ERRORS    3           //  compiler errors quoted
#define S_MAX_SHOWN     4           //  mismatches quoted
#define S_TAIL_SPAN     32          //  "tail": within this many of a dimension's end

//  A growing text buffer.
typedef struct {
    char *data;
    size_t len, cap;
} s_text_t;

static void
s_add (s_text_t *text, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_add (s_text_t *text, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    char buf [1024];
    int n = vsnprintf (buf, sizeof buf, fmt, args);
    va_end (args);
    if (n <= 0)
        return;
    size_t add = (size_t) n < sizeof buf? (size_t) n: sizeof buf - 1;
    if (text->len + add + 1 > text->cap) {
        size_t cap = (text->cap + add + 1) * 2;
        char *grown = realloc (text->data, cap);
        if (!grown)
            return;
        text->data = grown;
        text->cap = cap;
    }
    memcpy (text->data + text->len, buf, add);
    text->len += add;
    text->data [text->len] = 0;
}

static const char *
s_str (json_t *obj, const char *key)
{
    const char *value = json_string_value (json_object_get (obj, key));
    return value? value: "";
}

static double
s_num (json_t *obj, const char *key)
{
    json_t *value = json_object_get (obj, key);
    return json_is_number (value)? json_number_value (value): NAN;
}

//  A mismatch value (number, or "nan"/"inf" strings) as text.
static void
s_value_text (json_t *value, char *buf, size_t len)
{
    if (json_is_number (value))
        snprintf (buf, len, "%.6g", json_number_value (value));
    else
    if (json_is_string (value))
        snprintf (buf, len, "%s", json_string_value (value));
    else
        snprintf (buf, len, "?");
}

//  Source line number (1-based) into buf, or "" when out of range.
static void
s_source_line (const char *source, long line, char *buf, size_t len)
{
    buf [0] = 0;
    if (!source || line < 1)
        return;
    const char *at = source;
    for (long i = 1; i < line && at; i++) {
        at = strchr (at, '\n');
        if (at)
            at++;
    }
    if (!at || !*at)
        return;
    size_t n = strcspn (at, "\n");
    while (n && isspace ((unsigned char) *at)) {
        at++;
        n--;
    }
    snprintf (buf, len, "%.*s", (int) (n < 160? n: 160), at);
}

//  Parse "file:LINE:COL: error: msg" (gcc, clang) or "file(LINE): error: msg"
//  (NVRTC). Returns the line number and points *msg at the message, or 0.
static long
s_parse_error (const char *line, const char **msg)
{
    const char *err = strstr (line, "error");
    if (!err)
        return 0;
    *msg = err;
    const char *p = line;
    while (*p && p < err) {
        if (*p == ':' && isdigit ((unsigned char) p [1]))
            return strtol (p + 1, NULL, 10);
        if (*p == '(' && isdigit ((unsigned char) p [1]))
            return strtol (p + 1, NULL, 10);
        p++;
    }
    return -1;
}

//  The file an error line names ("dir/cuda.cu(12): error" -> "cuda.cu"),
//  into buf.
static void
s_error_file (const char *line, const char *msg, char *buf, size_t len)
{
    size_t n = strcspn (line, ":(");
    if ((size_t) (msg - line) < n)
        n = 0;
    const char *base = line;
    for (size_t i = 0; i < n; i++)
        if (line [i] == '/')
            base = line + i + 1;
    n -= (size_t) (base - line);
    snprintf (buf, len, "%.*s", (int) (n < 64? n: 64), base);
}

//  gcc's echo of the line in error ("   10 |   y[0] = ;"), or NULL.
static const char *
s_echo (const char *line)
{
    const char *p = line;
    while (*p == ' ')
        p++;
    if (!isdigit ((unsigned char) *p))
        return NULL;
    while (isdigit ((unsigned char) *p))
        p++;
    return strncmp (p, " |", 2) == 0? line: NULL;
}

static void
s_compile_error (s_text_t *text, json_t *result, const common_job_t *job)
{
    const char *log = s_str (result, "compile_log");
    const char *source = job && job->candidate? job->candidate->source: NULL;
    //  A module's (PyTorch) compile errors come from the files its extension
    //  builds wrote (load_inline's main.cpp, cuda.cu: torch adds lines of its
    //  own at their top): their line numbers are not the candidate's, so the
    //  file is named and the compiler's own echo of the line quoted.
    bool module = job && job->task && job->task->is_module;
    s_add (text, "Compile error.\n");
    int shown = 0;
    const char *line = log;
    while (line && *line && shown < S_MAX_ERRORS) {
        const char *end = strchr (line, '\n');
        size_t n = end? (size_t) (end - line): strlen (line);
        char copy [512];
        snprintf (copy, sizeof copy, "%.*s", (int) (n < sizeof copy - 1? n: sizeof copy - 1), line);
        const char *msg = NULL;
        long number = s_parse_error (copy, &msg);
        if (number && module) {
            char file [80];
            s_error_file (copy, msg, file, sizeof file);
            if (number > 0 && file [0])
                s_add (text, "%s line %ld: %s\n", file, number, msg);
            else
                s_add (text, "%s\n", msg);
            const char *next = end? end + 1: NULL;
            if (number > 0 && next && s_echo (next))
                s_add (text, "%.*s\n", (int) strcspn (next, "\n") < 200? (int) strcspn (next, "\n"): 200, next);
            shown++;
        }
        else
        if (number) {
            if (number > 0) {
                char src [200];
                s_source_line (source, number, src, sizeof src);
                s_add (text, "line %ld: %s\n", number, msg);
                if (src [0])
                    s_add (text, "    %ld | %s\n", number, src);
            }
            else
                s_add (text, "%s\n", msg);
            shown++;
        }
        line = end? end + 1: NULL;
    }
    if (!shown)
        s_add (text, "%s\n%.300s\n", s_str (result, "message"), log);
}

//  Coordinates of a flat index in dims (row-major), and whether it sits in
//  the last S_TAIL_SPAN of its innermost dimension.
static void
s_coords (uint64_t index, const int64_t *dims, size_t ndims, char *buf, size_t len,
          int64_t *inner, int64_t *inner_extent)
{
    int64_t coord [TASK_MAX_DIMS];
    uint64_t rest = index;
    for (size_t d = ndims; d-- > 0;) {
        int64_t extent = dims [d] > 0? dims [d]: 1;
        coord [d] = (int64_t) (rest % (uint64_t) extent);
        rest /= (uint64_t) extent;
    }
    size_t at = 0;
    buf [0] = 0;
    for (size_t d = 0; d < ndims && at < len; d++)
        at += (size_t) snprintf (buf + at, len - at, d? ",%lld": "%lld", (long long) coord [d]);
    *inner = ndims? coord [ndims - 1]: (int64_t) index;
    *inner_extent = ndims? dims [ndims - 1]: 0;
}

static void
s_incorrect (s_text_t *text, json_t *result, const common_job_t *job)
{
    s_add (text, "Wrong result. %s\n", s_str (result, "message"));
    json_t *mismatches = json_object_get (result, "mismatches");
    size_t count = json_array_size (mismatches);
    if (!count)
        return;
    json_t *first = json_array_get (mismatches, 0);
    const char *arg = s_str (first, "arg");
    size_t size_index = (size_t) json_integer_value (json_object_get (first, "size"));
    //  Shapes of the failing size, when the job is at hand.
    common_layout_t layout;
    bool have_layout = false;
    size_t argi = 0;
    if (job && job->task) {
        char err [128];
        have_layout = common_task_layout (job->task, job->candidate, size_index, 0, &layout,
                                          err, sizeof err) == 0;
        for (argi = 0; argi < job->task->nargs; argi++)
            if (strcmp (job->task->args [argi].name, arg) == 0)
                break;
        have_layout = have_layout && argi < job->task->nargs;
        if (have_layout) {
            const common_size_t *size = &job->task->sizes [size_index];
            s_add (text, "Failing size %zu:", size_index);
            for (size_t v = 0; v < size->nvars; v++)
                s_add (text, " %s=%lld", size->names [v], (long long) size->values [v]);
            if (size_index > 0)
                s_add (text, " (sizes before it passed)");
            s_add (text, ".\n");
        }
    }
    bool unwritten = false, all_tail = true;
    int64_t tail_from = INT64_MAX, tail_extent = 0;
    for (size_t i = 0; i < count; i++) {
        json_t *m = json_array_get (mismatches, i);
        if (strcmp (s_str (m, "arg"), arg) != 0 || (size_t) json_integer_value (json_object_get (m, "size")) != size_index)
            continue;
        uint64_t index = (uint64_t) json_integer_value (json_object_get (m, "index"));
        char where [160], expected [48], got [48];
        int64_t inner = (int64_t) index, extent = 0;
        if (have_layout)
            s_coords (index, layout.dims [argi], job->task->args [argi].ndims, where, sizeof where,
                      &inner, &extent);
        else
            snprintf (where, sizeof where, "%llu", (unsigned long long) index);
        s_value_text (json_object_get (m, "expected"), expected, sizeof expected);
        s_value_text (json_object_get (m, "got"), got, sizeof got);
        if (strcmp (got, "nan") == 0 && strcmp (expected, "nan") != 0)
            unwritten = true;
        if (i < S_MAX_SHOWN)
            s_add (text, "  %s[%s]: expected %s, got %s\n", arg, where, expected, got);
        if (extent > 0) {
            if (inner < tail_from)
                tail_from = inner;
            tail_extent = extent;
            if (extent - inner > S_TAIL_SPAN || inner == 0)
                all_tail = false;
        }
        else
            all_tail = false;
    }
    uint32_t trial = (uint32_t) json_integer_value (json_object_get (first, "trial"));
    if (trial > 0 && strstr (s_str (result, "message"), "trial"))
        s_add (text, "Earlier trials of this size passed; trial %u, with fresh inputs, failed: the kernel "
               "seems to keep state between calls (a cached answer?) instead of computing from its inputs.\n",
               trial);
    if (strstr (s_str (result, "message"), "timed run"))
        s_add (text, "It passed the correctness trials but a timed run's output was wrong: the result must "
               "not depend on earlier calls.\n");
    double bad = s_num (result, "bad_elements");
    if (all_tail && tail_extent > 0)
        s_add (text, "The mismatches cluster at the tail of the innermost dimension (from index %lld of %lld): "
               "the classic missing bound check or remainder loop when the size is not a multiple of your "
               "tile or vector width.\n", (long long) tail_from, (long long) tail_extent);
    if (unwritten)
        s_add (text, "NaN where a number was expected: those elements were never written (outputs start as NaN).\n");
    double max_abs = s_num (result, "max_abs_err");
    if (isfinite (bad) && bad > 0 && isfinite (max_abs) && max_abs > 0)
        s_add (text, "%.0f elements wrong in all; largest finite error %.3g.\n", bad, max_abs);
}

static void
s_runtime_error (s_text_t *text, json_t *result)
{
    const char *message = s_str (result, "message");
    s_add (text, "Runtime error: %s\n", message);
    struct { const char *needle, *hint; } hints[] = {
        { "SIGSEGV", "A segmentation fault: the kernel read or wrote outside its buffers or through a bad pointer; check every index against the tensor's size." },
        { "SIGBUS", "A bus error: a misaligned or out-of-range access." },
        { "SIGABRT", "The process aborted (abort() or a failed assert)." },
        { "SIGFPE", "An arithmetic fault, such as an integer division by zero." },
        { "out of memory", "The kernel exceeded its memory cap: allocate less, or nothing at all beyond the given buffers and workspace." },
        { "CPU time", "The kernel exceeded its CPU-time cap." },
        { "illegal address", "An illegal memory access on the GPU: a thread indexed outside its buffers; guard every access with the size check." },
        { "misaligned", "A misaligned access on the GPU: vector loads (float4, half2) need addresses aligned to their size; handle unaligned heads and tails with scalar code." },
        { "trap", "The kernel executed a trap (__trap or a failed device assert)." },
        { "launch", "The launch failed: check the grid, block and shared memory sizes against the device limits." },
        { "not defined", "A kernel named in the launch plan does not exist in the source: make the names match (extern \"C\" for CUDA)." },
        { "no symbol", "A kernel named in the launch plan does not exist in the source: make the names match." },
    };
    for (size_t i = 0; i < sizeof hints / sizeof hints [0]; i++)
        if (strcasestr (message, hints [i].needle)) {
            s_add (text, "%s\n", hints [i].hint);
            break;
        }
}

//  Where the time goes and one hint, from a CUDA profile when there is one.
static void
s_profile_hint (s_text_t *text, json_t *profile)
{
    json_t *kernels = json_object_get (profile, "kernels");
    if (!json_is_array (kernels) || json_array_size (kernels) == 0)
        return;
    json_t *top = NULL;
    double top_share = -1;
    size_t i;
    json_t *k;
    json_array_foreach (kernels, i, k) {
        double share = s_num (k, "share");
        if (isfinite (share) && share > top_share) {
            top_share = share;
            top = k;
        }
    }
    if (!top)
        return;
    double occupancy = s_num (top, "occupancy");
    double bandwidth = s_num (top, "dram_bw_fraction");
    s_add (text, "Most time: %s (%.0f%% of the candidate's time", s_str (top, "name"), 100 * top_share);
    if (isfinite (occupancy))
        s_add (text, ", occupancy %.0f%%", 100 * occupancy);
    if (isfinite (bandwidth))
        s_add (text, ", DRAM bandwidth %.0f%% of peak", 100 * bandwidth);
    s_add (text, ").\n");
    if (isfinite (bandwidth) && bandwidth > 0.7)
        s_add (text, "Hint: it is near the memory roofline; only moving fewer bytes (fusion, lower precision) makes it faster.\n");
    else
    if (isfinite (occupancy) && occupancy < 0.25)
        s_add (text, "Hint: occupancy is low; use fewer registers or less shared memory per block, or larger blocks.\n");
    else
    if (isfinite (bandwidth) && bandwidth < 0.3)
        s_add (text, "Hint: bandwidth is far from peak; coalesce global accesses (consecutive threads, consecutive addresses) and use vector loads.\n");
}

static void
s_ok (s_text_t *text, json_t *result)
{
    json_t *timings = json_object_get (result, "timings");
    double speedup = s_num (result, "speedup");
    json_t *cand = json_object_get (timings, "candidate");
    json_t *base = json_object_get (timings, "baseline");
    if (!isfinite (speedup)) {
        s_add (text, "Correct on every size and trial (not timed).\n");
        return;
    }
    s_add (text, "Correct. Speedup %.2fx over the %s (median %.1f us vs %.1f us, cv %.0f%%).\n",
           speedup, s_str (timings, "baseline_kind"), s_num (cand, "median_us"),
           s_num (base, "median_us"), 100 * s_num (cand, "cv"));
    json_t *profile = json_object_get (result, "profile");
    if (json_is_object (profile))
        s_profile_hint (text, profile);
    if (speedup < 1)
        s_add (text, "Hint: slower than the %s; look at memory access order and redundant work first.\n",
               s_str (timings, "baseline_kind"));
    double cv = s_num (cand, "cv");
    if (isfinite (cv) && cv > 0.2)
        s_add (text, "Timings varied (cv %.0f%%): the speedup is approximate.\n", 100 * cv);
}

char *
worker_feedback (json_t *result, const common_job_t *job, size_t max_bytes)
{
    s_text_t text = { NULL, 0, 0 };
    s_add (&text, "%s", "");
    const char *status = s_str (result, "status");
    if (strcmp (status, "ok") == 0)
        s_ok (&text, result);
    else
    if (strcmp (status, "compile_error") == 0)
        s_compile_error (&text, result, job);
    else
    if (strcmp (status, "incorrect") == 0)
        s_incorrect (&text, result, job);
    else
    if (strcmp (status, "runtime_error") == 0)
        s_runtime_error (&text, result);
    else
    if (strcmp (status, "timeout") == 0)
        s_add (&text, "Timeout: %s\nThe kernel hung or is far too slow: check loop bounds and "
               "termination, and that every thread reaches each barrier.\n", s_str (result, "message"));
    else
    if (strcmp (status, "invalid") == 0)
        s_add (&text, "The job was rejected before the kernel ran (not the kernel's fault): %s\n",
               s_str (result, "message"));
    else
        s_add (&text, "kgym failed internally; this says nothing about the kernel: %s\n",
               s_str (result, "message"));
    if (!text.data)
        return NULL;
    //  Bound it: cut at the last newline that fits, else at a UTF-8 boundary.
    if (text.len > max_bytes) {
        size_t cut = max_bytes;
        while (cut > 0 && text.data [cut - 1] != '\n')
            cut--;
        if (cut == 0) {
            cut = max_bytes;
            while (cut > 0 && ((unsigned char) text.data [cut] & 0xC0) == 0x80)
                cut--;
        }
        text.data [cut] = 0;
        text.len = cut;
    }
    //  No trailing newline in the field.
    while (text.len && text.data [text.len - 1] == '\n')
        text.data [--text.len] = 0;
    return text.data;
}
