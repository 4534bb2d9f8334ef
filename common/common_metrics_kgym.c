/*  common_metrics_kgym - the catalogue of kgym's own metric families.  */
#include "common_metrics_kgym.h"
#include "kgym_config.h"
#include <string.h>

//  Queue waits run from milliseconds (idle fleet) to many minutes (a
//  backlog); grading from tens of milliseconds to the longest timeout.
static const double s_wait_buckets [] = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600
};
static const double s_job_buckets [] = {
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600
};
#define S_COUNT(a) (sizeof (a) / sizeof ((a) [0]))

int
common_metrics_kgym_broker (common_metrics_t *m, common_metrics_broker_t *f)
{
    memset (f, 0, sizeof *f);
    f->build_info = common_metrics_gauge (m, "kgym_build_info",
        "kgym version of this process (always 1).", "version,component");
    f->queue_depth = common_metrics_gauge (m, "kgym_queue_depth",
        "Jobs waiting for a worker.", "backend");
    f->jobs_in_flight = common_metrics_gauge (m, "kgym_jobs_in_flight",
        "Jobs leased to workers and not yet answered.", "backend");
    f->jobs_submitted = common_metrics_counter (m, "kgym_jobs_submitted_total",
        "Jobs accepted from clients.", "backend");
    f->jobs_rejected = common_metrics_counter (m, "kgym_jobs_rejected_total",
        "SUBMITs refused: overloaded (queue full), client_limit, malformed.", "reason");
    f->jobs_dispatched = common_metrics_counter (m, "kgym_jobs_dispatched_total",
        "Leases handed to workers (one per attempt).", "backend");
    f->jobs_completed = common_metrics_counter (m, "kgym_jobs_completed_total",
        "Jobs answered to clients, by result status.", "status");
    f->jobs_requeued = common_metrics_counter (m, "kgym_jobs_requeued_total",
        "Leases taken back from lost or departed workers and queued again.", NULL);
    f->jobs_cancelled = common_metrics_counter (m, "kgym_jobs_cancelled_total",
        "Waiting jobs dropped because their client disconnected.", NULL);
    f->jobs_unserved = common_metrics_counter (m, "kgym_jobs_unserved_total",
        "Jobs answered internal_error because no worker of their backend joined within "
        "--no-worker-grace.", "backend");
    f->cache_hits = common_metrics_counter (m, "kgym_cache_hits_total",
        "SUBMITs answered from stored results without grading again.", NULL);
    f->results_dropped = common_metrics_counter (m, "kgym_results_dropped_total",
        "RESULTs dropped: unknown job, stale attempt or lease held elsewhere.", NULL);
    f->results_rejected = common_metrics_counter (m, "kgym_results_rejected_total",
        "RESULTs that failed the broker's check (answered internal_error instead), by worker.",
        "worker");
    f->results_undeliverable = common_metrics_counter (m, "kgym_results_undeliverable_total",
        "RESULTs that could not be sent because the client was gone.", NULL);
    f->messages_malformed = common_metrics_counter (m, "kgym_messages_malformed_total",
        "Malformed messages received from clients and workers.", NULL);
    f->workers = common_metrics_gauge (m, "kgym_workers",
        "Registered workers by state: idle, busy, draining, quarantined.", "backend,state");
    f->workers_lost = common_metrics_counter (m, "kgym_workers_lost_total",
        "Workers dropped by the broker (heartbeat expired or unreachable).", NULL);
    f->queue_wait = common_metrics_histogram (m, "kgym_job_queue_wait_seconds",
        "Seconds from ACCEPTED to a job's first dispatch.", "backend",
        s_wait_buckets, S_COUNT (s_wait_buckets));
    f->job_duration = common_metrics_histogram (m, "kgym_job_duration_seconds",
        "Seconds per job: lease (dispatch to RESULT), total (ACCEPTED to answer).", "phase",
        s_job_buckets, S_COUNT (s_job_buckets));
    common_metric_set (f->build_info, 1, KGYM_VERSION, "broker");
    common_metric_t **all = (common_metric_t **) f;
    for (size_t i = 0; i < sizeof *f / sizeof (common_metric_t *); i++)
        if (!all [i])
            return -1;
    return 0;
}

int
common_metrics_kgym_worker (common_metrics_t *m, common_metrics_worker_t *f)
{
    memset (f, 0, sizeof *f);
    f->build_info = common_metrics_gauge (m, "kgym_build_info",
        "kgym version of this process (always 1).", "version,component");
    f->info = common_metrics_gauge (m, "kgym_worker_info",
        "The device this worker grades on (always 1).", "gpu,UUID,backend,model");
    f->busy = common_metrics_gauge (m, "kgym_worker_busy",
        "Jobs running on the device now.", "gpu,UUID");
    f->slots = common_metrics_gauge (m, "kgym_worker_slots",
        "Jobs the worker runs at once.", "gpu,UUID");
    f->compilers = common_metrics_gauge (m, "kgym_worker_compilers",
        "Compiles the worker runs at once (its compile pool).", "gpu,UUID");
    f->compiles = common_metrics_gauge (m, "kgym_worker_compiles",
        "Jobs compiling now.", "gpu,UUID");
    f->prepared = common_metrics_gauge (m, "kgym_worker_prepared",
        "Jobs compiled and waiting for a run slot.", "gpu,UUID");
    f->busy_seconds = common_metrics_counter (m, "kgym_worker_device_busy_seconds_total",
        "Seconds jobs' execute phases held the run slots, all slots together.", "gpu,UUID");
    f->busy_ratio = common_metrics_gauge (m, "kgym_worker_device_busy_ratio",
        "Share of the run slots' wall time jobs held them over about the last 10 s.", "gpu,UUID");
    f->state = common_metrics_gauge (m, "kgym_worker_state",
        "1 for the worker's current state: ready, draining, quarantined.", "gpu,UUID,state");
    f->connected = common_metrics_gauge (m, "kgym_worker_connected",
        "1 while the broker answers, else 0.", NULL);
    f->reconnects = common_metrics_counter (m, "kgym_worker_reconnects_total",
        "New connections to the broker after the first.", NULL);
    f->jobs = common_metrics_counter (m, "kgym_worker_jobs_total",
        "Jobs graded, by result status.", "status");
    f->faults = common_metrics_counter (m, "kgym_worker_faults_total",
        "Faults while grading: timeout, runner_crash, cuda_error, oom, sandbox, gpu_check.", "kind");
    f->compile_cache_hits = common_metrics_counter (m, "kgym_worker_compile_cache_hits_total",
        "Compiles served from the compile cache.", NULL);
    f->compile_cache_misses = common_metrics_counter (m, "kgym_worker_compile_cache_misses_total",
        "Compiles run (not in the compile cache).", NULL);
    f->job_duration = common_metrics_histogram (m, "kgym_worker_job_duration_seconds",
        "Seconds per job in the worker, by phase: compile, run, total.", "phase",
        s_job_buckets, S_COUNT (s_job_buckets));
    common_metric_set (f->build_info, 1, KGYM_VERSION, "worker");
    common_metric_t **all = (common_metric_t **) f;
    for (size_t i = 0; i < sizeof *f / sizeof (common_metric_t *); i++)
        if (!all [i])
            return -1;
    return 0;
}
