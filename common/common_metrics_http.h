/*  common_metrics_http - the HTTP endpoint of a common_metrics registry.

    kgym-broker --metrics HOST:PORT and kgym-worker --metrics HOST:PORT run
    one each. libmicrohttpd serves it from its own thread:

        GET /metrics   200, Prometheus text format 0.0.4 (the registry)
        GET /healthz   200 "ok" while alive; 503 and the reason otherwise
                       (starting, stalled main loop)
        GET /readyz    200 "ok" while ready; 503 and the reason otherwise
        GET /          200, a list of the three
    HEAD works for each; other methods get 405, other paths 404.

    Address: "HOST:PORT", "[V6ADDR]:PORT", "*:PORT" or ":PORT" (every
    interface, IPv6 and IPv4 where the host has both). PORT 0 takes a free
    port; common_metrics_http_port tells which. Everything the endpoint
    serves is read-only; bind it where only the scraper can reach it.
*/
#ifndef COMMON_METRICS_HTTP_H
#define COMMON_METRICS_HTTP_H

#include "common_metrics.h"

typedef struct common_metrics_http_t common_metrics_http_t;

//  Bind and start serving metrics (borrowed: it must outlive the server).
//  NULL with a one-line reason (bad address, port in use).
common_metrics_http_t *common_metrics_http_new (common_metrics_t *metrics, const char *address,
                                                char *err, size_t errlen);
//  Stop serving (waits for the HTTP thread) and free.
void common_metrics_http_destroy (common_metrics_http_t **self_p);

//  The port bound (the real one when 0 was asked for).
int common_metrics_http_port (common_metrics_http_t *self);

//  "HOST:PORT" as bound, for logs (borrowed).
const char *common_metrics_http_address (common_metrics_http_t *self);

#endif
