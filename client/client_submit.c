/*  client_submit - the `kgym submit` subcommand: jobs to a broker, result lines out.

    Jobs come from a source (the candidates on the command line, or the
    lines of a batch file read as they are needed, so a batch of any length
    runs in bounded memory), go out through client_kgym with at most
    --window in flight, and each RESULT becomes one line on stdout as soon
    as it arrives. Everything that stops the run says why in one line.

    GRPO groups, trajectories and the result cache policy (--group,
    --group-size, --trajectory, --cache, or the same keys on a batch line)
    go in each SUBMIT's header. A group's SUMMARY is said on stderr; after
    the last result the run waits a little for the summaries of its groups.
*/
#include "client_submit.h"
#include "client_extract.h"
#include "common_task.h"
#include "client_format.h"
#include "client_kgym.h"
#include "client_options.h"
#include "common_log.h"
#include <getopt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define SUBMIT_MAX_FILE (16u << 20)     //  bytes of a task or candidate file
#define SUBMIT_MAX_LINE (40u << 20)     //  bytes of a batch line (inline task + candidate)
#define SUBMIT_TASK_CACHE 256           //  task files kept loaded for batch lines
#define SUBMIT_PROGRESS_MS 100          //  redraw interval of the progress line
#define SUBMIT_MIN_SILENCE_S 3.0        //  never call a broker lost quicker than this
#define SUBMIT_RETRY_MIN_MS 100         //  first wait before sending a refused job again
#define SUBMIT_RETRY_MAX_MS 5000        //  longest wait between sends of a refused job
#define SUBMIT_SUMMARY_WAIT_MS 2000     //  after the last result, wait this long at most for summaries
#define SUBMIT_MAX_DEADLINE_S 604800.0  //  --deadline at most a week

//  Parsed options.
typedef struct {
    client_options_t conn;      //  --broker, CURVE, --timeout S (eval.timeout, when given)
    uint64_t seed;              //  --seed N (eval.seed), when given
    bool seed_given;
    const char *tag;            //  --tag T, or NULL
    uint32_t window;            //  --window N: jobs in flight
    double connect_timeout_s;   //  --connect-timeout S: first contact
    double broker_timeout_s;    //  --broker-timeout S: a broker away (restarting) this long is lost
    double deadline_s;          //  --deadline S: the whole run's limit (0: none)
    const char *client_id;      //  --client-id ID, or NULL (random)
    uint32_t heartbeat_ms;      //  --heartbeat MS
    const char *batch;          //  --batch FILE|-, or NULL
    bool table;                 //  --profile: readable blocks (stdout, or stderr with --json)
    bool json_lines;            //  --json: keep the JSON lines on stdout
    const char *group;          //  --group G, or NULL
    uint32_t group_size;        //  --group-size N (0: not said)
    const char *trajectory;     //  --trajectory X, or NULL
    client_cache_policy_t cache;//  --cache use|refresh|bypass
    const char *backend;        //  --backend T: the task's target instead of its own (a .py task's)
    char **paths;               //  TASK CANDIDATE...
    int npaths;                 //  entries in paths
    char **completions;         //  --completion FILE... (model answers; argv's strings)
    int ncompletions;           //  entries in completions
} s_options_t;

//  A job's SUBMIT options: the command line's, or a batch line's own.
typedef struct {
    char group [PROTO_MAX_STR];     //  "" none
    char trajectory [PROTO_MAX_STR];//  "" none
    uint32_t group_size;            //  0 not said
    client_cache_policy_t cache;    //  result cache policy
} s_jobopts_t;

//  Where jobs come from.
typedef struct {
    const s_options_t *opts;    //  borrowed
    json_t *task;               //  command-line form: the task
    int next_path;              //  command-line form: next candidate in opts->paths
    int next_completion;        //  command-line form: next of opts->completions
    FILE *batch;                //  batch form: the file (a copy of stdin for "-")
    size_t lineno;              //  batch form: lines read
    char *line;                 //  getline buffer
    size_t linecap;             //  its size
    zhashx_t *tasks;            //  batch form: task path -> json_t
    size_t total;               //  jobs in all (counted by the check)
    bool total_known;           //  total is final
} s_source_t;

//  Run state.
typedef struct {
    char **labels;              //  ref -> candidate label while in flight
    size_t maxlabels;           //  entries allocated
    size_t submitted;           //  jobs sent
    size_t inflight;            //  jobs sent without a result yet
    size_t accepted;            //  ACCEPTED seen
    size_t done;                //  results printed
    size_t failed;              //  jobs that ended without a result of their own (s_fail_job)
    zhashx_t *failures;         //  status -> count (size_t stored in the pointer)
    uint64_t *refused;          //  refs the broker refused (busy), to send again
    size_t nrefused;            //  entries used
    size_t maxrefused;          //  entries allocated
    int64_t retry_at_ms;        //  when to send the refused ones again
    int64_t retry_ms;           //  the wait after the next refusal
    int64_t started_ms;         //  first submit
    int64_t progress_ms;        //  last redraw
    bool tty;                   //  stderr is a terminal
    zhashx_t *noticed;          //  backends whose "no worker" notice was said
    zhashx_t *groups;           //  group -> 1 sent, 2 summarised (in the pointer)
    size_t unsummarised;        //  groups sent without a summary yet
} s_run_t;

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym submit --broker EP [options] TASK CANDIDATE...\n"
        "       kgym submit --broker EP [options] --batch FILE|-\n"
        "  --broker EP            the broker's client endpoint (e.g. tcp://host:5555);\n"
        "                         default $KGYM_BROKER\n"
        "  --timeout S            eval.timeout: seconds the runs of one job may take\n"
        "  --backend T            the task's target (a KernelBench .py task: default cuda)\n"
        "  --seed N               eval.seed: input seed (default: fresh per job)\n"
        "  --tag T                tag echoed in results\n"
        "  --group G              GRPO group id: the broker sends the group's summary when it ends\n"
        "                         (said on stderr)\n"
        "  --group-size N         jobs in the group (its summary comes once N have ended)\n"
        "  --trajectory X         multi-turn trajectory id (for kgym jobs --trajectory)\n"
        "  --cache POLICY         the broker's result cache: use (default: a kept result of the same\n"
        "                         job answers it, \"cached\": true), refresh (grade again and keep\n"
        "                         it), bypass (grade again, keep nothing)\n"
        "  --window N             jobs in flight at most (default 256)\n"
        "  --connect-timeout S    give up when the broker never answers (default 10)\n"
        "  --broker-timeout S     give up when a broker that answered is away longer (default 60);\n"
        "                         until then it reconnects and resends, each result printed once\n"
        "  --deadline S           the whole run's limit: jobs without a result by then are named\n"
        "                         on stderr and the exit status is 1\n"
        "  --client-id ID         stable client id (default: a random one)\n"
        "  --heartbeat MS         heartbeat interval towards the broker (default 1000)\n"
        "  --curve-secret FILE    own secret certificate (kgym keygen): CURVE to the broker\n"
        "  --broker-key FILE      the broker's public certificate (with --curve-secret)\n"
        "  --completion FILE      a model's answer to a PyTorch task (repeatable): its ```python\n"
        "                         block defining ModelNew is the candidate; an answer without one\n"
        "                         gets its line at once (status invalid, the feedback), unsent\n"
        "  --batch FILE|-         one job per line: {\"task\", \"candidate\", \"eval\", \"reward\", \"tag\"},\n"
        "                         and optionally \"group\", \"group_size\", \"trajectory\", \"cache\";\n"
        "                         every line is checked before any is sent (a bad one: exit 2)\n"
        "  --profile              per result, the feedback and a per-kernel table instead of JSON lines\n"
        "  --json                 with --profile: JSON lines on stdout, the tables on stderr\n");
}

//  Load a JSON file of at most SUBMIT_MAX_FILE bytes.
//  A task or candidate file: JSON, or a KernelBench-format .py module (a
//  task for target, default "cuda"; docs/pytorch-tasks.md).
static json_t *
s_load_json (const char *path, bool is_task, const char *target, char *err, size_t errlen)
{
    json_t *json = common_task_file_load (path, is_task, target? target: "cuda", SUBMIT_MAX_FILE,
                                          err, errlen);
    if (json && !json_is_object (json)) {
        snprintf (err, errlen, "%s: not a JSON object", path);
        json_decref (json);
        json = NULL;
    }
    return json;
}

static void
s_json_free (void **item)
{
    if (*item) {
        json_decref ((json_t *) *item);
        *item = NULL;
    }
}

//  A batch line's task: a path (loaded, cached) or an object. New reference.
static json_t *
s_batch_task (s_source_t *self, json_t *task, char *err, size_t errlen)
{
    if (json_is_object (task))
        return json_incref (task);
    const char *path = json_string_value (task);
    if (!path) {
        snprintf (err, errlen, "\"task\" must be a path or an object");
        return NULL;
    }
    json_t *cached = (json_t *) zhashx_lookup (self->tasks, path);
    if (cached)
        return json_incref (cached);
    json_t *loaded = s_load_json (path, true, self->opts->backend, err, errlen);
    if (loaded && zhashx_size (self->tasks) < SUBMIT_TASK_CACHE)
        zhashx_insert (self->tasks, path, json_incref (loaded));
    return loaded;
}

//  Assemble {"task", "candidate", "eval", "reward", "tag"}; steals task and candidate.
static json_t *
s_make_job (const s_options_t *opts, json_t *task, json_t *candidate, json_t *line,
            char *err, size_t errlen)
{
    json_t *job = json_object ();
    json_t *eval = json_object ();
    json_object_set_new (job, "task", task);
    json_object_set_new (job, "candidate", candidate);
    if (opts->conn.timeout_given)
        json_object_set_new (eval, "timeout", json_real (opts->conn.timeout_s));
    if (opts->seed_given)
        json_object_set_new (eval, "seed", json_integer ((json_int_t) opts->seed));
    json_object_set_new (job, "eval", eval);
    const char *tag = opts->tag;
    if (line) {
        json_t *line_eval = json_object_get (line, "eval");
        json_t *reward = json_object_get (line, "reward");
        json_t *line_tag = json_object_get (line, "tag");
        if (line_eval && !json_is_object (line_eval)) {
            snprintf (err, errlen, "\"eval\" must be an object");
            json_decref (job);
            return NULL;
        }
        if (reward && !json_is_object (reward)) {
            snprintf (err, errlen, "\"reward\" must be an object");
            json_decref (job);
            return NULL;
        }
        if (line_tag && !json_is_string (line_tag)) {
            snprintf (err, errlen, "\"tag\" must be a string");
            json_decref (job);
            return NULL;
        }
        //  The line is more specific than the command line.
        if (line_eval)
            json_object_update (eval, line_eval);
        if (reward)
            json_object_set (job, "reward", reward);
        if (line_tag)
            tag = json_string_value (line_tag);
    }
    if (tag)
        json_object_set_new (job, "tag", json_string (tag));
    return job;
}

//  The command line's SUBMIT options.
static void
s_jobopts_default (const s_options_t *opts, s_jobopts_t *jobopts)
{
    memset (jobopts, 0, sizeof (*jobopts));
    proto_msg_set_str (jobopts->group, opts->group);
    proto_msg_set_str (jobopts->trajectory, opts->trajectory);
    jobopts->group_size = opts->group_size;
    jobopts->cache = opts->cache;
}

//  A batch line's own SUBMIT options over the command line's. 0, or -1
//  with a reason.
static int
s_batch_jobopts (json_t *line, s_jobopts_t *jobopts, char *err, size_t errlen)
{
    static const char *const names [] = { "group", "trajectory" };
    for (int i = 0; i < 2; i++) {
        json_t *value = json_object_get (line, names [i]);
        if (!value)
            continue;
        const char *text = json_string_value (value);
        if (!text || !*text || strlen (text) >= PROTO_MAX_STR) {
            snprintf (err, errlen, "\"%s\" must be a string of 1 to %d bytes", names [i],
                      PROTO_MAX_STR - 1);
            return -1;
        }
        proto_msg_set_str (i? jobopts->trajectory: jobopts->group, text);
    }
    json_t *size = json_object_get (line, "group_size");
    if (size) {
        if (!json_is_integer (size) || json_integer_value (size) < 0
        ||  json_integer_value (size) > UINT32_MAX) {
            snprintf (err, errlen, "\"group_size\" must be an integer from 0 to %u", UINT32_MAX);
            return -1;
        }
        jobopts->group_size = (uint32_t) json_integer_value (size);
    }
    json_t *cache = json_object_get (line, "cache");
    if (cache && client_cache_policy_parse (json_string_value (cache), &jobopts->cache)) {
        snprintf (err, errlen, "\"cache\" must be \"use\", \"refresh\" or \"bypass\"");
        return -1;
    }
    if (jobopts->group_size && !jobopts->group [0]) {
        snprintf (err, errlen, "\"group_size\" without a group");
        return -1;
    }
    return 0;
}

//  Next batch line as a job: 1, 0 at the end, -1 with a reason.
static int
s_next_batch (s_source_t *self, json_t **job, char **label, s_jobopts_t *jobopts,
              char *err, size_t errlen)
{
    char why [512];
    while (true) {
        errno = 0;
        ssize_t len = getline (&self->line, &self->linecap, self->batch);
        if (len < 0) {
            if (errno && errno != EAGAIN) {
                snprintf (err, errlen, "cannot read %s: %s", self->opts->batch, strerror (errno));
                return -1;
            }
            return 0;
        }
        size_t lineno = ++self->lineno;
        if ((size_t) len > SUBMIT_MAX_LINE) {
            snprintf (err, errlen, "%s:%zu: line longer than %u MiB", self->opts->batch, lineno,
                      SUBMIT_MAX_LINE >> 20);
            return -1;
        }
        if (strspn (self->line, " \t\r\n") == (size_t) len) {
            self->lineno--;                 //  blank lines are not jobs
            continue;
        }
        json_error_t error;
        json_t *line = json_loadb (self->line, (size_t) len, JSON_REJECT_DUPLICATES, &error);
        if (!json_is_object (line)) {
            snprintf (err, errlen, "%s:%zu: %s", self->opts->batch, lineno,
                      line? "not a JSON object": error.text);
            json_decref (line);
            return -1;
        }
        s_jobopts_default (self->opts, jobopts);
        if (s_batch_jobopts (line, jobopts, why, sizeof (why))) {
            snprintf (err, errlen, "%s:%zu: %s", self->opts->batch, lineno, why);
            json_decref (line);
            return -1;
        }
        json_t *task = s_batch_task (self, json_object_get (line, "task"), why, sizeof (why));
        json_t *candidate = json_object_get (line, "candidate");
        json_t *cand = NULL;
        if (task) {
            if (json_is_object (candidate))
                cand = json_incref (candidate);
            else
            if (json_is_string (candidate))
                cand = s_load_json (json_string_value (candidate), false, NULL, why, sizeof (why));
            else
                snprintf (why, sizeof (why), "\"candidate\" must be a path or an object");
        }
        if (!task || !cand) {
            snprintf (err, errlen, "%s:%zu: %s", self->opts->batch, lineno, why);
            json_decref (task);
            json_decref (line);
            return -1;
        }
        if (json_is_string (candidate))
            *label = strdup (json_string_value (candidate));
        else
            *label = zsys_sprintf ("line %zu", lineno);
        *job = s_make_job (self->opts, task, cand, line, why, sizeof (why));
        json_decref (line);
        if (!*job) {
            snprintf (err, errlen, "%s:%zu: %s", self->opts->batch, lineno, why);
            free (*label);
            *label = NULL;
            return -1;
        }
        return 1;
    }
}

//  A file's text (at most SUBMIT_MAX_FILE bytes, to free); NULL with a reason.
static char *
s_load_text (const char *path, char *err, size_t errlen)
{
    FILE *file = fopen (path, "rb");
    if (!file) {
        snprintf (err, errlen, "cannot read %s: %s", path, strerror (errno));
        return NULL;
    }
    char *data = (char *) malloc (SUBMIT_MAX_FILE + 1);
    size_t size = data? fread (data, 1, SUBMIT_MAX_FILE + 1, file): 0;
    bool failed = !data || ferror (file);
    fclose (file);
    if (failed || size > SUBMIT_MAX_FILE) {
        snprintf (err, errlen, failed? "cannot read %s": "%s is larger than 16 MiB", path);
        free (data);
        return NULL;
    }
    data [size] = 0;
    if (strlen (data) != size) {
        snprintf (err, errlen, "%s holds a NUL byte: not a model's text", path);
        free (data);
        return NULL;
    }
    return data;
}

//  The next --completion as a job (1), or as the result that answers it
//  here when it holds no gradable answer (2: *job is that result, never
//  sent). -1 with a reason when the file cannot be read or the task takes
//  no Python answer.
static int
s_next_completion (s_source_t *self, json_t **job, char **label, char *err, size_t errlen)
{
    const char *path = self->opts->completions [self->next_completion++];
    const char *entry = client_extract_entry (self->task);
    if (!entry) {
        snprintf (err, errlen, "--completion reads the Python answers of PyTorch tasks, and %s is "
                  "a C/CUDA task: give candidate JSON files (the Python client's kgym.extract "
                  "reads C/CUDA answers)", self->opts->paths [0]);
        return -1;
    }
    char *text = s_load_text (path, err, errlen);
    if (!text)
        return -1;
    char problem [512], feedback [1024];
    json_t *candidate = client_extract_python (text, entry, problem, sizeof problem);
    free (text);
    *label = strdup (path);
    if (!candidate) {
        //  Said as a result, like the Python client's error="extract".
        client_extract_feedback (problem, feedback, sizeof feedback);
        const char *name = json_string_value (json_object_get (self->task, "name"));
        *job = json_pack ("{s:s, s:n, s:n, s:s, s:s, s:s, s:s?}", "status", "invalid", "reward",
                          "speedup", "message", problem, "feedback", feedback, "error", "extract",
                          "task", name);
        return *job? 2: -1;
    }
    *job = s_make_job (self->opts, json_incref (self->task), candidate, NULL, err, errlen);
    return *job? 1: -1;
}

//  Next job of either form and its SUBMIT options: 1, 2 for a result
//  answered here (s_next_completion), 0 at the end, -1 with a reason.
static int
s_source_next (s_source_t *self, json_t **job, char **label, s_jobopts_t *jobopts,
               char *err, size_t errlen)
{
    if (self->batch)
        return s_next_batch (self, job, label, jobopts, err, errlen);
    s_jobopts_default (self->opts, jobopts);
    if (self->next_path >= self->opts->npaths && self->next_completion < self->opts->ncompletions)
        return s_next_completion (self, job, label, err, errlen);
    if (self->next_path >= self->opts->npaths)
        return 0;
    const char *path = self->opts->paths [self->next_path++];
    json_t *candidate = s_load_json (path, false, NULL, err, errlen);
    if (!candidate)
        return -1;
    *label = strdup (path);
    *job = s_make_job (self->opts, json_incref (self->task), candidate, NULL, err, errlen);
    return *job? 1: -1;
}

//  Back to the first job, after the check.
static int
s_source_rewind (s_source_t *self, char *err, size_t errlen)
{
    self->next_path = 1;
    self->next_completion = 0;
    self->lineno = 0;
    if (self->batch && fseek (self->batch, 0, SEEK_SET)) {
        snprintf (err, errlen, "cannot read %s again: %s", self->opts->batch, strerror (errno));
        return -1;
    }
    return 0;
}

//  Read every job once, as the run will, and keep none: a bad line or an
//  unreadable file is found before anything is sent. Counts them.
static int
s_source_check (s_source_t *self, char *err, size_t errlen)
{
    size_t count = 0;
    while (true) {
        json_t *job = NULL;
        char *label = NULL;
        s_jobopts_t jobopts;
        int got = s_source_next (self, &job, &label, &jobopts, err, errlen);
        json_decref (job);
        free (label);
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        count++;
    }
    self->total = count;
    self->total_known = true;
    return s_source_rewind (self, err, errlen);
}

//  Copy stdin to an unnamed file, so a batch from a pipe can be read twice
//  (checked, then sent) in bounded memory.
static FILE *
s_stdin_copy (char *err, size_t errlen)
{
    FILE *copy = tmpfile ();
    if (!copy) {
        snprintf (err, errlen, "cannot make a temporary file for the batch: %s", strerror (errno));
        return NULL;
    }
    char buffer [65536];
    size_t size;
    while ((size = fread (buffer, 1, sizeof (buffer), stdin)) > 0)
        if (fwrite (buffer, 1, size, copy) != size) {
            snprintf (err, errlen, "cannot keep the batch from stdin: %s", strerror (errno));
            fclose (copy);
            return NULL;
        }
    if (ferror (stdin) || fflush (copy) || fseek (copy, 0, SEEK_SET)) {
        snprintf (err, errlen, "cannot read the batch from stdin: %s", strerror (errno));
        fclose (copy);
        return NULL;
    }
    return copy;
}

//  Open the source and check every job of it; 0 or -1 with a reason.
static int
s_source_open (s_source_t *self, const s_options_t *opts, char *err, size_t errlen)
{
    memset (self, 0, sizeof (*self));
    self->opts = opts;
    if (!opts->batch) {
        self->task = s_load_json (opts->paths [0], true, opts->backend, err, errlen);
        if (self->task && opts->backend)
            json_object_set_new (self->task, "backend", json_string (opts->backend));
        self->next_path = 1;
        if (!self->task)
            return -1;
        return s_source_check (self, err, errlen);
    }
    self->tasks = zhashx_new ();
    if (!self->tasks) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    zhashx_set_destructor (self->tasks, s_json_free);
    if (streq (opts->batch, "-"))
        self->batch = s_stdin_copy (err, errlen);
    else {
        self->batch = fopen (opts->batch, "r");
        if (!self->batch)
            snprintf (err, errlen, "cannot read %s: %s", opts->batch, strerror (errno));
    }
    if (!self->batch)
        return -1;
    return s_source_check (self, err, errlen);
}

static void
s_source_close (s_source_t *self)
{
    json_decref (self->task);
    if (self->batch)
        fclose (self->batch);
    free (self->line);
    zhashx_destroy (&self->tasks);
}

//  --------------------------------------------------------------------------
//  Run

static int
s_label_set (s_run_t *run, uint64_t ref, char *label)
{
    if (ref >= run->maxlabels) {
        size_t grown = run->maxlabels? 2 * run->maxlabels: 1024;
        while (grown <= ref)
            grown *= 2;
        char **labels = (char **) realloc (run->labels, grown * sizeof (char *));
        if (!labels)
            return -1;
        memset (labels + run->maxlabels, 0, (grown - run->maxlabels) * sizeof (char *));
        run->labels = labels;
        run->maxlabels = grown;
    }
    run->labels [ref] = label;
    return 0;
}

static const char *
s_label (s_run_t *run, uint64_t ref)
{
    return ref < run->maxlabels && run->labels [ref]? run->labels [ref]: "(unknown job)";
}

//  A job of group (may be "") goes out; 0, or -1 out of memory.
static int
s_group_sent (s_run_t *run, const char *group)
{
    if (!group [0] || zhashx_lookup (run->groups, group))
        return 0;
    if (zhashx_insert (run->groups, group, (void *) 1))
        return -1;
    run->unsummarised++;
    return 0;
}

//  A group's SUMMARY: one readable line on stderr.
static void
s_summary (s_run_t *run, const char *group, json_t *summary)
{
    if ((size_t) zhashx_lookup (run->groups, group) == 1) {
        zhashx_update (run->groups, group, (void *) 2);
        run->unsummarised--;
    }
    json_t *pass = json_object_get (summary, "pass_rate");
    json_t *mean = json_object_get (summary, "reward_mean");
    json_t *std = json_object_get (summary, "reward_std");
    char rate [32] = "-", rewards [96] = "no reward";
    if (json_is_number (pass))
        snprintf (rate, sizeof (rate), "%.1f%%", 100 * json_number_value (pass));
    if (json_is_number (mean))
        snprintf (rewards, sizeof (rewards), "reward mean %.4g std %.4g",
                  json_number_value (mean), json_is_number (std)? json_number_value (std): 0.0);
    if (run->tty)
        fprintf (stderr, "\r\033[K");
    fprintf (stderr, "kgym submit: group %s: %lld job(s), %lld cancelled, pass rate %s, %s%s\n",
             group, (long long) json_integer_value (json_object_get (summary, "count")),
             (long long) json_integer_value (json_object_get (summary, "cancelled")), rate, rewards,
             json_is_true (json_object_get (summary, "zero_variance"))?
                " (zero variance: no gradient)": "");
}

static void
s_count_failure (s_run_t *run, json_t *result)
{
    const char *status = json_string_value (json_object_get (result, "status"));
    if (!status)
        status = "(no status)";
    if (streq (status, "ok"))
        return;
    size_t count = (size_t) zhashx_lookup (run->failures, status);
    zhashx_update (run->failures, status, (void *) (count + 1));
}

static void
s_progress (s_run_t *run, const s_source_t *source, bool force)
{
    if (!run->tty)
        return;
    int64_t now = zclock_mono ();
    if (!force && now - run->progress_ms < SUBMIT_PROGRESS_MS)
        return;
    run->progress_ms = now;
    double elapsed = (now - run->started_ms) / 1000.0;
    char total [32];
    if (source->total_known)
        snprintf (total, sizeof (total), "%zu", source->total);
    else
        snprintf (total, sizeof (total), "%zu+", run->submitted);
    char failures [256] = "";
    size_t used = 0;
    for (void *count = zhashx_first (run->failures); count && used < sizeof (failures);
         count = zhashx_next (run->failures)) {
        int n = snprintf (failures + used, sizeof (failures) - used, " %s=%zu",
                          (const char *) zhashx_cursor (run->failures), (size_t) count);
        used += n > 0? (size_t) n: 0;
    }
    fprintf (stderr, "\r\033[K%zu/%s done, %.1f jobs/s, failures:%s", run->done, total,
             elapsed > 0? run->done / elapsed: 0.0, used? failures: " none");
    fflush (stderr);
}

//  The parsed options; 0, or 2 on a usage error (said on stderr).
static int
s_parse (int argc, char **argv, s_options_t *opts)
{
    memset (opts, 0, sizeof (*opts));
    client_options_init (&opts->conn, "submit", 0);
    opts->window = 256;
    opts->connect_timeout_s = 10;
    opts->broker_timeout_s = 60;
    opts->heartbeat_ms = 1000;
    static const struct option options [] = {
        CLIENT_OPTIONS_LONG,
        { "seed", required_argument, NULL, 's' },
        { "tag", required_argument, NULL, 'g' },
        { "window", required_argument, NULL, 'w' },
        { "connect-timeout", required_argument, NULL, 'c' },
        { "batch", required_argument, NULL, 'B' },
        { "broker-timeout", required_argument, NULL, 'T' },
        { "deadline", required_argument, NULL, 'D' },
        { "client-id", required_argument, NULL, 'i' },
        { "heartbeat", required_argument, NULL, 'H' },
        { "profile", no_argument, NULL, 'p' },
        { "json", no_argument, NULL, 'j' },
        { "group", required_argument, NULL, 'G' },
        { "group-size", required_argument, NULL, 'N' },
        { "trajectory", required_argument, NULL, 'X' },
        { "cache", required_argument, NULL, 'C' },
        { "backend", required_argument, NULL, 'b' },
        { "completion", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    optind = 0;                 //  glibc: start over, whoever parsed before
    int opt;
    long long value;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        int taken = client_options_take (&opts->conn, opt, optarg);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        switch (opt) {
            case 'b':
                opts->backend = optarg;
                break;
            case 'c':
                if (client_options_real ("submit", "--connect-timeout", optarg, 0, true, 86400,
                                         "seconds", &opts->connect_timeout_s))
                    return 2;
                break;
            case 'T':
                if (client_options_real ("submit", "--broker-timeout", optarg, 0, true, 86400,
                                         "seconds", &opts->broker_timeout_s))
                    return 2;
                break;
            case 'D':
                if (client_options_real ("submit", "--deadline", optarg, 0, true, SUBMIT_MAX_DEADLINE_S,
                                         "seconds", &opts->deadline_s))
                    return 2;
                break;
            case 'H':
                if (client_options_int ("submit", "--heartbeat", optarg, 10, 60000, &value))
                    return 2;
                opts->heartbeat_ms = (uint32_t) value;
                break;
            case 'i':
                if (!*optarg || strlen (optarg) >= PROTO_MAX_STR) {
                    fprintf (stderr, "kgym submit: --client-id wants 1..%d bytes\n", PROTO_MAX_STR - 1);
                    return 2;
                }
                opts->client_id = optarg;
                break;
            case 's':
                if (client_options_int ("submit", "--seed", optarg, 0, INT64_MAX, &value))
                    return 2;
                opts->seed = (uint64_t) value;
                opts->seed_given = true;
                break;
            case 'g':
                if (strlen (optarg) > 256) {
                    fprintf (stderr, "kgym submit: --tag longer than 256 bytes\n");
                    return 2;
                }
                opts->tag = optarg;
                break;
            case 'G':
            case 'X':
                if (!*optarg || strlen (optarg) >= PROTO_MAX_STR) {
                    fprintf (stderr, "kgym submit: --%s wants 1..%d bytes\n",
                             opt == 'G'? "group": "trajectory", PROTO_MAX_STR - 1);
                    return 2;
                }
                if (opt == 'G')
                    opts->group = optarg;
                else
                    opts->trajectory = optarg;
                break;
            case 'N':
                if (client_options_int ("submit", "--group-size", optarg, 1, UINT32_MAX, &value))
                    return 2;
                opts->group_size = (uint32_t) value;
                break;
            case 'C':
                if (client_cache_policy_parse (optarg, &opts->cache)) {
                    fprintf (stderr, "kgym submit: --cache wants use, refresh or bypass, not '%s'\n",
                             optarg);
                    return 2;
                }
                break;
            case 'p':
                opts->table = true;
                break;
            case 'j':
                opts->json_lines = true;
                break;
            case 'w':
                if (client_options_int ("submit", "--window", optarg, 1, 100000, &value))
                    return 2;
                opts->window = (uint32_t) value;
                break;
            case 'B':
                opts->batch = optarg;
                break;
            case 'M': {
                char **grown = (char **) realloc (opts->completions,
                                                  (size_t) (opts->ncompletions + 1) * sizeof (char *));
                if (!grown) {
                    fprintf (stderr, "kgym submit: out of memory\n");
                    return 2;
                }
                opts->completions = grown;
                opts->completions [opts->ncompletions++] = optarg;
                break;
            }
            case 'h':
                s_usage (stdout);
                return 1;
            default:
                s_usage (stderr);
                return 2;
        }
    }
    opts->paths = argv + optind;
    opts->npaths = argc - optind;
    if (client_options_check (&opts->conn, true))
        return 2;
    if (opts->group_size && !opts->group) {
        fprintf (stderr, "kgym submit: --group-size goes with --group\n");
        return 2;
    }
    if (opts->batch && (opts->npaths > 0 || opts->ncompletions)) {
        fprintf (stderr, "kgym submit: --batch takes no TASK, CANDIDATE or --completion\n");
        return 2;
    }
    if (!opts->batch && opts->npaths < 1 + (opts->ncompletions? 0: 1)) {
        fprintf (stderr, "kgym submit: needs TASK and at least one CANDIDATE or --completion "
                 "(or --batch)\n");
        return 2;
    }
    return 0;
}

//  Remember a refused job, to send again after a wait that grows while
//  refusals go on. 0 or -1 out of memory.
static int
s_refused_add (s_run_t *run, uint64_t ref)
{
    if (run->nrefused == run->maxrefused) {
        size_t grown = run->maxrefused? run->maxrefused * 2: 256;
        uint64_t *refused = (uint64_t *) realloc (run->refused, grown * sizeof (uint64_t));
        if (!refused)
            return -1;
        run->refused = refused;
        run->maxrefused = grown;
    }
    run->refused [run->nrefused++] = ref;
    if (run->nrefused == 1) {
        run->retry_ms = run->retry_ms? run->retry_ms * 2: SUBMIT_RETRY_MIN_MS;
        if (run->retry_ms > SUBMIT_RETRY_MAX_MS)
            run->retry_ms = SUBMIT_RETRY_MAX_MS;
        run->retry_at_ms = zclock_mono () + run->retry_ms;
    }
    return 0;
}

//  Print one result line (and the --profile block) for ref, whose job is
//  then done. 0, or -1 with a reason when stdout fails.
static int
s_print_result (s_run_t *run, const s_options_t *opts, uint64_t ref, json_t *result,
                char *err, size_t errlen)
{
    const char *label = run->labels [ref];
    json_t *line = client_result_line (result, label);
    char *text = line? json_dumps (line, JSON_COMPACT): NULL;
    json_decref (line);
    //  --profile alone: readable blocks on stdout; with --json, on stderr.
    if (opts->table)
        client_format_profile (result, label, opts->json_lines? stderr: stdout);
    bool print = !opts->table || opts->json_lines;
    int rc = 0;
    if (!text || (print && printf ("%s\n", text) < 0) || fflush (stdout)) {
        snprintf (err, errlen, "cannot write the result of %s", label);
        rc = -1;
    }
    free (text);
    s_count_failure (run, result);
    zstr_free (&run->labels [ref]);
    run->inflight--;
    run->done++;
    return rc;
}

//  The line of a result made here, for a job never sent. 0, or -1 with a
//  reason when stdout fails.
static int
s_print_local (s_run_t *run, const s_options_t *opts, const char *label, json_t *result,
               char *err, size_t errlen)
{
    json_t *line = client_result_line (result, label);
    char *text = line? json_dumps (line, JSON_COMPACT): NULL;
    json_decref (line);
    if (opts->table)
        client_format_profile (result, label, opts->json_lines? stderr: stdout);
    int rc = 0;
    if (!text || ((!opts->table || opts->json_lines) && printf ("%s\n", text) < 0) || fflush (stdout)) {
        snprintf (err, errlen, "cannot write the result of %s", label);
        rc = -1;
    }
    free (text);
    s_count_failure (run, result);
    run->submitted++;
    run->done++;
    return rc;
}

//  An ERROR that ends a job of this run without a result: a result body
//  that did not decode (made here) or the broker refusing the job. The job
//  gets its line all the same (status internal_error, the reason as its
//  message; reward null, so no trainer learns from it), a line on stderr,
//  and counts as failed; the run goes on.
static int
s_fail_job (s_run_t *run, const s_options_t *opts, const client_event_t *event,
            char *err, size_t errlen)
{
    char message [PROTO_MAX_STR + 64];
    if (event->local)
        snprintf (message, sizeof (message), "the broker sent a result that could not be read (%s)",
                  event->reason);
    else
        snprintf (message, sizeof (message), "the broker refused the job: error %u: %s",
                  event->code, event->reason);
    if (run->tty)
        fprintf (stderr, "\r\033[K");
    fprintf (stderr, "kgym submit: %s: %s\n", run->labels [event->ref], message);
    json_t *result = json_pack ("{s:s, s:n, s:n, s:s}", "status", "internal_error", "reward",
                                "speedup", "message", message);
    if (!result) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    if (event->job)
        json_object_set_new (result, "job", json_integer ((json_int_t) event->job));
    run->failed++;
    int rc = s_print_result (run, opts, event->ref, result, err, errlen);
    json_decref (result);
    return rc;
}

//  A NOTICE (503: no worker serves the job's backend yet): said once per
//  backend; the job stays in flight and its result comes later.
static void
s_notice (s_run_t *run, const client_event_t *event)
{
    const char *backend = event->backend [0]? event->backend: "(unknown backend)";
    if (zhashx_lookup (run->noticed, backend))
        return;
    zhashx_insert (run->noticed, backend, (void *) 1);
    if (run->tty)
        fprintf (stderr, "\r\033[K");
    fprintf (stderr, "kgym submit: %s (still waiting)\n", event->reason);
}

//  One event of the run. 0, or -1 with a reason when the run must stop.
static int
s_handle_event (s_run_t *run, const s_options_t *opts, client_event_t *event,
                char *err, size_t errlen)
{
    bool ours = event->ref && event->ref < run->maxlabels && run->labels [event->ref];
    switch (event->type) {
        case CLIENT_EVENT_ACCEPTED:
            run->accepted++;
            run->retry_ms = 0;
            return 0;
        case CLIENT_EVENT_RESULT:
            //  Only a job of this run still in flight is printed: each once.
            return ours? s_print_result (run, opts, event->ref, event->result, err, errlen): 0;
        case CLIENT_EVENT_SUMMARY:
            s_summary (run, event->group, event->summary);
            return 0;
        case CLIENT_EVENT_NOTICE:
            s_notice (run, event);
            return 0;
        case CLIENT_EVENT_REFUSED:
            snprintf (err, errlen, "the broker at %s: %s", opts->conn.broker, event->reason);
            return -1;
        case CLIENT_EVENT_ERROR: {
            bool busy = event->code == PROTO_ERR_OVERLOADED || event->code == PROTO_ERR_INTERNAL;
            if (busy && ours) {
                //  Busy (or it could not store the job): no fault of the job. Later.
                log_debug ("client", "%s: broker busy (%u: %s), will send again",
                           s_label (run, event->ref), event->code, event->reason);
                if (s_refused_add (run, event->ref)) {
                    snprintf (err, errlen, "out of memory");
                    return -1;
                }
                return 0;
            }
            if (busy && event->ref)
                return 0;           //  about a job already answered: nothing to do
            if (ours)
                return s_fail_job (run, opts, event, err, errlen);
            if (event->ref)
                snprintf (err, errlen, "%s: broker error %u: %s", s_label (run, event->ref),
                          event->code, event->reason);
            else
                snprintf (err, errlen, "broker error %u: %s", event->code, event->reason);
            return -1;
        }
        default:
            return 0;
    }
}

//  The deadline passed: say which jobs have no result (and how many were
//  never sent). Their DISCONNECT drops the queued ones at the broker.
static void
s_report_unfinished (s_run_t *run, const s_source_t *source, const s_options_t *opts,
                     char *err, size_t errlen)
{
    if (run->tty)
        fprintf (stderr, "\r\033[K");
    for (size_t ref = 1; ref < run->maxlabels; ref++)
        if (run->labels [ref])
            fprintf (stderr, "kgym submit: no result for %s within the deadline\n", run->labels [ref]);
    size_t unsent = source->total > run->submitted? source->total - run->submitted: 0;
    snprintf (err, errlen, "deadline of %g s passed: %zu of %zu job(s) unfinished (%zu never sent)",
              opts->deadline_s, run->inflight + unsent, source->total, unsent);
}

//  The loop: keep the window full, print results as they come. 0 or -1 with a reason.
static int
s_run (s_run_t *run, s_source_t *source, const s_options_t *opts, char *err, size_t errlen)
{
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.client_id = opts->client_id;
    cfg.heartbeat_ms = opts->heartbeat_ms;
    char why [512];
    client_kgym_t *client = client_options_connect (&opts->conn, &cfg);
    if (!client) {
        err [0] = 0;            //  said
        return -1;
    }
    int rc = 0;
    bool end = false;
    uint64_t next_ref = 1;
    run->started_ms = zclock_mono ();
    int64_t deadline_ms = opts->deadline_s > 0?
                          run->started_ms + (int64_t) (opts->deadline_s * 1000): INT64_MAX;
    double silence_limit_s = opts->broker_timeout_s > SUBMIT_MIN_SILENCE_S?
                             opts->broker_timeout_s: SUBMIT_MIN_SILENCE_S;
    while (rc == 0) {
        while (!end && run->inflight < opts->window) {
            json_t *job = NULL;
            char *label = NULL;
            s_jobopts_t jobopts;
            int got = s_source_next (source, &job, &label, &jobopts, err, errlen);
            if (got <= 0) {
                end = true;
                if (got < 0)
                    rc = -1;
                break;
            }
            if (got == 2) {
                //  Answered here (a completion without a gradable answer): its line now.
                rc = s_print_local (run, opts, label, job, err, errlen);
                free (label);
                json_decref (job);
                continue;
            }
            uint64_t ref = next_ref++;
            if (s_label_set (run, ref, label)) {
                snprintf (err, errlen, "out of memory");
                free (label);
                rc = -1;
            }
            else
            if (s_group_sent (run, jobopts.group)) {
                snprintf (err, errlen, "out of memory");
                rc = -1;
            }
            else {
                client_submit_opts_t submit_opts = {
                    jobopts.group, jobopts.group_size, jobopts.trajectory, jobopts.cache
                };
                if (client_kgym_submit_opts (client, ref, job, &submit_opts, why, sizeof (why))) {
                    snprintf (err, errlen, "%s: %s", label, why);
                    rc = -1;
                }
            }
            json_decref (job);
            if (rc)
                break;
            run->inflight++;
            run->submitted++;
        }
        if (rc || run->inflight == 0)
            break;
        if (zclock_mono () >= deadline_ms) {
            s_report_unfinished (run, source, opts, err, errlen);
            rc = -1;
            break;
        }
        if (run->nrefused && zclock_mono () >= run->retry_at_ms) {
            //  The broker was busy: the jobs it refused go again (the library kept them).
            size_t n = run->nrefused;
            run->nrefused = 0;
            for (size_t i = 0; i < n; i++)
                if (client_kgym_retry (client, run->refused [i], why, sizeof (why)))
                    log_debug ("client", "retry of ref %llu: %s",
                               (unsigned long long) run->refused [i], why);
        }

        client_event_t event;
        int64_t wait_ms = 200;
        if (run->nrefused && run->retry_at_ms - zclock_mono () < wait_ms)
            wait_ms = run->retry_at_ms - zclock_mono ();
        if (deadline_ms - zclock_mono () < wait_ms)
            wait_ms = deadline_ms - zclock_mono ();
        if (client_kgym_recv (client, wait_ms > 0? (int) wait_ms: 0, &event)) {
            if (zsys_interrupted) {
                snprintf (err, errlen, "interrupted");
                rc = -1;
            }
            else
            if (!client_kgym_heard (client)
            &&  zclock_mono () - run->started_ms > (int64_t) (opts->connect_timeout_s * 1000)) {
                snprintf (err, errlen, "no reply from the broker at %s within %g s",
                          opts->conn.broker, opts->connect_timeout_s);
                rc = -1;
            }
            else
            if (client_kgym_heard (client)
            &&  client_kgym_silence_ms (client) > (int64_t) (silence_limit_s * 1000)) {
                snprintf (err, errlen, "the broker at %s stopped answering (%g s)",
                          opts->conn.broker, silence_limit_s);
                rc = -1;
            }
            s_progress (run, source, false);
            continue;
        }
        rc = s_handle_event (run, opts, &event, err, errlen);
        client_event_clear (&event);
        s_progress (run, source, false);
    }
    //  A group's summary comes right after its last result: wait for those
    //  of the groups sent, a little (never past the deadline).
    int64_t until = zclock_mono () + SUBMIT_SUMMARY_WAIT_MS;
    if (until > deadline_ms)
        until = deadline_ms;
    while (rc == 0 && run->unsummarised && !zsys_interrupted && zclock_mono () < until) {
        client_event_t event;
        if (client_kgym_recv (client, (int) (until - zclock_mono ()), &event))
            continue;
        if (event.type == CLIENT_EVENT_SUMMARY)
            s_summary (run, event.group, event.summary);
        client_event_clear (&event);
    }
    if (rc == 0 && run->failed) {
        snprintf (err, errlen, "%zu of %zu job(s) got no result of their own (said above; their"
                  " lines have status internal_error)", run->failed, run->done);
        rc = -1;
    }
    if (client_kgym_reconnects (client))
        fprintf (stderr, "kgym submit: reconnected %llu time(s); %llu duplicate repl%s dropped\n",
                 (unsigned long long) client_kgym_reconnects (client),
                 (unsigned long long) client_kgym_duplicates (client),
                 client_kgym_duplicates (client) == 1? "y": "ies");
    client_kgym_destroy (&client);
    return rc;
}

int
client_submit_main (int argc, char **argv)
{
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    if (usage)
        return usage == 1? 0: usage;

    char err [1024] = "";
    s_source_t source;
    if (s_source_open (&source, &opts, err, sizeof (err))) {
        fprintf (stderr, "kgym submit: %s (nothing was sent)\n", err);
        s_source_close (&source);
        return 2;
    }
    s_run_t run;
    memset (&run, 0, sizeof (run));
    run.tty = isatty (STDERR_FILENO);
    run.failures = zhashx_new ();
    run.groups = zhashx_new ();
    run.noticed = zhashx_new ();
    int rc = -1;
    if (run.failures && run.groups && run.noticed)
        rc = s_run (&run, &source, &opts, err, sizeof (err));
    else
        snprintf (err, sizeof (err), "out of memory");
    if (run.tty && run.submitted) {
        s_progress (&run, &source, true);
        fputc ('\n', stderr);
    }
    if (rc && err [0])          //  empty: said already
        fprintf (stderr, "kgym submit: %s\n", err);
    for (size_t i = 0; i < run.maxlabels; i++)
        free (run.labels [i]);
    free (run.labels);
    free (run.refused);
    zhashx_destroy (&run.failures);
    zhashx_destroy (&run.groups);
    zhashx_destroy (&run.noticed);
    s_source_close (&source);
    free (opts.completions);
    return rc? 1: 0;
}
