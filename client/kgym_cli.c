/*  kgym_cli - pieces the kgym subcommands that grade locally share.  */
#include "kgym_cli.h"
#include "common_task.h"
#include <stdio.h>

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

json_t *
kgym_cli_load (const char *path, const char *what)
{
    char err [512];
    json_t *json = common_json_load_file (path, KGYM_MAX_FILE, err, sizeof err);
    if (!json)
        fprintf (stderr, "kgym: cannot read %s %s: %s\n", what, path, err);
    return json;
}
