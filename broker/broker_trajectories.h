/*  broker_trajectories - per-trajectory state kept for multi-turn tools.

    A multi-turn RL tool (veRL's BaseTool, TRL's environment) grades several
    kernels within one trajectory and needs what came before: the task, the
    attempts, the best score. Frameworks create the tool object per call and
    may run the calls of one trajectory in different processes, so the
    state lives here, at the broker, keyed by trajectory id (docs/protocol.md
    section 14.6). The broker stores it and never reads it: a JSON value the
    client owns.

    Each put bumps the entry's version; a put may name the version it read
    (if_version) and is refused when another writer came in between, so two
    processes cannot lose each other's attempts. Bounded by count and by
    bytes (the state's msgpack size plus the id), least recently used
    evicted first. Memory only: a restarted broker starts empty. One thread
    owns an instance (the broker's actor).
*/
#ifndef BROKER_TRAJECTORIES_H
#define BROKER_TRAJECTORIES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BROKER_TRAJECTORY_MAX_STATE (1u << 20)  //  bytes of one state, encoded

typedef struct broker_trajectories_t broker_trajectories_t;

broker_trajectories_t *broker_trajectories_new (size_t max_entries, size_t max_bytes);
void broker_trajectories_destroy (broker_trajectories_t **self_p);

//  The state of id (borrowed, valid until the next call) and its version,
//  or NULL (version 0) when unknown. Makes it most recently used.
json_t *broker_trajectories_get (broker_trajectories_t *self, const char *id, uint64_t *version);

//  Keep state (a new reference is taken) for id, encoded size bytes.
//  if_version 0: whatever is there; else only when the entry's version is
//  that (0 for "not there yet" is said with if_version = UINT64_MAX).
//  Returns 0 with the new version in *version; -1 when it is too large
//  or out of memory; -2 when if_version does not match (*version: the
//  entry's current one, 0 when none).
int broker_trajectories_put (broker_trajectories_t *self, const char *id, json_t *state,
                             size_t size, uint64_t if_version, uint64_t *version);

//  Forget id: its last state (caller owns it), or NULL when unknown.
json_t *broker_trajectories_close (broker_trajectories_t *self, const char *id);

//  Entries and bytes held, and evictions so far.
size_t broker_trajectories_size (broker_trajectories_t *self);
size_t broker_trajectories_bytes (broker_trajectories_t *self);
uint64_t broker_trajectories_evicted (broker_trajectories_t *self);

#endif
