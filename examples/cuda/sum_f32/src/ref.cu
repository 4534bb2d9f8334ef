// Reference full sum: a single block of 1024 threads; each thread sums a
// strided (coalesced) share in double, then a shared-memory tree in double.
// Deterministic and accurate; slow (one multiprocessor), which is fine.
extern "C" __global__ void sum_ref(const float *x, float *y, int N)
{
    __shared__ double part[1024];
    double s = 0.0;
    for (int i = threadIdx.x; i < N; i += blockDim.x)
        s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if (threadIdx.x < h)
            part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        y[0] = (float) part[0];
}
