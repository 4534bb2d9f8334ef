/*  worker_grade - the grading core: judging what a backend's runs produced.

    Everything that is not device-specific, shared by every backend (and
    linked into runners that judge on their side): whether a run's tensors
    are right (inputs unchanged bit for bit; outputs within the task's
    tolerance, integers exactly as integers, bit for bit when the task says
    `exact`), with the mismatch report; whether the reference's own answer
    is usable; timing statistics (median, mean, spread, CV, outliers) and
    the speedup with its confidence interval; and what a failed run means
    for the verdict (who is to blame: the candidate's crash or hang is its
    own, never `internal_error`), and likewise what a failed compile means.
    A backend supplies compiles, runs and buffers; this
    file decides. The reward (common_reward) and the feedback text
    (worker_feedback) are the two other parts of the core.
*/
#ifndef WORKER_GRADE_H
#define WORKER_GRADE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common_task.h"
#include "worker_outcome.h"

//  One tensor of one run, as the judge sees it.
typedef struct {
    const char *name;           //  the task arg's name
    common_arg_kind_t kind;     //  input, output or inout (scalars are skipped)
    common_dtype_t dtype;       //  element type
    uint64_t count;             //  elements
    const void *before;         //  input: what was handed in (bit for bit); else NULL
    const void *expected;       //  output, inout: the reference's answer
    const void *got;            //  what the candidate's run left
} worker_grade_tensor_t;

//  The task's tolerance.
typedef struct {
    double atol, rtol;          //  |got - expected| <= atol + rtol * |expected|
    bool exact;                 //  bit for bit instead
} worker_grade_tolerance_t;

//  The tolerance a task asks for.
void worker_grade_tolerance (const common_task_t *task, worker_grade_tolerance_t *tol);

//  Judge one run's tensors. 0 when right; -1 with out set to incorrect: which
//  tensor, how many elements, `when` ("trial 2", "timed run 7"), the first
//  mismatches (size, trial, index, expected, got). The largest errors seen
//  are kept in out either way.
int worker_grade_check (worker_outcome_t *out, const worker_grade_tensor_t *tensors, size_t n,
                        const worker_grade_tolerance_t *tol, uint32_t size_index, uint32_t trial,
                        const char *when);

//  The reference's answer (expected of every output and inout) must be
//  comparable: an element left NaN or unwritten could never be matched.
//  0 when usable; -1 with out set to invalid (the task is broken).
int worker_grade_reference (worker_outcome_t *out, const worker_grade_tensor_t *tensors, size_t n,
                            uint32_t size_index);

//  Summarise samples (microseconds; sorted in place): median, mean, sample
//  standard deviation, min, max, and `outliers` (samples beyond the median
//  by more than 3 median absolute deviations, kept but counted).
void worker_grade_timing (worker_timing_t *timing, double *samples_us, size_t n);

//  The speedup: baseline median over candidate median (0 when either is
//  missing). With lo and hi (may be NULL), a distribution-free interval at
//  about 95%: the medians' order-statistic intervals of both, combined
//  pessimistically (lo = base_lo / cand_hi, hi = base_hi / cand_lo).
//  Samples are sorted in place.
double worker_grade_speedup (double *cand_us, size_t ncand, double *base_us, size_t nbase,
                             double *lo, double *hi);

//  Who a run belonged to.
typedef enum {
    GRADE_CANDIDATE = 0,        //  the policy's kernel: its failures are its verdict
    GRADE_REFERENCE,            //  the task's reference: its failures make the job invalid
    GRADE_BASELINE              //  the task's baseline: likewise
} worker_grade_who_t;

//  How a run failed.
typedef enum {
    GRADE_FAIL_CRASH = 0,       //  died (signal, exit) or stopped answering during or between its runs
    GRADE_FAIL_TIMEOUT,         //  ran past its budget
    GRADE_FAIL_REFUSED,         //  its runner refused the call (no such kernel, bad arguments)
    GRADE_FAIL_MISBEHAVED,      //  left threads or work running, used time outside its calls
    GRADE_FAIL_OURS             //  kgym could not run it (spawn, memory): proven ours
} worker_grade_fail_t;

//  Set out's verdict for a failed run: the candidate's crash, refusal or
//  misbehaviour is runtime_error, its overrun timeout; the task's programs'
//  failures are invalid; only GRADE_FAIL_OURS is internal_error. detail is
//  the one-line reason.
void worker_grade_run_failed (worker_outcome_t *out, worker_grade_who_t who,
                              worker_grade_fail_t how, const char *detail);

//  How a program's compile ended.
typedef enum {
    GRADE_BUILD_OK = 0,         //  compiled
    GRADE_BUILD_ERROR,          //  the compiler refused the source (its log says why)
    GRADE_BUILD_TIMEOUT,        //  ran past the job's compile budget
    GRADE_BUILD_REFUSED,        //  not compiled: it asks what is not allowed (an option, a target)
    GRADE_BUILD_OURS            //  kgym could not run the compiler: proven ours
} worker_grade_build_how_t;

//  One compile, as a backend's compiler reported it.
typedef struct {
    worker_grade_build_how_t how;   //  how it ended
    const char *log;            //  the compiler's messages, may be NULL
    const char *key;            //  compile cache key (hex), may be NULL
    bool cache_hit;             //  served from the compile cache
    double seconds;             //  wall time of the compile
    const char *detail;         //  TIMEOUT, REFUSED, OURS: the one-line reason, may be NULL
} worker_grade_build_t;

//  Record one compile of who's program in out (its time, its cache hit;
//  for the candidate also its cache key and its log, the result's
//  compile_log) and, when it failed, set the verdict: the candidate's
//  compile error or overrun is compile_error (the message quotes the log's
//  first error line), its refused request invalid; a failure of the task's
//  own programs makes the job invalid; GRADE_BUILD_OURS is internal_error.
//  0 when it compiled, else -1.
int worker_grade_compiled (worker_outcome_t *out, worker_grade_who_t who,
                           const worker_grade_build_t *build);

//  The first line of a compiler's log that says "error" (else its first
//  line), at most 200 bytes, into buf; "(no compiler output)" when empty.
void worker_grade_first_error (const char *log, char *buf, size_t len);

#endif
