/*  common_task - tasks, candidates and jobs: parsed, validated, laid out.

    Everything here comes from outside (a task file, a client's job on the
    wire), so the parser is strict and never asserts: unknown keys are
    rejected (except "description", "comment" and "x-*" annotations), every
    count and string is bounded before anything is allocated, and every
    error names where it is ("candidate.launches[0].grid[1]: ...").
    JSON null reads as an absent key, since msgpack clients send nil for
    "not given".

    Integer-or-expression fields (shapes, grid, block, shared, workspace,
    scalar values, bytes) are stored as expression text; numbers become
    "%lld" text. They are checked against the size names when the task and
    job are parsed and evaluated per size by common_task_layout(), which is
    where dims, byte counts, launch geometry and the memory cap are enforced.
*/
#include "common_task.h"
#include "common_backend.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TASK_PATH_LEN       256             //  bytes of an error path
#define TASK_MAX_SIZE_VALUE (1ll << 40)     //  largest value of a size name
#define TASK_MAX_LAUNCH_DIM 2147483647ll    //  grid/block entry, shared bytes

//  --- small helpers ---

//  Write "path: message" into err; always returns -1.
static int
s_fail (char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static int
s_fail (char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return -1;
    int n = snprintf (err, errlen, "%s: ", path);
    if (n >= 0 && (size_t) n < errlen) {
        va_list args;
        va_start (args, fmt);
        vsnprintf (err + n, errlen - (size_t) n, fmt, args);
        va_end (args);
    }
    return -1;
}

//  "parent.key" into buf (TASK_PATH_LEN bytes); returns buf.
static const char *
s_path (char *buf, const char *parent, const char *key)
{
    if (snprintf (buf, TASK_PATH_LEN, "%s.%s", parent, key) < 0)
        buf [0] = '\0';
    return buf;
}

//  "parent[index]" into buf (TASK_PATH_LEN bytes); returns buf.
static const char *
s_path_index (char *buf, const char *parent, size_t index)
{
    if (snprintf (buf, TASK_PATH_LEN, "%s[%zu]", parent, index) < 0)
        buf [0] = '\0';
    return buf;
}

//  A member, or NULL when absent or null.
static json_t *
s_member (json_t *object, const char *key)
{
    json_t *value = json_object_get (object, key);
    return json_is_null (value) ? NULL : value;
}

//  [A-Za-z_][A-Za-z0-9_]*, 1..TASK_MAX_NAME bytes.
static bool
s_is_ident (const char *text)
{
    size_t len = strlen (text);
    if (len == 0 || len > TASK_MAX_NAME)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = text [i];
        bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && (i == 0 || c < '0' || c > '9'))
            return false;
    }
    return true;
}

//  Keys allowed in every object: notes for humans and extensions.
static bool
s_is_annotation (const char *key)
{
    return strcmp (key, "description") == 0 || strcmp (key, "comment") == 0
        || strncmp (key, "x-", 2) == 0;
}

//  Reject keys that are neither in allowed (NULL-terminated) nor annotations.
static int
s_check_keys (json_t *object, const char *path, const char *const allowed [],
              char *err, size_t errlen)
{
    const char *key;
    size_t key_len;
    json_t *value;
    json_object_keylen_foreach (object, key, key_len, value) {
        if (strlen (key) != key_len)
            return s_fail (err, errlen, path, "a key contains a NUL byte");
        if (strcmp (key, "description") == 0 || strcmp (key, "comment") == 0) {
            if (!json_is_string (value) && !json_is_null (value))
                return s_fail (err, errlen, path, "'%s' must be a string", key);
            continue;
        }
        if (s_is_annotation (key))
            continue;
        bool known = false;
        for (size_t i = 0; allowed [i] && !known; i++)
            known = strcmp (key, allowed [i]) == 0;
        if (!known)
            return s_fail (err, errlen, path, "unknown key '%.64s'", key);
    }
    return 0;
}

//  A string of minlen..maxlen bytes without NUL bytes; lends it in *text.
static int
s_string (json_t *json, const char *path, size_t minlen, size_t maxlen,
          const char **text, char *err, size_t errlen)
{
    if (!json_is_string (json))
        return s_fail (err, errlen, path, "must be a string");
    size_t len = json_string_length (json);
    const char *value = json_string_value (json);
    if (strlen (value) != len)
        return s_fail (err, errlen, path, "contains a NUL byte");
    if (len < minlen || len > maxlen)
        return s_fail (err, errlen, path, "must be %zu to %zu bytes, got %zu", minlen, maxlen, len);
    *text = value;
    return 0;
}

//  Like s_string, but a copy the caller owns.
static int
s_string_dup (json_t *json, const char *path, size_t minlen, size_t maxlen,
              char **out, char *err, size_t errlen)
{
    const char *text;
    if (s_string (json, path, minlen, maxlen, &text, err, errlen))
        return -1;
    *out = strdup (text);
    if (!*out)
        return s_fail (err, errlen, path, "out of memory");
    return 0;
}

//  An identifier (1..TASK_MAX_NAME bytes), copied.
static int
s_ident_dup (json_t *json, const char *path, char **out, char *err, size_t errlen)
{
    const char *text;
    if (s_string (json, path, 1, TASK_MAX_NAME, &text, err, errlen))
        return -1;
    if (!s_is_ident (text))
        return s_fail (err, errlen, path, "'%s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", text);
    *out = strdup (text);
    if (!*out)
        return s_fail (err, errlen, path, "out of memory");
    return 0;
}

//  An integer. Whole reals up to 2^53 are accepted too: some msgpack
//  encoders send 4.0 for 4, and below 2^53 the value is exact.
static int
s_int (json_t *json, int64_t *out)
{
    if (json_is_integer (json)) {
        *out = (int64_t) json_integer_value (json);
        return 0;
    }
    if (json_is_real (json)) {
        double d = json_real_value (json);
        if (isfinite (d) && d == floor (d) && fabs (d) <= 0x1p53) {
            *out = (int64_t) d;
            return 0;
        }
    }
    return -1;
}

static int
s_int_range (json_t *json, const char *path, int64_t lo, int64_t hi, int64_t *out,
             char *err, size_t errlen)
{
    int64_t v = 0;
    if (s_int (json, &v) || v < lo || v > hi)
        return s_fail (err, errlen, path, "must be an integer from %lld to %lld",
                       (long long) lo, (long long) hi);
    *out = v;
    return 0;
}

//  A finite number.
static int
s_number (json_t *json, const char *path, double *out, char *err, size_t errlen)
{
    if (!json_is_number (json) || !isfinite (json_number_value (json)))
        return s_fail (err, errlen, path, "must be a finite number");
    *out = json_number_value (json);
    return 0;
}

static int
s_bool (json_t *json, const char *path, bool *out, char *err, size_t errlen)
{
    if (!json_is_boolean (json))
        return s_fail (err, errlen, path, "must be true or false");
    *out = json_is_true (json);
    return 0;
}

//  An integer or an expression string, stored as expression text.
static int
s_expr_dup (json_t *json, const char *path, char **out, char *err, size_t errlen)
{
    if (json_is_string (json))
        return s_string_dup (json, path, 1, COMMON_EXPR_MAX_LEN, out, err, errlen);
    if (json_is_number (json)) {
        int64_t v = 0;
        if (s_int (json, &v))
            return s_fail (err, errlen, path, "%g is not an integer", json_number_value (json));
        char text [32];
        snprintf (text, sizeof text, "%lld", (long long) v);
        *out = strdup (text);
        if (!*out)
            return s_fail (err, errlen, path, "out of memory");
        return 0;
    }
    return s_fail (err, errlen, path, "must be an integer or an expression string");
}

//  Check an expression against the task's size names.
static int
s_check_expr (const common_task_t *task, const char *text, const char *path,
              char *err, size_t errlen)
{
    const char *const *names = task->nsizes > 0 ? (const char *const *) task->sizes [0].names : NULL;
    size_t nnames = task->nsizes > 0 ? task->sizes [0].nvars : 0;
    char reason [256];
    if (common_expr_check (text, names, nnames, reason, sizeof reason))
        return s_fail (err, errlen, path, "%s", reason);
    return 0;
}

//  Evaluate an expression for one size.
static int
s_eval_expr (const char *text, const common_expr_var_t *vars, size_t nvars, size_t size_index,
             const char *path, int64_t *value, char *err, size_t errlen)
{
    char reason [256];
    if (common_expr_eval (text, vars, nvars, value, reason, sizeof reason))
        return s_fail (err, errlen, path, "%s (size %zu)", reason, size_index);
    return 0;
}

//  Bytes as "1.5 TiB" (binary units, for limit messages).
static void
s_human (uint64_t bytes, char *buf, size_t len)
{
    static const char *units [] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double v = (double) bytes;
    size_t unit = 0;
    while (v >= 1024 && unit < 6) {
        v /= 1024;
        unit++;
    }
    if (v == floor (v))
        snprintf (buf, len, "%.0f %s", v, units [unit]);
    else
        snprintf (buf, len, "%.1f %s", v, units [unit]);
}

//  --- names ---

const char *
common_arg_kind_name (common_arg_kind_t kind)
{
    switch (kind) {
        case ARG_INPUT:  return "input";
        case ARG_OUTPUT: return "output";
        case ARG_INOUT:  return "inout";
        case ARG_SCALAR: return "scalar";
        default:         return "invalid";
    }
}

static int
s_kind_parse (const char *text, common_arg_kind_t *kind)
{
    for (int k = ARG_INPUT; k <= ARG_SCALAR; k++)
        if (strcmp (text, common_arg_kind_name ((common_arg_kind_t) k)) == 0) {
            *kind = (common_arg_kind_t) k;
            return 0;
        }
    return -1;
}

//  --- destroy ---

static void
s_launch_free (common_launch_t *launch)
{
    free (launch->kernel);
    for (int d = 0; d < 3; d++) {
        free (launch->grid [d]);
        free (launch->block [d]);
    }
    free (launch->shared);
    if (launch->args)
        for (size_t i = 0; i < launch->nargs; i++)
            free (launch->args [i]);
    free (launch->args);
    memset (launch, 0, sizeof *launch);
}

//  Free what a program holds, not the program itself (the task embeds its
//  reference).
static void
s_program_free (common_program_t *program)
{
    free (program->source);
    free (program->lang);
    if (program->options)
        for (size_t i = 0; i < program->noptions; i++)
            free (program->options [i]);
    free (program->options);
    free (program->workspace);
    if (program->launches)
        for (size_t i = 0; i < program->nlaunches; i++)
            s_launch_free (&program->launches [i]);
    free (program->launches);
    free (program->name);
    memset (program, 0, sizeof *program);
}

void
common_program_destroy (common_program_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_program_free (*self_p);
    free (*self_p);
    *self_p = NULL;
}

void
common_task_destroy (common_task_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    common_task_t *self = *self_p;
    free (self->name);
    free (self->backend);
    if (self->args)
        for (size_t i = 0; i < self->nargs; i++) {
            common_arg_t *arg = &self->args [i];
            free (arg->name);
            for (size_t d = 0; d < TASK_MAX_DIMS; d++)
                free (arg->shape [d]);
            free (arg->value_expr);
        }
    free (self->args);
    if (self->sizes)
        for (size_t i = 0; i < self->nsizes; i++)
            for (size_t k = 0; k < TASK_MAX_SIZE_VARS; k++)
                free (self->sizes [i].names [k]);
    free (self->sizes);
    s_program_free (&self->reference);
    common_program_destroy (&self->baseline);
    free (self->bytes_expr);
    free (self->module.entry);
    free (self->module.candidate_entry);
    free (self->module.kernel);
    free (self->module.baseline);
    free (self);
    *self_p = NULL;
}

void
common_job_destroy (common_job_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    common_job_t *self = *self_p;
    common_task_destroy (&self->task);
    common_program_destroy (&self->candidate);
    free (self->tag);
    free (self);
    *self_p = NULL;
}

//  --- program ---

//  grid or block: absent = [1,1,1]; 1..3 entries, missing ones "1".
static int
s_dims_parse (json_t *json, const char *path, char *out [3], char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN];
    size_t n = 0;
    if (json) {
        if (!json_is_array (json) || json_array_size (json) < 1 || json_array_size (json) > 3)
            return s_fail (err, errlen, path, "must be an array of 1 to 3 integers or expressions");
        n = json_array_size (json);
        for (size_t d = 0; d < n; d++)
            if (s_expr_dup (json_array_get (json, d), s_path_index (sub, path, d),
                            &out [d], err, errlen))
                return -1;
    }
    for (size_t d = n; d < 3; d++)
        if (!(out [d] = strdup ("1")))
            return s_fail (err, errlen, path, "out of memory");
    return 0;
}

static int
s_launch_parse (json_t *json, const char *path, common_launch_t *launch, char *err, size_t errlen)
{
    static const char *const keys [] = { "kernel", "grid", "block", "shared", "args", NULL };
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN];
    if (!json_is_object (json))
        return s_fail (err, errlen, path, "must be an object");
    if (s_check_keys (json, path, keys, err, errlen))
        return -1;

    json_t *value = s_member (json, "kernel");
    if (!value)
        return s_fail (err, errlen, path, "missing 'kernel'");
    if (s_ident_dup (value, s_path (sub, path, "kernel"), &launch->kernel, err, errlen))
        return -1;
    if (s_dims_parse (s_member (json, "grid"), s_path (sub, path, "grid"), launch->grid, err, errlen)
    ||  s_dims_parse (s_member (json, "block"), s_path (sub, path, "block"), launch->block, err, errlen))
        return -1;
    value = s_member (json, "shared");
    if (value) {
        if (s_expr_dup (value, s_path (sub, path, "shared"), &launch->shared, err, errlen))
            return -1;
    }
    else
    if (!(launch->shared = strdup ("0")))
        return s_fail (err, errlen, path, "out of memory");

    value = s_member (json, "args");
    if (value) {
        s_path (sub, path, "args");
        if (!json_is_array (value) || json_array_size (value) > TASK_MAX_ARGS + 1)
            return s_fail (err, errlen, sub, "must be an array of at most %d arg names",
                           TASK_MAX_ARGS + 1);
        size_t n = json_array_size (value);
        launch->args = calloc (n > 0 ? n : 1, sizeof (char *));
        if (!launch->args)
            return s_fail (err, errlen, sub, "out of memory");
        launch->nargs = n;
        launch->args_given = true;
        for (size_t i = 0; i < n; i++)
            if (s_ident_dup (json_array_get (value, i), s_path_index (item, sub, i),
                             &launch->args [i], err, errlen))
                return -1;
    }
    return 0;
}

static common_program_t *
s_program_parse (json_t *json, const char *backend, const char *path, char *err, size_t errlen)
{
    static const char *const keys [] = {
        "source", "lang", "options", "workspace", "launches", "name", NULL
    };
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN];
    if (!json_is_object (json)) {
        s_fail (err, errlen, path, "must be an object");
        return NULL;
    }
    char names [128];
    if (!backend || (common_backend_known () && !common_backend_find (backend, NULL))) {
        s_fail (err, errlen, path, "unknown backend '%s' (%s)", backend ? backend : "(none)",
                common_backend_list (NULL, false, names, sizeof names));
        return NULL;
    }
    if (s_check_keys (json, path, keys, err, errlen))
        return NULL;
    common_program_t *self = calloc (1, sizeof *self);
    if (!self) {
        s_fail (err, errlen, path, "out of memory");
        return NULL;
    }

    json_t *value = s_member (json, "source");
    if (!value) {
        s_fail (err, errlen, path, "missing 'source'");
        goto fail;
    }
    if (s_string_dup (value, s_path (sub, path, "source"), 1, TASK_MAX_SOURCE,
                      &self->source, err, errlen))
        goto fail;

    value = s_member (json, "lang");
    if (value) {
        const char *lang;
        if (s_string (value, s_path (sub, path, "lang"), 1, 16, &lang, err, errlen))
            goto fail;
        if (common_backend_known () && !common_backend_find (backend, lang)) {
            s_fail (err, errlen, sub, "'%s' is not a language of backend %s (%s)", lang, backend,
                    common_backend_list (backend, true, names, sizeof names));
            goto fail;
        }
        self->lang = strdup (lang);
    }
    else {
        //  Without a catalog the worker that grades the job fills in its default.
        const char *lang = common_backend_default_lang (backend);
        self->lang = lang? strdup (lang): NULL;
    }
    if (common_backend_known () && !self->lang) {
        s_fail (err, errlen, path, "out of memory");
        goto fail;
    }

    value = s_member (json, "options");
    if (value) {
        s_path (sub, path, "options");
        if (!json_is_array (value) || json_array_size (value) > TASK_MAX_OPTIONS) {
            s_fail (err, errlen, sub, "must be an array of at most %d strings", TASK_MAX_OPTIONS);
            goto fail;
        }
        size_t n = json_array_size (value);
        self->options = calloc (n > 0 ? n : 1, sizeof (char *));
        if (!self->options) {
            s_fail (err, errlen, sub, "out of memory");
            goto fail;
        }
        self->noptions = n;
        for (size_t i = 0; i < n; i++)
            if (s_string_dup (json_array_get (value, i), s_path_index (item, sub, i),
                              1, TASK_MAX_OPTION_LEN, &self->options [i], err, errlen))
                goto fail;
    }

    value = s_member (json, "workspace");
    if (value && s_expr_dup (value, s_path (sub, path, "workspace"), &self->workspace, err, errlen))
        goto fail;

    //  A module (a Python program) is loaded whole: nothing to launch.
    bool module = common_backend_modules (backend, self->lang);
    value = s_member (json, "launches");
    s_path (sub, path, "launches");
    if (module && (value || self->workspace || self->noptions)) {
        s_fail (err, errlen, path, "a %s program is a module: no 'launches', 'workspace' or 'options'",
                self->lang);
        goto fail;
    }
    if (!value && (module || (!common_backend_known () && self->lang))) {
        value = s_member (json, "name");
        if (value && s_string_dup (value, s_path (sub, path, "name"), 1, TASK_MAX_NAME,
                                   &self->name, err, errlen))
            goto fail;
        return self;
    }
    if (!value) {
        s_fail (err, errlen, path, "missing 'launches'");
        goto fail;
    }
    if (!json_is_array (value) || json_array_size (value) < 1
    ||  json_array_size (value) > TASK_MAX_LAUNCHES) {
        s_fail (err, errlen, sub, "must be an array of 1 to %d launches", TASK_MAX_LAUNCHES);
        goto fail;
    }
    self->nlaunches = json_array_size (value);
    self->launches = calloc (self->nlaunches, sizeof (common_launch_t));
    if (!self->launches) {
        self->nlaunches = 0;
        s_fail (err, errlen, sub, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < self->nlaunches; i++)
        if (s_launch_parse (json_array_get (value, i), s_path_index (item, sub, i),
                            &self->launches [i], err, errlen))
            goto fail;

    value = s_member (json, "name");
    if (value && s_string_dup (value, s_path (sub, path, "name"), 1, TASK_MAX_NAME,
                               &self->name, err, errlen))
        goto fail;
    return self;

fail:
    common_program_destroy (&self);
    return NULL;
}

common_program_t *
common_program_from_json (json_t *json, const char *backend, char *err, size_t errlen)
{
    return s_program_parse (json, backend, "program", err, errlen);
}

//  Names of the program's expressions fit the task; launch args exist.
static int
s_program_check (const common_task_t *task, const common_program_t *program, const char *path,
                 char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN], field [TASK_PATH_LEN], item [TASK_PATH_LEN];
    if (!program)
        return s_fail (err, errlen, path, "no program");
    if (task->is_module && program->nlaunches)
        return s_fail (err, errlen, path, "the task's reference is a %s module: so must this be",
                       task->reference.lang? task->reference.lang: "Python");
    if (!task->is_module && !program->nlaunches)
        return s_fail (err, errlen, path, "a '%s' program is a module, but the task launches kernels",
                       program->lang? program->lang: "?");
    if (program->workspace
    &&  s_check_expr (task, program->workspace, s_path (sub, path, "workspace"), err, errlen))
        return -1;
    for (size_t i = 0; i < program->nlaunches; i++) {
        const common_launch_t *launch = &program->launches [i];
        s_path_index (sub, s_path (field, path, "launches"), i);
        for (size_t d = 0; d < 3; d++) {
            if (s_check_expr (task, launch->grid [d],
                              s_path_index (item, s_path (field, sub, "grid"), d), err, errlen)
            ||  s_check_expr (task, launch->block [d],
                              s_path_index (item, s_path (field, sub, "block"), d), err, errlen))
                return -1;
        }
        if (s_check_expr (task, launch->shared, s_path (field, sub, "shared"), err, errlen))
            return -1;
        for (size_t a = 0; a < launch->nargs; a++) {
            const char *name = launch->args [a];
            s_path_index (item, s_path (field, sub, "args"), a);
            if (strcmp (name, "workspace") == 0) {
                if (!program->workspace)
                    return s_fail (err, errlen, item,
                                   "'workspace' passed but the program has no workspace");
                continue;
            }
            bool found = false;
            for (size_t k = 0; k < task->nargs && !found; k++)
                found = strcmp (task->args [k].name, name) == 0;
            if (!found)
                return s_fail (err, errlen, item, "'%s' is not an arg of task %s", name, task->name);
        }
    }
    return 0;
}

//  --- task ---

//  Task names end up in logs and file names: keep them plain.
static int
s_task_name (json_t *json, const char *path, char **out, char *err, size_t errlen)
{
    const char *text;
    if (s_string (json, path, 1, TASK_MAX_NAME, &text, err, errlen))
        return -1;
    for (const char *c = text; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')
           || *c == '_' || *c == '-' || *c == '.'))
            return s_fail (err, errlen, path, "'%s' may only hold letters, digits, '_', '-' and '.'", text);
    *out = strdup (text);
    if (!*out)
        return s_fail (err, errlen, path, "out of memory");
    return 0;
}

static int
s_sizes_parse (common_task_t *self, json_t *json, const char *path, char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN];
    if (!json)
        return s_fail (err, errlen, path, "missing 'sizes'");
    s_path (sub, path, "sizes");
    if (!json_is_array (json) || json_array_size (json) < 1 || json_array_size (json) > TASK_MAX_SIZES)
        return s_fail (err, errlen, sub, "must be an array of 1 to %d objects", TASK_MAX_SIZES);
    self->nsizes = json_array_size (json);
    self->sizes = calloc (self->nsizes, sizeof (common_size_t));
    if (!self->sizes) {
        self->nsizes = 0;
        return s_fail (err, errlen, sub, "out of memory");
    }
    for (size_t i = 0; i < self->nsizes; i++) {
        json_t *entry = json_array_get (json, i);
        common_size_t *size = &self->sizes [i];
        const common_size_t *first = &self->sizes [0];
        s_path_index (item, sub, i);
        if (!json_is_object (entry))
            return s_fail (err, errlen, item, "must be an object of size names to integers");
        bool seen [TASK_MAX_SIZE_VARS] = { false };
        size_t nseen = 0;
        const char *key;
        size_t key_len;
        json_t *value;
        json_object_keylen_foreach (entry, key, key_len, value) {
            char field [TASK_PATH_LEN];
            if (strlen (key) != key_len)
                return s_fail (err, errlen, item, "a key contains a NUL byte");
            if (s_is_annotation (key))
                continue;
            if (!s_is_ident (key))
                return s_fail (err, errlen, item, "'%.64s' is not an identifier", key);
            int64_t v = 0;
            if (s_int_range (value, s_path (field, item, key), 0, TASK_MAX_SIZE_VALUE, &v, err, errlen))
                return -1;
            if (i == 0) {
                if (size->nvars == TASK_MAX_SIZE_VARS)
                    return s_fail (err, errlen, item, "more than %d size names", TASK_MAX_SIZE_VARS);
                size->names [size->nvars] = strdup (key);
                if (!size->names [size->nvars])
                    return s_fail (err, errlen, item, "out of memory");
                size->values [size->nvars++] = v;
                continue;
            }
            //  Later sizes keep the first size's order, so names[k] is
            //  the same name in every size.
            size_t k = 0;
            while (k < first->nvars && strcmp (first->names [k], key) != 0)
                k++;
            if (k == first->nvars)
                return s_fail (err, errlen, item,
                               "'%s' is not in sizes[0]; every size must define the same names", key);
            size->names [k] = strdup (key);
            if (!size->names [k])
                return s_fail (err, errlen, item, "out of memory");
            size->values [k] = v;
            seen [k] = true;
            nseen++;
        }
        if (i > 0) {
            size->nvars = first->nvars;
            if (nseen != first->nvars)
                for (size_t k = 0; k < first->nvars; k++)
                    if (!seen [k])
                        return s_fail (err, errlen, item,
                                       "missing '%s'; every size must define the same names",
                                       first->names [k]);
        }
    }
    return 0;
}

static int
s_init_parse (json_t *json, const char *path, common_init_t *init, char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN];
    if (!json_is_object (json))
        return s_fail (err, errlen, path, "must be an object");
    json_t *value = s_member (json, "dist");
    if (!value)
        return s_fail (err, errlen, path, "missing 'dist'");
    const char *name;
    if (s_string (value, s_path (sub, path, "dist"), 1, 32, &name, err, errlen))
        return -1;
    if (common_init_dist_parse (name, &init->dist))
        return s_fail (err, errlen, sub,
                       "'%s' is not a distribution (normal uniform randint zeros ones arange)", name);

    const char *key0 = NULL, *key1 = NULL;
    double p0 = 0, p1 = 0;
    switch (init->dist) {
        case INIT_NORMAL:  key0 = "mean";  key1 = "std";  p1 = 1;  break;
        case INIT_UNIFORM: key0 = "low";   key1 = "high"; p1 = 1;  break;
        case INIT_RANDINT: key0 = "low";   key1 = "high"; p1 = 10; break;
        case INIT_ARANGE:  key0 = "start"; key1 = "step"; p1 = 1;  break;
        default: break;
    }
    const char *key;
    size_t key_len;
    json_object_keylen_foreach (json, key, key_len, value) {
        if (strlen (key) != key_len)
            return s_fail (err, errlen, path, "a key contains a NUL byte");
        if (strcmp (key, "dist") == 0 || s_is_annotation (key)
        || (key0 && strcmp (key, key0) == 0) || (key1 && strcmp (key, key1) == 0))
            continue;
        return s_fail (err, errlen, path, "unknown key '%.64s' for dist '%s'", key, name);
    }
    if (key0 && (value = s_member (json, key0))
    &&  s_number (value, s_path (sub, path, key0), &p0, err, errlen))
        return -1;
    if (key1 && (value = s_member (json, key1))
    &&  s_number (value, s_path (sub, path, key1), &p1, err, errlen))
        return -1;

    if (init->dist == INIT_NORMAL && p1 < 0)
        return s_fail (err, errlen, path, "std must be >= 0, got %g", p1);
    if (init->dist == INIT_UNIFORM && !(p1 >= p0))
        return s_fail (err, errlen, path, "high (%g) must be >= low (%g)", p1, p0);
    if (init->dist == INIT_RANDINT) {
        if (p0 != floor (p0) || p1 != floor (p1) || fabs (p0) > 0x1p53 || fabs (p1) > 0x1p53)
            return s_fail (err, errlen, path, "randint low and high must be integers up to 2^53");
        if (!(p1 > p0))
            return s_fail (err, errlen, path, "high (%g) must be > low (%g)", p1, p0);
    }
    init->p0 = p0;
    init->p1 = p1;
    return 0;
}

//  True when v (a whole number) fits the integer dtype.
static bool
s_int_fits (common_dtype_t dtype, int64_t v)
{
    switch (dtype) {
        case DTYPE_I8:  return v >= INT8_MIN && v <= INT8_MAX;
        case DTYPE_U8:  return v >= 0 && v <= UINT8_MAX;
        case DTYPE_I32: return v >= INT32_MIN && v <= INT32_MAX;
        default:        return true;
    }
}

//  True when the float dtype holds v without overflowing to infinity.
static bool
s_float_fits (common_dtype_t dtype, double v)
{
    uint8_t buf [8];
    common_dtype_set (dtype, buf, 0, v);
    return isfinite (common_dtype_get (dtype, buf, 0));
}

static int
s_arg_parse (common_task_t *task, size_t index, json_t *json, const char *path,
             char *err, size_t errlen)
{
    static const char *const keys [] = { "name", "kind", "dtype", "shape", "init", "value", NULL };
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN];
    common_arg_t *arg = &task->args [index];
    arg->init.dist = INIT_NORMAL;
    arg->init.p0 = 0;
    arg->init.p1 = 1;
    if (!json_is_object (json))
        return s_fail (err, errlen, path, "must be an object");
    if (s_check_keys (json, path, keys, err, errlen))
        return -1;

    json_t *value = s_member (json, "name");
    if (!value)
        return s_fail (err, errlen, path, "missing 'name'");
    if (s_ident_dup (value, s_path (sub, path, "name"), &arg->name, err, errlen))
        return -1;
    if (strcmp (arg->name, "workspace") == 0)
        return s_fail (err, errlen, sub, "'workspace' is reserved for the program's scratch buffer");
    for (size_t k = 0; k < index; k++)
        if (strcmp (task->args [k].name, arg->name) == 0)
            return s_fail (err, errlen, sub, "'%s' is also the name of args[%zu]", arg->name, k);

    const char *text;
    value = s_member (json, "kind");
    if (!value)
        return s_fail (err, errlen, path, "missing 'kind'");
    if (s_string (value, s_path (sub, path, "kind"), 1, 16, &text, err, errlen))
        return -1;
    if (s_kind_parse (text, &arg->kind))
        return s_fail (err, errlen, sub, "'%s' is not a kind (input output inout scalar)", text);

    value = s_member (json, "dtype");
    if (!value)
        return s_fail (err, errlen, path, "missing 'dtype'");
    if (s_string (value, s_path (sub, path, "dtype"), 1, 16, &text, err, errlen))
        return -1;
    arg->dtype = common_dtype_parse (text);
    if (arg->dtype == DTYPE_INVALID)
        return s_fail (err, errlen, sub, "'%s' is not a dtype (f16 bf16 f32 f64 i8 u8 i32 i64)", text);

    bool scalar = arg->kind == ARG_SCALAR;
    value = s_member (json, "shape");
    s_path (sub, path, "shape");
    if (scalar && value)
        return s_fail (err, errlen, path, "a scalar takes no 'shape'");
    if (!scalar) {
        if (!value)
            return s_fail (err, errlen, path, "missing 'shape'");
        if (!json_is_array (value) || json_array_size (value) > TASK_MAX_DIMS)
            return s_fail (err, errlen, sub, "must be an array of at most %d dims", TASK_MAX_DIMS);
        arg->ndims = json_array_size (value);
        for (size_t d = 0; d < arg->ndims; d++)
            if (s_expr_dup (json_array_get (value, d), s_path_index (item, sub, d),
                            &arg->shape [d], err, errlen))
                return -1;
    }

    value = s_member (json, "init");
    if (value) {
        if (arg->kind != ARG_INPUT && arg->kind != ARG_INOUT)
            return s_fail (err, errlen, path, "only input and inout args take 'init'");
        if (s_init_parse (value, s_path (sub, path, "init"), &arg->init, err, errlen))
            return -1;
    }

    value = s_member (json, "value");
    s_path (sub, path, "value");
    if (!scalar && value)
        return s_fail (err, errlen, path, "only scalars take 'value'");
    if (scalar) {
        if (!value)
            return s_fail (err, errlen, path, "missing 'value'");
        if (json_is_string (value)) {
            arg->value_is_expr = true;
            if (s_string_dup (value, sub, 1, COMMON_EXPR_MAX_LEN, &arg->value_expr, err, errlen))
                return -1;
        }
        else {
            if (s_number (value, sub, &arg->value, err, errlen))
                return s_fail (err, errlen, sub, "must be a finite number or an integer expression string");
            if (!common_dtype_is_float (arg->dtype)) {
                int64_t v = 0;
                if (s_int (value, &v))
                    return s_fail (err, errlen, sub, "%g is not an integer, but the dtype is %s",
                                   arg->value, common_dtype_name (arg->dtype));
                if (!s_int_fits (arg->dtype, v))
                    return s_fail (err, errlen, sub, "%lld is out of range for %s",
                                   (long long) v, common_dtype_name (arg->dtype));
                arg->value = (double) v;
            }
            else
            if (!s_float_fits (arg->dtype, arg->value))
                return s_fail (err, errlen, sub, "%g is out of range for %s",
                               arg->value, common_dtype_name (arg->dtype));
        }
    }
    return 0;
}

//  Every task-level expression (shapes, scalar values, bytes) uses only
//  size names.
static int
s_task_check_exprs (const common_task_t *task, char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN], field [TASK_PATH_LEN];
    for (size_t i = 0; i < task->nargs; i++) {
        const common_arg_t *arg = &task->args [i];
        s_path_index (sub, "task.args", i);
        for (size_t d = 0; d < arg->ndims; d++)
            if (s_check_expr (task, arg->shape [d],
                              s_path_index (item, s_path (field, sub, "shape"), d), err, errlen))
                return -1;
        if (arg->kind == ARG_SCALAR && arg->value_is_expr
        &&  s_check_expr (task, arg->value_expr, s_path (field, sub, "value"), err, errlen))
            return -1;
    }
    if (task->bytes_expr && s_check_expr (task, task->bytes_expr, "task.bytes", err, errlen))
        return -1;
    return 0;
}

//  The "python" object of a module task (docs/pytorch-tasks.md).
static int
s_module_parse (common_task_t *self, json_t *json, const char *path, char *err, size_t errlen)
{
    static const char *const keys [] = {
        "dtype", "entry", "candidate_entry", "kernel", "library_share_max", "baseline", NULL
    };
    static const char *const kernels [] = { "triton", "cuda", "any", "torch", NULL };
    static const char *const baselines [] = { "eager", "compile", NULL };
    common_module_t *m = &self->module;
    char sub [TASK_PATH_LEN], field [TASK_PATH_LEN];
    m->library_share_max = 0.5;
    s_path (sub, path, "python");
    if (json && !json_is_object (json))
        return s_fail (err, errlen, sub, "must be an object");
    if (json && s_check_keys (json, sub, keys, err, errlen))
        return -1;
    json_t *value = json? s_member (json, "dtype"): NULL;
    if (value) {
        const char *name;
        if (s_string (value, s_path (field, sub, "dtype"), 1, 16, &name, err, errlen))
            return -1;
        m->dtype = common_dtype_parse (name);
        if (!common_dtype_is_float (m->dtype))
            return s_fail (err, errlen, field, "'%s' is not a floating dtype (f16, bf16, f32, f64)", name);
    }
    const char *texts [4] = { "Model", NULL, "any", "eager" };
    const char *names [4] = { "entry", "candidate_entry", "kernel", "baseline" };
    char **slots [4] = { &m->entry, &m->candidate_entry, &m->kernel, &m->baseline };
    for (int k = 0; k < 4; k++) {
        value = json? s_member (json, names [k]): NULL;
        if (value && s_string (value, s_path (field, sub, names [k]), 1, TASK_MAX_NAME, &texts [k],
                               err, errlen))
            return -1;
    }
    if (!s_is_ident (texts [0]))
        return s_fail (err, errlen, sub, "entry '%.64s' is not a Python identifier", texts [0]);
    //  A class's candidate is ModelNew; a function's has the function's name.
    bool is_class = texts [0][0] >= 'A' && texts [0][0] <= 'Z';
    if (!texts [1])
        texts [1] = is_class? "ModelNew": texts [0];
    if (!s_is_ident (texts [1]))
        return s_fail (err, errlen, sub, "candidate_entry '%.64s' is not a Python identifier", texts [1]);
    bool ok = false;
    for (int i = 0; kernels [i]; i++)
        ok |= strcmp (texts [2], kernels [i]) == 0;
    if (!ok)
        return s_fail (err, errlen, sub, "kernel '%.64s' is not one of triton, cuda, any, torch", texts [2]);
    ok = false;
    for (int i = 0; baselines [i]; i++)
        ok |= strcmp (texts [3], baselines [i]) == 0;
    if (!ok)
        return s_fail (err, errlen, sub, "baseline '%.64s' is not eager or compile", texts [3]);
    value = json? s_member (json, "library_share_max"): NULL;
    if (value && (s_number (value, s_path (field, sub, "library_share_max"), &m->library_share_max,
                            err, errlen) || m->library_share_max < 0 || m->library_share_max > 1))
        return s_fail (err, errlen, field, "must be a number in [0, 1]");
    for (int k = 0; k < 4; k++)
        if (!(*slots [k] = strdup (texts [k])))
            return s_fail (err, errlen, sub, "out of memory");
    return 0;
}

static common_task_t *
s_task_parse (json_t *json, const char *path, char *err, size_t errlen)
{
    static const char *const keys [] = {
        "name", "backend", "args", "sizes", "timing_size", "tolerance",
        "reference", "baseline", "bytes", "python", NULL
    };
    static const char *const tolerance_keys [] = { "atol", "rtol", "exact", NULL };
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN];
    if (!json) {
        s_fail (err, errlen, path, "missing");
        return NULL;
    }
    if (!json_is_object (json)) {
        s_fail (err, errlen, path, "must be an object");
        return NULL;
    }
    if (s_check_keys (json, path, keys, err, errlen))
        return NULL;
    common_task_t *self = calloc (1, sizeof *self);
    if (!self) {
        s_fail (err, errlen, path, "out of memory");
        return NULL;
    }
    self->atol = 1e-5;
    self->rtol = 1e-5;

    json_t *value = s_member (json, "name");
    if (!value) {
        s_fail (err, errlen, path, "missing 'name'");
        goto fail;
    }
    if (s_task_name (value, s_path (sub, path, "name"), &self->name, err, errlen))
        goto fail;

    value = s_member (json, "backend");
    if (!value) {
        s_fail (err, errlen, path, "missing 'backend'");
        goto fail;
    }
    const char *text;
    if (s_string (value, s_path (sub, path, "backend"), 1, 16, &text, err, errlen))
        goto fail;
    char names [128];
    if (common_backend_known () && !common_backend_find (text, NULL)) {
        s_fail (err, errlen, sub, "'%s' is not a backend (%s)", text,
                common_backend_list (NULL, false, names, sizeof names));
        goto fail;
    }
    if (!(self->backend = strdup (text))) {
        s_fail (err, errlen, path, "out of memory");
        goto fail;
    }

    //  A module task (its reference's language is a module language) has no
    //  args: its module makes its inputs; sizes are its constants.
    json_t *ref = s_member (json, "reference");
    const char *ref_lang = json_string_value (json_object_get (ref, "lang"));
    self->is_module = common_backend_modules (self->backend, ref_lang)
                   || (!common_backend_known () && ref_lang && !json_object_get (ref, "launches"));
    if (self->is_module) {
        self->atol = self->rtol = 1e-2;
        if (s_module_parse (self, s_member (json, "python"), path, err, errlen))
            goto fail;
        if (s_member (json, "args") || s_member (json, "bytes")) {
            s_fail (err, errlen, path, "a %s task has no 'args' or 'bytes': its module makes its inputs",
                    ref_lang? ref_lang: "module");
            goto fail;
        }
    }
    else
    if (s_member (json, "python")) {
        s_fail (err, errlen, path, "'python' belongs to tasks whose reference is a Python module");
        goto fail;
    }
    value = s_member (json, "sizes");
    if (!value && self->is_module) {
        self->sizes = calloc (1, sizeof (common_size_t));
        if (!self->sizes) {
            s_fail (err, errlen, path, "out of memory");
            goto fail;
        }
        self->nsizes = 1;
    }
    else
    if (s_sizes_parse (self, value, path, err, errlen))
        goto fail;

    value = s_member (json, "args");
    s_path (sub, path, "args");
    if (self->is_module)
        ;
    else
    if (!value) {
        s_fail (err, errlen, path, "missing 'args'");
        goto fail;
    }
    else
    if (!json_is_array (value) || json_array_size (value) < 1 || json_array_size (value) > TASK_MAX_ARGS) {
        s_fail (err, errlen, sub, "must be an array of 1 to %d args", TASK_MAX_ARGS);
        goto fail;
    }
    self->nargs = self->is_module? 0: json_array_size (value);
    self->args = self->nargs? calloc (self->nargs, sizeof (common_arg_t)): NULL;
    if (self->nargs && !self->args) {
        self->nargs = 0;
        s_fail (err, errlen, sub, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < self->nargs; i++)
        if (s_arg_parse (self, i, json_array_get (value, i), s_path_index (item, sub, i), err, errlen))
            goto fail;

    value = s_member (json, "timing_size");
    if (value) {
        int64_t v = 0;
        if (s_int_range (value, s_path (sub, path, "timing_size"), 0, (int64_t) self->nsizes - 1,
                         &v, err, errlen))
            goto fail;
        self->timing_size = (size_t) v;
    }

    value = s_member (json, "tolerance");
    if (value) {
        s_path (sub, path, "tolerance");
        if (!json_is_object (value)) {
            s_fail (err, errlen, sub, "must be an object {atol, rtol, exact}");
            goto fail;
        }
        if (s_check_keys (value, sub, tolerance_keys, err, errlen))
            goto fail;
        double *fields [] = { &self->atol, &self->rtol };
        for (size_t k = 0; k < 2; k++) {
            json_t *tol = s_member (value, tolerance_keys [k]);
            if (!tol)
                continue;
            s_path (item, sub, tolerance_keys [k]);
            if (s_number (tol, item, fields [k], err, errlen) || *fields [k] < 0) {
                s_fail (err, errlen, item, "must be a finite number >= 0");
                goto fail;
            }
        }
        json_t *exact = s_member (value, "exact");
        if (exact && !json_is_boolean (exact)) {
            s_fail (err, errlen, s_path (item, sub, "exact"), "must be true or false");
            goto fail;
        }
        self->exact = json_is_true (exact);
    }

    value = s_member (json, "bytes");
    if (value) {
        s_path (sub, path, "bytes");
        if (json_is_array (value)) {
            s_fail (err, errlen, sub, "arrays are not supported yet; give one integer expression");
            goto fail;
        }
        if (s_expr_dup (value, sub, &self->bytes_expr, err, errlen))
            goto fail;
    }
    if (s_task_check_exprs (self, err, errlen))
        goto fail;

    value = s_member (json, "reference");
    if (!value) {
        s_fail (err, errlen, path, "missing 'reference'");
        goto fail;
    }
    common_program_t *program = s_program_parse (value, self->backend, s_path (sub, path, "reference"),
                                                 err, errlen);
    if (!program)
        goto fail;
    self->reference = *program;
    free (program);
    if (s_program_check (self, &self->reference, sub, err, errlen))
        goto fail;

    value = s_member (json, "baseline");
    if (value) {
        s_path (sub, path, "baseline");
        self->baseline = s_program_parse (value, self->backend, sub, err, errlen);
        if (!self->baseline || s_program_check (self, self->baseline, sub, err, errlen))
            goto fail;
    }
    return self;

fail:
    common_task_destroy (&self);
    return NULL;
}

common_task_t *
common_task_from_json (json_t *json, char *err, size_t errlen)
{
    return s_task_parse (json, "task", err, errlen);
}

int
common_program_check (const common_task_t *task, const common_program_t *program,
                      char *err, size_t errlen)
{
    if (!task)
        return s_fail (err, errlen, "program", "no task");
    if (s_task_check_exprs (task, err, errlen))
        return -1;
    return s_program_check (task, program, "program", err, errlen);
}

//  --- eval and reward ---

static int
s_eval_parse (json_t *json, const char *path, common_eval_t *eval, char *err, size_t errlen)
{
    static const char *const keys [] = {
        "seed", "trials", "warmup", "timed", "timeout", "compile_timeout",
        "profile", "check_only", "feedback_bytes", NULL
    };
    char sub [TASK_PATH_LEN];
    *eval = (common_eval_t) {
        .seed_given = false, .seed = 0, .trials = 3, .warmup = 2, .timed = 10,
        .timeout_s = 10, .compile_timeout_s = 30, .profile = true, .check_sizes_only = false,
        .feedback_bytes = 2048
    };
    if (!json || json_is_null (json))
        return 0;
    if (!json_is_object (json))
        return s_fail (err, errlen, path, "must be an object");
    if (s_check_keys (json, path, keys, err, errlen))
        return -1;

    int64_t v = 0;
    json_t *value;
    if ((value = s_member (json, "seed"))) {
        if (s_int_range (value, s_path (sub, path, "seed"), 0, INT64_MAX, &v, err, errlen))
            return -1;
        eval->seed = (uint64_t) v;
        eval->seed_given = true;
    }
    if ((value = s_member (json, "trials"))) {
        if (s_int_range (value, s_path (sub, path, "trials"), 1, TASK_MAX_TRIALS, &v, err, errlen))
            return -1;
        eval->trials = (uint32_t) v;
    }
    if ((value = s_member (json, "warmup"))) {
        if (s_int_range (value, s_path (sub, path, "warmup"), 0, 1000, &v, err, errlen))
            return -1;
        eval->warmup = (uint32_t) v;
    }
    if ((value = s_member (json, "timed"))) {
        if (s_int_range (value, s_path (sub, path, "timed"), 1, TASK_MAX_TIMED, &v, err, errlen))
            return -1;
        eval->timed = (uint32_t) v;
    }
    if ((value = s_member (json, "timeout"))) {
        s_path (sub, path, "timeout");
        if (s_number (value, sub, &eval->timeout_s, err, errlen)
        ||  !(eval->timeout_s > 0 && eval->timeout_s <= 3600))
            return s_fail (err, errlen, sub, "must be a number of seconds in (0, 3600]");
    }
    if ((value = s_member (json, "compile_timeout"))) {
        s_path (sub, path, "compile_timeout");
        if (s_number (value, sub, &eval->compile_timeout_s, err, errlen)
        ||  !(eval->compile_timeout_s > 0 && eval->compile_timeout_s <= 600))
            return s_fail (err, errlen, sub, "must be a number of seconds in (0, 600]");
    }
    if ((value = s_member (json, "profile"))
    &&  s_bool (value, s_path (sub, path, "profile"), &eval->profile, err, errlen))
        return -1;
    if ((value = s_member (json, "check_only"))
    &&  s_bool (value, s_path (sub, path, "check_only"), &eval->check_sizes_only, err, errlen))
        return -1;
    if ((value = s_member (json, "feedback_bytes"))) {
        if (s_int_range (value, s_path (sub, path, "feedback_bytes"), 0, 65536, &v, err, errlen))
            return -1;
        eval->feedback_bytes = (uint32_t) v;
    }
    return 0;
}

int
common_eval_from_json (json_t *json, common_eval_t *eval, char *err, size_t errlen)
{
    return s_eval_parse (json, "eval", eval, err, errlen);
}

static int
s_reward_parse (json_t *json, const char *path, common_reward_t *reward, char *err, size_t errlen)
{
    static const char *const keys [] = {
        "compile_error", "incorrect", "runtime_error", "timeout", "clip", "shape", NULL
    };
    char sub [TASK_PATH_LEN];
    *reward = (common_reward_t) {
        .compile_error = -1.0, .incorrect = -0.5, .runtime_error = -0.5, .timeout = -0.5,
        .clip = 2.0, .log_shape = false
    };
    if (!json || json_is_null (json))
        return 0;
    if (!json_is_object (json))
        return s_fail (err, errlen, path, "must be an object");
    if (s_check_keys (json, path, keys, err, errlen))
        return -1;

    double *failures [] = {
        &reward->compile_error, &reward->incorrect, &reward->runtime_error, &reward->timeout
    };
    for (size_t k = 0; k < 4; k++) {
        json_t *value = s_member (json, keys [k]);
        if (!value)
            continue;
        s_path (sub, path, keys [k]);
        if (s_number (value, sub, failures [k], err, errlen))
            return -1;
        if (*failures [k] > 0)
            return s_fail (err, errlen, sub,
                           "%g is > 0: a failure must never outscore a correct kernel, whose reward is > 0",
                           *failures [k]);
    }
    json_t *value = s_member (json, "clip");
    if (value) {
        s_path (sub, path, "clip");
        if (s_number (value, sub, &reward->clip, err, errlen) || !(reward->clip > 0))
            return s_fail (err, errlen, sub, "must be a number > 0");
    }
    value = s_member (json, "shape");
    if (value) {
        const char *text;
        if (s_string (value, s_path (sub, path, "shape"), 1, 16, &text, err, errlen))
            return -1;
        if (strcmp (text, "linear") == 0)
            reward->log_shape = false;
        else
        if (strcmp (text, "log") == 0)
            reward->log_shape = true;
        else
            return s_fail (err, errlen, sub, "'%s' is not a shape (linear or log)", text);
    }
    return 0;
}

int
common_reward_from_json (json_t *json, common_reward_t *reward, char *err, size_t errlen)
{
    return s_reward_parse (json, "reward", reward, err, errlen);
}

//  --- job ---

common_job_t *
common_job_from_json (json_t *json, char *err, size_t errlen)
{
    static const char *const keys [] = { "task", "candidate", "eval", "reward", "tag", NULL };
    if (!json_is_object (json)) {
        s_fail (err, errlen, "job", "must be an object");
        return NULL;
    }
    if (s_check_keys (json, "job", keys, err, errlen))
        return NULL;
    common_job_t *self = calloc (1, sizeof *self);
    if (!self) {
        s_fail (err, errlen, "job", "out of memory");
        return NULL;
    }

    json_t *value = s_member (json, "task");
    if (!value) {
        s_fail (err, errlen, "job", "missing 'task'");
        goto fail;
    }
    self->task = s_task_parse (value, "task", err, errlen);
    if (!self->task)
        goto fail;

    value = s_member (json, "candidate");
    if (!value) {
        s_fail (err, errlen, "job", "missing 'candidate'");
        goto fail;
    }
    self->candidate = s_program_parse (value, self->task->backend, "candidate", err, errlen);
    if (!self->candidate)
        goto fail;
    //  The reference and baseline were checked with the task.
    if (s_program_check (self->task, self->candidate, "candidate", err, errlen))
        goto fail;

    if (s_eval_parse (s_member (json, "eval"), "eval", &self->eval, err, errlen)
    ||  s_reward_parse (s_member (json, "reward"), "reward", &self->reward, err, errlen))
        goto fail;

    value = s_member (json, "tag");
    if (value && s_string_dup (value, "tag", 0, TASK_MAX_TAG, &self->tag, err, errlen))
        goto fail;
    return self;

fail:
    common_job_destroy (&self);
    return NULL;
}

//  --- layout ---

size_t
common_task_size_vars (const common_task_t *task, size_t size_index,
                       common_expr_var_t *vars, size_t max)
{
    if (!task || size_index >= task->nsizes || !vars)
        return 0;
    const common_size_t *size = &task->sizes [size_index];
    size_t n = size->nvars < max ? size->nvars : max;
    for (size_t k = 0; k < n; k++) {
        vars [k].name = size->names [k];
        vars [k].value = size->values [k];
    }
    return n;
}

//  Evaluate one launch's geometry and resolve its args.
static int
s_launch_layout (const common_task_t *task, const common_program_t *program, size_t index,
                 const common_expr_var_t *vars, size_t nvars, size_t size_index,
                 common_launch_layout_t *out, char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN], field [TASK_PATH_LEN];
    const common_launch_t *launch = &program->launches [index];
    s_path_index (sub, "program.launches", index);
    out->kernel = launch->kernel;
    for (size_t d = 0; d < 3; d++) {
        const char *names [] = { "grid", "block" };
        char *const *exprs [] = { launch->grid, launch->block };
        int64_t *values [] = { out->grid, out->block };
        for (size_t k = 0; k < 2; k++) {
            s_path_index (item, s_path (field, sub, names [k]), d);
            if (s_eval_expr (exprs [k][d], vars, nvars, size_index, item, &values [k][d], err, errlen))
                return -1;
            if (values [k][d] < 1 || values [k][d] > TASK_MAX_LAUNCH_DIM)
                return s_fail (err, errlen, item, "%lld at size %zu, must be 1 to %lld",
                               (long long) values [k][d], size_index, TASK_MAX_LAUNCH_DIM);
        }
    }
    s_path (field, sub, "shared");
    if (s_eval_expr (launch->shared, vars, nvars, size_index, field, &out->shared, err, errlen))
        return -1;
    if (out->shared < 0 || out->shared > TASK_MAX_LAUNCH_DIM)
        return s_fail (err, errlen, field, "%lld bytes at size %zu, must be 0 to %lld",
                       (long long) out->shared, size_index, TASK_MAX_LAUNCH_DIM);

    if (launch->args_given) {
        if (launch->nargs > TASK_MAX_ARGS + 1)
            return s_fail (err, errlen, sub, "more than %d args", TASK_MAX_ARGS + 1);
        for (size_t a = 0; a < launch->nargs; a++) {
            s_path_index (item, s_path (field, sub, "args"), a);
            if (strcmp (launch->args [a], "workspace") == 0) {
                if (!program->workspace)
                    return s_fail (err, errlen, item, "'workspace' passed but the program has no workspace");
                out->args [a] = -1;
                continue;
            }
            size_t k = 0;
            while (k < task->nargs && strcmp (task->args [k].name, launch->args [a]) != 0)
                k++;
            if (k == task->nargs)
                return s_fail (err, errlen, item, "'%s' is not an arg of the task", launch->args [a]);
            out->args [a] = (int32_t) k;
        }
        out->nargs = launch->nargs;
    }
    else {
        for (size_t k = 0; k < task->nargs; k++)
            out->args [k] = (int32_t) k;
        out->nargs = task->nargs;
        if (program->workspace)
            out->args [out->nargs++] = -1;
    }
    return 0;
}

int
common_task_layout (const common_task_t *task, const common_program_t *program,
                    size_t size_index, uint64_t max_bytes,
                    common_layout_t *layout, char *err, size_t errlen)
{
    char sub [TASK_PATH_LEN], item [TASK_PATH_LEN], field [TASK_PATH_LEN];
    if (!task || !layout)
        return s_fail (err, errlen, "layout", "no task");
    if (size_index >= task->nsizes)
        return s_fail (err, errlen, "task.sizes", "size %zu does not exist (%zu sizes)",
                       size_index, task->nsizes);
    if (task->nargs > TASK_MAX_ARGS)
        return s_fail (err, errlen, "task.args", "more than %d args", TASK_MAX_ARGS);
    if (program && program->nlaunches > TASK_MAX_LAUNCHES)
        return s_fail (err, errlen, "program.launches", "more than %d launches", TASK_MAX_LAUNCHES);
    if (max_bytes == 0)
        max_bytes = TASK_DEFAULT_MAX_TENSOR_BYTES;
    memset (layout, 0, sizeof *layout);
    layout->size_index = size_index;

    common_expr_var_t vars [TASK_MAX_SIZE_VARS];
    size_t nvars = common_task_size_vars (task, size_index, vars, TASK_MAX_SIZE_VARS);
    uint64_t total = 0;
    bool total_overflow = false;

    for (size_t i = 0; i < task->nargs; i++) {
        const common_arg_t *arg = &task->args [i];
        s_path_index (sub, "task.args", i);
        layout->count [i] = 1;
        if (arg->kind == ARG_SCALAR) {
            s_path (field, sub, "value");
            if (arg->value_is_expr) {
                int64_t v = 0;
                if (s_eval_expr (arg->value_expr, vars, nvars, size_index, field, &v, err, errlen))
                    return -1;
                if (!common_dtype_is_float (arg->dtype) && !s_int_fits (arg->dtype, v))
                    return s_fail (err, errlen, field, "%lld at size %zu is out of range for %s",
                                   (long long) v, size_index, common_dtype_name (arg->dtype));
                if (common_dtype_is_float (arg->dtype) && !s_float_fits (arg->dtype, (double) v))
                    return s_fail (err, errlen, field, "%lld at size %zu is out of range for %s",
                                   (long long) v, size_index, common_dtype_name (arg->dtype));
                layout->scalar_int [i] = v;
                layout->scalar [i] = (double) v;
            }
            else {
                double v = arg->value;
                layout->scalar [i] = v;
                //  Truncate toward zero, clamped: a float scalar may be any size.
                layout->scalar_int [i] = v >= 0x1p63 ? INT64_MAX
                                       : v < -0x1p63 ? INT64_MIN : (int64_t) v;
            }
            continue;
        }
        if (arg->ndims > TASK_MAX_DIMS)
            return s_fail (err, errlen, sub, "more than %d dims", TASK_MAX_DIMS);
        uint64_t count = 1;
        for (size_t d = 0; d < arg->ndims; d++) {
            int64_t dim;
            s_path_index (item, s_path (field, sub, "shape"), d);
            if (s_eval_expr (arg->shape [d], vars, nvars, size_index, item, &dim, err, errlen))
                return -1;
            if (dim < 0)
                return s_fail (err, errlen, item, "dim is %lld at size %zu, must be >= 0",
                               (long long) dim, size_index);
            layout->dims [i][d] = dim;
            if (__builtin_mul_overflow (count, (uint64_t) dim, &count))
                return s_fail (err, errlen, sub, "element count overflows 64 bits at size %zu",
                               size_index);
        }
        uint64_t bytes;
        if (__builtin_mul_overflow (count, (uint64_t) common_dtype_size (arg->dtype), &bytes))
            return s_fail (err, errlen, sub, "byte count overflows 64 bits at size %zu", size_index);
        layout->count [i] = count;
        layout->bytes [i] = bytes;
        if (__builtin_add_overflow (total, bytes, &total))
            total_overflow = true;
    }

    if (program && program->workspace) {
        int64_t ws;
        if (s_eval_expr (program->workspace, vars, nvars, size_index, "program.workspace",
                         &ws, err, errlen))
            return -1;
        if (ws < 0 || (uint64_t) ws > max_bytes)
            return s_fail (err, errlen, "program.workspace", "%lld bytes at size %zu, must be 0 to %llu",
                           (long long) ws, size_index, (unsigned long long) max_bytes);
        layout->workspace_bytes = (uint64_t) ws;
        if (__builtin_add_overflow (total, (uint64_t) ws, &total))
            total_overflow = true;
    }

    char limit [32], need [32];
    s_human (max_bytes, limit, sizeof limit);
    if (total_overflow) {
        if (err && errlen > 0)
            snprintf (err, errlen, "size %zu needs over 16 EiB of tensors and workspace, over the %s limit",
                      size_index, limit);
        return -1;
    }
    if (total > max_bytes) {
        s_human (total, need, sizeof need);
        if (err && errlen > 0)
            snprintf (err, errlen, "size %zu needs %s of tensors and workspace, over the %s limit",
                      size_index, need, limit);
        return -1;
    }
    layout->total_bytes = total;

    if (program) {
        for (size_t l = 0; l < program->nlaunches; l++)
            if (s_launch_layout (task, program, l, vars, nvars, size_index,
                                 &layout->launches [l], err, errlen))
                return -1;
        layout->nlaunches = program->nlaunches;
    }
    return 0;
}

//  --- files ---

json_t *
common_json_load_file (const char *path, size_t max_bytes, char *err, size_t errlen)
{
    if (!path) {
        s_fail (err, errlen, "(null)", "no path");
        return NULL;
    }
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        s_fail (err, errlen, path, "%s", strerror (errno));
        return NULL;
    }
    struct stat st;
    if (fstat (fd, &st) != 0) {
        s_fail (err, errlen, path, "%s", strerror (errno));
        close (fd);
        return NULL;
    }
    if (!S_ISREG (st.st_mode)) {
        s_fail (err, errlen, path, "not a regular file");
        close (fd);
        return NULL;
    }
    if ((uint64_t) st.st_size > max_bytes) {
        s_fail (err, errlen, path, "%lld bytes, over the %zu-byte limit", (long long) st.st_size, max_bytes);
        close (fd);
        return NULL;
    }
    //  Read at most one byte past the limit, in case the file grew since fstat.
    size_t cap = (size_t) st.st_size + 1;
    char *buf = malloc (cap);
    if (!buf) {
        s_fail (err, errlen, path, "out of memory");
        close (fd);
        return NULL;
    }
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read (fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            s_fail (err, errlen, path, "%s", strerror (errno));
            free (buf);
            close (fd);
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t) n;
    }
    close (fd);
    if (len > max_bytes || len == cap) {
        s_fail (err, errlen, path, "changed while being read, or over the %zu-byte limit", max_bytes);
        free (buf);
        return NULL;
    }
    json_error_t jerr;
    json_t *json = json_loadb (buf, len, JSON_REJECT_DUPLICATES, &jerr);
    free (buf);
    if (!json) {
        if (err && errlen > 0)
            snprintf (err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    return json;
}
