/*  broker_trajectories - per-trajectory state kept for multi-turn tools.

    A zhashx of id -> entry and a zlistx LRU of the entries (each keeps its
    handle), so get, put, close and eviction are O(1). See the header.
*/
#include "broker_trajectories.h"
#include <czmq.h>
#include <string.h>

typedef struct {
    char *id;                   //  the key (owned; the table borrows it)
    json_t *state;              //  the client's value (a reference held)
    size_t bytes;               //  what it counts against max_bytes
    uint64_t version;           //  puts so far
    void *handle;               //  its place in the LRU list
} s_entry_t;

struct broker_trajectories_t {
    zhashx_t *table;            //  id -> entry
    zlistx_t *lru;              //  entries, least recently used first (owns nothing)
    size_t max_entries, max_bytes;
    size_t bytes;               //  held
    uint64_t evicted;           //  entries dropped for room
};

//  Out of the table and the list; the caller frees it.
static void
s_remove (broker_trajectories_t *self, s_entry_t *entry)
{
    zlistx_delete (self->lru, entry->handle);
    entry->handle = NULL;
    zhashx_delete (self->table, entry->id);
    self->bytes -= entry->bytes;
}

static void
s_free (s_entry_t **entry_p)
{
    s_entry_t *entry = *entry_p;
    if (entry) {
        json_decref (entry->state);
        free (entry->id);
        free (entry);
        *entry_p = NULL;
    }
}

broker_trajectories_t *
broker_trajectories_new (size_t max_entries, size_t max_bytes)
{
    broker_trajectories_t *self = (broker_trajectories_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->table = zhashx_new ();
    self->lru = zlistx_new ();
    if (!self->table || !self->lru) {
        zhashx_destroy (&self->table);
        zlistx_destroy (&self->lru);
        free (self);
        return NULL;
    }
    //  The entry owns its id: the table neither copies nor frees keys or items.
    zhashx_set_key_duplicator (self->table, NULL);
    zhashx_set_key_destructor (self->table, NULL);
    zhashx_set_destructor (self->table, NULL);
    self->max_entries = max_entries? max_entries: 1;
    self->max_bytes = max_bytes;
    return self;
}

void
broker_trajectories_destroy (broker_trajectories_t **self_p)
{
    broker_trajectories_t *self = *self_p;
    if (!self)
        return;
    s_entry_t *entry;
    while ((entry = (s_entry_t *) zlistx_first (self->lru))) {
        s_remove (self, entry);
        s_free (&entry);
    }
    zhashx_destroy (&self->table);
    zlistx_destroy (&self->lru);
    free (self);
    *self_p = NULL;
}

json_t *
broker_trajectories_get (broker_trajectories_t *self, const char *id, uint64_t *version)
{
    s_entry_t *entry = (s_entry_t *) zhashx_lookup (self->table, id);
    *version = entry? entry->version: 0;
    if (!entry)
        return NULL;
    zlistx_move_end (self->lru, entry->handle);
    return entry->state;
}

int
broker_trajectories_put (broker_trajectories_t *self, const char *id, json_t *state,
                         size_t size, uint64_t if_version, uint64_t *version)
{
    s_entry_t *entry = (s_entry_t *) zhashx_lookup (self->table, id);
    uint64_t current = entry? entry->version: 0;
    *version = current;
    if (if_version && (if_version == UINT64_MAX? current != 0: current != if_version))
        return -2;
    size_t bytes = size + strlen (id) + sizeof (s_entry_t);
    if (size > BROKER_TRAJECTORY_MAX_STATE || (self->max_bytes && bytes > self->max_bytes))
        return -1;
    if (entry) {
        //  Out while the others make room, back in as the most recent.
        s_remove (self, entry);
        json_decref (entry->state);
        entry->state = NULL;
    }
    else {
        entry = (s_entry_t *) calloc (1, sizeof *entry);
        if (!entry || !(entry->id = strdup (id))) {
            free (entry);
            return -1;
        }
    }
    s_entry_t *oldest;
    while ((oldest = (s_entry_t *) zlistx_first (self->lru))
       &&  (zhashx_size (self->table) + 1 > self->max_entries
       ||   (self->max_bytes && self->bytes + bytes > self->max_bytes))) {
        s_remove (self, oldest);
        s_free (&oldest);
        self->evicted++;
    }
    entry->state = json_incref (state);
    entry->bytes = bytes;
    entry->version = current + 1;
    entry->handle = zlistx_add_end (self->lru, entry);
    if (!entry->handle) {
        json_decref (entry->state);
        free (entry->id);
        free (entry);
        return -1;
    }
    zhashx_insert (self->table, entry->id, entry);
    self->bytes += bytes;
    *version = entry->version;
    return 0;
}

json_t *
broker_trajectories_close (broker_trajectories_t *self, const char *id)
{
    s_entry_t *entry = (s_entry_t *) zhashx_lookup (self->table, id);
    if (!entry)
        return NULL;
    s_remove (self, entry);
    json_t *state = json_incref (entry->state);
    s_free (&entry);
    return state;
}

size_t
broker_trajectories_size (broker_trajectories_t *self)
{
    return zhashx_size (self->table);
}

size_t
broker_trajectories_bytes (broker_trajectories_t *self)
{
    return self->bytes;
}

uint64_t
broker_trajectories_evicted (broker_trajectories_t *self)
{
    return self->evicted;
}
