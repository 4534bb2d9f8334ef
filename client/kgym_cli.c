/*  kgym_cli - pieces the kgym subcommands that grade locally share.  */
#include "kgym_cli.h"
#include "common_task.h"
#include "worker_registry.h"
#include <stdio.h>
#include <string.h>

#define KGYM_MAX_FILE (16u << 20)

json_t *
kgym_cli_job (json_t *task, json_t *candidate, json_t *eval)
{
    json_t *job = json_object ();
    json_object_set (job, "task", task);
    json_object_set (job, "candidate", candidate);
    if (eval && json_object_size (eval))
        json_object_set (job, "eval", eval);
    return job;
}

const char *
kgym_cli_target (void)
{
    static const char *target;
    if (target)
        return target;
    const worker_backend_t *const *all = worker_registry_all ();
    for (size_t i = 0; all [i] && !target; i++) {
        char desc [256], err [256];
        if (all [i]->device_ordinal && all [i]->probe
        &&  all [i]->probe (0, desc, sizeof desc, err, sizeof err) == 0)
            target = all [i]->info.targets [0];
    }
    if (!target)
        target = "cpu";
    return target;
}

json_t *
kgym_cli_load (const char *path, const char *what, const char *target)
{
    char err [512];
    bool is_task = strcmp (what, "task") == 0;
    size_t len = strlen (path);
    if (is_task && !target && len > 3 && strcmp (path + len - 3, ".py") == 0)
        target = kgym_cli_target ();
    json_t *json = common_task_file_load (path, is_task, target, KGYM_MAX_FILE, err, sizeof err);
    if (!json)
        fprintf (stderr, "kgym: cannot read %s %s: %s\n", what, path, err);
    return json;
}
