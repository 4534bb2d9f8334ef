/*  cuda_driver - the CUDA driver API, loaded at run time (runner side).

    kgym-cuda-runner does not link libcuda: it dlopens libcuda.so.1 and
    looks up every entry point it uses, so on a machine without the NVIDIA
    driver it still starts and says "no device: ..." in its HELLO (the GPU
    tests then skip instead of failing to exec). Names go through cuda.h's
    own version macros (cuMemAlloc -> cuMemAlloc_v2), so the symbol looked
    up is the one a direct link would bind.

    cuda_exec.c defines CUDA_DRIVER_REDIRECT before including this header:
    its calls then go through the table unchanged in spelling.
*/
#ifndef CUDA_DRIVER_H
#define CUDA_DRIVER_H

#include <stddef.h>
#include <cuda.h>

//  Every driver entry point the runner calls (cuFuncGetParamInfo may be
//  missing on drivers before 12.4; it is then NULL).
#define CUDA_DRIVER_FUNCS(X) \
    X (cuInit) X (cuDeviceGetCount) X (cuDeviceGet) X (cuDeviceGetName) X (cuDeviceTotalMem) \
    X (cuDeviceGetPCIBusId) X (cuDeviceGetUuid) X (cuDriverGetVersion) X (cuDeviceGetAttribute) \
    X (cuDevicePrimaryCtxRetain) X (cuCtxCreate) X (cuCtxSetCurrent) X (cuCtxSetLimit) \
    X (cuStreamCreate) X (cuEventCreate) X (cuMemAlloc) X (cuMemFree) X (cuMemGetInfo) \
    X (cuModuleLoadData) X (cuModuleLoadDataEx) X (cuModuleGetFunction) X (cuModuleUnload) \
    X (cuFuncGetAttribute) X (cuFuncSetAttribute) X (cuLaunchKernel) X (cuEventRecord) \
    X (cuEventElapsedTime) X (cuStreamSynchronize) X (cuMemcpyDtoH) X (cuMemcpyDtoHAsync) \
    X (cuMemcpyHtoD) X (cuMemsetD8Async) X (cuMemsetD16Async) X (cuMemsetD32Async) \
    X (cuGetErrorName) X (cuFuncGetParamInfo) X (cuOccupancyMaxActiveBlocksPerMultiprocessor)

#define CUDA_DRIVER_MEMBER(f) __typeof__ (f) *f;

//  The table: one pointer per entry point.
typedef struct {
    CUDA_DRIVER_FUNCS (CUDA_DRIVER_MEMBER)
} cuda_driver_t;

extern cuda_driver_t cuda_driver;

//  dlopen libcuda.so.1 and fill the table. 0, or -1 with a reason
//  ("libcuda.so.1: cannot open shared object file ..."). Idempotent.
int cuda_driver_load (char *err, size_t errlen);

//  True when the driver has cuFuncGetParamInfo (12.4+).
int cuda_driver_has_param_info (void);

#ifdef CUDA_DRIVER_REDIRECT
//  The names after cuda.h's version macros, pointed at the table.
#define cuInit                  cuda_driver.cuInit
#define cuDeviceGetCount        cuda_driver.cuDeviceGetCount
#define cuDeviceGet             cuda_driver.cuDeviceGet
#define cuDeviceGetName         cuda_driver.cuDeviceGetName
#define cuDeviceTotalMem_v2     cuda_driver.cuDeviceTotalMem_v2
#define cuDeviceGetPCIBusId     cuda_driver.cuDeviceGetPCIBusId
#define cuDeviceGetUuid_v2      cuda_driver.cuDeviceGetUuid_v2
#define cuDriverGetVersion      cuda_driver.cuDriverGetVersion
#define cuDeviceGetAttribute    cuda_driver.cuDeviceGetAttribute
#define cuDevicePrimaryCtxRetain cuda_driver.cuDevicePrimaryCtxRetain
#define cuCtxCreate_v4          cuda_driver.cuCtxCreate_v4
#define cuCtxSetCurrent         cuda_driver.cuCtxSetCurrent
#define cuCtxSetLimit           cuda_driver.cuCtxSetLimit
#define cuStreamCreate          cuda_driver.cuStreamCreate
#define cuEventCreate           cuda_driver.cuEventCreate
#define cuMemAlloc_v2           cuda_driver.cuMemAlloc_v2
#define cuMemFree_v2            cuda_driver.cuMemFree_v2
#define cuMemGetInfo_v2         cuda_driver.cuMemGetInfo_v2
#define cuModuleLoadData        cuda_driver.cuModuleLoadData
#define cuModuleLoadDataEx      cuda_driver.cuModuleLoadDataEx
#define cuModuleGetFunction     cuda_driver.cuModuleGetFunction
#define cuModuleUnload          cuda_driver.cuModuleUnload
#define cuFuncGetAttribute      cuda_driver.cuFuncGetAttribute
#define cuFuncSetAttribute      cuda_driver.cuFuncSetAttribute
#define cuLaunchKernel          cuda_driver.cuLaunchKernel
#define cuEventRecord           cuda_driver.cuEventRecord
#define cuEventElapsedTime_v2   cuda_driver.cuEventElapsedTime_v2
#define cuStreamSynchronize     cuda_driver.cuStreamSynchronize
#define cuMemcpyDtoH_v2         cuda_driver.cuMemcpyDtoH_v2
#define cuMemcpyDtoHAsync_v2    cuda_driver.cuMemcpyDtoHAsync_v2
#define cuMemcpyHtoD_v2         cuda_driver.cuMemcpyHtoD_v2
#define cuMemsetD8Async         cuda_driver.cuMemsetD8Async
#define cuMemsetD16Async        cuda_driver.cuMemsetD16Async
#define cuMemsetD32Async        cuda_driver.cuMemsetD32Async
#define cuGetErrorName          cuda_driver.cuGetErrorName
#define cuFuncGetParamInfo      cuda_driver.cuFuncGetParamInfo
#define cuOccupancyMaxActiveBlocksPerMultiprocessor cuda_driver.cuOccupancyMaxActiveBlocksPerMultiprocessor
#endif

#endif
