/*  kgym_cli - pieces the kgym subcommands that grade locally share
    (`kgym eval`, `kgym demo`): a job from its parts, a JSON file loaded
    with its reason said.  */
#ifndef KGYM_CLI_H
#define KGYM_CLI_H

#include <jansson.h>

//  A job object from a task, a candidate and eval overrides (borrowed, may be NULL).
json_t *kgym_cli_job (json_t *task, json_t *candidate, json_t *eval);

//  Load a JSON file (16 MiB bound); NULL after a one-line reason on stderr.
json_t *kgym_cli_load (const char *path, const char *what);

#endif
