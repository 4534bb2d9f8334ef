/*  kgym_eval - `kgym eval`: grade candidates here, with no servers.

        kgym eval [--timeout S] [--seed N] [--trials N] [--check-only] [--no-profile]
                  [--cache PATH] [--profile [--json]] TASK CANDIDATE...

    One JSON line per candidate on stdout, in the order given. Exit 0 when
    every candidate was graded (whatever its verdict), 1 when one could
    not be, 2 on a usage error.
*/
#ifndef KGYM_EVAL_H
#define KGYM_EVAL_H

//  argv [0] is the subcommand's name ("eval"). Returns the exit status.
int kgym_eval_main (int argc, char **argv);

#endif
