/*  common_task - tasks, candidates and jobs: parsed, validated, laid out.

    One parser serves disk (JSON files) and wire (msgpack maps decoded into
    jansson values by proto_mpk): the same keys either way, documented in
    docs/task-format.md. Everything from outside is checked here against the
    limits below and rejected with a one-line reason; nothing asserts.

    A job = {"task", "candidate", "eval", "reward", "tag"}.
    common_task_layout() evaluates one size of a task for a program: the
    bytes of every tensor, every scalar's value, the workspace and each
    launch's grid/block/shared/args, with overflow and limit checks.
*/
#ifndef COMMON_TASK_H
#define COMMON_TASK_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <jansson.h>
#include "common_dtype.h"
#include "common_init.h"
#include "common_expr.h"

//  Limits on what a job may ask for (docs/task-format.md lists them).
#define TASK_MAX_SOURCE       (1u << 20)    //  bytes of one program's source
#define TASK_MAX_NAME         128           //  bytes of a name or kernel symbol
#define TASK_MAX_ARGS         64            //  args of a task
#define TASK_MAX_DIMS         8             //  dims of a tensor shape
#define TASK_MAX_SIZES        32            //  entries of "sizes"
#define TASK_MAX_SIZE_VARS    16            //  names in one size
#define TASK_MAX_LAUNCHES     64            //  launches of a program
#define TASK_MAX_OPTIONS      32            //  compiler options of a program
#define TASK_MAX_OPTION_LEN   256           //  bytes of one option
#define TASK_MAX_TRIALS       100           //  correctness trials per size
#define TASK_MAX_TIMED        10000         //  timed trials
#define TASK_MAX_TAG          256           //  bytes of a tag
#define TASK_DEFAULT_MAX_TENSOR_BYTES  (64ull << 30)   //  all tensors + workspace of one size

typedef enum {
    ARG_INPUT = 0, ARG_OUTPUT, ARG_INOUT, ARG_SCALAR
} common_arg_kind_t;

//  One parameter of the task's kernels.
typedef struct {
    char *name;                 //  identifier, unique in the task
    common_arg_kind_t kind;     //  input, output, inout, scalar
    common_dtype_t dtype;       //  element or scalar type
    char *shape[TASK_MAX_DIMS]; //  tensors: one expression per dim
    size_t ndims;               //  tensors: dims used (0 = one element)
    common_init_t init;         //  input/inout: distribution (default normal(0,1))
    bool value_is_expr;         //  scalar: value is an integer expression
    char *value_expr;           //  scalar: the expression (when value_is_expr)
    double value;               //  scalar: the number (when not value_is_expr)
} common_arg_t;

//  One call of a kernel (a C function on the CPU backend).
typedef struct {
    char *kernel;               //  symbol name
    char *grid[3];              //  expressions, default "1"
    char *block[3];             //  expressions, default "1"
    char *shared;               //  dynamic shared memory bytes, default "0"
    char **args;                //  arg names (task args or "workspace")
    size_t nargs;               //  entries in args
    bool args_given;            //  false: task args in order (+ workspace)
} common_launch_t;

//  A candidate, reference or baseline: source plus how to launch it.
typedef struct {
    char *source;               //  C or CUDA C (or PTX when lang is "ptx")
    char *lang;                 //  "c", "cuda", "ptx"...; default: the backend's first (NULL only without a catalog, common_backend)
    char **options;             //  compiler options, checked by the backend
    size_t noptions;            //  entries in options
    char *workspace;            //  expression for scratch bytes, NULL = none
    common_launch_t *launches;  //  at least one
    size_t nlaunches;           //  entries in launches
    char *name;                 //  optional label ("name"), NULL when absent
} common_program_t;

//  One entry of "sizes": names with their values.
typedef struct {
    char *names[TASK_MAX_SIZE_VARS];    //  size names
    int64_t values[TASK_MAX_SIZE_VARS]; //  their values
    size_t nvars;                       //  entries used
} common_size_t;

//  A module task's settings (the task's "python" object, docs/pytorch-tasks.md).
typedef struct {
    common_dtype_t dtype;       //  cast floating inputs and parameters to it; DTYPE_INVALID = as made
    char *entry;                //  the reference's class or function (default "Model")
    char *candidate_entry;      //  what the candidate defines (default "ModelNew", or entry for a function)
    char *kernel;               //  "triton", "cuda", "any" (default) or "torch"
    double library_share_max;   //  above it the candidate is a wrapper (default 0.5)
    char *baseline;             //  "eager" (default) or "compile"
} common_module_t;

//  A self-contained task.
typedef struct {
    char *name;                 //  task name
    char *backend;              //  target: "cpu", "cuda" (common_backend)
    bool is_module;             //  its programs are modules (a PyTorch task): no args, launches
    common_module_t module;     //  is_module: the "python" settings
    common_arg_t *args;         //  parameters in order
    size_t nargs;               //  entries in args
    common_size_t *sizes;       //  test sizes
    size_t nsizes;              //  entries in sizes
    size_t timing_size;         //  index into sizes for timing
    double atol, rtol;          //  tolerance (defaults 1e-5, modules 1e-2); integers compare exactly as integers
    bool exact;                 //  tolerance.exact: outputs must equal the reference's bit for bit
    common_program_t reference; //  required
    common_program_t *baseline; //  optional; NULL = time against reference
    char *bytes_expr;           //  "bytes": bytes moved, for the roofline; NULL when absent
} common_task_t;

//  Evaluation settings ("eval" of a job).
typedef struct {
    bool seed_given;            //  false: the evaluator draws a fresh seed
    uint64_t seed;              //  input seed (echoed in the result)
    uint32_t trials;            //  correctness trials per size (default 3)
    uint32_t warmup;            //  warm-up runs before timing (default 2)
    uint32_t timed;             //  timed trials (default 10)
    double timeout_s;           //  wall-clock budget for the runs (default 10)
    double compile_timeout_s;   //  budget per compile (default 30)
    bool profile;               //  collect a profile (default true)
    bool check_sizes_only;      //  skip timing (default false: time when correct)
    uint32_t feedback_bytes;    //  bound on the result's feedback text (default 2048, 0 = none)
} common_eval_t;

//  Reward parameters ("reward" of a job). Failure values must be <= 0 and
//  clip > 0, so no failure ever outscores a correct kernel (whose reward is
//  always > 0).
typedef struct {
    double compile_error;       //  default -1.0
    double incorrect;           //  default -0.5
    double runtime_error;       //  default -0.5
    double timeout;             //  default -0.5
    double clip;                //  speedup clip, default 2.0
    bool log_shape;             //  "shape": "log" -> log(1+min(speedup,clip)); default "linear" -> min(speedup,clip)
} common_reward_t;

//  A whole job.
typedef struct {
    common_task_t *task;        //  owned
    common_program_t *candidate;//  owned
    common_eval_t eval;         //  settings with defaults filled
    common_reward_t reward;     //  parameters with defaults filled
    char *tag;                  //  caller's tag, may be NULL
} common_job_t;

//  --- parsing (jansson values; JSON on disk, msgpack on the wire) ---
//  Each returns NULL with a one-line reason in err on any invalid input.
common_task_t *common_task_from_json (json_t *json, char *err, size_t errlen);
common_program_t *common_program_from_json (json_t *json, const char *backend, char *err, size_t errlen);
common_job_t *common_job_from_json (json_t *json, char *err, size_t errlen);
//  Fill defaults, then override from an "eval" / "reward" object (NULL: defaults only).
int common_eval_from_json (json_t *json, common_eval_t *eval, char *err, size_t errlen);
int common_reward_from_json (json_t *json, common_reward_t *reward, char *err, size_t errlen);

void common_task_destroy (common_task_t **self_p);
void common_program_destroy (common_program_t **self_p);
void common_job_destroy (common_job_t **self_p);

//  Check that a program fits its task: every launch arg names a task arg or
//  "workspace" (only when the program has a workspace), expressions parse
//  over the task's size names. 0 or -1 with a reason.
int common_program_check (const common_task_t *task, const common_program_t *program,
                          char *err, size_t errlen);

//  --- layout of one size ---
//  One evaluated launch.
typedef struct {
    const char *kernel;         //  borrowed from the program
    int64_t grid[3], block[3];  //  evaluated (>= 1 each)
    int64_t shared;             //  evaluated (>= 0)
    int32_t args[TASK_MAX_ARGS + 1];  //  per call arg: task arg index, or -1 for workspace
    size_t nargs;               //  entries in args
} common_launch_layout_t;

//  Everything evaluated for one (task, program, size).
typedef struct {
    size_t size_index;          //  which entry of sizes
    uint64_t count[TASK_MAX_ARGS];   //  tensors: elements (1 for scalars)
    uint64_t bytes[TASK_MAX_ARGS];   //  tensors: bytes (0 for scalars)
    int64_t dims[TASK_MAX_ARGS][TASK_MAX_DIMS]; //  tensors: evaluated dims
    double scalar[TASK_MAX_ARGS];    //  scalars: value (integer expressions converted)
    int64_t scalar_int[TASK_MAX_ARGS]; //  scalars: value as integer (for integer dtypes)
    uint64_t workspace_bytes;   //  0 = none
    uint64_t total_bytes;       //  all tensors + workspace
    common_launch_layout_t launches[TASK_MAX_LAUNCHES];
    size_t nlaunches;           //  entries in launches
} common_layout_t;

//  Evaluate size size_index of task for program. Fails (-1, reason) on a
//  negative or overflowing dim, a zero block/grid, a total over max_bytes,
//  an expression error. The layout is heap-free and can be copied.
int common_task_layout (const common_task_t *task, const common_program_t *program,
                        size_t size_index, uint64_t max_bytes,
                        common_layout_t *layout, char *err, size_t errlen);

//  Size variables of size_index as expression variables (borrowed names).
size_t common_task_size_vars (const common_task_t *task, size_t size_index,
                              common_expr_var_t *vars, size_t max);

//  Name of a kind ("input").
const char *common_arg_kind_name (common_arg_kind_t kind);

//  --- files ---
//  Load a JSON file with a size bound; NULL with a reason.
json_t *common_json_load_file (const char *path, size_t max_bytes, char *err, size_t errlen);

#endif
