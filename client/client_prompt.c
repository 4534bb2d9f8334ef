/*  client_prompt - `kgym prompt`: the policy's prompt for a task.

    The template's sections are parsed from the built-in text; the values
    each needs are computed here exactly as python/kgym/prompts.py computes
    them (the test python/tests/test_prompt.py holds both to the same
    output). Sections are joined with a blank line.
*/
#include "client_prompt.h"
#include "client_prompt_template.h"
#include "client_import.h"
#include "client_pysource.h"
#include "worker_registry.h"
#include <czmq.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PROMPT_MAX_FILE (16u << 20)     //  bytes of a RESULT.json

//  A growing string.
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;                //  out of memory once: the rest is dropped
} s_buf_t;

static void
s_add (s_buf_t *buf, const char *text, size_t n)
{
    if (buf->failed)
        return;
    if (buf->len + n + 1 > buf->cap) {
        size_t cap = (buf->cap? buf->cap * 2: 256);
        while (cap < buf->len + n + 1)
            cap *= 2;
        char *data = (char *) realloc (buf->data, cap);
        if (!data) {
            buf->failed = true;
            return;
        }
        buf->data = data;
        buf->cap = cap;
    }
    memcpy (buf->data + buf->len, text, n);
    buf->len += n;
    buf->data [buf->len] = 0;
}

static void
s_adds (s_buf_t *buf, const char *text)
{
    s_add (buf, text, strlen (text));
}

static void
s_addf (s_buf_t *buf, const char *fmt, ...)
{
    char text [512];
    va_list args;
    va_start (args, fmt);
    vsnprintf (text, sizeof text, fmt, args);
    va_end (args);
    s_adds (buf, text);
}

//  The text, "" when empty; the buffer is left empty (take ownership).
static char *
s_take (s_buf_t *buf)
{
    char *text = buf->failed? NULL: buf->data? buf->data: strdup ("");
    if (buf->failed)
        free (buf->data);
    memset (buf, 0, sizeof *buf);
    return text;
}

//  The prompt being made: the template's sections and the values so far.
typedef struct {
    zhashx_t *sections;         //  name -> text (owned strings)
    zhashx_t *values;           //  key -> text (owned strings)
    s_buf_t user;               //  the user text so far
    char *err;                  //  where to say why
    size_t errlen;
    int rc;                     //  -1 once something failed
} s_prompt_t;

//  The template's sections: "@@ NAME" lines start them; trailing newlines dropped.
static zhashx_t *
s_sections (void)
{
    zhashx_t *sections = zhashx_new ();
    if (!sections)
        return NULL;
    zhashx_set_destructor (sections, (zhashx_destructor_fn *) zstr_free);
    const char *at = CLIENT_PROMPT_TEMPLATE;
    char *name = NULL;
    s_buf_t text = { 0 };
    while (true) {
        const char *end = strchr (at, '\n');
        size_t n = end? (size_t) (end - at): strlen (at);
        bool header = n >= 3 && strncmp (at, "@@ ", 3) == 0;
        if (header || !end) {
            if (!header && name) {
                s_add (&text, at, n);
            }
            if (name) {
                char *body = s_take (&text);
                size_t len = body? strlen (body): 0;
                while (len && body [len - 1] == '\n')
                    body [--len] = 0;
                if (body)
                    zhashx_insert (sections, name, body);
                zstr_free (&name);
            }
            if (!end)
                break;
            name = strndup (at + 3, n - 3);
        }
        else
        if (name) {
            s_add (&text, at, n);
            s_add (&text, "\n", 1);
        }
        at = end + 1;
    }
    zstr_free (&name);
    free (text.data);
    return sections;
}

static void
s_fail (s_prompt_t *self, const char *fmt, ...)
{
    if (self->rc)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (self->err, self->errlen, fmt, args);
    va_end (args);
    self->rc = -1;
}

static void
s_set (s_prompt_t *self, const char *key, const char *value)
{
    zhashx_update (self->values, key, (void *) value);
}

//  Section name with {{key}} replaced (to free); NULL after s_fail.
static char *
s_render (s_prompt_t *self, const char *name)
{
    const char *text = (const char *) zhashx_lookup (self->sections, name);
    if (!text) {
        s_fail (self, "the prompt template has no section '%s'", name);
        return NULL;
    }
    s_buf_t out = { 0 };
    while (*text) {
        const char *open = strstr (text, "{{");
        const char *close = open? strstr (open + 2, "}}"): NULL;
        size_t keylen = close? (size_t) (close - open - 2): 0;
        if (!open || !close || keylen == 0 || keylen > 64 || strspn (open + 2, "abcdefghijklmnopqrstuvwxyz_") != keylen) {
            //  Not a key here: copy through the braces.
            size_t n = open? (size_t) (open - text) + 2: strlen (text);
            s_add (&out, text, n);
            text += n;
            continue;
        }
        s_add (&out, text, (size_t) (open - text));
        char key [65];
        memcpy (key, open + 2, keylen);
        key [keylen] = 0;
        const char *value = (const char *) zhashx_lookup (self->values, key);
        if (!value) {
            s_fail (self, "template section '%s' uses {{%s}}, which the code does not set", name, key);
            free (out.data);
            return NULL;
        }
        s_adds (&out, value);
        text = close + 2;
    }
    char *result = s_take (&out);
    if (!result)
        s_fail (self, "out of memory");
    return result;
}

//  Append a rendered section to the user text, after a blank line.
static void
s_part (s_prompt_t *self, const char *name)
{
    char *text = s_render (self, name);
    if (!text)
        return;
    if (self->user.len)
        s_adds (&self->user, "\n\n");
    s_adds (&self->user, text);
    free (text);
}

//  Render name into the value key.
static void
s_set_rendered (s_prompt_t *self, const char *key, const char *name)
{
    char *text = s_render (self, name);
    if (text)
        s_set (self, key, text);
    free (text);
}

static void
s_g (char *buf, size_t len, double value)
{
    snprintf (buf, len, "%g", value);
}

static bool
s_is_annotation (const char *key)
{
    return streq (key, "description") || streq (key, "comment") || strncmp (key, "x-", 2) == 0;
}

static const char *
s_str (json_t *object, const char *key)
{
    return json_string_value (json_object_get (object, key));
}

//  A JSON scalar as the Python side writes it with str().
static void
s_scalar (s_buf_t *buf, json_t *value)
{
    char num [64];
    if (json_is_integer (value))
        s_addf (buf, "%lld", (long long) json_integer_value (value));
    else
    if (json_is_string (value))
        s_adds (buf, json_string_value (value));
    else
    if (json_is_real (value)) {
        s_g (num, sizeof num, json_real_value (value));
        s_adds (buf, num);
    }
    else
        s_adds (buf, "?");
}

//  "a = 1, b = 2 (timed); a = 3, b = 2": the task's sizes.
static void
s_sizes_text (json_t *task, s_buf_t *out)
{
    json_t *sizes = json_object_get (task, "sizes");
    json_t *empty = json_object ();
    size_t count = json_is_array (sizes) && json_array_size (sizes)? json_array_size (sizes): 1;
    json_int_t timed = json_is_integer (json_object_get (task, "timing_size"))?
                       json_integer_value (json_object_get (task, "timing_size")): 0;
    for (size_t i = 0; i < count; i++) {
        json_t *size = json_is_array (sizes)? json_array_get (sizes, i): empty;
        if (i)
            s_adds (out, "; ");
        size_t items = 0;
        const char *key;
        json_t *value;
        json_object_foreach (json_is_object (size)? size: empty, key, value) {
            if (s_is_annotation (key))
                continue;
            s_addf (out, "%s%s = ", items++? ", ": "", key);
            s_scalar (out, value);
        }
        if (!items)
            s_adds (out, "as written");
        if ((json_int_t) i == timed)
            s_adds (out, " (timed)");
    }
    json_decref (empty);
}

//  One line of the arguments list.
static void
s_arg_line (json_t *arg, s_buf_t *out)
{
    const char *name = s_str (arg, "name"), *kind = s_str (arg, "kind"), *dtype = s_str (arg, "dtype");
    name = name? name: "?";
    kind = kind? kind: "?";
    dtype = dtype? dtype: "?";
    char num [64];
    if (streq (kind, "scalar")) {
        json_t *value = json_object_get (arg, "value");
        s_addf (out, "- %s: scalar %s = ", name, dtype);
        if (json_is_string (value))
            s_adds (out, json_string_value (value));
        else
        if (json_is_number (value)) {
            s_g (num, sizeof num, json_number_value (value));
            s_adds (out, num);
        }
        else
            s_adds (out, "?");
        return;
    }
    s_addf (out, "- %s: %s %s [", name, kind, dtype);
    json_t *shape = json_object_get (arg, "shape");
    for (size_t i = 0; json_is_array (shape) && i < json_array_size (shape); i++) {
        if (i)
            s_adds (out, ", ");
        s_scalar (out, json_array_get (shape, i));
    }
    s_adds (out, "]");
    json_t *init = json_object_get (arg, "init");
    const char *dist = s_str (init, "dist");
    if ((streq (kind, "input") || streq (kind, "inout")) && dist) {
        s_addf (out, " from %s(", dist);
        size_t items = 0;
        const char *key;
        json_t *value;
        json_object_foreach (init, key, value) {
            if (streq (key, "dist") || !json_is_number (value))
                continue;
            s_g (num, sizeof num, json_number_value (value));
            s_addf (out, "%s%s=%s", items++? ", ": "", key, num);
        }
        s_adds (out, ")");
    }
}

static void
s_tolerance (json_t *task, bool module, char *buf, size_t len)
{
    json_t *tol = json_object_get (task, "tolerance");
    if (json_is_true (json_object_get (tol, "exact"))) {
        snprintf (buf, len, "bit for bit");
        return;
    }
    double fallback = module? 1e-2: 1e-5;
    json_t *atol = json_object_get (tol, "atol"), *rtol = json_object_get (tol, "rtol");
    char a [64], r [64];
    s_g (a, sizeof a, json_is_number (atol)? json_number_value (atol): fallback);
    s_g (r, sizeof r, json_is_number (rtol)? json_number_value (rtol): fallback);
    snprintf (buf, len, "within atol = %s, rtol = %s", a, r);
}

//  The language: given (checked) or the task's default. NULL after s_fail.
static const char *
s_pick_lang (s_prompt_t *self, json_t *task, bool module, const char *backend, const char *lang)
{
    const char *kernel = s_str (json_object_get (task, "python"), "kernel");
    kernel = kernel? kernel: "any";
    bool cpu = streq (backend, "cpu");
    const char *allowed [2] = { NULL, NULL };
    const char *fallback;
    if (module) {
        allowed [0] = cpu? "c": "triton";
        allowed [1] = cpu? NULL: "cuda";
        fallback = cpu? "c": streq (kernel, "cuda")? "cuda": "triton";
    }
    else {
        allowed [0] = cpu? "c": "cuda";
        allowed [1] = cpu? NULL: "ptx";
        const char *ref_lang = s_str (json_object_get (task, "reference"), "lang");
        fallback = ref_lang && ((allowed [0] && streq (ref_lang, allowed [0]))
                                || (allowed [1] && streq (ref_lang, allowed [1])))? ref_lang: allowed [0];
    }
    if (!lang)
        return fallback;
    if (!streq (lang, "triton") && !streq (lang, "cuda") && !streq (lang, "c") && !streq (lang, "ptx")) {
        s_fail (self, "lang '%s' is not one of triton, cuda, c, ptx", lang);
        return NULL;
    }
    if (!streq (lang, allowed [0]) && !(allowed [1] && streq (lang, allowed [1]))) {
        if (allowed [1])
            s_fail (self, "a %s task on %s takes lang %s or %s, not %s", module? "PyTorch": "kgym C/CUDA",
                    backend, allowed [0], allowed [1], lang);
        else
            s_fail (self, "a %s task on %s takes lang %s, not %s", module? "PyTorch": "kgym C/CUDA",
                    backend, allowed [0], lang);
        return NULL;
    }
    if (module && (streq (kernel, "triton") || streq (kernel, "cuda")) && !streq (lang, kernel)) {
        s_fail (self, "task %s wants %s kernels (python.kernel), not %s", s_str (task, "name"), kernel, lang);
        return NULL;
    }
    return lang;
}

//  "status: ok, reward 1.5, speedup 1.5\nmessage\nfeedback"
static char *
s_report (json_t *result)
{
    s_buf_t out = { 0 };
    const char *status = s_str (result, "status");
    s_addf (&out, "status: %s", status? status: "unknown");
    static const char *const keys [] = { "reward", "speedup" };
    for (int i = 0; i < 2; i++) {
        json_t *value = json_object_get (result, keys [i]);
        if (json_is_number (value) && isfinite (json_number_value (value))) {
            char num [64];
            s_g (num, sizeof num, json_number_value (value));
            s_addf (&out, ", %s %s", keys [i], num);
        }
    }
    const char *message = s_str (result, "message"), *feedback = s_str (result, "feedback");
    if (message && *message) {
        s_adds (&out, "\n");
        s_adds (&out, message);
    }
    if (feedback && *feedback && !(message && streq (feedback, message))) {
        s_adds (&out, "\n");
        s_adds (&out, feedback);
    }
    return s_take (&out);
}

//  The module's constants, "a = 1, b = 2"; "" when none (or it does not read).
static char *
s_constants (const char *source)
{
    client_pysource_t *module = client_pysource_new (source, strlen (source));
    s_buf_t out = { 0 };
    for (size_t i = 0; module && !client_pysource_error (module) && i < client_pysource_constants (module); i++)
        s_addf (&out, "%s%s = %lld", i? ", ": "", client_pysource_constant_name (module, i),
                (long long) client_pysource_constant_value (module, i));
    client_pysource_destroy (&module);
    return s_take (&out);
}

//  The values and parts of a PyTorch task.
static void
s_module_parts (s_prompt_t *self, json_t *task, const char *backend, const char *lang)
{
    json_t *python = json_object_get (task, "python");
    const char *entry = s_str (python, "entry");
    entry = entry? entry: "Model";
    bool is_class = entry [0] >= 'A' && entry [0] <= 'Z';
    const char *candidate = s_str (python, "candidate_entry");
    candidate = candidate && *candidate? candidate: is_class? "ModelNew": entry;
    s_set (self, "entry", entry);
    s_set (self, "candidate_entry", candidate);
    const char *baseline = s_str (python, "baseline");
    s_set (self, "baseline", baseline && streq (baseline, "compile")?
           " (the reference compiled with torch.compile)": "");
    s_part (self, "task.module");
    char section [64];
    snprintf (section, sizeof section, "lang.module.%s", lang);
    s_part (self, section);
    const char *kernel = s_str (python, "kernel");
    kernel = kernel? kernel: "any";
    if (!streq (backend, "cpu")
    &&  (streq (kernel, "triton") || streq (kernel, "cuda") || streq (kernel, "any"))) {
        json_t *share = json_object_get (python, "library_share_max");
        char num [64];
        s_g (num, sizeof num, 100 * (json_is_number (share)? json_number_value (share): 0.5));
        s_set (self, "share", num);
        snprintf (section, sizeof section, "rule.%s", kernel);
        s_part (self, section);
    }
    s_part (self, "reference.module");
    char *list = s_constants (s_str (json_object_get (task, "reference"), "source"));
    if (list) {
        s_set (self, "list", list);
        s_set_rendered (self, "constants", *list? "constants": "constants.none");
    }
    free (list);
    const char *dtype = s_str (python, "dtype");
    if (dtype)
        s_set (self, "dtype", dtype);
    s_set_rendered (self, "dtype", dtype? "dtype": "dtype.none");
    s_buf_t sizes = { 0 };
    s_sizes_text (task, &sizes);
    char *text = s_take (&sizes);
    if (text)
        s_set (self, "sizes", text);
    free (text);
    json_t *list_sizes = json_object_get (task, "sizes");
    s_part (self, json_is_array (list_sizes) && json_array_size (list_sizes) > 1?
                  "shapes.module": "shapes.module.one");
}

//  The values and parts of a kgym C/CUDA task.
static void
s_kernel_parts (s_prompt_t *self, json_t *task, const char *backend, const char *lang)
{
    const char *description = s_str (task, "description");
    char *text = zsys_sprintf ("%s%s", description && *description? " ": "",
                               description? description: "");
    s_set (self, "description", text);
    zstr_free (&text);
    s_part (self, "task.kernel");
    char section [64];
    snprintf (section, sizeof section, "lang.kernel.%s", lang);
    s_part (self, section);
    const char *ref_lang = s_str (json_object_get (task, "reference"), "lang");
    s_set (self, "fence", ref_lang? ref_lang: streq (backend, "cpu")? "c": "cuda");
    s_part (self, "reference.kernel");
    json_t *args = json_object_get (task, "args");
    s_buf_t lines = { 0 }, arg_json = { 0 }, arg_names = { 0 }, sizes = { 0 }, size_names = { 0 };
    size_t count = 0;
    for (size_t i = 0; json_is_array (args) && i < json_array_size (args); i++) {
        json_t *arg = json_array_get (args, i);
        if (!json_is_object (arg))
            continue;
        if (count)
            s_adds (&lines, "\n");
        s_arg_line (arg, &lines);
        const char *name = s_str (arg, "name");
        json_t *string = json_string (name? name: "?");
        char *quoted = string? json_dumps (string, JSON_ENCODE_ANY): NULL;
        json_decref (string);
        s_adds (&arg_json, count? ", ": "");
        s_adds (&arg_json, quoted? quoted: "\"?\"");
        free (quoted);
        s_addf (&arg_names, "%s%s", count? ", ": "", name? name: "?");
        count++;
    }
    s_sizes_text (task, &sizes);
    json_t *all = json_object_get (task, "sizes");
    json_t *first = json_is_array (all)? json_array_get (all, 0): NULL;
    const char *key;
    json_t *value;
    size_t names = 0;
    if (json_is_object (first))
        json_object_foreach (first, key, value)
            if (!s_is_annotation (key))
                s_addf (&size_names, "%s%s", names++? ", ": "", key);
    struct { const char *key; s_buf_t *buf; } sets [] = {
        { "args", &lines }, { "arg_json", &arg_json }, { "arg_names", &arg_names },
        { "sizes", &sizes }, { "size_names", &size_names }
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets [0]; i++) {
        char *taken = s_take (sets [i].buf);
        if (taken)
            s_set (self, sets [i].key, taken);
        free (taken);
    }
    s_part (self, "shapes.kernel");
}

json_t *
client_prompt_build (json_t *task, const char *lang, const char *gpu, json_t *feedback,
                     char *err, size_t errlen)
{
    const char *name = s_str (task, "name");
    json_t *reference = json_object_get (task, "reference");
    const char *source = s_str (reference, "source");
    const char *backend = s_str (task, "backend");
    if (!json_is_object (task) || !name) {
        snprintf (err, errlen, "a task object with a name is needed");
        return NULL;
    }
    if (!source) {
        snprintf (err, errlen, "task %s has no reference source", name);
        return NULL;
    }
    if (!backend) {
        snprintf (err, errlen, "task %s has no backend", name);
        return NULL;
    }
    s_prompt_t self = { s_sections (), zhashx_new (), { 0 }, err, errlen, 0 };
    if (!self.sections || !self.values) {
        zhashx_destroy (&self.sections);
        zhashx_destroy (&self.values);
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    zhashx_set_destructor (self.values, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_duplicator (self.values, (zhashx_duplicator_fn *) strdup);
    const char *ref_lang = s_str (reference, "lang");
    bool module = ref_lang && streq (ref_lang, "python");
    lang = s_pick_lang (&self, task, module, backend, lang);
    json_t *prompt = NULL;
    if (lang) {
        char tolerance [160];
        s_tolerance (task, module, tolerance, sizeof tolerance);
        s_set (&self, "name", name);
        s_set (&self, "tolerance", tolerance);
        char *trimmed = strdup (source);
        size_t len = trimmed? strlen (trimmed): 0;
        while (len && trimmed [len - 1] == '\n')
            trimmed [--len] = 0;
        if (trimmed)
            s_set (&self, "source", trimmed);
        free (trimmed);
        if (module)
            s_module_parts (&self, task, backend, lang);
        else
            s_kernel_parts (&self, task, backend, lang);
        if (streq (backend, "cpu"))
            s_part (&self, "target.cpu");
        else
        if (gpu) {
            s_set (&self, "gpu", gpu);
            s_part (&self, "target.gpu");
        }
        else
            s_part (&self, "target.gpu.unknown");
        char section [64];
        const char *entry = (const char *) zhashx_lookup (self.values, "entry");
        if (module)
            snprintf (section, sizeof section, "answer.module.%s",
                      entry && entry [0] >= 'A' && entry [0] <= 'Z'? "class": "function");
        else
            snprintf (section, sizeof section, "answer.kernel.%s", lang);
        s_part (&self, section);
        if (feedback) {
            char *report = s_report (feedback);
            if (report)
                s_set (&self, "report", report);
            free (report);
            s_part (&self, "feedback");
        }
        char *system = s_render (&self, "system");
        char *user = s_take (&self.user);
        if (self.rc == 0 && system && user)
            prompt = json_pack ("{s:s, s:s, s:s, s:o, s:s, s:s, s:s}", "task", name,
                                "kind", module? "module": "kernel", "lang", lang,
                                "gpu", gpu? json_string (gpu): json_null (),
                                "answer", module? "python": lang, "system", system, "user", user);
        else
        if (self.rc == 0)
            snprintf (err, errlen, "out of memory");
        free (system);
        free (user);
    }
    free (self.user.data);
    zhashx_destroy (&self.sections);
    zhashx_destroy (&self.values);
    return prompt;
}

char *
client_prompt_local_gpu (void)
{
    const worker_backend_t *cuda = worker_registry_named ("cuda");
    if (!cuda || !cuda->probe)
        return NULL;
    char desc [256] = "", err [256] = "";
    if (cuda->probe (0, desc, sizeof desc, err, sizeof err) != 0 || !*desc)
        return NULL;
    //  "NVIDIA H200 (sm_90, 0000:1B:00.0)": the bus id says nothing to a model.
    char *open = strrchr (desc, '(');
    char *comma = open? strchr (open, ','): NULL;
    if (comma)
        strcpy (comma, ")");
    return strdup (desc);
}

json_t *
client_prompt_result (const char *text, char *err, size_t errlen)
{
    json_error_t error;
    json_t *result = json_loads (text, JSON_DECODE_ANY, &error);
    if (!result) {
        //  JSON lines: the last one.
        size_t len = strlen (text);
        while (len && strchr (" \t\r\n", text [len - 1]))
            len--;
        size_t start = len;
        while (start && text [start - 1] != '\n')
            start--;
        result = json_loadb (text + start, len - start, JSON_DECODE_ANY, &error);
        if (!result) {
            snprintf (err, errlen, "the feedback result is not JSON: %s", error.text);
            return NULL;
        }
    }
    if (!json_is_object (result)) {
        snprintf (err, errlen, "the feedback result is not a JSON object");
        json_decref (result);
        return NULL;
    }
    return result;
}

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym prompt [--lang triton|cuda|c|ptx] [--format text|json|chat] [--gpu NAME]\n"
        "                   [--feedback RESULT.json] TASK\n"
        "  the policy's prompt for TASK (a task file, a folder with task.json, or a KernelBench\n"
        "  .py module): the instruction, the reference, shapes and dtypes, the target, the answer\n"
        "  format the extractor reads back; --feedback adds the previous result's feedback.\n"
        "  --lang    PyTorch tasks: triton or cuda (c on cpu); C/CUDA tasks: cuda, ptx or c\n"
        "  --format  text (default), json (one object), chat (OpenAI-style messages)\n"
        "  --gpu     the target GPU in words (default: this host's, when it has one)\n");
}

//  A task from a path: a folder's task.json, a .py module, a JSON file (a
//  job's task too). NULL after a line on stderr.
static json_t *
s_load_task (const char *path)
{
    struct stat st;
    char *file = stat (path, &st) == 0 && S_ISDIR (st.st_mode)?
                 zsys_sprintf ("%s/task.json", path): strdup (path);
    char err [1024];
    json_t *task = file? client_import_load_task (file, NULL, err, sizeof err): NULL;
    if (!task)
        fprintf (stderr, "kgym prompt: %s\n", file? err: "out of memory");
    else
    if (json_is_object (json_object_get (task, "task")) && !json_object_get (task, "reference")) {
        json_t *inner = json_incref (json_object_get (task, "task"));
        json_decref (task);
        task = inner;
    }
    zstr_free (&file);
    return task;
}

//  The result in RESULT.json; NULL after a line on stderr.
static json_t *
s_load_result (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file) {
        fprintf (stderr, "kgym prompt: cannot read %s: %m\n", path);
        return NULL;
    }
    char *data = (char *) malloc (PROMPT_MAX_FILE + 1);
    size_t size = data? fread (data, 1, PROMPT_MAX_FILE + 1, file): 0;
    bool failed = !data || ferror (file) || size > PROMPT_MAX_FILE;
    fclose (file);
    json_t *result = NULL;
    char err [512];
    if (failed)
        fprintf (stderr, "kgym prompt: cannot read %s (or it is over %u MiB)\n", path,
                 PROMPT_MAX_FILE >> 20);
    else {
        data [size] = 0;
        result = client_prompt_result (data, err, sizeof err);
        if (!result)
            fprintf (stderr, "kgym prompt: %s: %s\n", path, err);
    }
    free (data);
    return result;
}

int
client_prompt_main (int argc, char **argv)
{
    static struct option options [] = {
        { "lang", required_argument, 0, 'l' }, { "format", required_argument, 0, 'f' },
        { "gpu", required_argument, 0, 'g' }, { "feedback", required_argument, 0, 'b' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *lang = NULL, *format = "text", *gpu = NULL, *feedback_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
            case 'l': lang = optarg; break;
            case 'f': format = optarg; break;
            case 'g': gpu = optarg; break;
            case 'b': feedback_path = optarg; break;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (!streq (format, "text") && !streq (format, "json") && !streq (format, "chat")) {
        fprintf (stderr, "kgym prompt: --format wants text, json or chat, not '%s'\n", format);
        return 2;
    }
    if (lang && !streq (lang, "triton") && !streq (lang, "cuda") && !streq (lang, "c")
    &&  !streq (lang, "ptx")) {
        fprintf (stderr, "kgym prompt: --lang wants triton, cuda, c or ptx, not '%s'\n", lang);
        return 2;
    }
    if (argc - optind != 1) {
        fprintf (stderr, "kgym prompt: need exactly one TASK\n");
        s_usage (stderr);
        return 2;
    }
    json_t *task = s_load_task (argv [optind]);
    json_t *feedback = task && feedback_path? s_load_result (feedback_path): NULL;
    if (!task || (feedback_path && !feedback)) {
        json_decref (task);
        return 1;
    }
    char *local = gpu? NULL: client_prompt_local_gpu ();
    char err [1024];
    json_t *prompt = client_prompt_build (task, lang, gpu? gpu: local, feedback, err, sizeof err);
    int rc = 0;
    if (!prompt) {
        fprintf (stderr, "kgym prompt: %s\n", err);
        rc = 1;
    }
    else
    if (streq (format, "text"))
        printf ("%s\n\n%s\n", s_str (prompt, "system"), s_str (prompt, "user"));
    else {
        json_t *out = streq (format, "json")? json_incref (prompt):
            json_pack ("[{s:s, s:O}, {s:s, s:O}]", "role", "system", "content",
                       json_object_get (prompt, "system"), "role", "user", "content",
                       json_object_get (prompt, "user"));
        char *text = out? json_dumps (out, JSON_COMPACT): NULL;
        if (text)
            printf ("%s\n", text);
        else
            rc = 1;
        free (text);
        json_decref (out);
    }
    free (local);
    json_decref (prompt);
    json_decref (feedback);
    json_decref (task);
    return rc;
}
