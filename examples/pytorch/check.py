#!/usr/bin/python3
"""check.py - what can be checked of the PyTorch pool without kgym or a GPU.

    check.py cpu [TASK...]      grade every candidate the pool expects on the
                                CPU target with plain torch, and compare with
                                expected.json; exit 1 on a mismatch
    check.py sources [TASK...]  compile the CUDA and C++ sources of every
                                load_inline candidate (nvcc -c, g++
                                -fsyntax-only) against this torch's headers;
                                exit 1 when one that must build does not

`cpu` is a small stand-in for kgym's Python backend, not a copy of it: the
same split of trust (the reference and its outputs in this process, each
candidate in a subprocess of its own that never holds them), seeded inputs
made fresh for every call, two extra calls after the trials checked like the
trials, inputs checked unchanged, outputs checked for type, shape, dtype and
values (atol, rtol of the task), a wall-clock timeout. It gives ok,
incorrect, runtime_error, compile_error or timeout; it does not time.

Exit 77 (skipped) when torch cannot be imported (Debian: python3-torch), or,
for `sources`, when there is no nvcc.
"""

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
EXTRA_CALLS = 2          # calls after the trials, as a harness's timed runs
TRIALS = 3
JOB_SEED = 1234
LIMIT_S = 20             # wall clock per candidate, at most


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def import_source(name, source, where):
    """A module from source text, written to where/name.py first (Triton and
    inspect want a real file)."""
    path = os.path.join(where, name + ".py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cast(torch, value, dtype):
    if dtype is not None and isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def build(torch, entry, init, dtype):
    """The entry built as the harness builds it: after the job's seed."""
    if isinstance(entry, type):
        torch.manual_seed(JOB_SEED)
        model = entry(*init)
        return model.to(dtype) if dtype is not None else model
    return entry


# ---------------------------------------------------------------- the child

def child(job_path, out_path):
    """Run one candidate on the calls of job_path; write what it gave."""
    import torch
    torch.set_num_threads(1)
    job = torch.load(job_path)
    dtype = getattr(torch, job["dtype"]) if job["dtype"] else None
    result = {"status": None, "calls": []}
    with tempfile.TemporaryDirectory() as where:
        try:
            module = import_source("candidate", job["candidate"], where)
            entry = getattr(module, job["candidate_entry"])
        except BaseException:
            result["status"] = "compile_error"
            result["log"] = traceback.format_exc(limit=-3)
            torch.save(result, out_path)
            return 0
        try:
            for size in job["sizes"]:
                model = build(torch, entry, size["init"], dtype)
                for inputs in size["calls"]:
                    args = [cast(torch, v, dtype) for v in inputs]
                    with torch.no_grad():
                        out = model(*args)
                    kind = "tensor" if type(out) is torch.Tensor else type(out).__name__
                    result["calls"].append({
                        "kind": kind,
                        "out": out.detach().clone() if kind == "tensor" else None,
                        "inputs": [a.detach().clone() if isinstance(a, torch.Tensor) else a
                                   for a in args]})
        except BaseException:
            result["status"] = "runtime_error"
            result["log"] = traceback.format_exc(limit=-3)
    torch.save(result, out_path)
    return 0


# ---------------------------------------------------------------- the parent

def reference_calls(torch, task, dtype):
    """Per size: the init inputs, the inputs of every call, the expected outputs."""
    ref = {}
    exec(compile(task["reference"]["source"], "ref.py", "exec"), ref)
    entry = ref[task.get("python", {}).get("entry", "Model")]
    sizes = []
    for number, size in enumerate(task.get("sizes", [{}])):
        ref.update(size)
        init = list(ref["get_init_inputs"]())
        model = build(torch, entry, init, dtype)
        calls, expected = [], []
        count = TRIALS + (EXTRA_CALLS if number == task.get("timing_size", 0) else 0)
        for call in range(count):
            torch.manual_seed(JOB_SEED * 1000 + number * 100 + call)
            inputs = list(ref["get_inputs"]())
            calls.append(inputs)
            with torch.no_grad():
                expected.append(model(*[cast(torch, v, dtype) for v in inputs]))
        sizes.append({"init": init, "calls": calls, "expected": expected})
    return sizes


def verdict(torch, sizes, result, atol, rtol):
    """The status, and why, from what the child gave."""
    if result["status"]:
        return result["status"], result.get("log", "").strip().splitlines()[-1:]
    made = iter(result["calls"])
    for number, size in enumerate(sizes):
        for call, (inputs, want) in enumerate(zip(size["calls"], size["expected"])):
            got = next(made)
            where = "size %d call %d" % (number, call)
            if got["kind"] != "tensor":
                return "incorrect", ["%s: output is a %s, not a torch.Tensor" % (where, got["kind"])]
            out = got["out"]
            if out.shape != want.shape or out.dtype != want.dtype:
                return "incorrect", ["%s: output %s %s, expected %s %s" % (
                    where, tuple(out.shape), out.dtype, tuple(want.shape), want.dtype)]
            for before, after in zip(inputs, got["inputs"]):
                if isinstance(before, torch.Tensor) and not torch.equal(
                        before.to(after.dtype), after):
                    return "incorrect", ["%s: an input changed" % where]
            if not torch.allclose(out.double(), want.double(), atol=atol, rtol=rtol):
                bad = (out.double() - want.double()).abs().max().item()
                return "incorrect", ["%s: max abs error %.3g" % (where, bad)]
    return "ok", []


def check_task(torch, taskdir, only):
    task = load_json(os.path.join(taskdir, "task.cpu.json"))
    expected = load_json(os.path.join(taskdir, "expected.json")).get("cpu", {})
    python = task.get("python", {})
    dtype = getattr(torch, DTYPES[python["dtype"]]) if python.get("dtype") else None
    tol = task.get("tolerance", {})
    atol, rtol = tol.get("atol", 1e-2), tol.get("rtol", 1e-2)
    entry = python.get("entry", "Model")
    candidate_entry = python.get("candidate_entry", "ModelNew" if entry[:1].isupper() else entry)
    sizes = reference_calls(torch, task, dtype)
    limit = min(LIMIT_S, expected.get("eval", {}).get("timeout", LIMIT_S))
    misses = 0
    with tempfile.TemporaryDirectory() as where:
        for name, want in sorted(expected.items()):
            if name in ("eval", "fast", "slow") or (only and name not in only):
                continue
            source = load_json(os.path.join(taskdir, "candidates", name + ".json"))["source"]
            job = {"candidate": source, "candidate_entry": candidate_entry,
                   "dtype": DTYPES.get(python.get("dtype")),
                   "sizes": [{"init": s["init"], "calls": s["calls"]} for s in sizes]}
            job_path = os.path.join(where, "job.pt")
            out_path = os.path.join(where, "out.pt")
            torch.save(job, job_path)
            if os.path.exists(out_path):
                os.remove(out_path)
            try:
                proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                       job_path, out_path], capture_output=True, text=True,
                                      timeout=limit, cwd=where)
                if proc.returncode != 0 or not os.path.exists(out_path):
                    status, why = "runtime_error", ["child exit %d: %s" % (
                        proc.returncode, proc.stderr.strip()[-300:])]
                else:
                    status, why = verdict(torch, sizes, torch.load(out_path), atol, rtol)
            except subprocess.TimeoutExpired:
                status, why = "timeout", ["no answer in %d s" % limit]
            wanted = want if isinstance(want, list) else [want]
            match = status in wanted
            misses += not match
            print("%-24s %-18s %-14s %-14s %s" % (
                os.path.basename(taskdir), name, status,
                "as expected" if match else "/".join(wanted), "; ".join(why)[:120]))
            sys.stdout.flush()
    return misses


def run_cpu(tasks):
    try:
        import torch
    except ImportError:
        print("check.py: no torch here (Debian: python3-torch); skipped")
        return 77
    torch.set_num_threads(1)
    only = {}
    for arg in tasks:
        task, _, cand = arg.partition(":")
        only.setdefault(task, set())
        if cand:
            only[task].add(cand)
    misses = 0
    for taskdir in sorted(glob.glob(os.path.join(HERE, "*", "task.cpu.json"))):
        taskdir = os.path.dirname(taskdir)
        name = os.path.basename(taskdir)
        if only and name not in only:
            continue
        misses += check_task(torch, taskdir, only.get(name))
    print("check.py cpu: %d candidate(s) missed their expected status" % misses)
    return 1 if misses else 0


# ---------------------------------------------------------------- sources

def load_inline_sources(path):
    """(name, cuda source, cpp source) of a candidate that calls load_inline,
    read from its module-level string constants without running it."""
    import ast
    with open(path, encoding="utf-8") as f:
        try:
            tree = ast.parse(f.read())
        except SyntaxError:
            return None                 # meant not to parse (pack.py checks the rest)
    strings = {}
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    strings[target.id] = node.value.value
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "load_inline":
            call = node
    if call is None:
        return None
    found = {}
    for kw in call.keywords:
        value = kw.value
        if isinstance(value, ast.Name):
            found[kw.arg] = strings.get(value.id)
        elif isinstance(value, ast.Constant):
            found[kw.arg] = value.value
    return found.get("name"), found.get("cuda_sources"), found.get("cpp_sources")


def run_sources(tasks):
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        print("check.py: no torch here (Debian: python3-torch); skipped")
        return 77
    nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    if not os.path.exists(nvcc):
        print("check.py: no nvcc at %s; skipped" % nvcc)
        return 77
    import sysconfig
    includes = cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]
    flags = ["-I" + p for p in includes] + ["-std=c++17", "-DTORCH_EXTENSION_NAME=check"]
    failures = 0
    checked = 0
    with tempfile.TemporaryDirectory() as where:
        # A CPU-only torch (Debian's) lacks this header, generated by a CUDA
        # build; it only says how c10_cuda is linked.
        macros = os.path.join(where, "include", "c10", "cuda", "impl", "cuda_cmake_macros.h")
        if not any(os.path.exists(os.path.join(p, "c10/cuda/impl/cuda_cmake_macros.h"))
                   for p in includes):
            os.makedirs(os.path.dirname(macros))
            with open(macros, "w") as f:
                f.write("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
            flags.append("-I" + os.path.join(where, "include"))
        for path in sorted(glob.glob(os.path.join(HERE, "*", "src", "*.py"))):
            task = os.path.basename(os.path.dirname(os.path.dirname(path)))
            if tasks and task not in tasks:
                continue
            found = load_inline_sources(path)
            if not found:
                continue
            name, cuda, cpp = found
            with open(path, encoding="utf-8") as f:
                must_fail = "cuda=compile_error" in f.read()
            # What load_inline writes: torch/extension.h before the C++ source
            # (its bindings aside), torch/types.h, cuda.h, cuda_runtime.h before the CUDA one.
            cu = os.path.join(where, "cuda.cu")
            cc = os.path.join(where, "main.cpp")
            with open(cu, "w") as f:
                f.write("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
                        + cuda + "\n")
            with open(cc, "w") as f:
                f.write("#include <torch/extension.h>\n" + cpp + "\n")
            logs = []
            ok = True
            for cmd in ([nvcc, "-c", "-o", os.path.join(where, "cuda.o"), "-arch=sm_90",
                         "--expt-relaxed-constexpr", "-w"] + flags + [cu],
                        ["g++", "-fsyntax-only", "-w"] + flags + [cc]):
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    ok = False
                    logs.append(" ".join(l for l in proc.stderr.splitlines() if "error" in l)[:300])
            checked += 1
            good = ok != must_fail
            failures += not good
            print("%-24s %-22s %-9s %s %s" % (task, os.path.basename(path)[:-3],
                                             "builds" if ok else "fails",
                                             "as expected" if good else "NOT AS EXPECTED",
                                             "; ".join(logs)[:200]))
            sys.stdout.flush()
    print("check.py sources: %d load_inline candidate(s), %d not as expected" % (checked, failures))
    return 1 if failures else 0


def main(argv):
    if len(argv) == 3 and argv[0] == "--child":
        return child(argv[1], argv[2])
    if not argv or argv[0] not in ("cpu", "sources"):
        sys.stderr.write(__doc__)
        return 2
    return run_cpu(argv[1:]) if argv[0] == "cpu" else run_sources(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
