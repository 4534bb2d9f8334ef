/*  client_query - the `kgym` subcommands that ask the broker what it knows.

    Each sends one QUERY (docs/protocol.md section 14.3) through
    client_kgym_ask and prints the ANSWER:

    kgym workers --broker EP [--json]
        One row per worker: name, host, backend, device, state, capacity,
        results returned, faults, the jobs it holds. --json: one JSON
        object per line per worker.
    kgym stats   --broker EP [--json] [--watch [SECONDS]]
        Queue by backend, jobs in flight, workers by state, completion
        rates, pass rate, result cache, counts and statuses. --json: the
        answer as one JSON line. --watch: again every SECONDS (default 2)
        until interrupted (SIGINT: exit 0); on a terminal the screen is
        cleared each time, otherwise one block (or JSON line) per interval,
        blocks separated by a blank line.
    kgym job     --broker EP [--table] ID
    kgym jobs    --broker EP (--tag T | --group G | --trajectory X) [--limit N] [--results] [--table]
        (--table of a job: its state, where it is, and with its result the
        reward and speedup, as columns)
    kgym results --broker EP --task NAME [--limit N] [--table]
    kgym tasks   --broker EP [--band LO,HI] [--min-attempts N] [--table]
        JSON lines by default: one object per job / result / task, so they
        pipe into jq; --table: aligned columns instead. A list the broker
        cut at its limit says so on stderr.
    kgym cache stats --broker EP [--json]
        The broker's result cache (without --broker, `kgym cache` is the
        local compile cache: kgym_main.c).

    Every one takes --curve-secret FILE --broker-key FILE (CURVE to the
    broker) and --timeout S (default 10); --broker defaults to
    $KGYM_BROKER; --help prints the subcommand's own usage. A query runs
    under a client id of its own (a random one): it never touches a
    trainer's jobs. Exit 0 with the answer printed; 1 with a one-line
    reason on stderr when the broker answered an ERROR (404 unknown job,
    400 bad query), an empty list to a query that names something (results
    of a task, jobs of a tag, group or trajectory: the broker does not know
    it), refused the handshake, or nothing in time; 2 on a usage error.
*/
#ifndef CLIENT_QUERY_H
#define CLIENT_QUERY_H

#include <stdbool.h>

//  Run the subcommand named by argv [0] ("workers", "stats", "job", "jobs",
//  "results", "tasks", "cache"). Returns the exit status.
int client_query_main (int argc, char **argv);

//  True when this is a subcommand of client_query_main.
bool client_query_handles (const char *command);

#endif
