// Hostile: one thread takes the whole device heap with malloc() in 1 MiB
// pieces until malloc returns NULL (the heap is a fixed-size arena, 8 MiB
// by default, so this ends quickly; the loop is capped in any case), frees
// nothing and writes no output. It must neither crash the evaluator nor
// pass. Expected: incorrect.
extern "C" __global__ void bias_gelu_residual(const float *x, const float *bias, const float *res, float *y,
                                              int M, int N)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    for (int k = 0; k < (1 << 20); k++) {
        volatile char *p = (volatile char *) malloc(1 << 20);
        if (!p)
            break;
        p[0] = 1;
    }
}
