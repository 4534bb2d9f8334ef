/*  worker_server - a worker's connection to the broker.

    Announces itself (READY: backend, device, capacity, state), heartbeats
    (with its device's busy ratio), takes JOBs up to its capacity and sends
    each RESULT as soon as it is ready. Each job runs in its own thread (an
    actor) and goes through two pools: a compile slot (the compile pool,
    `compilers`, sized from the host's cores), then a run slot (`slots`, the
    device). The worker holds `prefetch` jobs beyond its run slots, by
    default enough to keep every compiler busy while a compiled job waits
    for each run slot, so the device never waits for a compile; a job that
    prepare already decided (it does not parse, or does not compile) is
    answered at once and never takes a run slot. Only the server's thread
    touches the broker socket.

    The busy ratio is the share of the run slots' wall time that jobs'
    execute phases held them, over about the last ten seconds (samples a
    second apart); kgym_worker_device_busy_seconds_total has every second
    of it (docs/metrics.md).

    Reconnects by itself: when the broker goes silent (backing off 1 s
    doubling to 32 s, then a new socket) or answers "unknown worker" (a
    restarted broker), it announces itself again and forgets the jobs it
    held: the broker has requeued them, and their results would be stale.

    States (worker_state_t), carried in READY and HEARTBEAT:
        ready        takes jobs
        draining     finishes what it holds, takes no new job, then sends
                     DISCONNECT and worker_server_run returns 0. Entered on
                     DRAIN from the broker (`kgym drain NAME`), "DRAIN" on
                     the pipe (kgym-worker: the first SIGTERM) or
                     worker_server_set_state.
        quarantined  its device is unfit (a failed GPU check): it gives its
                     jobs back to the broker (READY again), takes nothing,
                     and stays connected so the broker shows it; set by
                     worker_server_set_state, left by setting ready.
    Pipe commands (the pipe given to worker_server_run, or the actor's):
    "DRAIN", "STOP" (leave now: DISCONNECT, jobs go back), "$TERM" (same),
    "QUARANTINE" [reason], "READY", "STATUS" -> one string, a JSON object
    {"state", "jobs", "done", "connects", "slots", "compilers", "prefetch",
    "compiling", "compiling_max" (most compiles at once so far), "prepared"
    (compiled, waiting for a run slot), "running", "busy" (the ratio)}.
    With config.metrics it moves the worker figures of docs/metrics.md
    (job threads bump theirs directly: the registry is thread-safe), and
    with config.registry keeps /readyz true exactly while it is connected,
    registered and ready (not draining, quarantined or reconnecting).
*/
#ifndef WORKER_SERVER_H
#define WORKER_SERVER_H

#include <czmq.h>
#include <stdint.h>
#include <stdbool.h>
#include "common_metrics_kgym.h"

typedef struct {
    const char *broker_endpoint;    //  broker's worker endpoint
    const char *backend;            //  "cpu" or "cuda"
    int device;                     //  CUDA device ordinal
    uint32_t slots;                 //  jobs running at once (0: the backend's; cpu one per core
                                    //  but one, cuda 1)
    uint32_t compilers;             //  compiles at once (0: the backend's, from the host's cores)
    uint32_t prefetch;              //  jobs held beyond the run slots (WORKER_PREFETCH_AUTO: compilers
                                    //  + slots, at most WORKER_PREFETCH_AUTO_MAX)
    const char *name;               //  worker name (default host:pid)
    const char *cache_path;         //  compile cache, NULL = default
    uint32_t heartbeat_ms;          //  default 1000
    uint32_t liveness;              //  missed heartbeats before reconnecting (default 3)
    bool fresh_runner;              //  CUDA: a fresh runner per job
    const char *python;             //  the python backend's interpreter (NULL: $KGYM_PYTHON, else
                                    //  /usr/bin/python3)
    uint64_t max_job_bytes;         //  memory one job may need, all its parts (0: the backend's
                                    //  default from the machine); over it a job is invalid
    const char *curve_secret;       //  own secret certificate: CURVE to the broker
    const char *broker_key;         //  the broker's public certificate (with curve_secret)
    common_metrics_worker_t *metrics;   //  figures to move (borrowed; NULL: none, the default)
    common_metrics_t *registry;     //  their registry: readiness and the stall beat (borrowed; may be NULL)
    bool notify;                    //  speak sd_notify: READY once serving, STATUS, STOPPING
} worker_config_t;

#define WORKER_PREFETCH_AUTO UINT32_MAX    //  prefetch sized from the pools (the default)
#define WORKER_PREFETCH_AUTO_MAX 64         //  most jobs an automatic prefetch holds
#define WORKER_POOL_MAX 1024                //  most slots, compilers or prefetched jobs one may ask for

void worker_config_default (worker_config_t *cfg);

typedef enum {
    WORKER_STATE_READY = 0,         //  takes jobs
    WORKER_STATE_DRAINING,          //  finishes its jobs, then leaves
    WORKER_STATE_QUARANTINED        //  device unfit: takes nothing
} worker_state_t;

//  "ready", "draining", "quarantined".
const char *worker_state_name (worker_state_t state);

typedef struct worker_server_t worker_server_t;

//  Create (makes the evaluator, so a broken backend fails here; loads the
//  CURVE certificates). NULL with a reason.
worker_server_t *worker_server_new (const worker_config_t *cfg, char *err, size_t errlen);
void worker_server_destroy (worker_server_t **self_p);

//  Serve until drained, stopped ("STOP"/"$TERM" on pipe, which may be NULL)
//  or interrupted (zsys_interrupted). 0, or -1 when it could not start.
int worker_server_run (worker_server_t *self, zsock_t *pipe);

//  Actor form: zactor_new (worker_server_actor, server) takes ownership of server.
void worker_server_actor (zsock_t *pipe, void *args);

//  Ask for a state change, from any thread (a job thread whose GPU check
//  failed calls this with WORKER_STATE_QUARANTINED). The server's thread
//  applies it at once if it is waiting, else at its next turn. reason may
//  be NULL. 0, or -1 when the request could not be sent.
int worker_server_set_state (worker_server_t *self, worker_state_t state, const char *reason);

//  The state (server's thread only).
worker_state_t worker_server_state (worker_server_t *self);

//  Jobs held now, running or waiting (server's thread only).
size_t worker_server_jobs (worker_server_t *self);

//  The device this worker grades on (borrowed).
const char *worker_server_device (worker_server_t *self);

#endif
