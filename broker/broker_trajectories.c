/*  broker_trajectories - per-trajectory state kept for multi-turn tools.

    A zhashx of id -> entry and an intrusive LRU list through the entries,
    so get, put, close and eviction are O(1). See the header.
*/
#include "broker_trajectories.h"
#include <czmq.h>
#include <string.h>

typedef struct _s_entry_t s_entry_t;
struct _s_entry_t {
    char *id;                   //  the key (owned; the table borrows it)
    json_t *state;              //  the client's value (a reference held)
    size_t bytes;               //  what it counts against max_bytes
    uint64_t version;           //  puts so far
    s_entry_t *prev, *next;     //  LRU: head is the least recently used
};

struct broker_trajectories_t {
    zhashx_t *table;            //  id -> entry
    s_entry_t *head, *tail;     //  LRU order
    size_t max_entries, max_bytes;
    size_t bytes;               //  held
    uint64_t evicted;           //  entries dropped for room
};

static void
s_unlink (broker_trajectories_t *self, s_entry_t *entry)
{
    if (entry->prev)
        entry->prev->next = entry->next;
    else
        self->head = entry->next;
    if (entry->next)
        entry->next->prev = entry->prev;
    else
        self->tail = entry->prev;
    entry->prev = entry->next = NULL;
}

static void
s_push (broker_trajectories_t *self, s_entry_t *entry)
{
    entry->prev = self->tail;
    entry->next = NULL;
    if (self->tail)
        self->tail->next = entry;
    else
        self->head = entry;
    self->tail = entry;
}

//  Out of the table and the list; the caller frees it.
static void
s_remove (broker_trajectories_t *self, s_entry_t *entry)
{
    s_unlink (self, entry);
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
    if (!self->table) {
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
    while (self->head) {
        s_entry_t *entry = self->head;
        s_remove (self, entry);
        s_free (&entry);
    }
    zhashx_destroy (&self->table);
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
    s_unlink (self, entry);
    s_push (self, entry);
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
    while (self->head && (zhashx_size (self->table) + 1 > self->max_entries
                      ||  (self->max_bytes && self->bytes + bytes > self->max_bytes))) {
        s_entry_t *oldest = self->head;
        s_remove (self, oldest);
        s_free (&oldest);
        self->evicted++;
    }
    entry->state = json_incref (state);
    entry->bytes = bytes;
    entry->version = current + 1;
    zhashx_insert (self->table, entry->id, entry);
    s_push (self, entry);
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
