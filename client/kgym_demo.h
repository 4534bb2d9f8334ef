/*  kgym_demo - `kgym demo`: the whole service on loopback, in one process.

        kgym demo [--workers N] [--examples DIR] [--backend cpu|cuda] [--timeout S]

    Starts a broker and local workers, grades every bundled example with
    its bundled candidates, and prints a table with each verdict beside
    the status the example expects.
*/
#ifndef KGYM_DEMO_H
#define KGYM_DEMO_H

//  argv [0] is the subcommand's name ("demo"). Returns the exit status.
int kgym_demo_main (int argc, char **argv);

#endif
