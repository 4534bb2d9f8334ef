/*  cuda_driver - the CUDA driver API, loaded at run time (runner side).  */
#include "cuda_driver.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define STR(x)  #x
#define XSTR(x) STR (x)

cuda_driver_t cuda_driver;
static void *s_handle;

int
cuda_driver_load (char *err, size_t errlen)
{
    if (s_handle)
        return 0;
    void *handle = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror ();
        snprintf (err, errlen, "%s", why? why: "cannot load libcuda.so.1");
        return -1;
    }
    const char *missing = NULL;
    //  XSTR expands cuda.h's version macros: the symbol a direct link would use.
#define CUDA_DRIVER_LOAD(f) \
    cuda_driver.f = (__typeof__ (f) *) dlsym (handle, XSTR (f)); \
    if (!cuda_driver.f && !missing) missing = XSTR (f);
    CUDA_DRIVER_FUNCS (CUDA_DRIVER_LOAD)
#undef CUDA_DRIVER_LOAD
    //  Optional: older drivers lack it, and the parameter check is skipped.
    if (missing && strcmp (missing, XSTR (cuFuncGetParamInfo)) == 0)
        missing = NULL;
    if (missing) {
        snprintf (err, errlen, "libcuda.so.1 lacks %s (driver too old)", missing);
        dlclose (handle);
        memset (&cuda_driver, 0, sizeof cuda_driver);
        return -1;
    }
    s_handle = handle;
    return 0;
}

int
cuda_driver_has_param_info (void)
{
    return cuda_driver.cuFuncGetParamInfo != NULL;
}
