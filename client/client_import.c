/*  client_import - `kgym import kernelbench`: datasets of PyTorch problems
    become kgym task files.

    Paths are walked into a list of inputs (files in sorted order), each
    input yields problems (a module file one, a JSON-lines file one per
    line), each problem is read statically (client_pysource) into a task
    object, optionally checked by grading its reference against itself
    (worker_eval, the python backend), and written to DIR/NAME.json.
*/
#include "client_import.h"
#include "client_pysource.h"
#include "client_options.h"
#include "common_task.h"
#include "worker_eval.h"
#include "worker_registry.h"
#include <czmq.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define IMPORT_MAX_DEPTH     32             //  folders deep
#define IMPORT_MAX_FILES     1000000        //  inputs found under the paths
#define IMPORT_MAX_LINE      (16u << 20)    //  bytes of one JSON line
#define IMPORT_MAX_VARIED    TASK_MAX_SIZE_VARS  //  constants varied in the extra sizes
#define IMPORT_MAX_VALUE     (1ll << 40)    //  a size value kgym takes
#define IMPORT_CHECK_SEED    20240601       //  the seed both checking runs use
#define IMPORT_META_MAX      256            //  bytes of a kept row field

//  Row fields kept in "x-source" (scalars only).
static const char *const s_meta_keys [] = {
    "name", "problem_name", "task_name", "op_name", "level", "problem_id", "id", "entry_point",
    "repo_name", "module_name", "dataset", "difficulty", "uuid", NULL
};
//  Row fields that name a problem, first present wins.
static const char *const s_name_keys [] = {
    "name", "problem_name", "task_name", "op_name", "module_name", NULL
};

//  Parsed options.
typedef struct {
    client_import_config_t cfg; //  how problems become tasks
    const char *out;            //  --out DIR
    bool check;                 //  --check
    double timeout_s;           //  --timeout S for --check
} s_options_t;

//  The run's state.
typedef struct {
    const s_options_t *opts;    //  borrowed
    worker_eval_t *evaluator;   //  --check: the local evaluator
    zhashx_t *names;            //  task names written so far (keys only)
    zhashx_t *problems;         //  problem code -> count (size_t in the pointer)
    size_t imported;            //  tasks written
    size_t failed;              //  problems that are not tasks
    int rc;                     //  1 once the command could not do part of its work
} s_run_t;

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym import kernelbench [--out DIR] [--check] [--backend cuda|cpu] [--dtype D]\n"
        "                               [--kernel triton|cuda|any|torch] [--timeout S] PATH...\n"
        "  KernelBench-format problems (.py files: Model, get_inputs, get_init_inputs; JSON-lines\n"
        "  files whose objects hold the module in \"code\"; folders of either) become task files\n"
        "  DIR/NAME.json (default DIR: tasks). One JSON line per problem on stdout, the summary on\n"
        "  stderr. Modules are read, not run; --check also grades each reference against itself\n"
        "  twice with one seed (needs the python backend) and drops those that fail or differ.\n"
        "  --backend  the tasks' target (default cuda)     --dtype  python.dtype: f16 bf16 f32 f64\n"
        "  --kernel   python.kernel (default: any on cuda, torch on cpu)\n"
        "  --timeout  seconds a --check run may take (default 120)\n");
}

//  --------------------------------------------------------------------------
//  Names

static bool
s_name_char (char c)
{
    return isalnum ((unsigned char) c) || c == '_' || c == '-' || c == '.';
}

//  Copy text into out as a task name part: characters a name cannot hold
//  become '_', at most len - 1 bytes.
static void
s_clean (const char *text, size_t n, char *out, size_t len)
{
    size_t at = 0;
    for (size_t i = 0; i < n && text [i] && at + 1 < len; i++)
        out [at++] = s_name_char (text [i])? text [i]: '_';
    out [at] = 0;
}

//  The level a folder name says ("level1", "Level_2", "level-3"), or -1.
static int
s_level_of (const char *part, size_t n)
{
    if (n < 6 || strncasecmp (part, "level", 5) != 0)
        return -1;
    size_t i = 5;
    if (part [i] == '_' || part [i] == '-')
        i++;
    if (i >= n || n - i > 3)
        return -1;
    int level = 0;
    for (; i < n; i++) {
        if (!isdigit ((unsigned char) part [i]))
            return -1;
        level = level * 10 + (part [i] - '0');
    }
    return level;
}

//  The nearest level folder of path, or -1.
static int
s_path_level (const char *path)
{
    const char *end = strrchr (path, '/');
    while (end && end > path) {
        const char *start = end;
        while (start > path && start [-1] != '/')
            start--;
        int level = s_level_of (start, (size_t) (end - start));
        if (level >= 0)
            return level;
        end = start > path? start - 1: NULL;
    }
    return -1;
}

const char *
client_import_name (const char *path, char *buf, size_t len)
{
    const char *base = strrchr (path, '/');
    base = base? base + 1: path;
    size_t n = strlen (base);
    const char *dot = strrchr (base, '.');
    if (dot && dot > base)
        n = (size_t) (dot - base);
    char stem [TASK_MAX_NAME];
    s_clean (base, n, stem, sizeof stem);
    int level = s_path_level (path);
    if (level >= 0)
        snprintf (buf, len, "L%d_%s", level, stem [0]? stem: "problem");
    else
        snprintf (buf, len, "%s", stem [0]? stem: "problem");
    buf [len > TASK_MAX_NAME? TASK_MAX_NAME - 1: len - 1] = 0;
    return buf;
}

//  --------------------------------------------------------------------------
//  One module -> one task

//  The tail value a constant takes in its extra size: odd, not a power of
//  two, at most half of it (3 for the small ones); 0 when it has none.
static int64_t
s_tail (int64_t value)
{
    if (value < 4)
        return 0;
    int64_t half = value / 2;
    int64_t odd = half % 2? half: half - 1;
    return odd >= 3? odd: 3;
}

//  "sizes": every constant that shapes the inputs and not the model (named
//  in get_inputs, not in get_init_inputs or the entry class) keeps its value
//  in sizes[0] and takes its tail value in one size of its own. NULL when
//  no constant qualifies (the module as written is the one size).
static json_t *
s_sizes (client_pysource_t *module, const char *entry)
{
    const char *varied [IMPORT_MAX_VARIED];
    int64_t values [IMPORT_MAX_VARIED];
    size_t count = 0;
    for (size_t i = 0; i < client_pysource_constants (module) && count < IMPORT_MAX_VARIED; i++) {
        const char *name = client_pysource_constant_name (module, i);
        int64_t value = client_pysource_constant_value (module, i);
        if (value > IMPORT_MAX_VALUE || !s_tail (value)
        ||  !client_pysource_uses (module, "get_inputs", name)
        ||  client_pysource_uses (module, "get_init_inputs", name)
        ||  client_pysource_uses (module, entry, name))
            continue;
        varied [count] = name;
        values [count++] = value;
    }
    if (!count)
        return NULL;
    json_t *sizes = json_array ();
    for (size_t k = 0; k <= count; k++) {
        json_t *size = json_object ();
        for (size_t i = 0; i < count; i++)
            json_object_set_new (size, varied [i],
                                 json_integer (k == i + 1? s_tail (values [i]): values [i]));
        json_array_append_new (sizes, size);
    }
    return sizes;
}

json_t *
client_import_module (const char *source, size_t len, const char *name, const char *entry,
                      const client_import_config_t *cfg, json_t *meta,
                      const char **problem, char *err, size_t errlen)
{
    client_import_config_t defaults = { "cuda", NULL, NULL };
    if (!cfg)
        cfg = &defaults;
    const char *backend = cfg->backend? cfg->backend: "cuda";
    entry = entry? entry: "Model";
    if (len > TASK_MAX_SOURCE) {
        *problem = "too_large";
        snprintf (err, errlen, "the module is %zu bytes, over kgym's %u", len, TASK_MAX_SOURCE);
        return NULL;
    }
    if (strspn (source, " \t\r\n\f") >= len) {
        *problem = "empty";
        snprintf (err, errlen, "the module is empty");
        return NULL;
    }
    json_t *text = json_stringn (source, len);
    if (!text) {
        *problem = "not_utf8";
        snprintf (err, errlen, "the module is not UTF-8 text (or holds a NUL byte)");
        return NULL;
    }
    client_pysource_t *module = client_pysource_new (source, len);
    if (!module) {
        json_decref (text);
        *problem = "internal";
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    const char *missing = NULL;
    if (client_pysource_error (module)) {
        *problem = "syntax_error";
        snprintf (err, errlen, "syntax error: %s", client_pysource_error (module));
    }
    else
    if (!client_pysource_has_class (module, entry)) {
        *problem = "no_model";
        missing = "class";
    }
    else
    if (!client_pysource_has_def (module, "get_inputs")) {
        *problem = "no_get_inputs";
        missing = "get_inputs";
    }
    else
    if (!client_pysource_has_def (module, "get_init_inputs")) {
        *problem = "no_get_init_inputs";
        missing = "get_init_inputs";
    }
    else
        *problem = NULL;
    if (missing && streq (missing, "class"))
        snprintf (err, errlen, "no top-level 'class %s'%s", entry,
                  client_pysource_has_def (module, entry)? " (it is a function)": "");
    else
    if (missing)
        snprintf (err, errlen, "no top-level 'def %s()'", missing);
    json_t *task = NULL;
    if (!*problem) {
        task = json_pack ("{s:s, s:s, s:{s:s, s:o}}", "name", name, "backend", backend,
                          "reference", "lang", "python", "source", json_incref (text));
        json_t *sizes = s_sizes (module, entry);
        if (sizes) {
            json_object_set_new (task, "sizes", sizes);
            json_object_set_new (task, "timing_size", json_integer (0));
        }
        json_t *python = json_object ();
        if (cfg->dtype)
            json_object_set_new (python, "dtype", json_string (cfg->dtype));
        json_object_set_new (python, "entry", json_string (entry));
        json_object_set_new (python, "kernel", json_string (
            cfg->kernel? cfg->kernel: streq (backend, "cpu")? "torch": "any"));
        json_object_set_new (task, "python", python);
        if (meta && json_object_size (meta))
            json_object_set (task, "x-source", meta);
    }
    json_decref (text);
    client_pysource_destroy (&module);
    return task;
}

//  --------------------------------------------------------------------------
//  Reading files

//  A whole file of at most max bytes into *data (malloc'd, NUL-terminated).
static int
s_read_file (const char *path, size_t max, char **data, size_t *size, char *err, size_t errlen)
{
    FILE *file = fopen (path, "rb");
    if (!file) {
        snprintf (err, errlen, "cannot read %s: %s", path, strerror (errno));
        return -1;
    }
    *data = (char *) malloc (max + 2);
    if (!*data) {
        fclose (file);
        snprintf (err, errlen, "out of memory reading %s", path);
        return -1;
    }
    *size = fread (*data, 1, max + 1, file);
    bool failed = ferror (file);
    fclose (file);
    if (failed || *size > max) {
        snprintf (err, errlen, failed? "cannot read %s": "%s is larger than %zu bytes", path, max);
        free (*data);
        *data = NULL;
        return -1;
    }
    (*data) [*size] = 0;
    return 0;
}

static bool
s_ends_with (const char *text, const char *suffix)
{
    size_t n = strlen (text), m = strlen (suffix);
    return n >= m && strcasecmp (text + n - m, suffix) == 0;
}

json_t *
client_import_load_task (const char *path, const client_import_config_t *cfg,
                         char *err, size_t errlen)
{
    if (!s_ends_with (path, ".py"))
        return common_json_load_file (path, 16u << 20, err, errlen);
    char *data;
    size_t size;
    //  Over the source limit by one byte is enough to say it is too large.
    if (s_read_file (path, TASK_MAX_SOURCE + 1, &data, &size, err, errlen))
        return NULL;
    char name [TASK_MAX_NAME];
    client_import_name (path, name, sizeof name);
    const char *problem;
    char why [512];
    json_t *task = client_import_module (data, size, name, NULL, cfg, NULL, &problem, why, sizeof why);
    if (!task)
        snprintf (err, errlen, "%s is not a KernelBench-format problem: %s", path, why);
    free (data);
    return task;
}

//  Every input file under path (a file itself, or a folder walked in
//  sorted order) appended to files (a list that copies what it is given).
static int
s_collect (const char *path, int depth, zlistx_t *files, char *err, size_t errlen)
{
    struct stat st;
    if (stat (path, &st)) {
        snprintf (err, errlen, "cannot read %s: %s", path, strerror (errno));
        return -1;
    }
    if (!S_ISDIR (st.st_mode)) {
        if (zlistx_size (files) >= IMPORT_MAX_FILES) {
            snprintf (err, errlen, "more than %d files under the paths", IMPORT_MAX_FILES);
            return -1;
        }
        zlistx_add_end (files, (void *) path);
        return 0;
    }
    if (depth >= IMPORT_MAX_DEPTH) {
        snprintf (err, errlen, "%s: folders nested deeper than %d", path, IMPORT_MAX_DEPTH);
        return -1;
    }
    DIR *dir = opendir (path);
    if (!dir) {
        snprintf (err, errlen, "cannot read %s: %s", path, strerror (errno));
        return -1;
    }
    zlistx_t *names = zlistx_new ();
    zlistx_set_duplicator (names, (czmq_duplicator *) strdup);
    zlistx_set_destructor (names, (czmq_destructor *) zstr_free);
    zlistx_set_comparator (names, (czmq_comparator *) strcmp);
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (entry->d_name [0] != '.' && !streq (entry->d_name, "__pycache__")
        &&  !streq (entry->d_name, "__init__.py"))
            zlistx_add_end (names, entry->d_name);
    closedir (dir);
    zlistx_sort (names);
    int rc = 0;
    for (const char *name = (const char *) zlistx_first (names); name && rc == 0;
         name = (const char *) zlistx_next (names)) {
        char *child = zsys_sprintf ("%s%s%s", path, s_ends_with (path, "/")? "": "/", name);
        struct stat cst;
        if (child && stat (child, &cst) == 0
        &&  (S_ISDIR (cst.st_mode) || s_ends_with (name, ".py") || s_ends_with (name, ".jsonl")
             || s_ends_with (name, ".ndjson")))
            rc = s_collect (child, depth + 1, files, err, errlen);
        zstr_free (&child);
    }
    zlistx_destroy (&names);
    return rc;
}

//  --------------------------------------------------------------------------
//  The run

static void
s_count (s_run_t *run, const char *problem)
{
    size_t count = (size_t) zhashx_lookup (run->problems, problem);
    zhashx_update (run->problems, problem, (void *) (count + 1));
    run->failed++;
}

//  One JSON line on stdout.
static void
s_print (json_t *line)
{
    char *text = json_dumps (line, JSON_COMPACT);
    if (text)
        printf ("%s\n", text);
    free (text);
    fflush (stdout);
    json_decref (line);
}

static void
s_report_failed (s_run_t *run, const char *source, const char *problem, const char *reason)
{
    s_count (run, problem);
    s_print (json_pack ("{s:s, s:s, s:s, s:s}", "source", source, "status", "failed",
                        "problem", problem, "reason", reason));
}

//  base, or base_2, base_3... when a task of this run has that name.
static void
s_unique_name (s_run_t *run, const char *base, char *out, size_t len)
{
    snprintf (out, len, "%s", base);
    for (int k = 2; zhashx_lookup (run->names, out); k++) {
        char suffix [16];
        snprintf (suffix, sizeof suffix, "_%d", k);
        size_t room = len - strlen (suffix) - 1;
        snprintf (out, len, "%.*s%s", (int) (strlen (base) < room? strlen (base): room), base, suffix);
    }
}

//  --check: the reference graded against itself twice with the same seed.
//  0, or -1 with *problem and the reason.
static int
s_check (s_run_t *run, json_t *task, const char **problem, char *err, size_t errlen)
{
    json_t *checked = json_deep_copy (task);
    json_t *python = json_object_get (checked, "python");
    //  The reference runs library kernels: as a candidate that is no fault.
    json_object_set_new (python, "kernel", json_string ("torch"));
    const char *entry = json_string_value (json_object_get (python, "entry"));
    const char *source = json_string_value (json_object_get (json_object_get (checked, "reference"),
                                                             "source"));
    char *copy = zsys_sprintf ("%s\n\n\nModelNew = %s\n", source, entry? entry: "Model");
    json_t *job = json_pack ("{s:o, s:{s:s, s:s}, s:{s:I, s:i, s:b, s:b, s:f}}",
        "task", checked, "candidate", "lang", "python", "source", copy,
        "eval", "seed", (json_int_t) IMPORT_CHECK_SEED, "trials", 1, "check_only", 1,
        "profile", 0, "timeout", run->opts->timeout_s);
    zstr_free (&copy);
    int rc = 0;
    for (int attempt = 0; attempt < 2 && rc == 0; attempt++) {
        json_t *result = worker_eval_run (run->evaluator, job);
        const char *status = json_string_value (json_object_get (result, "status"));
        const char *message = json_string_value (json_object_get (result, "message"));
        message = message && *message? message: "no message";
        if (!status) {
            *problem = "check_failed";
            snprintf (err, errlen, "the evaluator gave no result");
            rc = -1;
        }
        else
        if (streq (status, "ok"))
            ;
        else {
            rc = -1;
            if (streq (status, "incorrect")) {
                *problem = "not_deterministic";
                snprintf (err, errlen, "the reference gave different outputs for the same seed "
                          "(run %d): %s", attempt + 1, message);
            }
            else
            if (streq (status, "invalid") || streq (status, "compile_error")) {
                *problem = "import_error";
                snprintf (err, errlen, "the module does not import or its reference fails: %s", message);
            }
            else
            if (streq (status, "runtime_error")) {
                *problem = "reference_error";
                snprintf (err, errlen, "the reference raises: %s", message);
            }
            else
            if (streq (status, "timeout")) {
                *problem = "reference_timeout";
                snprintf (err, errlen, "the reference took longer than %g s", run->opts->timeout_s);
            }
            else {
                *problem = "check_failed";
                snprintf (err, errlen, "the check could not run (%s): %s", status, message);
            }
        }
        json_decref (result);
    }
    json_decref (job);
    return rc;
}

//  Write task to DIR/name.json (through a temporary file); the path into
//  file. 0, or -1 with the reason.
static int
s_write (s_run_t *run, json_t *task, const char *name, char *file, size_t len,
         char *err, size_t errlen)
{
    snprintf (file, len, "%s/%s.json", run->opts->out, name);
    char *temp = zsys_sprintf ("%s.tmp", file);
    int rc = 0;
    if (json_dump_file (task, temp, JSON_INDENT (2)) || rename (temp, file)) {
        snprintf (err, errlen, "cannot write %s: %s", file, strerror (errno));
        remove (temp);
        rc = -1;
    }
    zstr_free (&temp);
    return rc;
}

//  One problem: its task, checked when asked, written, reported.
static void
s_problem (s_run_t *run, const char *source, const char *text, size_t len, const char *base,
           const char *entry, json_t *meta)
{
    char name [TASK_MAX_NAME], reason [1024], file [4096];
    const char *problem = NULL;
    s_unique_name (run, base, name, sizeof name);
    json_t *task = client_import_module (text, len, name, entry, &run->opts->cfg, meta, &problem,
                                         reason, sizeof reason);
    if (task && run->evaluator && s_check (run, task, &problem, reason, sizeof reason)) {
        json_decref (task);
        task = NULL;
    }
    if (!task) {
        s_report_failed (run, source, problem, reason);
        return;
    }
    if (s_write (run, task, name, file, sizeof file, reason, sizeof reason)) {
        fprintf (stderr, "kgym import: %s\n", reason);
        s_report_failed (run, source, "write_failed", reason);
        run->rc = 1;
    }
    else {
        zhashx_insert (run->names, name, (void *) 1);
        run->imported++;
        json_t *sizes = json_object_get (task, "sizes");
        s_print (json_pack ("{s:s, s:s, s:s, s:s, s:I}", "source", source, "status", "imported",
                            "task", name, "file", file,
                            "sizes", (json_int_t) (sizes? json_array_size (sizes): 1)));
    }
    json_decref (task);
}

static void
s_module_file (s_run_t *run, const char *path)
{
    char *data, reason [1024];
    size_t size;
    if (s_read_file (path, TASK_MAX_SOURCE + 1, &data, &size, reason, sizeof reason)) {
        bool large = strstr (reason, "larger than") != NULL;
        s_report_failed (run, path, large? "too_large": "unreadable", reason);
        if (!large)
            run->rc = 1;
        return;
    }
    char base [TASK_MAX_NAME];
    client_import_name (path, base, sizeof base);
    json_t *meta = json_pack ("{s:s}", "file", path);
    int level = s_path_level (path);
    if (level >= 0)
        json_object_set_new (meta, "level", json_integer (level));
    s_problem (run, path, data, size, base, NULL, meta);
    json_decref (meta);
    free (data);
}

//  A row's level: an integer, or text with digits ("level1", "2"); -1 when none.
static int
s_row_level (json_t *value)
{
    if (json_is_integer (value) && json_integer_value (value) >= 0 && json_integer_value (value) < 1000)
        return (int) json_integer_value (value);
    const char *text = json_string_value (value);
    if (!text)
        return -1;
    while (*text && !isdigit ((unsigned char) *text))
        text++;
    int level = 0, digits = 0;
    for (; isdigit ((unsigned char) *text) && digits < 3; text++, digits++)
        level = level * 10 + (*text - '0');
    return digits? level: -1;
}

//  The task name of row lineno of path.
static void
s_row_name (json_t *row, const char *path, size_t lineno, char *out, size_t len)
{
    const char *named = NULL;
    for (size_t i = 0; s_name_keys [i] && !named; i++)
        named = json_string_value (json_object_get (row, s_name_keys [i]));
    char stem [TASK_MAX_NAME], id [32] = "";
    if (named && *named)
        s_clean (named, strlen (named), stem, sizeof stem);
    else {
        char file [TASK_MAX_NAME];
        client_import_name (path, file, sizeof file);
        snprintf (stem, sizeof stem, "%.100s_%zu", file, lineno);
        snprintf (out, len, "%s", stem);
        return;
    }
    json_t *pid = json_object_get (row, "problem_id");
    if (json_is_integer (pid))
        snprintf (id, sizeof id, "%lld_", (long long) json_integer_value (pid));
    else
    if (json_is_string (pid)) {
        s_clean (json_string_value (pid), 20, id, sizeof id - 1);
        strcat (id, "_");
    }
    int level = s_row_level (json_object_get (row, "level"));
    if (level < 0)
        level = s_path_level (path);
    if (level >= 0)
        snprintf (out, len, "L%d_%s%s", level, id, stem);
    else
        snprintf (out, len, "%s%s", id, stem);
    out [len > TASK_MAX_NAME? TASK_MAX_NAME - 1: len - 1] = 0;
}

//  What of a row goes into "x-source": its file and line, and the scalar
//  fields this import knows.
static json_t *
s_row_meta (json_t *row, const char *path, size_t lineno)
{
    json_t *meta = json_pack ("{s:s, s:I}", "file", path, "line", (json_int_t) lineno);
    for (size_t i = 0; s_meta_keys [i]; i++) {
        json_t *value = json_object_get (row, s_meta_keys [i]);
        if (json_is_string (value) && strlen (json_string_value (value)) <= IMPORT_META_MAX)
            json_object_set (meta, s_meta_keys [i], value);
        else
        if (json_is_number (value))
            json_object_set (meta, s_meta_keys [i], value);
    }
    return meta;
}

static void
s_lines_file (s_run_t *run, const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file) {
        char reason [1024];
        snprintf (reason, sizeof reason, "cannot read %s: %s", path, strerror (errno));
        s_report_failed (run, path, "unreadable", reason);
        run->rc = 1;
        return;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    while ((got = getline (&line, &cap, file)) >= 0) {
        lineno++;
        if (strspn (line, " \t\r\n") == (size_t) got)
            continue;
        char source [4200], reason [1024];
        snprintf (source, sizeof source, "%s:%zu", path, lineno);
        if ((size_t) got > IMPORT_MAX_LINE) {
            snprintf (reason, sizeof reason, "the line is over %u MiB", IMPORT_MAX_LINE >> 20);
            s_report_failed (run, source, "too_large", reason);
            continue;
        }
        json_error_t error;
        json_t *row = json_loadb (line, (size_t) got, 0, &error);
        if (!json_is_object (row)) {
            snprintf (reason, sizeof reason, "not a JSON object: %s", row? "another value": error.text);
            s_report_failed (run, source, "bad_line", reason);
            json_decref (row);
            continue;
        }
        json_t *code = json_object_get (row, "code");
        if (!json_is_string (code))
            code = json_object_get (row, "python_code");
        if (!json_is_string (code)) {
            s_report_failed (run, source, "no_code",
                             "no \"code\" (or \"python_code\") string holding the module");
            json_decref (row);
            continue;
        }
        char base [TASK_MAX_NAME];
        s_row_name (row, path, lineno, base, sizeof base);
        //  KernelBook names its reference class in entry_point.
        const char *entry = json_string_value (json_object_get (row, "entry_point"));
        char entry_name [TASK_MAX_NAME];
        if (entry) {
            s_clean (entry, strlen (entry), entry_name, sizeof entry_name);
            entry = streq (entry_name, entry) && !isdigit ((unsigned char) entry [0])
                  && !strchr (entry, '-') && !strchr (entry, '.')? entry: NULL;
        }
        json_t *meta = s_row_meta (row, path, lineno);
        s_problem (run, source, json_string_value (code), json_string_length (code), base, entry, meta);
        json_decref (meta);
        json_decref (row);
    }
    if (ferror (file)) {
        fprintf (stderr, "kgym import: cannot read %s: %s\n", path, strerror (errno));
        run->rc = 1;
    }
    free (line);
    fclose (file);
}

//  The summary line on stderr.
static void
s_summary (s_run_t *run)
{
    fprintf (stderr, "kgym import: %zu imported into %s, %zu failed", run->imported,
             run->opts->out, run->failed);
    if (run->failed) {
        zlistx_t *keys = zhashx_keys (run->problems);
        zlistx_set_comparator (keys, (czmq_comparator *) strcmp);
        zlistx_sort (keys);
        const char *sep = " (";
        for (const char *key = (const char *) zlistx_first (keys); key;
             key = (const char *) zlistx_next (keys)) {
            fprintf (stderr, "%s%s %zu", sep, key, (size_t) zhashx_lookup (run->problems, key));
            sep = ", ";
        }
        fprintf (stderr, ")");
        zlistx_destroy (&keys);
    }
    fprintf (stderr, "\n");
}

//  Parse into opts: 0, 1 after --help, 2 on a usage error (said).
static int
s_parse (int argc, char **argv, s_options_t *opts)
{
    static struct option options [] = {
        { "out", required_argument, 0, 'o' }, { "check", no_argument, 0, 'c' },
        { "backend", required_argument, 0, 'b' }, { "dtype", required_argument, 0, 'd' },
        { "kernel", required_argument, 0, 'k' }, { "timeout", required_argument, 0, 't' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    memset (opts, 0, sizeof *opts);
    opts->out = "tasks";
    opts->cfg.backend = "cuda";
    opts->timeout_s = 120;
    if (argc >= 2 && (streq (argv [1], "--help") || streq (argv [1], "-h"))) {
        s_usage (stdout);
        return 1;
    }
    if (argc < 2 || !streq (argv [1], "kernelbench")) {
        fprintf (stderr, "kgym import: say the format: kgym import kernelbench PATH... "
                 "(the one format there is)\n");
        s_usage (stderr);
        return 2;
    }
    argc--;
    argv++;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "ho:", options, NULL)) != -1) {
        switch (opt) {
            case 'o': opts->out = optarg; break;
            case 'c': opts->check = true; break;
            case 'b': opts->cfg.backend = optarg; break;
            case 'd': opts->cfg.dtype = optarg; break;
            case 'k': opts->cfg.kernel = optarg; break;
            case 't':
                if (client_options_real ("import", "--timeout", optarg, 0, true,
                                         CLIENT_OPTIONS_MAX_TIMEOUT, "seconds", &opts->timeout_s))
                    return 2;
                break;
            case 'h': s_usage (stdout); return 1;
            default: s_usage (stderr); return 2;
        }
    }
    char targets [128];
    if (!worker_registry_serves (opts->cfg.backend)) {
        fprintf (stderr, "kgym import: --backend '%s' is not a target (%s)\n", opts->cfg.backend,
                 worker_registry_targets (targets, sizeof targets));
        return 2;
    }
    static const char *const dtypes [] = { "f16", "bf16", "f32", "f64", NULL };
    static const char *const kernels [] = { "triton", "cuda", "any", "torch", NULL };
    bool ok = !opts->cfg.dtype;
    for (size_t i = 0; dtypes [i] && !ok; i++)
        ok = streq (opts->cfg.dtype, dtypes [i]);
    if (!ok) {
        fprintf (stderr, "kgym import: --dtype wants f16, bf16, f32 or f64, not '%s'\n", opts->cfg.dtype);
        return 2;
    }
    ok = !opts->cfg.kernel;
    for (size_t i = 0; kernels [i] && !ok; i++)
        ok = streq (opts->cfg.kernel, kernels [i]);
    if (!ok) {
        fprintf (stderr, "kgym import: --kernel wants triton, cuda, any or torch, not '%s'\n",
                 opts->cfg.kernel);
        return 2;
    }
    if (optind >= argc) {
        fprintf (stderr, "kgym import: need at least one PATH (a .py file, a .jsonl file or a folder)\n");
        return 2;
    }
    //  Leave optind at the paths of the caller's argv.
    optind++;
    return 0;
}

int
client_import_main (int argc, char **argv)
{
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    if (usage)
        return usage == 1? 0: usage;
    if (opts.check && !worker_registry_named ("python")) {
        fprintf (stderr, "kgym import: --check grades each reference with the python backend, "
                 "which this build does not have\n");
        return 1;
    }
    zlistx_t *files = zlistx_new ();
    zlistx_set_duplicator (files, (czmq_duplicator *) strdup);
    zlistx_set_destructor (files, (czmq_destructor *) zstr_free);
    char err [1024];
    for (int i = optind; i < argc; i++) {
        size_t before = zlistx_size (files);
        if (s_collect (argv [i], 0, files, err, sizeof err)) {
            fprintf (stderr, "kgym import: %s\n", err);
            zlistx_destroy (&files);
            return 1;
        }
        if (zlistx_size (files) == before) {
            fprintf (stderr, "kgym import: no .py or .jsonl files under %s\n", argv [i]);
            zlistx_destroy (&files);
            return 1;
        }
    }
    if (zsys_dir_create ("%s", opts.out)) {
        fprintf (stderr, "kgym import: cannot make %s: %s\n", opts.out, strerror (errno));
        zlistx_destroy (&files);
        return 1;
    }
    s_run_t run = { &opts, NULL, zhashx_new (), zhashx_new (), 0, 0, 0 };
    if (opts.check) {
        worker_eval_config_t cfg;
        worker_eval_config_default (&cfg);
        cfg.worker_name = "kgym-import";
        run.evaluator = worker_eval_new (&cfg, err, sizeof err);
        if (!run.evaluator) {
            fprintf (stderr, "kgym import: --check: %s\n", err);
            run.rc = 1;
        }
    }
    for (const char *path = (const char *) zlistx_first (files); path && !(opts.check && !run.evaluator);
         path = (const char *) zlistx_next (files)) {
        if (s_ends_with (path, ".py"))
            s_module_file (&run, path);
        else
            s_lines_file (&run, path);
    }
    if (!opts.check || run.evaluator)
        s_summary (&run);
    worker_eval_destroy (&run.evaluator);
    zhashx_destroy (&run.names);
    zhashx_destroy (&run.problems);
    zlistx_destroy (&files);
    return run.rc;
}
