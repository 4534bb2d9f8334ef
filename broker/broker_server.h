/*  broker_server - the broker: routes jobs from clients to capable workers.

    Two ROUTER sockets (clients, workers). Workers announce backend, device,
    capacity and state (READY); each SUBMIT is stored (with a database, in
    one transaction per poll wakeup) and then acknowledged (ACCEPTED with
    the job id), queued per backend (bounded, and per client when asked),
    leased to a worker of that backend with free capacity, and its RESULT
    streamed back to the submitting client as soon as it arrives. A lost
    worker's leases go back to the queue; a job that loses max_attempts
    workers fails as internal_error. Finished results are kept (time and
    count bounded) so a reconnecting client gets them again (FETCH, or a
    resubmit of the same (client, ref)). Bodies are forwarded untouched;
    each worker's result is checked (broker_verdict) before it is believed.

    Runs as a CZMQ actor: zactor_new (broker_server_actor, &config); the
    config (and its strings) need only live until zactor_new returns.
    Pipe commands: "ENDPOINTS" -> replies two strings (client endpoint,
    worker endpoint, with the real ports when bound to an ephemeral port);
    when the start failed (cannot bind, cannot open the database, bad keys)
    the first is "" and the second the reason. "STATS" -> one string, a JSON
    object of counters and gauges (docs/protocol.md section 11). "$TERM"
    stops it (so does SIGINT/SIGTERM via CZMQ's interrupt handling).
    With config.metrics set, the actor moves the Prometheus figures of
    docs/metrics.md as it goes (the registry is the one object it shares
    with another thread, the HTTP server's, by design: common_metrics.h).
    Section 14 of the spec: it decodes each job body once, to key the
    result cache (broker_cache), follow identical jobs in flight, and name
    the task for its statistics (broker_tasks) and GRPO groups
    (broker_groups); it answers CANCEL and QUERY.
    Spec: docs/protocol.md; guarantees: docs/reliability.md.
*/
#ifndef BROKER_SERVER_H
#define BROKER_SERVER_H

#include <czmq.h>
#include <stdint.h>
#include <stdbool.h>
#include "common_metrics_kgym.h"

typedef struct {
    const char *clients_endpoint;   //  e.g. "tcp://*:5555" or "tcp://127.0.0.1:*"
    const char *workers_endpoint;   //  e.g. "tcp://*:5556"
    uint32_t heartbeat_ms;          //  heartbeat interval (default 1000)
    uint32_t liveness;              //  missed heartbeats before a worker is dropped (default 3)
    uint32_t max_queue;             //  queued jobs across all clients (default 100000)
    uint32_t max_client_jobs;       //  unfinished jobs of one client (default 0: no limit of its own)
    uint32_t max_attempts;          //  leases lost with their worker before a job fails (default 3)
    const char *db_path;            //  durable store (SQLite); NULL: memory only
    bool db_full_sync;              //  fsync every commit (survives power loss)
    uint32_t keep_results;          //  finished results kept for FETCH and resubmits (default 100000)
    uint32_t keep_s;                //  ... for at most this many seconds (default 3600)
    const char *curve_secret;       //  broker's secret certificate: CURVE on both sockets
    const char *trainer_keys;       //  directory of trainers' public certificates
    const char *worker_keys;        //  directory of workers' public certificates
    common_metrics_broker_t *metrics;   //  figures to move (borrowed; NULL: none, the default)
    common_metrics_t *registry;     //  their registry, for the stall beat (borrowed; may be NULL)
    bool notify;                    //  speak sd_notify: STATUS (throttled), WATCHDOG, STOPPING
    uint32_t cache_entries;         //  result cache entries (default 10000; 0: no cache)
    uint64_t cache_bytes;           //  result cache bytes (default 256 MiB)
    uint32_t task_window;           //  results per task in its statistics (default 100)
    uint32_t no_worker_grace_s;     //  a job no registered worker serves waits this long for one,
                                    //  then fails as internal_error (default 60; 0: at once)
} broker_config_t;

void broker_config_default (broker_config_t *cfg);

void broker_server_actor (zsock_t *pipe, void *args);

#endif
