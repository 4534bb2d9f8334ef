/*  common_metrics_kgym - the catalogue of kgym's own metric families.

    One function registers the broker's families, one the worker's, so the
    names, help texts, label names and buckets live in one place (listed in
    docs/metrics.md, linted by promtool in tests/test_common_metrics.c) and
    the processes only bump figures:

        common_metrics_broker_t m;
        common_metrics_kgym_broker (metrics, &m);
        common_metric_inc (m.jobs_submitted, "cuda");       //  {backend}
        common_metric_observe (m.queue_wait, 0.8, "cuda");  //  {backend}

    Label values are small closed sets (backend, status, state, phase, kind)
    or identify hardware (gpu, UUID, as dcgm-exporter names them; worker, a
    worker's name, bounded like every family); never a job id, client, task
    name or hash.
*/
#ifndef COMMON_METRICS_KGYM_H
#define COMMON_METRICS_KGYM_H

#include "common_metrics.h"

typedef struct {
    common_metric_t *build_info;            //  gauge {version, component} = 1
    common_metric_t *queue_depth;           //  gauge {backend}: jobs waiting for a worker
    common_metric_t *jobs_in_flight;        //  gauge {backend}: jobs leased to workers
    common_metric_t *jobs_submitted;        //  counter {backend}: jobs accepted (ACCEPTED sent)
    common_metric_t *jobs_rejected;         //  counter {reason}: SUBMITs refused (overloaded, limit, malformed)
    common_metric_t *jobs_dispatched;       //  counter {backend}: leases handed out (attempts)
    common_metric_t *jobs_completed;        //  counter {status}: jobs answered, by result status
    common_metric_t *jobs_requeued;         //  counter: leases taken back from lost workers
    common_metric_t *jobs_cancelled;        //  counter: waiting jobs dropped for a client that left
    common_metric_t *jobs_unserved;         //  counter {backend}: jobs failed: no worker of it joined in time
    common_metric_t *cache_hits;            //  counter: SUBMITs answered from stored results
    common_metric_t *results_dropped;       //  counter: RESULTs for stale or unknown leases
    common_metric_t *results_rejected;      //  counter {worker}: RESULTs that failed the broker's check
    common_metric_t *results_undeliverable; //  counter: RESULTs whose client was gone
    common_metric_t *messages_malformed;    //  counter: malformed messages received
    common_metric_t *workers;               //  gauge {backend, state}: registered workers
    common_metric_t *workers_lost;          //  counter: workers dropped (expired, send failed)
    common_metric_t *queue_wait;            //  histogram {backend}: ACCEPTED to first dispatch, s
    common_metric_t *job_duration;          //  histogram {phase}: lease (dispatch to RESULT), total (accept to answer), s
} common_metrics_broker_t;

typedef struct {
    common_metric_t *build_info;            //  gauge {version, component} = 1
    common_metric_t *info;                  //  gauge {gpu, UUID, backend, model} = 1
    common_metric_t *busy;                  //  gauge {gpu, UUID}: jobs running on the device now
    common_metric_t *slots;                 //  gauge {gpu, UUID}: jobs it runs at once
    common_metric_t *compilers;             //  gauge {gpu, UUID}: compiles it runs at once (its pool)
    common_metric_t *compiles;              //  gauge {gpu, UUID}: jobs compiling now
    common_metric_t *prepared;              //  gauge {gpu, UUID}: jobs compiled, waiting for a run slot
    common_metric_t *busy_seconds;          //  counter {gpu, UUID}: run-slot seconds held by execute phases
    common_metric_t *busy_ratio;            //  gauge {gpu, UUID}: their share of the last ~10 s
    common_metric_t *state;                 //  gauge {gpu, UUID, state}: 1 for the current state
    common_metric_t *connected;             //  gauge: 1 while the broker answers
    common_metric_t *reconnects;            //  counter: new sockets to the broker
    common_metric_t *jobs;                  //  counter {status}: jobs graded, by result status
    common_metric_t *faults;                //  counter {kind}: timeout, runner_crash, cuda_error, oom, sandbox, gpu_check
    common_metric_t *compile_cache_hits;    //  counter: compiles served from the cache
    common_metric_t *compile_cache_misses;  //  counter: compiles run
    common_metric_t *job_duration;          //  histogram {phase}: compile, run, total, s
} common_metrics_worker_t;

//  Register the broker's / the worker's families (and set build_info to 1).
//  0, or -1 when any could not be registered (figures left NULL are
//  harmless: bumping them does nothing).
int common_metrics_kgym_broker (common_metrics_t *metrics, common_metrics_broker_t *figures);
int common_metrics_kgym_worker (common_metrics_t *metrics, common_metrics_worker_t *figures);

#endif
