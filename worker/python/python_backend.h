/*  python_backend - PyTorch-reference tasks (docs/pytorch-tasks.md).

    Grades Python candidates (ModelNew with Triton kernels, load_inline
    extensions or torch code) against a PyTorch reference, on the CPU or a
    GPU, each program in a sandboxed interpreter of its own (python_proc,
    kgym_pyrunner.py). Reached only through its table, listed in
    worker_registry.c; `kgym-worker --python PATH` names the interpreter.
*/
#ifndef PYTHON_BACKEND_H
#define PYTHON_BACKEND_H

#include "worker_backend.h"

extern const worker_backend_t python_backend;

#endif
