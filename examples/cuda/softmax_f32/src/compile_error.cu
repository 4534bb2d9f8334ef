// Broken: a missing semicolon, an undeclared name and a float4 used as a
// float. Expected: compile_error.
extern "C" __global__ void softmax(const float *x, float *y, int M, int N)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x
    float4 v = ((const float4 *) x)[r];
    y[r] = v / row_sum;
}
