/*  fuzz_targets - the entry function of every fuzz target.

    Plain C with no libFuzzer in it, so the gcc build can replay inputs too
    (tests/test_fuzz_regressions.c). Beyond "no crash, no leak, no UB", each
    target checks properties that must hold for any input: a rejection
    always has a reason; what decodes under tight limits decodes the same
    under the defaults; a decoded value survives encode and decode; a job
    parses from msgpack exactly when it parses from JSON; a layout that
    succeeds respects every bound of docs/task-format.md; an expression
    that evaluates also passes the name check and keeps its value inside
    parentheses; a job the broker keys (broker_cache) keys the same after
    a round trip and whatever its tag, group, trajectory and seed; a marked
    result keeps its keys; a peer's bytes copy to valid UTF-8.
*/
#include "fuzz_targets.h"
#include "common_expr.h"
#include "common_task.h"
#include "proto_mpk.h"
#include "proto_mpr.h"
#include "proto_msg.h"
#include "broker_cache.h"
#include "common_util.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_SMALL_CAP      (1u << 20)      //  layout cap: tensors + workspace
#define FUZZ_LAUNCH_MAX     2147483647ll    //  grid, block and shared bound

//  Abort when an invariant does not hold, naming it.
#define FUZZ_CHECK(cond) \
    do { if (!(cond)) s_broken (#cond, __FILE__, __LINE__); } while (0)

static void
s_broken (const char *what, const char *file, int line)
{
    fprintf (stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    abort ();
}

//  A reason was written: non-empty and terminated inside its buffer.
static bool
s_has_reason (const char *err, size_t errlen)
{
    return err [0] != '\0' && memchr (err, '\0', errlen) != NULL;
}

//  json_equal, but keys may hold NUL bytes (msgpack keys can, and
//  jansson's json_equal compares keys as C strings).
static bool
s_same (json_t *a, json_t *b)
{
    if (json_typeof (a) != json_typeof (b))
        return false;
    if (json_is_object (a)) {
        if (json_object_size (a) != json_object_size (b))
            return false;
        const char *key;
        size_t key_len;
        json_t *value;
        json_object_keylen_foreach (a, key, key_len, value) {
            json_t *other = json_object_getn (b, key, key_len);
            if (!other || !s_same (value, other))
                return false;
        }
        return true;
    }
    if (json_is_array (a)) {
        if (json_array_size (a) != json_array_size (b))
            return false;
        for (size_t i = 0; i < json_array_size (a); i++)
            if (!s_same (json_array_get (a, i), json_array_get (b, i)))
                return false;
        return true;
    }
    return json_equal (a, b);
}

void
fuzz_init (void)
{
    //  jansson seeds its hash from /dev/urandom: fix it so object order,
    //  and with it which error is met first, repeats from run to run.
    json_object_seed (1);
}

//  --------------------------------------------------------------------------
//  msgpack: the reader and the decoder

//  Walk the bytes token by token and value by value; nothing may point
//  outside them.
static void
s_reader_walk (const uint8_t *data, size_t size)
{
    proto_mpr_t reader;
    proto_mpr_item_t item;
    proto_mpr_init (&reader, data, size);
    while (proto_mpr_next (&reader, &item) == 0) {
        FUZZ_CHECK (reader.pos <= size);
        if (item.type == MPR_STR || item.type == MPR_BIN || item.type == MPR_EXT)
            FUZZ_CHECK (item.str >= (const char *) data
                     && (size_t) (item.str - (const char *) data) + item.len <= reader.pos);
        if (item.type == MPR_MAP)
            FUZZ_CHECK (item.count <= proto_mpr_left (&reader) / 2);
        if (item.type == MPR_ARRAY)
            FUZZ_CHECK (item.count <= proto_mpr_left (&reader));
    }
    FUZZ_CHECK (reader.reason != NULL);

    proto_mpr_init (&reader, data, size);
    while (proto_mpr_left (&reader) > 0) {
        size_t before = reader.pos;
        if (proto_mpr_skip (&reader, 8)) {
            FUZZ_CHECK (reader.reason != NULL);
            break;
        }
        FUZZ_CHECK (reader.pos > before && reader.pos <= size);
    }
}

int
fuzz_one_mpk (const uint8_t *data, size_t size)
{
    s_reader_walk (data, size);

    char err [256] = "";
    json_t *json = proto_mpk_decode (data, size, NULL, err, sizeof err);
    if (!json)
        FUZZ_CHECK (s_has_reason (err, sizeof err));
    else {
        char *buf = NULL;
        size_t len = 0;
        FUZZ_CHECK (proto_mpk_encode (json, &buf, &len) == 0);
        json_t *back = proto_mpk_decode (buf, len, NULL, err, sizeof err);
        FUZZ_CHECK (back != NULL);
        FUZZ_CHECK (s_same (json, back));
        json_decref (back);
        free (buf);
    }

    //  Anything within tight limits is within the defaults, and equal.
    proto_mpk_limits_t tight = {
        .max_bytes = 4096, .max_depth = 4, .max_items = 8, .max_total = 64, .max_string = 16
    };
    json_t *small = proto_mpk_decode (data, size, &tight, err, sizeof err);
    if (small) {
        FUZZ_CHECK (json != NULL);
        FUZZ_CHECK (s_same (json, small));
        json_decref (small);
    }
    else
        FUZZ_CHECK (s_has_reason (err, sizeof err));
    json_decref (json);
    return 0;
}

//  --------------------------------------------------------------------------
//  Protocol messages
//
//  Input layout (so the mutator can change each frame on its own):
//      byte 0          bit 0: a body frame follows the header
//      byte 1          n0, the size of frame 0
//      n0 bytes        frame 0 (signature, version, command)
//      2 bytes         nh, the size of the header, big-endian
//      nh bytes        the header
//      the rest        the body, when bit 0 is set (may be empty)
//  Sizes are cut to what is left.

//  Take up to n bytes from the input.
static const uint8_t *
s_take (const uint8_t **data, size_t *size, size_t n, size_t *got)
{
    const uint8_t *start = *data;
    *got = n < *size ? n : *size;
    *data += *got;
    *size -= *got;
    return start;
}

//  Decode the frames into a fresh message, the body given or not.
static proto_msg_t *
s_msg_decode (const uint8_t *frame0, size_t frame0_size, const uint8_t *header,
              size_t header_size, const uint8_t *body, size_t body_size, bool has_body,
              int *rc)
{
    proto_msg_t *msg = proto_msg_new (0);
    FUZZ_CHECK (msg != NULL);
    if (has_body) {
        zframe_t *frame = zframe_new (body, body_size);
        FUZZ_CHECK (frame != NULL);
        proto_msg_set_body (msg, &frame);
    }
    *rc = proto_msg_decode (msg, frame0, frame0_size, header, header_size);
    return msg;
}

int
fuzz_one_msg (const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool has_body = data [0] & 1;
    size_t n0 = data [1];
    data += 2;
    size -= 2;
    size_t frame0_size, header_size, got;
    const uint8_t *frame0 = s_take (&data, &size, n0, &frame0_size);
    const uint8_t *lenbytes = s_take (&data, &size, 2, &got);
    size_t nh = got == 2 ? ((size_t) lenbytes [0] << 8) | lenbytes [1] : 0;
    const uint8_t *header = s_take (&data, &size, nh, &header_size);

    int rc;
    proto_msg_t *msg = s_msg_decode (frame0, frame0_size, header, header_size,
                                     data, size, has_body, &rc);
    FUZZ_CHECK (rc == 0 || rc == -2);
    char *strings [] = {
        msg->backend, msg->device, msg->name, msg->tag, msg->reason, msg->client, msg->state,
        msg->status
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings [0]; i++)
        FUZZ_CHECK (memchr (strings [i], '\0', PROTO_MAX_STR) != NULL);
    if (rc == 0) {
        FUZZ_CHECK (msg->cmd >= PROTO_READY && msg->cmd <= PROTO_CMD_MAX);
        FUZZ_CHECK (strcmp (proto_cmd_name (msg->cmd), "UNKNOWN") != 0);
        FUZZ_CHECK (has_body == (msg->body != NULL));
        FUZZ_CHECK (!msg->body || (zframe_size (msg->body) > 0
                                && zframe_size (msg->body) <= PROTO_MAX_BODY));
        FUZZ_CHECK (header_size <= PROTO_MAX_HEADER);
        //  A command has a body always or never: the same frames with the
        //  body taken away (or added) are malformed.
        int other_rc;
        proto_msg_t *other = s_msg_decode (frame0, frame0_size, header, header_size,
                                           (const uint8_t *) "\xc0", 1, !has_body, &other_rc);
        FUZZ_CHECK (other_rc == -2 && other->code == PROTO_ERR_MALFORMED);
        proto_msg_destroy (&other);
    }
    else {
        FUZZ_CHECK (msg->code == PROTO_ERR_MALFORMED || msg->code == PROTO_ERR_UNKNOWN_COMMAND
                 || msg->code == PROTO_ERR_TOO_LARGE);
        FUZZ_CHECK (msg->reason [0] != '\0');
        FUZZ_CHECK (msg->body == NULL);
    }
    proto_msg_destroy (&msg);
    return 0;
}

//  --------------------------------------------------------------------------
//  Jobs and layouts

//  A successful layout keeps every bound the evaluator relies on.
static void
s_layout_check (const common_task_t *task, const common_program_t *program,
                const common_layout_t *layout, uint64_t cap)
{
    uint64_t total = layout->workspace_bytes;
    for (size_t i = 0; i < task->nargs; i++) {
        const common_arg_t *arg = &task->args [i];
        if (arg->kind == ARG_SCALAR) {
            FUZZ_CHECK (layout->count [i] == 1 && layout->bytes [i] == 0);
            continue;
        }
        uint64_t count = 1;
        for (size_t d = 0; d < arg->ndims; d++) {
            FUZZ_CHECK (layout->dims [i][d] >= 0);
            FUZZ_CHECK (!__builtin_mul_overflow (count, (uint64_t) layout->dims [i][d], &count));
        }
        FUZZ_CHECK (layout->count [i] == count);
        FUZZ_CHECK (layout->bytes [i] == count * common_dtype_size (arg->dtype));
        FUZZ_CHECK (!__builtin_add_overflow (total, layout->bytes [i], &total));
    }
    FUZZ_CHECK (layout->total_bytes == total);
    FUZZ_CHECK (total <= cap);
    if (!program) {
        FUZZ_CHECK (layout->nlaunches == 0);
        return;
    }
    FUZZ_CHECK (layout->nlaunches == program->nlaunches);
    FUZZ_CHECK (layout->nlaunches <= TASK_MAX_LAUNCHES);
    for (size_t l = 0; l < layout->nlaunches; l++) {
        const common_launch_layout_t *launch = &layout->launches [l];
        for (size_t d = 0; d < 3; d++) {
            FUZZ_CHECK (launch->grid [d] >= 1 && launch->grid [d] <= FUZZ_LAUNCH_MAX);
            FUZZ_CHECK (launch->block [d] >= 1 && launch->block [d] <= FUZZ_LAUNCH_MAX);
        }
        FUZZ_CHECK (launch->shared >= 0 && launch->shared <= FUZZ_LAUNCH_MAX);
        FUZZ_CHECK (launch->nargs <= TASK_MAX_ARGS + 1);
        for (size_t a = 0; a < launch->nargs; a++) {
            int32_t k = launch->args [a];
            FUZZ_CHECK ((k == -1 && program->workspace) || (k >= 0 && (size_t) k < task->nargs));
        }
    }
}

//  Lay out every size (and one past the end) for every program of the job.
static void
s_layouts (const common_job_t *job)
{
    const common_task_t *task = job->task;
    const common_program_t *programs [] = {
        job->candidate, &task->reference, task->baseline, NULL
    };
    const uint64_t caps [] = { FUZZ_SMALL_CAP, TASK_DEFAULT_MAX_TENSOR_BYTES };
    common_layout_t *layout = malloc (sizeof *layout);
    FUZZ_CHECK (layout != NULL);
    for (size_t s = 0; s <= task->nsizes; s++)
        for (size_t p = 0; p < 4; p++) {
            if (p == 2 && !task->baseline)
                continue;
            for (size_t c = 0; c < 2; c++) {
                char err [512] = "";
                int rc = common_task_layout (task, programs [p], s, caps [c], layout,
                                             err, sizeof err);
                if (rc == 0) {
                    FUZZ_CHECK (s < task->nsizes);
                    s_layout_check (task, programs [p], layout, caps [c]);
                }
                else {
                    FUZZ_CHECK (rc == -1);
                    FUZZ_CHECK (s_has_reason (err, sizeof err));
                }
            }
        }
    free (layout);
}

//  Parse a job and lay it out. When through_msgpack, also encode the value
//  as a client would, decode it as a worker would, and require the same
//  verdict. Returns true when the job parsed.
static bool
s_job (json_t *json, bool through_msgpack)
{
    char err [512] = "";
    common_job_t *job = common_job_from_json (json, err, sizeof err);
    if (!job)
        FUZZ_CHECK (s_has_reason (err, sizeof err));
    else {
        FUZZ_CHECK (job->task && job->candidate);
        FUZZ_CHECK (job->task->nsizes >= 1 && job->task->nsizes <= TASK_MAX_SIZES);
        FUZZ_CHECK (job->task->timing_size < job->task->nsizes);
        FUZZ_CHECK (job->task->nargs >= 1 && job->task->nargs <= TASK_MAX_ARGS);
        FUZZ_CHECK (common_program_check (job->task, job->candidate, err, sizeof err) == 0);
        s_layouts (job);
    }
    if (through_msgpack) {
        char *buf = NULL;
        size_t len = 0;
        FUZZ_CHECK (proto_mpk_encode (json, &buf, &len) == 0);
        json_t *back = proto_mpk_decode (buf, len, NULL, err, sizeof err);
        free (buf);
        //  JSON nests deeper than msgpack bodies may (32): then no verdict.
        if (back) {
            FUZZ_CHECK (s_same (json, back));
            FUZZ_CHECK (s_job (back, false) == (job != NULL));
            json_decref (back);
        }
    }
    bool parsed = job != NULL;
    common_job_destroy (&job);
    return parsed;
}

int
fuzz_one_job_json (const uint8_t *data, size_t size)
{
    json_error_t error;
    json_t *json = json_loadb ((const char *) data, size,
                               JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &error);
    if (!json)
        return 0;
    s_job (json, true);
    json_decref (json);
    return 0;
}

int
fuzz_one_job_mpk (const uint8_t *data, size_t size)
{
    char err [256] = "";
    json_t *json = proto_mpk_decode (data, size, NULL, err, sizeof err);
    if (!json)
        return 0;
    s_job (json, true);
    json_decref (json);
    return 0;
}

//  --------------------------------------------------------------------------
//  Expressions

#define FUZZ_NVARS 4

//  Values for the names M, N, K, B: plain sizes, the int64 extremes, and
//  zeros (so every division can be by zero).
static const int64_t s_var_sets [][FUZZ_NVARS] = {
    { 512, 1000, 0, 1ll << 40 },
    { 1, -1, INT64_MAX, INT64_MIN },
    { 3, 7, -7, 1ll << 62 },
    { 0, 0, 0, 0 },
};
#define FUZZ_NSETS (sizeof s_var_sets / sizeof s_var_sets [0])

int
fuzz_one_expr (const uint8_t *data, size_t size)
{
    static const char *const names [FUZZ_NVARS] = { "M", "N", "K", "B" };
    if (size < 1)
        return 0;
    common_expr_var_t vars [FUZZ_NVARS];
    for (size_t i = 0; i < FUZZ_NVARS; i++) {
        vars [i].name = names [i];
        vars [i].value = s_var_sets [data [0] % FUZZ_NSETS][i];
    }
    //  The text, NUL-terminated; an inner NUL ends it early, as in C.
    //  Room for "-(" and ")" around it.
    size_t len = size - 1;
    char *text = malloc (len + 4);
    FUZZ_CHECK (text != NULL);
    memcpy (text + 2, data + 1, len);
    text [len + 2] = '\0';
    char *plain = text + 2;
    len = strlen (plain);

    char err [256] = "";
    int64_t value = 0;
    int rc = common_expr_eval (plain, vars, FUZZ_NVARS, &value, err, sizeof err);
    FUZZ_CHECK (rc == 0 || rc == -1);
    if (rc)
        FUZZ_CHECK (s_has_reason (err, sizeof err));

    //  The same verdict with no room for a reason.
    int64_t ignored;
    char tiny [1];
    FUZZ_CHECK (common_expr_eval (plain, vars, FUZZ_NVARS, &ignored, tiny, sizeof tiny) == rc);
    FUZZ_CHECK (tiny [0] == '\0');
    FUZZ_CHECK (common_expr_eval (plain, vars, FUZZ_NVARS, NULL, NULL, 0) == rc);

    //  Checking names is laxer than evaluating: it never fails what evaluates.
    int check = common_expr_check (plain, names, FUZZ_NVARS, err, sizeof err);
    if (rc == 0)
        FUZZ_CHECK (check == 0);
    if (check)
        FUZZ_CHECK (rc == -1 && s_has_reason (err, sizeof err));
    common_expr_check (plain, NULL, 0, NULL, 0);

    //  "(e)" is e and "-(e)" is its negation, whenever those evaluate.
    if (rc == 0) {
        text [1] = '(';
        text [len + 2] = ')';
        text [len + 3] = '\0';
        int64_t wrapped;
        if (common_expr_eval (text + 1, vars, FUZZ_NVARS, &wrapped, err, sizeof err) == 0)
            FUZZ_CHECK (wrapped == value);
        text [0] = '-';
        if (common_expr_eval (text, vars, FUZZ_NVARS, &wrapped, err, sizeof err) == 0)
            FUZZ_CHECK (value != INT64_MIN && wrapped == -value);
    }
    free (text);
    return 0;
}

//  --------------------------------------------------------------------------

//  --------------------------------------------------------------------------
//  cache_key: what the broker does with a job body it did not make

static void
s_key (json_t *job, uint8_t key [BROKER_CACHE_KEY_BYTES], int *rc)
{
    char err [256] = "";
    *rc = broker_cache_key (job, "cuda", key, err, sizeof err);
    FUZZ_CHECK (*rc == 0 || s_has_reason (err, sizeof err));
}

int
fuzz_one_cache_key (const uint8_t *data, size_t size)
{
    //  The broker's limits for a body it reads (s_job_describe).
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    limits.max_total = 1 << 16;
    char err [256];
    json_t *job = proto_mpk_decode (data, size, &limits, err, sizeof err);
    if (job) {
        uint8_t key [BROKER_CACHE_KEY_BYTES], again [BROKER_CACHE_KEY_BYTES];
        int rc, rc2;
        s_key (job, key, &rc);
        if (rc == 0) {
            //  Stable, and blind to the caller's bookkeeping and the seed.
            s_key (job, again, &rc2);
            FUZZ_CHECK (rc2 == 0 && memcmp (key, again, sizeof key) == 0);
            //  A second decode, not json_deep_copy: jansson's copy cuts keys
            //  at a NUL byte, which msgpack keys may hold.
            json_t *copy = proto_mpk_decode (data, size, &limits, err, sizeof err);
            FUZZ_CHECK (copy != NULL);
            json_object_set_new (copy, "tag", json_string ("t"));
            json_object_set_new (copy, "group", json_integer (7));
            json_object_del (copy, "trajectory");
            json_t *eval = json_object_get (copy, "eval");
            if (json_is_object (eval))
                json_object_set_new (eval, "seed", json_integer (12345));
            s_key (copy, again, &rc2);
            FUZZ_CHECK (rc2 == 0);
            //  Adding a seed to an eval that had none, or an eval of only a
            //  seed, are the same job: only compare when eval was there.
            if (json_is_object (json_object_get (job, "eval")))
                FUZZ_CHECK (memcmp (key, again, sizeof key) == 0);
            json_decref (copy);
            //  Encoded and decoded again (what a resend is): the same key.
            char *bytes = NULL;
            size_t nbytes = 0;
            FUZZ_CHECK (proto_mpk_encode (job, &bytes, &nbytes) == 0);
            json_t *back = proto_mpk_decode (bytes, nbytes, NULL, err, sizeof err);
            FUZZ_CHECK (back != NULL);
            s_key (back, again, &rc2);
            FUZZ_CHECK (rc2 == 0 && memcmp (key, again, sizeof key) == 0);
            json_decref (back);
            free (bytes);
        }
    }
    //  The same bytes as a result to mark: a map keeps every key.
    json_t *tag = json_string ("mine");
    zframe_t *marked = broker_cache_mark (data, size, size & 1, tag, NULL);
    json_decref (tag);
    FUZZ_CHECK (!marked || json_is_object (job));
    if (marked) {
        json_t *value = proto_mpk_decode (zframe_data (marked), zframe_size (marked), NULL, err,
                                          sizeof err);
        FUZZ_CHECK (value && json_is_true (json_object_get (value, "cached")));
        //  Keys with their lengths: msgpack keys may hold NUL bytes.
        for (void *iter = json_object_iter (job); iter; iter = json_object_iter_next (job, iter))
            FUZZ_CHECK (json_object_getn (value, json_object_iter_key (iter),
                                          json_object_iter_key_len (iter)) != NULL);
        json_decref (value);
        zframe_destroy (&marked);
    }
    json_decref (job);
    //  A peer's bytes as a name: always a string jansson takes.
    char text [300], out [64];
    size_t n = size < sizeof text - 1? size: sizeof text - 1;
    memcpy (text, data, n);
    text [n] = 0;
    common_utf8_copy (out, sizeof out, text);
    FUZZ_CHECK (strlen (out) < sizeof out);
    json_t *name = json_string (out);
    FUZZ_CHECK (name != NULL);
    json_decref (name);
    return 0;
}

const fuzz_target_t fuzz_targets [] = {
    { "mpk", fuzz_one_mpk },
    { "msg", fuzz_one_msg },
    { "job_json", fuzz_one_job_json },
    { "job_mpk", fuzz_one_job_mpk },
    { "expr", fuzz_one_expr },
    { "cache_key", fuzz_one_cache_key },
    { NULL, NULL }
};
