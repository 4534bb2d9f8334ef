/*  worker_outcome - what a backend found about one candidate.

    Every backend (worker_backend.h) fills this neutral record;
    worker_eval turns it, with the job's reward parameters, into the result
    object. Keeps the backends free of JSON layout and reward policy.
*/
#ifndef WORKER_OUTCOME_H
#define WORKER_OUTCOME_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <jansson.h>

typedef enum {
    STATUS_OK = 0,
    STATUS_COMPILE_ERROR,
    STATUS_INCORRECT,
    STATUS_RUNTIME_ERROR,
    STATUS_TIMEOUT,
    STATUS_INVALID,             //  the job is malformed or asks too much: not the kernel's fault
    STATUS_INTERNAL_ERROR       //  our fault (infrastructure): never rewarded
} worker_status_t;

const char *worker_status_name (worker_status_t status);
//  The status a name ("ok", ...) stands for; internal_error for anything else.
worker_status_t worker_status_from_name (const char *name);

//  Summary of repeated timings, microseconds.
typedef struct {
    uint32_t n;                 //  samples (0 = not timed)
    double median_us, mean_us, std_us, min_us, max_us;
    uint32_t outliers;          //  samples beyond median +- 3 MADs (worker_grade_timing)
} worker_timing_t;

#define WORKER_MISMATCH_KEEP 8

//  One failing element, with where it was found.
typedef struct {
    char arg[128];              //  output (or input, when it was modified) name
    uint32_t size_index;        //  which entry of sizes
    uint32_t trial;             //  correctness trial, or timed run
    uint64_t index;             //  flat element index
    double expected, got;       //  values
} worker_mismatch_t;

typedef struct {
    worker_status_t status;     //  verdict
    char message[512];          //  one line: why (empty when ok)
    char *compile_log;          //  compiler messages of the candidate (malloc'd) or NULL
    uint64_t seed;              //  seed used
    worker_timing_t candidate;  //  candidate's timed runs
    worker_timing_t baseline;   //  baseline's (or reference's) timed runs
    const char *baseline_kind;  //  "baseline" or "reference" (static string)
    double speedup;             //  baseline median / candidate median (0 = not timed)
    double speedup_lo, speedup_hi;  //  its ~95% interval (worker_grade_speedup; 0 = none)
    const char *timing_stopped; //  why timing stopped (worker_grade_stop_name, static; candidate.n
                                //  runs were made), NULL = not timed or a fixed count
    bool retried;               //  graded twice: the first verdict (timeout, a fault) was not kept
    double max_abs, max_rel;    //  largest errors seen over all checks
    worker_mismatch_t mismatches[WORKER_MISMATCH_KEEP];
    size_t nmismatches;         //  entries used
    uint64_t bad_elements;      //  elements that failed in the failing check
    double compile_s;           //  wall time compiling (all programs)
    double run_s;               //  wall time running and checking
    bool cache_hit[3];          //  candidate, reference, baseline served from the compile cache
    char cache_key[65];         //  candidate's compile cache key (hex)
    char sandbox[512];          //  JSON object text: caps in force
    char device[256];           //  the device this job ran on, when the backend's
                                //  own words do not say it ("" = theirs)
    json_t *extra;              //  backend-specific fields (e.g. "profile"), owned, or NULL
} worker_outcome_t;

void worker_outcome_init (worker_outcome_t *outcome);
void worker_outcome_clear (worker_outcome_t *outcome);   //  frees owned parts, keeps nothing
//  Set status and a printf-style message.
void worker_outcome_fail (worker_outcome_t *outcome, worker_status_t status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#endif
