/*  client_import - `kgym import kernelbench`: datasets of PyTorch problems
    become kgym task files.

        kgym import kernelbench [--out DIR] [--check] [--backend cuda|cpu] [--dtype D]
                                [--kernel triton|cuda|any|torch] [--timeout S] PATH...

    A PATH is a KernelBench-format module (`.py`: a `Model`, `get_inputs`,
    `get_init_inputs` and integer constants; the CUDA-Agent-Ops-6K rows
    and KernelBook's PyTorch side use the same convention), a JSON-lines
    file whose objects carry the module in `code` (or `python_code`), or a
    folder searched for both (sorted, hidden folders and `__init__.py`
    skipped). Each problem becomes DIR/NAME.json (docs/pytorch-tasks.md;
    the naming and size rules are in docs/trainers.md). The module is read,
    never run (client_pysource); --check also grades each reference against
    itself twice with the same seed through the local evaluator, which
    needs the `python` backend.

    stdout: one JSON line per problem, {"source", "status": "imported" or
    "failed", "task", "file", "sizes"} or {"source", "status", "problem",
    "reason"}; stderr: the summary. Exit 0 when every problem was read
    (whatever came of it), 1 when the command could not do its work (a
    PATH it cannot read or that holds no problem, DIR not writable,
    --check without the python backend), 2 on a usage error.
*/
#ifndef CLIENT_IMPORT_H
#define CLIENT_IMPORT_H

#include <jansson.h>
#include <stddef.h>

//  How problems become tasks.
typedef struct {
    const char *backend;        //  the tasks' target: "cuda" (default) or "cpu"
    const char *dtype;          //  python.dtype, or NULL (inputs as the module makes them)
    const char *kernel;         //  python.kernel, or NULL: "any" on cuda, "torch" on cpu
} client_import_config_t;

//  The task object of one KernelBench-format module, named name (already
//  a valid task name), its reference class entry (NULL: "Model"), with
//  meta (borrowed, may be NULL) as its "x-source". NULL when the module is
//  not a problem: *problem is a short code ("syntax_error", "no_model",
//  "no_get_inputs", "no_get_init_inputs", "too_large", "empty",
//  "not_utf8") and err the reason.
json_t *client_import_module (const char *source, size_t len, const char *name, const char *entry,
                              const client_import_config_t *cfg, json_t *meta,
                              const char **problem, char *err, size_t errlen);

//  The task name of a problem file: its stem with characters a task name
//  cannot hold as '_', "L<n>_" before it when a folder of its path is
//  level<n>: "level1/19_ReLU.py" -> "L1_19_ReLU". Returns buf.
const char *client_import_name (const char *path, char *buf, size_t len);

//  A task from a file: a `.py` module becomes its task (cfg NULL: the
//  defaults), anything else is read as a JSON task. NULL after a one-line
//  reason in err.
json_t *client_import_load_task (const char *path, const client_import_config_t *cfg,
                                 char *err, size_t errlen);

//  Run the subcommand; argv [0] is "import". Returns the exit status.
int client_import_main (int argc, char **argv);

#endif
