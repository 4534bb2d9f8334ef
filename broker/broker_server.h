/*  broker_server - the broker: routes jobs from clients to capable workers.

    Two ROUTER sockets (clients, workers). Workers announce backend, device
    and capacity (READY); each SUBMIT is acknowledged (ACCEPTED with the job
    id), queued per backend (bounded), dispatched to a worker of that backend
    with free capacity, and its RESULT streamed back to the submitting
    client as soon as it arrives. Bodies are never decoded here.

    Runs as a CZMQ actor: zactor_new (broker_server_actor, &config); the
    config (and its strings) need only live until zactor_new returns.
    Pipe commands: "ENDPOINTS" -> replies two strings (client endpoint,
    worker endpoint, with the real ports when bound to an ephemeral port);
    when the start failed (e.g. cannot bind) the first is "" and the second
    the reason. "STATS" -> one string, a JSON object of counters:
    submitted, rejected, dispatched, completed, requeued, dropped_results,
    undeliverable, cancelled, malformed, workers_lost, and the gauges
    workers, queued, inflight. "$TERM" stops it (so does SIGINT/SIGTERM via
    CZMQ's interrupt handling).
*/
#ifndef BROKER_SERVER_H
#define BROKER_SERVER_H

#include <czmq.h>
#include <stdint.h>

typedef struct {
    const char *clients_endpoint;   //  e.g. "tcp://*:5555" or "tcp://127.0.0.1:*"
    const char *workers_endpoint;   //  e.g. "tcp://*:5556"
    uint32_t heartbeat_ms;          //  heartbeat interval (default 1000)
    uint32_t liveness;              //  missed heartbeats before a peer is dropped (default 3)
    uint32_t max_queue;             //  queued jobs across all clients (default 100000)
} broker_config_t;

void broker_config_default (broker_config_t *cfg);

void broker_server_actor (zsock_t *pipe, void *args);

#endif
