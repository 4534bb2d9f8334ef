// Hostile: executes a trap instruction (__trap()) in every thread.
// The launch fails and the CUDA context is lost. Expected: runtime_error.
extern "C" __global__ void rmsnorm(const float *x, const float *w, float *y, int M, int N, float eps)
{
    __trap();
}
