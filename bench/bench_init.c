/*  bench_init - the host's input generator (common_init_fill), one thread.

        bench_init [MILLIONS]       elements per fill (default 16 Mi)

    The float path (normal and uniform of f32, f16, bf16: float Box-Muller,
    four elements per Philox block) against the double path (one block per
    element, Box-Muller in double: what f32 inputs used before the float
    path, and still every other dtype). Prints "BENCH name value unit" and a
    line per case; the CPU backend generates its inputs with this.
*/
#include "common_init.h"
#include "common_dtype.h"
#include "common_philox.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

int
main (int argc, char **argv)
{
    size_t n = (argc > 1? (size_t) atol (argv [1]): 16) << 20;
    if (n == 0) {
        fprintf (stderr, "usage: bench_init [MILLIONS]\n");
        return 2;
    }
    struct { const char *dtype, *dist; } cases [] = {
        { "f32", "normal" }, { "f32", "uniform" }, { "f16", "normal" }, { "bf16", "uniform" },
        { "f64", "normal" }, { "f64", "uniform" }, { "i32", "randint" },
    };
    void *buf = malloc (n * 8);
    if (!buf)
        return 1;
    printf ("host generator, one thread, %zu elements per fill\n", n);
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        common_init_t init = { INIT_NORMAL, 0, 1 };
        common_init_dist_parse (cases [c].dist, &init.dist);
        if (init.dist == INIT_RANDINT)
            init.p1 = 1000;
        common_dtype_t dtype = common_dtype_parse (cases [c].dtype);
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
            double t0 = s_now ();
            common_init_fill (&init, dtype, buf, n, (uint64_t) r + 1, kgym_stream (0, (uint32_t) r, 0));
            double took = s_now () - t0;
            if (took < best)
                best = took;
        }
        double rate = (double) n / best;
        printf ("%-4s %-7s %s path: %.1f ms per fill, %.1f M elements/s, %.2f GB/s\n", cases [c].dtype,
                cases [c].dist, common_init_float_path (&init, dtype)? "float": "double", best * 1e3,
                rate / 1e6, rate * (double) common_dtype_size (dtype) / 1e9);
        printf ("BENCH init_%s_%s_melem_s %.1f\n", cases [c].dtype, cases [c].dist, rate / 1e6);
    }
    free (buf);
    return 0;
}
