/*  client_submit - the `kgym submit` subcommand: jobs to a broker, result lines out.

    kgym submit --broker EP [--timeout S] [--seed N] [--tag T] [--window N]
                [--connect-timeout S] [--broker-timeout S] [--client-id ID]
                [--heartbeat MS] [--curve-secret FILE --broker-key FILE]
                [--group G [--group-size N]] [--trajectory X] [--cache use|refresh|bypass]
                TASK CANDIDATE...
    kgym submit --broker EP [same options] --batch FILE|-

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
    again after a wait (100 ms doubling to 5 s). Exit 0 when every job got
    a result, whatever its status; 1 with a one-line reason on stderr when
    it could not do its work (including a broker silent for longer than
    --broker-timeout); 2 on a usage error.
*/
#ifndef CLIENT_SUBMIT_H
#define CLIENT_SUBMIT_H

//  Run the subcommand; argv [0] is "submit". Returns the exit status.
int client_submit_main (int argc, char **argv);

#endif
