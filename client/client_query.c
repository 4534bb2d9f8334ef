/*  client_query - `kgym workers|stats|job|jobs|results|tasks|cache stats`.

    One query per run (or per interval with --watch): parse the options,
    build the query map, ask the broker (client_kgym_ask), print the answer
    as JSON lines or as a readable table. The answer is printed as it came:
    a key this file does not know is kept in the JSON and left out of the
    tables, a key missing shows as "-".
*/
#include "client_query.h"
#include "client_kgym.h"
#include "client_options.h"
#include "common_log.h"
#include <getopt.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QUERY_CELL 96               //  bytes of one table cell (longer values are cut)
#define QUERY_JOBS_SHOWN 3          //  job ids listed per worker in the table

//  Parsed options.
typedef struct {
    const char *command;        //  argv [0]
    client_options_t conn;      //  --broker, CURVE, --timeout S (the wait for the answer)
    bool json;                  //  --json (workers, stats, cache)
    bool table;                 //  --table (job, jobs, results, tasks)
    bool watch;                 //  --watch (stats)
    double watch_s;             //  its interval
    const char *tag;            //  --tag T (jobs)
    const char *group;          //  --group G (jobs)
    const char *trajectory;     //  --trajectory X (jobs)
    const char *task;           //  --task NAME (results)
    json_int_t limit;           //  --limit N (0: the broker's default)
    bool results;               //  --results (jobs)
    bool band;                  //  --band LO,HI given (tasks)
    double lo, hi;              //  the band
    json_int_t min_attempts;    //  --min-attempts N (tasks)
    bool min_given;             //  --min-attempts given (else the broker's default, 1)
    json_int_t job;             //  ID (job)
} s_options_t;

//  Which options each subcommand takes (the short codes of s_parse), and
//  its usage.
typedef struct {
    const char *name;           //  subcommand
    const char *options;        //  option codes it takes besides the common ones
    const char *usage;          //  its synopsis and what it prints
} s_command_t;

static const s_command_t s_commands [] = {
    { "workers", "j",
      "usage: kgym workers --broker EP [--json]\n"
      "  one row per worker: name, host, backend, device, state, capacity, results, faults,\n"
      "  uptime, jobs held, busy (the share of its run slots' time its jobs held them lately,\n"
      "  as its heartbeats say) (--json: one JSON object per line)\n" },
    { "stats", "jw",
      "usage: kgym stats --broker EP [--json] [--watch [SECONDS]]\n"
      "  queue by backend, jobs in flight, workers by state, rates, pass and cache hit rates\n"
      "  (--json: one JSON line; --watch: again every SECONDS, default 2, until Ctrl-C)\n" },
    { "job", "T",
      "usage: kgym job --broker EP [--table] ID\n"
      "  the job and its result as one JSON line (--table: columns); exit 1 for an unknown ID\n" },
    { "jobs", "gGXlrT",
      "usage: kgym jobs --broker EP (--tag T | --group G | --trajectory X) [--limit N] [--results]\n"
      "                 [--table]\n"
      "  the matching jobs, newest first, one JSON line each (--table: columns;\n"
      "  --results: with their results); exit 1 when none matches\n" },
    { "results", "klT",
      "usage: kgym results --broker EP --task NAME [--limit N] [--table]\n"
      "  the task's latest results, one JSON line each (--table: columns); exit 1 when the\n"
      "  broker has none for that task\n" },
    { "tasks", "BmT",
      "usage: kgym tasks --broker EP [--band LO,HI] [--min-attempts N] [--table]\n"
      "  per-task statistics, one JSON line per task (--table: columns); --band: only tasks\n"
      "  whose pass rate is in [LO, HI]\n" },
    { "cache", "j",
      "usage: kgym cache stats --broker EP [--json]\n"
      "  the broker's result cache: hit rate, entries, bytes, evictions (--json: one JSON line)\n"
      "  (without --broker: the local compile cache, kgym cache --help)\n" },
};

static const s_command_t *
s_command (const char *name)
{
    for (size_t i = 0; i < sizeof (s_commands) / sizeof (s_commands [0]); i++)
        if (streq (name, s_commands [i].name))
            return &s_commands [i];
    return NULL;
}

//  The usage of one subcommand (all of them when command is NULL).
static void
s_usage (FILE *out, const s_command_t *command)
{
    for (size_t i = 0; i < sizeof (s_commands) / sizeof (s_commands [0]); i++)
        if (!command || command == &s_commands [i])
            fputs (s_commands [i].usage, out);
    fprintf (out, "  common: [--curve-secret FILE --broker-key FILE] [--timeout S] (default 10);\n"
                  "  --broker defaults to $KGYM_BROKER\n");
}

bool
client_query_handles (const char *command)
{
    return s_command (command) != NULL;
}

//  Parse; 0, 1 after --help, or 2 on a usage error (said on stderr).
static int
s_parse (int argc, char **argv, s_options_t *opts)
{
    memset (opts, 0, sizeof (*opts));
    opts->command = argv [0];
    client_options_init (&opts->conn, argv [0], 10);
    opts->watch_s = 2;
    const s_command_t *self = s_command (argv [0]);
    if (!self) {
        s_usage (stderr, NULL);
        return 2;
    }
    const char *takes = self->options;
    static const struct option options [] = {
        CLIENT_OPTIONS_LONG,
        { "json", no_argument, NULL, 'j' },
        { "table", no_argument, NULL, 'T' },
        { "watch", optional_argument, NULL, 'w' },
        { "tag", required_argument, NULL, 'g' },
        { "group", required_argument, NULL, 'G' },
        { "trajectory", required_argument, NULL, 'X' },
        { "task", required_argument, NULL, 'k' },
        { "limit", required_argument, NULL, 'l' },
        { "results", no_argument, NULL, 'r' },
        { "band", required_argument, NULL, 'B' },
        { "min-attempts", required_argument, NULL, 'm' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *command = argv [0];
    optind = 0;
    int opt, index = 0;
    while ((opt = getopt_long (argc, argv, "h", options, &index)) != -1) {
        if (opt == '?') {
            s_usage (stderr, self);
            return 2;
        }
        int taken = client_options_take (&opts->conn, opt, optarg);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        if (strchr ("jTwgGXklrBm", opt) && !strchr (takes, opt)) {
            fprintf (stderr, "kgym %s: --%s is not an option of this command\n", command,
                     options [index].name);
            return 2;
        }
        switch (opt) {
            case 'j': opts->json = true; break;
            case 'T': opts->table = true; break;
            case 'r': opts->results = true; break;
            case 'w': {
                opts->watch = true;
                //  "--watch 5" as well as "--watch=5": stats takes no operand,
                //  so a number after --watch is its interval.
                const char *interval = optarg;
                if (!interval && optind < argc && argv [optind][0] != '-')
                    interval = argv [optind++];
                if (interval && client_options_real (command, "--watch", interval, 0.1, false, 86400,
                                                     "seconds", &opts->watch_s))
                    return 2;
                break;
            }
            case 'g':
            case 'G':
            case 'X':
            case 'k':
                if (!*optarg || strlen (optarg) >= PROTO_MAX_STR) {
                    fprintf (stderr, "kgym %s: --%s wants 1..%d bytes\n", command,
                             options [index].name, PROTO_MAX_STR - 1);
                    return 2;
                }
                if (opt == 'g')
                    opts->tag = optarg;
                else
                if (opt == 'G')
                    opts->group = optarg;
                else
                if (opt == 'X')
                    opts->trajectory = optarg;
                else
                    opts->task = optarg;
                break;
            case 'l': {
                long long value;
                if (client_options_int (command, "--limit", optarg, 1, 10000, &value))
                    return 2;
                opts->limit = (json_int_t) value;
                break;
            }
            case 'm': {
                long long value;
                if (client_options_int (command, "--min-attempts", optarg, 0, INT32_MAX, &value))
                    return 2;
                opts->min_attempts = (json_int_t) value;
                opts->min_given = true;
                break;
            }
            case 'B': {
                char text [64];
                snprintf (text, sizeof (text), "%s", optarg);
                char *comma = strchr (text, ',');
                if (comma)
                    *comma = 0;
                if (!comma) {
                    fprintf (stderr, "kgym %s: --band wants LO,HI, not '%s'\n", command, optarg);
                    return 2;
                }
                if (client_options_real (command, "--band's LO", text, 0, false, 1, "a number",
                                         &opts->lo)
                ||  client_options_real (command, "--band's HI", comma + 1, 0, false, 1, "a number",
                                         &opts->hi))
                    return 2;
                if (opts->lo > opts->hi) {
                    fprintf (stderr, "kgym %s: --band wants LO <= HI, not '%s'\n", command, optarg);
                    return 2;
                }
                opts->band = true;
                break;
            }
            case 'h':
                s_usage (stdout, self);
                return 1;
            default:
                s_usage (stderr, self);
                return 2;
        }
    }
    if (client_options_check (&opts->conn, true))
        return 2;
    int operands = argc - optind;
    if (streq (command, "job")) {
        if (operands != 1) {
            fprintf (stderr, "kgym job: needs one job ID\n");
            return 2;
        }
        long long value;
        if (client_options_int (command, "the job ID", argv [optind], 1, INT64_MAX, &value))
            return 2;
        opts->job = (json_int_t) value;
    }
    else
    if (streq (command, "cache")) {
        if (operands > 1 || (operands == 1 && !streq (argv [optind], "stats"))) {
            fprintf (stderr, "kgym cache: with --broker, only 'stats' (the broker's result cache)\n");
            return 2;
        }
    }
    else
    if (operands) {
        fprintf (stderr, "kgym %s: takes no operand ('%s')\n", command, argv [optind]);
        return 2;
    }
    if (streq (command, "jobs") && !!opts->tag + !!opts->group + !!opts->trajectory != 1) {
        fprintf (stderr, "kgym jobs: needs one of --tag, --group and --trajectory\n");
        return 2;
    }
    if (streq (command, "results") && !opts->task) {
        fprintf (stderr, "kgym results: needs --task NAME\n");
        return 2;
    }
    return 0;
}

//  The query map of this command (docs/protocol.md 14.3).
static json_t *
s_query (const s_options_t *opts)
{
    const char *what = streq (opts->command, "cache")? "cache": opts->command;
    json_t *query = json_pack ("{s:s}", "what", what);
    if (!query)
        return NULL;
    if (opts->job)
        json_object_set_new (query, "job", json_integer (opts->job));
    if (opts->tag)
        json_object_set_new (query, "tag", json_string (opts->tag));
    if (opts->group)
        json_object_set_new (query, "group", json_string (opts->group));
    if (opts->trajectory)
        json_object_set_new (query, "trajectory", json_string (opts->trajectory));
    if (opts->task)
        json_object_set_new (query, "task", json_string (opts->task));
    if (opts->limit)
        json_object_set_new (query, "limit", json_integer (opts->limit));
    if (opts->results)
        json_object_set_new (query, "results", json_true ());
    if (opts->band) {
        json_object_set_new (query, "lo", json_real (opts->lo));
        json_object_set_new (query, "hi", json_real (opts->hi));
    }
    if (opts->min_given)
        json_object_set_new (query, "min_attempts", json_integer (opts->min_attempts));
    return query;
}

//  --------------------------------------------------------------------------
//  Formatting

//  One JSON line on stdout; 0 or -1 when it could not be written.
static int
s_print_json (json_t *json)
{
    char *text = json_dumps (json, JSON_COMPACT | JSON_ENCODE_ANY);
    int rc = text && printf ("%s\n", text) >= 0? 0: -1;
    free (text);
    return rc;
}

//  A value as a table cell: strings as they are, numbers short, null and
//  absent "-", anything else compact JSON (cut to the cell).
static const char *
s_cell (json_t *value, char *cell, size_t size)
{
    if (!value || json_is_null (value))
        snprintf (cell, size, "-");
    else
    if (json_is_string (value))
        snprintf (cell, size, "%s", json_string_value (value));
    else
    if (json_is_integer (value))
        snprintf (cell, size, "%lld", (long long) json_integer_value (value));
    else
    if (json_is_real (value))
        snprintf (cell, size, "%.4g", json_real_value (value));
    else
    if (json_is_boolean (value))
        snprintf (cell, size, "%s", json_is_true (value)? "yes": "no");
    else {
        char *text = json_dumps (value, JSON_COMPACT);
        snprintf (cell, size, "%s", text? text: "?");
        free (text);
    }
    return cell;
}

//  A number of the answer (0 when absent or not a number).
static double
s_number (json_t *object, const char *key)
{
    json_t *value = json_object_get (object, key);
    return json_is_number (value)? json_number_value (value): 0;
}

//  A rate in [0, 1] as a percentage; "-" when null or absent.
static const char *
s_percent (json_t *value, char *cell, size_t size)
{
    if (json_is_number (value))
        snprintf (cell, size, "%.1f%%", 100 * json_number_value (value));
    else
        snprintf (cell, size, "-");
    return cell;
}

static const char *
s_bytes (double bytes, char *cell, size_t size)
{
    if (bytes >= 1 << 30)
        snprintf (cell, size, "%.1f GiB", bytes / (1 << 30));
    else
    if (bytes >= 1 << 20)
        snprintf (cell, size, "%.1f MiB", bytes / (1 << 20));
    else
    if (bytes >= 1 << 10)
        snprintf (cell, size, "%.1f KiB", bytes / (1 << 10));
    else
        snprintf (cell, size, "%.0f B", bytes);
    return cell;
}

static const char *
s_duration (double seconds, char *cell, size_t size)
{
    long long s = (long long) seconds;
    if (s >= 86400)
        snprintf (cell, size, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
    else
    if (s >= 3600)
        snprintf (cell, size, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else
    if (s >= 60)
        snprintf (cell, size, "%lldm%02llds", s / 60, s % 60);
    else
        snprintf (cell, size, "%llds", s);
    return cell;
}

//  "key n  key n ..." of a map of counts ("-" when empty), into line.
static const char *
s_counts (json_t *map, char *line, size_t size)
{
    size_t used = 0;
    line [0] = 0;
    const char *key;
    json_t *value;
    json_object_foreach (map, key, value) {
        char cell [QUERY_CELL];
        int n = snprintf (line + used, size - used, "%s%s %s", used? "  ": "", key,
                          s_cell (value, cell, sizeof (cell)));
        if (n < 0 || (size_t) n >= size - used)
            break;
        used += (size_t) n;
    }
    if (!used)
        snprintf (line, size, "-");
    return line;
}

//  A table: columns of cells, printed with each column as wide as its
//  widest cell (the last one not padded).
typedef struct {
    size_t columns;             //  cells per row
    size_t rows;                //  rows filled, the header included
    size_t max_rows;            //  rows allocated
    char **cells;               //  rows * columns strings (owned)
} s_table_t;

static int
s_table_row (s_table_t *table, const char *const *cells)
{
    if (table->rows == table->max_rows) {
        size_t grown = table->max_rows? table->max_rows * 2: 16;
        char **more = (char **) realloc (table->cells, grown * table->columns * sizeof (char *));
        if (!more)
            return -1;
        table->cells = more;
        table->max_rows = grown;
    }
    for (size_t c = 0; c < table->columns; c++)
        table->cells [table->rows * table->columns + c] = strdup (cells [c]? cells [c]: "-");
    table->rows++;
    return 0;
}

static void
s_table_print (s_table_t *table)
{
    size_t widths [32] = { 0 };
    for (size_t r = 0; r < table->rows; r++)
        for (size_t c = 0; c < table->columns && c < 32; c++) {
            const char *cell = table->cells [r * table->columns + c];
            size_t len = cell? strlen (cell): 1;
            if (len > widths [c])
                widths [c] = len;
        }
    for (size_t r = 0; r < table->rows; r++) {
        for (size_t c = 0; c < table->columns; c++) {
            const char *cell = table->cells [r * table->columns + c];
            if (c + 1 < table->columns)
                printf ("%-*s  ", (int) widths [c], cell? cell: "-");
            else
                printf ("%s\n", cell? cell: "-");
        }
    }
}

static void
s_table_destroy (s_table_t *table)
{
    for (size_t i = 0; i < table->rows * table->columns; i++)
        free (table->cells [i]);
    free (table->cells);
    memset (table, 0, sizeof (*table));
}

//  A column's cell: unix times as local date and time, rates as percentages,
//  anything else as s_cell.
static const char *
s_column_cell (const char *key, json_t *value, char *cell, size_t size)
{
    if (json_is_number (value)
    &&  (streq (key, "finished") || streq (key, "accepted") || streq (key, "updated"))) {
        time_t when = (time_t) json_number_value (value);
        struct tm tm;
        if (localtime_r (&when, &tm) && strftime (cell, size, "%Y-%m-%d %H:%M:%S", &tm))
            return cell;
    }
    size_t len = strlen (key);
    if (len > 5 && streq (key + len - 5, "_rate"))
        return s_percent (value, cell, size);
    return s_cell (value, cell, size);
}

//  An item's value under key; "result.KEY" is KEY of the item's result map.
static json_t *
s_item_value (json_t *item, const char *key)
{
    if (strncmp (key, "result.", 7) == 0)
        return json_object_get (json_object_get (item, "result"), key + 7);
    return json_object_get (item, key);
}

//  A table of the objects in list, one column per key.
static void
s_print_table (json_t *list, const char *const *keys, const char *const *headers, size_t columns)
{
    s_table_t table = { columns, 0, 0, NULL };
    s_table_row (&table, headers);
    size_t i;
    json_t *item;
    json_array_foreach (list, i, item) {
        char cells [32][QUERY_CELL];
        const char *row [32];
        for (size_t c = 0; c < columns && c < 32; c++)
            row [c] = s_column_cell (keys [c], s_item_value (item, keys [c]), cells [c],
                                     QUERY_CELL);
        s_table_row (&table, row);
    }
    s_table_print (&table);
    s_table_destroy (&table);
}

//  --------------------------------------------------------------------------
//  The commands' output

//  The answer's list under key, or NULL after a message.
static json_t *
s_list (const s_options_t *opts, json_t *answer, const char *key)
{
    json_t *list = json_object_get (answer, key);
    if (!json_is_array (list))
        fprintf (stderr, "kgym %s: the answer has no '%s' list\n", opts->command, key);
    return json_is_array (list)? list: NULL;
}

static int
s_print_workers (const s_options_t *opts, json_t *answer)
{
    json_t *list = s_list (opts, answer, "workers");
    if (!list)
        return 1;
    size_t i;
    json_t *worker;
    if (opts->json) {
        json_array_foreach (list, i, worker)
            if (s_print_json (worker))
                return 1;
        return 0;
    }
    static const char *const headers [] = { "NAME", "HOST", "BACKEND", "DEVICE", "STATE", "CAP",
                                            "DONE", "FAULTS", "UP", "JOBS", "BUSY" };
    static const char *const keys [] = { "name", "host", "backend", "device", "state", "capacity",
                                         "done", "faults" };
    s_table_t table = { 11, 0, 0, NULL };
    s_table_row (&table, headers);
    json_array_foreach (list, i, worker) {
        char cells [11][QUERY_CELL];
        const char *row [11];
        for (size_t c = 0; c < 8; c++)
            row [c] = s_cell (json_object_get (worker, keys [c]), cells [c], QUERY_CELL);
        json_t *since = json_object_get (worker, "since_s");
        row [8] = json_is_number (since)? s_duration (json_number_value (since), cells [8], QUERY_CELL)
                                        : "-";
        //  Its device's busy ratio, as its latest heartbeat said (none yet: -).
        json_t *busy = json_object_get (worker, "busy");
        if (json_is_number (busy))
            snprintf (cells [10], QUERY_CELL, "%.0f%%", 100 * json_number_value (busy));
        row [10] = json_is_number (busy)? cells [10]: "-";
        //  The jobs it holds: how many, then the first few ids.
        json_t *jobs = json_object_get (worker, "jobs");
        size_t njobs = json_is_array (jobs)? json_array_size (jobs): 0;
        size_t used = 0;
        cells [9][0] = 0;
        if (!njobs)
            snprintf (cells [9], QUERY_CELL, "-");
        else {
            used = (size_t) snprintf (cells [9], QUERY_CELL, "%zu:", njobs);
            for (size_t j = 0; j < njobs && j < QUERY_JOBS_SHOWN && used < QUERY_CELL; j++) {
                char id [QUERY_CELL];
                int n = snprintf (cells [9] + used, QUERY_CELL - used, " %s",
                                  s_cell (json_array_get (jobs, j), id, sizeof (id)));
                used += n > 0? (size_t) n: 0;
            }
            if (njobs > QUERY_JOBS_SHOWN && used < QUERY_CELL)
                snprintf (cells [9] + used, QUERY_CELL - used, " +%zu", njobs - QUERY_JOBS_SHOWN);
        }
        row [9] = cells [9];
        s_table_row (&table, row);
    }
    s_table_print (&table);
    s_table_destroy (&table);
    if (json_array_size (list) == 0)
        printf ("(no worker connected)\n");
    return 0;
}

//  The cache's figures in three lines, the first after prefix, the others
//  after as many spaces.
static void
s_print_cache_lines (json_t *cache, const char *prefix)
{
    char indent [32];
    snprintf (indent, sizeof (indent), "%*s", (int) strlen (prefix), "");
    char a [QUERY_CELL], b [QUERY_CELL], c [QUERY_CELL];
    printf ("%shit rate %s  (%s hits, %s misses)\n", prefix,
            s_percent (json_object_get (cache, "hit_rate"), a, sizeof (a)),
            s_cell (json_object_get (cache, "hits"), b, sizeof (b)),
            s_cell (json_object_get (cache, "misses"), c, sizeof (c)));
    char d [QUERY_CELL], e [QUERY_CELL];
    json_t *max_bytes = json_object_get (cache, "max_bytes");
    printf ("%sentries %s / %s, %s / %s\n", indent,
            s_cell (json_object_get (cache, "entries"), a, sizeof (a)),
            s_cell (json_object_get (cache, "max_entries"), b, sizeof (b)),
            s_bytes (s_number (cache, "bytes"), d, sizeof (d)),
            json_is_number (max_bytes) && json_number_value (max_bytes) > 0?
                s_bytes (json_number_value (max_bytes), e, sizeof (e)): "no limit");
    printf ("%sinserts %s  replaced %s  evictions %s  coalesced %s\n", indent,
            s_cell (json_object_get (cache, "inserts"), a, sizeof (a)),
            s_cell (json_object_get (cache, "replaced"), b, sizeof (b)),
            s_cell (json_object_get (cache, "evictions"), c, sizeof (c)),
            s_cell (json_object_get (cache, "coalesced"), d, sizeof (d)));
}

static int
s_print_stats (const s_options_t *opts, json_t *answer)
{
    if (opts->json)
        return s_print_json (answer)? 1: 0;
    char a [QUERY_CELL], b [QUERY_CELL];
    char line [1024];
    json_t *queued = json_object_get (answer, "queued");
    double total = 0;
    const char *key;
    json_t *value;
    json_object_foreach (queued, key, value)
        total += json_is_number (value)? json_number_value (value): 0;
    printf ("broker     %s, up %s\n", opts->conn.broker,
            s_duration (s_number (answer, "uptime_s"), a, sizeof (a)));
    printf ("queued     %.0f  (%s)\n", total, s_counts (queued, line, sizeof (line)));
    printf ("in flight  %s\n", s_cell (json_object_get (answer, "in_flight"), a, sizeof (a)));
    printf ("workers    %s\n", s_counts (json_object_get (answer, "workers"), line, sizeof (line)));
    printf ("rate       %.2f jobs/s over 10 s, %.2f jobs/s over 1 min\n",
            s_number (answer, "rate_10s"), s_number (answer, "rate_1m"));
    json_t *cache = json_object_get (answer, "cache");
    printf ("pass rate  %s    cache hit rate %s\n",
            s_percent (json_object_get (answer, "pass_rate"), a, sizeof (a)),
            s_percent (json_object_get (cache, "hit_rate"), b, sizeof (b)));
    printf ("counts     %s\n", s_counts (json_object_get (answer, "counts"), line, sizeof (line)));
    printf ("statuses   %s\n", s_counts (json_object_get (answer, "statuses"), line, sizeof (line)));
    if (json_is_object (cache))
        s_print_cache_lines (cache, "cache      ");
    return 0;
}

static int
s_print_cache (const s_options_t *opts, json_t *answer)
{
    if (opts->json)
        return s_print_json (answer)? 1: 0;
    s_print_cache_lines (answer, "");
    return 0;
}

//  The columns of a job (`job --table`, `jobs --table`): the last two come
//  from its result.
#define QUERY_JOB_COLUMNS 14
static const char *const s_job_keys [QUERY_JOB_COLUMNS] = {
    "job", "state", "backend", "task", "tag", "group", "trajectory", "attempt", "worker",
    "status", "cached", "queue_s", "result.reward", "result.speedup"
};
static const char *const s_job_headers [QUERY_JOB_COLUMNS] = {
    "JOB", "STATE", "BACKEND", "TASK", "TAG", "GROUP", "TRAJECTORY", "ATTEMPT", "WORKER",
    "STATUS", "CACHED", "QUEUE_S", "REWARD", "SPEEDUP"
};

//  An empty answer to a query that names something (a task, a tag, a group,
//  a trajectory): the broker does not know it. 1 after the reason; 0 for
//  a filter that simply matched nothing (tasks --band).
static int
s_nothing_found (const s_options_t *opts)
{
    if (streq (opts->command, "results"))
        fprintf (stderr, "kgym results: no results for task '%s': the broker has graded no job"
                         " of that task\n", opts->task);
    else
    if (streq (opts->command, "jobs"))
        fprintf (stderr, "kgym jobs: the broker knows no job with %s '%s'\n",
                 opts->tag? "tag": opts->group? "group": "trajectory",
                 opts->tag? opts->tag: opts->group? opts->group: opts->trajectory);
    else
        return 0;
    return 1;
}

//  A list answer: one JSON line per item, or a table of columns.
static int
s_print_items (const s_options_t *opts, json_t *answer, const char *key,
               const char *const *keys, const char *const *headers, size_t columns)
{
    json_t *list = s_list (opts, answer, key);
    if (!list)
        return 1;
    if (opts->table)
        s_print_table (list, keys, headers, columns);
    else {
        size_t i;
        json_t *item;
        json_array_foreach (list, i, item)
            if (s_print_json (item))
                return 1;
    }
    if (json_is_true (json_object_get (answer, "truncated"))) {
        fflush (stdout);
        fprintf (stderr, "kgym %s: the newest %zu shown; there are more (--limit N, at most 10000)\n",
                 opts->command, json_array_size (list));
    }
    return json_array_size (list)? 0: s_nothing_found (opts);
}

static int
s_print_answer (const s_options_t *opts, json_t *answer)
{
    const char *command = opts->command;
    if (streq (command, "workers"))
        return s_print_workers (opts, answer);
    if (streq (command, "stats"))
        return s_print_stats (opts, answer);
    if (streq (command, "cache"))
        return s_print_cache (opts, answer);
    if (streq (command, "job")) {
        json_t *job = json_object_get (answer, "job");
        if (!json_is_object (job)) {
            fprintf (stderr, "kgym job: the answer has no 'job' map\n");
            return 1;
        }
        if (!opts->table)
            return s_print_json (job)? 1: 0;
        json_t *list = json_pack ("[O]", job);
        if (!list)
            return 1;
        s_print_table (list, s_job_keys, s_job_headers, QUERY_JOB_COLUMNS);
        json_decref (list);
        return 0;
    }
    if (streq (command, "jobs")) {
        //  The result's reward and speedup only when the answer has results.
        size_t columns = opts->results? QUERY_JOB_COLUMNS: QUERY_JOB_COLUMNS - 2;
        return s_print_items (opts, answer, "jobs", s_job_keys, s_job_headers, columns);
    }
    if (streq (command, "results")) {
        static const char *const keys [] = { "job", "status", "reward", "speedup", "worker",
                                             "cached", "finished" };
        static const char *const headers [] = { "JOB", "STATUS", "REWARD", "SPEEDUP", "WORKER",
                                                "CACHED", "FINISHED" };
        return s_print_items (opts, answer, "results", keys, headers, 7);
    }
    //  The curriculum's view: pass rate, reward spread, groups without signal.
    static const char *const keys [] = { "task", "attempts", "window", "pass_rate", "compile_rate",
                                         "mean_speedup", "reward_mean", "reward_std", "groups",
                                         "zero_variance_groups" };
    static const char *const headers [] = { "TASK", "ATTEMPTS", "WINDOW", "PASS", "COMPILE",
                                            "SPEEDUP", "REWARD_MEAN", "REWARD_STD", "GROUPS",
                                            "ZERO_VAR" };
    return s_print_items (opts, answer, "tasks", keys, headers, 10);
}

//  --------------------------------------------------------------------------
//  Run

//  Wait ms while keeping the connection alive; false when interrupted.
static bool
s_pause (client_kgym_t *client, int64_t ms)
{
    int64_t deadline = zclock_mono () + ms;
    while (!zsys_interrupted) {
        int64_t left = deadline - zclock_mono ();
        if (left <= 0)
            return true;
        client_event_t event;
        if (client_kgym_recv (client, (int) left, &event) == 0)
            client_event_clear (&event);
        else
        if (errno == EINTR)
            return false;
    }
    return false;
}

int
client_query_main (int argc, char **argv)
{
    if (argc < 1 || !argv [0]) {
        s_usage (stderr, NULL);
        return 2;
    }
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    if (usage)
        return usage == 1? 0: usage;
    json_t *query = s_query (&opts);
    if (!query) {
        fprintf (stderr, "kgym %s: out of memory\n", opts.command);
        return 1;
    }
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    client_kgym_t *client = client_options_connect (&opts.conn, &cfg);
    if (!client) {
        json_decref (query);
        return 1;
    }
    char err [512];
    int timeout_ms = (int) (opts.conn.timeout_s * 1000);
    bool tty = isatty (STDOUT_FILENO);
    int rc = 0;
    for (unsigned round = 0; ; round++) {
        json_t *answer = client_kgym_ask (client, query, timeout_ms, err, sizeof (err));
        if (!answer && opts.watch && zsys_interrupted)
            break;                      //  the way out of --watch: exit 0
        if (!answer) {
            fprintf (stderr, "kgym %s: %s\n", opts.command, err);
            //  A watch that worked once rides out a broker away for a while.
            if (!opts.watch || round == 0) {
                rc = 1;
                break;
            }
        }
        else {
            if (opts.watch && !opts.json) {
                if (tty)
                    printf ("\033[H\033[2J");
                else
                if (round)
                    printf ("\n");
            }
            rc = s_print_answer (&opts, answer);
            json_decref (answer);
            if (fflush (stdout) || ferror (stdout)) {
                fprintf (stderr, "kgym %s: cannot write the answer\n", opts.command);
                rc = 1;
            }
            if (rc)
                break;
        }
        if (!opts.watch || !s_pause (client, (int64_t) (opts.watch_s * 1000)))
            break;
    }
    client_kgym_destroy (&client);
    json_decref (query);
    return rc;
}
