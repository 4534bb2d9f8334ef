/*  worker_server - a worker's connection to the broker.

    Announces itself (READY: backend, device, capacity), heartbeats, takes
    JOBs up to its capacity and sends each RESULT as soon as it is ready.
    Each job runs in its own thread (an actor): it compiles at once, then
    waits for a run slot, so one job compiles while another runs. Only the
    server's thread touches the broker socket. When the broker goes silent
    the worker reconnects by itself (backing off 1 s doubling to 32 s) and
    announces itself again.
*/
#ifndef WORKER_SERVER_H
#define WORKER_SERVER_H

#include <czmq.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct {
    const char *broker_endpoint;    //  broker's worker endpoint
    const char *backend;            //  "cpu" or "cuda"
    int device;                     //  CUDA device ordinal
    uint32_t slots;                 //  jobs running at once (default: cpu 2, cuda 1)
    uint32_t prefetch;              //  extra jobs taken to compile ahead (default 1)
    const char *name;               //  worker name (default host:pid)
    const char *cache_path;         //  compile cache, NULL = default
    uint32_t heartbeat_ms;          //  default 1000
    uint32_t liveness;              //  missed heartbeats before reconnecting (default 3)
    bool fresh_runner;              //  CUDA: a fresh runner per job
} worker_config_t;

void worker_config_default (worker_config_t *cfg);

typedef struct worker_server_t worker_server_t;

//  Create (makes the evaluator, so a broken backend fails here). NULL with a reason.
worker_server_t *worker_server_new (const worker_config_t *cfg, char *err, size_t errlen);
void worker_server_destroy (worker_server_t **self_p);

//  Serve until interrupted (SIGINT/SIGTERM) or "$TERM" arrives on pipe (may be NULL).
int worker_server_run (worker_server_t *self, zsock_t *pipe);

//  Actor form: zactor_new (worker_server_actor, server) takes ownership of server.
void worker_server_actor (zsock_t *pipe, void *args);

//  The device this worker grades on (borrowed).
const char *worker_server_device (worker_server_t *self);

#endif
