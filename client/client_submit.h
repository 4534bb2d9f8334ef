/*  client_submit - the `kgym submit` subcommand: jobs to a broker, result lines out.

    kgym submit --broker EP [--timeout S] [--seed N] [--tag T] [--window N]
                [--connect-timeout S] [--broker-timeout S] [--deadline S] [--client-id ID]
                [--heartbeat MS] [--curve-secret FILE --broker-key FILE]
                [--group G [--group-size N]] [--trajectory X] [--cache use|refresh|bypass]
                TASK CANDIDATE... [--completion FILE]...
    kgym submit --broker EP [same options] --batch FILE|-

    --completion FILE (repeatable) is a model's answer to the PyTorch task
    TASK: its ```python block defining ModelNew becomes the candidate
    (client_extract); an answer without one gets its line at once, status
    invalid with the feedback and "error": "extract", and is never sent.

    --broker defaults to $KGYM_BROKER. Every job is read and checked
    before the first is sent (a batch from stdin is kept in a temporary
    file to be read twice): a bad line ("FILE:N: why", blank lines not
    counted) or an unreadable file sends nothing and exits 2.

    Sends one job per candidate (or per line of the batch file, a JSON object
    {"task", "candidate", "eval", "reward", "tag"} whose task and candidate
    are objects or paths relative to the cwd), keeps at most --window jobs
    in flight, and prints one compact JSON line per result on stdout in
    completion order (client_result_line, "candidate" = the path as given,
    or "line N" for an inline candidate; a result the broker's cache
    answered keeps its "cached": true). Group, group size, trajectory and
    cache policy go in each SUBMIT's header (a batch line may carry its
    own "group", "group_size", "trajectory", "cache"); a group's SUMMARY
    is one line on stderr. A progress line goes to stderr
    when it is a terminal. Rides out a broker restart or a lost connection
    (client_kgym resends what is unanswered): each job is printed once. A
    job the broker refuses as busy (429) or could not store (500) is sent
    again after a wait (100 ms doubling to 5 s). A job no connected worker
    serves (ERROR 503, a NOTICE) keeps waiting, the broker's reason said
    once per backend on stderr; its result comes later (a broker-made
    internal_error when no worker joined in time). A job that ends without
    a result of its own (its result body does not decode or is not a map,
    or the broker refused the job with an ERROR naming it) still gets its
    line, status internal_error with the reason as message, and a line on
    stderr; the run goes on. --deadline S bounds the whole run: the jobs
    without a result by then are named on stderr. Exit 0 when every job
    got a result, whatever its status; 1 with a one-line reason on stderr
    when it could not do its work (including a job without a result of its
    own, a broker silent for longer than --broker-timeout, a broker that
    refused the handshake, a deadline passed); 2 on a usage error.
*/
#ifndef CLIENT_SUBMIT_H
#define CLIENT_SUBMIT_H

//  Run the subcommand; argv [0] is "submit". Returns the exit status.
int client_submit_main (int argc, char **argv);

#endif
