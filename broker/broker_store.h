/*  broker_store - the broker's durable job table: one SQLite file in WAL mode.

    Every accepted job is a row (id, client, ref, backend, body, the SUBMIT
    options: tag, cache policy, group, group size, trajectory; state,
    attempts, lost, times) written before the broker says ACCEPTED; a
    finished job keeps its result and its verdict (status, reward, speedup)
    and loses its body, until the broker's retention retires it. A broker that restarts on the same file reloads
    every row: unfinished jobs are queued again, finished ones answer FETCH
    and resubmits. See docs/reliability.md for what survives what.

    Writes open a transaction on first use and the broker commits once per
    poll wakeup (broker_store_commit), so a batch of hundreds of jobs costs
    one commit. synchronous=NORMAL (default): a commit is in the WAL file
    when it returns, safe against a killed process, not against power loss
    (the last commits before the loss may roll back; the file stays
    consistent). synchronous=FULL: the WAL is fsynced at every commit, safe
    against power loss too. The file is opened with an exclusive lock: a
    second broker on the same file fails to start.

    One thread owns an instance. All functions return 0 or -1 (with the
    SQLite error logged), never assert on what is in the file.
*/
#ifndef BROKER_STORE_H
#define BROKER_STORE_H

#include <czmq.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct broker_store_t broker_store_t;

//  One job row. Strings and bytes are borrowed (valid during the call).
typedef struct {
    uint64_t id;                //  broker's job id (primary key)
    const char *client;         //  client key ("" for a client without an id)
    uint64_t ref;               //  client's reference
    const char *tag;            //  header tag ("" = none)
    const char *backend;        //  backend name
    const void *body;           //  the job as submitted (unfinished rows)
    size_t body_size;           //  its size
    bool done;                  //  finished: result stored
    uint32_t attempts;          //  dispatches that ended (lost leases, or the final one)
    uint32_t lost;              //  leases lost with their worker
    int64_t accepted_us;        //  wall clock, microseconds since the epoch
    int64_t finished_us;        //  done rows: when the result came
    double queue_s;             //  done rows: seconds from ACCEPTED to first dispatch
    const char *worker;         //  done rows: who graded it
    const char *cache;          //  cache policy: "use", "refresh" or "bypass"
    const char *group;          //  header group ("" = none)
    uint32_t group_size;        //  header group_size (0 = not said)
    const char *trajectory;     //  header trajectory ("" = none)
    const char *status;         //  done rows: the result's status ("" = not known)
    double reward, speedup;     //  done rows: the result's (NAN = null)
} broker_store_row_t;

//  Open (creating when absent) the store at path. full_sync: fsync every
//  commit. NULL with a reason (cannot open, locked by another broker,
//  written by a newer kgym).
broker_store_t *broker_store_new (const char *path, bool full_sync, char *err, size_t errlen);

//  Commit what is pending (if anything) and close.
void broker_store_destroy (broker_store_t **self_p);

//  Retire finished rows older than keep_after_us (wall clock) and, past
//  keep_results finished rows, the oldest; then call fn for every row in
//  id order (fn returns 0, or -1 to stop). 0 or -1.
int broker_store_load (broker_store_t *self, int64_t keep_after_us, size_t keep_results,
                       int (*fn) (const broker_store_row_t *row, void *arg), void *arg);

//  The highest job id ever stored (0 when empty).
uint64_t broker_store_last_id (broker_store_t *self);

//  A new unfinished row (id, client, ref, tag, backend, body, accepted_us,
//  cache, group, group_size, trajectory; NULL strings are "", a NULL cache
//  "use").
int broker_store_insert (broker_store_t *self, const broker_store_row_t *row);

//  A lease ended without a result: the row's new counts.
int broker_store_requeue (broker_store_t *self, uint64_t id, uint32_t attempts, uint32_t lost);

//  The job finished: its result replaces its body; status, reward and
//  speedup are its verdict (NAN: null). A job cancelled before it ran is
//  finished with no result (NULL) and the broker's own status for that.
int broker_store_finish (broker_store_t *self, uint64_t id, uint32_t attempts, uint32_t lost,
                         const void *result, size_t size, const char *worker, double queue_s,
                         int64_t finished_us, const char *status, double reward, double speedup);

//  Forget a row (retired result, a job whose client left).
int broker_store_delete (broker_store_t *self, uint64_t id);

//  A finished row's result as a new frame, or NULL.
zframe_t *broker_store_result (broker_store_t *self, uint64_t id);

//  True while writes wait for a commit.
bool broker_store_pending (broker_store_t *self);

//  The store's connection, for a module that keeps its own table in the
//  same file (broker_tasks): the file is locked to this connection.
struct sqlite3 *broker_store_db (broker_store_t *self);

//  Commit the open transaction (0 when there is none). On failure the
//  transaction is rolled back and -1 returned: none of its writes happened.
int broker_store_commit (broker_store_t *self);

#endif
