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
    unsigned threads;           //  large outputs compared on up to this many threads (0, 1: one)
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
                            uint32_t size_index, unsigned threads);

//  Summarise samples (microseconds; sorted in place): median, mean, sample
//  standard deviation, min, max, and `outliers` (samples beyond the median
//  by more than 3 median absolute deviations, kept but counted).
void worker_grade_timing (worker_timing_t *timing, double *samples_us, size_t n);

//  The speedup: baseline median over candidate median (0 when either is
//  missing). With lo and hi (may be NULL), an interval at about 95%: each
//  median's distribution-free order-statistic interval (n/2 -+ 0.98 sqrt n),
//  their relative half-widths combined in quadrature on the log scale (the
//  two medians vary independently). Samples are sorted in place.
double worker_grade_speedup (double *cand_us, size_t ncand, double *base_us, size_t nbase,
                             double *lo, double *hi);

//  The speedup of paired samples: run i's candidate and baseline timed side
//  by side, who goes first alternating from run to run, n of each. Runs 2k
//  and 2k + 1 are a round, one of each order; a round's ratio is the
//  geometric mean of its runs' ratios base_i / cand_i. The speedup is the
//  median of the rounds' ratios (0 when none is positive; n = 1: the one
//  run's ratio), with lo and hi (may be NULL) their order-statistic interval
//  at about 95% (as for one median). A change of the host's speed that
//  lasts longer than a run (another tenant, memory reclaim, clocks) moves
//  both of a pair alike and leaves their ratio; the two medians taken apart
//  would each land where the change put most of their samples. What going
//  second costs (the first call's data evicted the second's from the
//  caches: 1.3-1.8x for a 1 MB ReLU here) is cancelled within a round;
//  the runs' ratios alone would fall in two clusters, their median between
//  them by chance. Samples are not modified.
double worker_grade_speedup_paired (const double *cand_us, const double *base_us, size_t n,
                                    double *lo, double *hi);

//  --- adaptive timing: when timed runs may stop ---
//  Timed runs go on until the speedup's ~95% interval (worker_grade_speedup)
//  is tight enough or can no longer change the reward, within eval.timed
//  runs and never fewer than a minimum (docs/results.md, "Timing"):
//      precise   both ends of the interval within `precision` of the speedup
//      clipped   the interval lies wholly at or above the reward's clip: the
//                reward is the clip's whatever more runs say
//      settled   the interval's upper end is at or below `floor`: the
//                candidate is that much slower than the baseline, its reward
//                (> 0, a failure's is <= 0) within `floor` of zero either way
//      max_runs  eval.timed runs made
#define WORKER_GRADE_STOP_MIN        5       //  timed runs before any stop
#define WORKER_GRADE_STOP_PRECISION  0.01    //  +-1% relative
#define WORKER_GRADE_STOP_FLOOR      0.05    //  20x slower than the baseline
#define WORKER_GRADE_STOP_MARGIN     2.0     //  a first round alone: clipped at 2x the clip, settled at half the floor

typedef enum {
    GRADE_STOP_NONE = 0,        //  go on
    GRADE_STOP_PRECISE,
    GRADE_STOP_CLIPPED,
    GRADE_STOP_SETTLED,
    GRADE_STOP_MAX_RUNS
} worker_grade_stop_why_t;

//  The rule and where it stands.
typedef struct {
    uint32_t min_runs;          //  never fewer (capped at max_runs)
    uint32_t max_runs;          //  never more: eval.timed
    double precision;           //  relative half-width that is tight enough; 0: never
    double clip;                //  the reward's clip (reward.clip); 0: none
    double floor;               //  speedup at or below which the reward is settled; 0: never
    double margin;              //  paired runs: the first round alone stops clipped (ratio >= clip x margin)
                                //  or settled (<= floor / margin) before the minimum; 0: never
    uint32_t next_check;        //  runs at which the interval is next looked at (after min_runs)
} worker_grade_stop_t;

//  The default rule for a job of max_runs timed runs and the reward's clip
//  (its fields may be changed before the first check).
void worker_grade_stop_init (worker_grade_stop_t *rule, uint32_t max_runs, double clip);

//  After each timed run, with the samples so far of both programs
//  (microseconds, in any order; not modified; the baseline's may be counted
//  apart, a baseline timed before the candidate, worker_grade_stop_baseline):
//  whether to stop and why, from each median's interval. ncand counts the
//  runs. The interval is recomputed every run up to 32 runs, then after
//  every ~6% more (so a long series costs O(n log^2 n), not O(n^2 log n)).
worker_grade_stop_why_t worker_grade_stop_check_n (worker_grade_stop_t *rule, const double *cand_us,
                                                   uint32_t ncand, const double *base_us, uint32_t nbase);

//  The same for n paired samples (worker_grade_speedup_paired's interval),
//  looked at on whole rounds only, from the minimum's last whole round (4
//  runs for the default 5); `precise` only once three rounds (six runs) are in.
//  Before the minimum, the first round alone stops it clipped or settled
//  when its ratio lies `margin` times past the line (a 2x slip of one run
//  moves a round's ratio by sqrt 2 only).
worker_grade_stop_why_t worker_grade_stop_check_paired (worker_grade_stop_t *rule, const double *cand_us,
                                                        const double *base_us, uint32_t n);

//  A baseline timed alone, before the candidate exists (the Python
//  backend's on a GPU): enough runs once, after the rule's minimum, its
//  median's own interval is within precision / sqrt 2 (so it takes at most
//  half the speedup interval's budget, in quadrature). Its n samples so far.
bool worker_grade_stop_baseline (const worker_grade_stop_t *rule, const double *base_us, uint32_t n);

//  The rule on one interval (lo <= speedup <= hi), without the run counts:
//  precise, clipped, settled or none (tests feed it synthetic intervals).
worker_grade_stop_why_t worker_grade_stop_judge (const worker_grade_stop_t *rule, double lo,
                                                 double speedup, double hi);

//  "precise", "clipped", "settled", "max_runs" ("" for none); and back
//  (GRADE_STOP_NONE for anything else).
const char *worker_grade_stop_name (worker_grade_stop_why_t why);
worker_grade_stop_why_t worker_grade_stop_from_name (const char *name);

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
