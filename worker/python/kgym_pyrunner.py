"""kgym_pyrunner - one PyTorch program (a task's reference or a candidate) in a sandbox.

The python backend (worker/python/python_backend.c) starts this file with the worker's
interpreter inside a confined runner, one process per program and per job, and drives it over a
socket (fd given by --fd): each message is a 4-byte little-endian length and a JSON object. Bulk
data goes through a shared memory file (--shm) that the supervisor maps too: this process writes
its outputs there, the supervisor reads and compares them. Nothing here is trusted once a
candidate's module has been imported into the process: the supervisor times every call with its
own clock, poisons the output area before each call and samples it the moment the reply arrives,
and compares every byte itself (docs/sandbox.md, "Python runners").

It imports torch (and Triton) first, then waits for {op: "start"} before it touches the device:
a runner started ahead of its job imports while another job is timed, and sets up CUDA and the
profiler only when the supervisor says so. Then it says hello: {hello, python, torch, gpu?, ...}.

A third role, the builder, runs without a GPU before its job takes one: it only imports the
candidate's module (its load_inline builds: nvcc, ninja, for the GPU's architecture, --arch) so
that the job's candidate finds the build done; nothing it says is a verdict.

Requests (op) and replies:
  load     {task, candidate?, entry, candidate_entry, dtype}   -> {ok} | {error, kind, traceback}
  build    {candidate}              the builder: import the candidate's module only
                                                                   -> {ok} | {error, kind, traceback}
  size     {constants, seed, compile?}  build the model for one size (and torch.compile of it
                                    for a "compile" baseline)      -> {ok} | {error, ...}
  inputs   {seed}                   make the inputs of one run     -> {ok, inputs: [meta]}
  call     {slots?, profile?, events?, baseline?, inputs?}  run forward (the compiled baseline's),
                                    copy its outputs to the slots given (or from offset 0), and with
                                    inputs its inputs as they are after the call, each from the next
                                    multiple of 64 after the outputs (the supervisor compares them
                                    with the reference's: an input changed by the call, or not made
                                    by get_inputs, shows there); profile: the kernels it ran (gpu:
                                    {span_us, kernels}); events: its GPU time on the current stream
                                    (gpu: {event_us})
                                    -> {outputs: [meta], inputs_at?, inputs?: [meta], gpu?: {...}}
                                       | {error, kind, traceback}
  flush    {}                       write over the GPU's L2 (the reference process only)
  copy     {nbytes, repeat}         time copying nbytes into the shared memory -> {seconds: [..]}
  exit
"""

import json
import mmap
import os
import struct
import sys
import time
import traceback

MAX_MESSAGE = 64 << 20


class Channel:
    """Length-prefixed JSON over a stream socket."""

    def __init__(self, fd):
        self.fd = fd

    def _read(self, n):
        parts = []
        while n:
            chunk = os.read(self.fd, n)
            if not chunk:
                raise EOFError
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def recv(self):
        (size,) = struct.unpack("<I", self._read(4))
        if size > MAX_MESSAGE:
            raise ValueError("request too large")
        return json.loads(self._read(size))

    def send(self, obj):
        data = json.dumps(obj, allow_nan=False, default=str).encode()
        data = struct.pack("<I", len(data)) + data
        while data:
            n = os.write(self.fd, data)
            data = data[n:]


def trimmed_traceback(exc, keep):
    """The traceback of exc trimmed to the frames of the task's or candidate's own
    files (not torch's, not the harness's); its last `keep` characters."""
    mine = ("kgym_candidate.py", "kgym_task.py")
    lines = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.basename(frame.filename) not in mine:
            continue
        lines.append(f'  File "{os.path.basename(frame.filename)}", line {frame.lineno}, in {frame.name}\n')
        if frame.line:
            lines.append(f"    {frame.line}\n")
    text = "Traceback (most recent call last):\n" + "".join(lines) if lines else ""
    text += "".join(traceback.format_exception_only(type(exc), exc)).replace(os.getcwd() + "/", "")
    return text[-keep:]


#  torch dtypes by the names the supervisor uses (common_dtype).
DTYPES = None


def dtype_names():
    import torch
    return {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64",
            torch.int8: "i8", torch.uint8: "u8", torch.int32: "i32", torch.int64: "i64",
            torch.bool: "u8"}


#  What each load_inline call of the candidate's module did here: name -> "kept" (imported from
#  a build already in its folder, no build tool run) or "built". The candidate's own process
#  says it, so it is information for whoever reads the result, never part of a verdict.
EXTENSIONS = {}
EXTENSIONS_MAX = 16


def kept_extensions():
    """load_inline, imported straight from its folder when the build there was made by this very
    call: same arguments (sources, flags, name), same torch, same architectures. torch itself
    would check the same by running ninja over every header the build read and a compiler or two
    for their versions (~0.5 s a call; torch < 2 even rewrites its sources, so builds again).
    A build is marked only once load_inline returned it; the mark and the library are the
    candidate's own, like everything in its build folder (kept under its own source's key).
    Versions as torch's: a name called again with other arguments is built as NAME_v1, NAME_v2."""
    try:
        import hashlib
        import inspect
        import torch
        import torch.utils.cpp_extension as cpp
        original = cpp.load_inline
        signature = inspect.signature(original)
        build_directory = cpp._get_build_directory
        import_library = cpp._import_module_from_library
        suffix = getattr(cpp, "LIB_EXT", ".so")
    except (ImportError, AttributeError, TypeError, ValueError):
        return
    if getattr(original, "kgym_kept", False):
        return
    versions = {}

    def load_inline(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        name = given.get("name")
        if type(name) is not str or given.get("is_python_module") is not True:
            return original(*args, **kwargs)
        described = repr(sorted((k, v) for k, v in given.items() if k != "verbose"))
        key = hashlib.sha256("\0".join((described, torch.__version__, str(torch.version.cuda),
                                         os.environ.get("TORCH_CUDA_ARCH_LIST", ""))).encode()).hexdigest()
        seen = versions.setdefault(name, [])
        if key not in seen:
            seen.append(key)
        version = seen.index(key)
        own = name if version == 0 else f"{name}_v{version}"
        folder = given.get("build_directory") or build_directory(name, False)
        mark = os.path.join(folder, f".kgym-{own}")
        try:
            with open(mark) as f:
                kept = f.read() == key and os.path.isfile(os.path.join(folder, own + suffix))
        except OSError:
            kept = False
        if kept:
            module = import_library(own, folder, True)
        else:
            try:
                os.unlink(mark)
            except OSError:
                pass
            given.update(name=own, build_directory=folder)
            module = original(**given)
            with open(mark + ".new", "w") as f:
                f.write(key)
            os.replace(mark + ".new", mark)
        if len(EXTENSIONS) < EXTENSIONS_MAX:
            EXTENSIONS[own[:64]] = "kept" if kept else "built"
        return module

    load_inline.kgym_kept = True
    load_inline.__doc__ = original.__doc__
    cpp.load_inline = load_inline


class Runner:
    def __init__(self, args):
        self.args = args
        self.role = args["role"]
        self.device = args["device"]
        self.channel = Channel(int(args["fd"]))
        self.shm_fd = int(args["shm"])
        self.shm = None
        self.shm_size = 0
        self.old_maps = []
        self.viewed = False
        self.task = None
        self.cand = None
        self.model = None
        self.inputs = None
        self.entry = "Model"
        self.candidate_entry = "ModelNew"
        self.cast = None
        self.profiler = None

    # --- shared memory ---
    def mapped(self, need):
        size = os.fstat(self.shm_fd).st_size
        if need > size:
            os.ftruncate(self.shm_fd, (need + 4095) // 4096 * 4096)
            size = os.fstat(self.shm_fd).st_size
        if self.shm is None or self.shm_size != size:
            if self.shm is not None:
                self.unpin()
                #  Tensors made by torch.frombuffer on it (given inputs) do
                #  not hold it open: once such views were made it stays mapped.
                if self.viewed:
                    self.old_maps.append(self.shm)
                else:
                    self.shm.close()
            self.shm = mmap.mmap(self.shm_fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.shm_size = size
            self.pin()
        return self.shm

    #  Outputs are copied from the GPU into the mapping on every call: pinned
    #  (registered with CUDA), a copy runs at the bus's speed, not through a
    #  staging buffer (GBs a call at KernelBench's shapes). Only speed
    #  depends on it: where registering fails the mapping stays pageable.
    def cudart(self):
        if getattr(self, "_cudart", None) is None:
            import ctypes
            self._cudart = False
            try:
                with open("/proc/self/maps") as maps:
                    paths = [line.split()[-1] for line in maps if "libcudart.so" in line]
                if paths:
                    lib = ctypes.CDLL(paths[0])
                    lib.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
                    lib.cudaHostUnregister.argtypes = [ctypes.c_void_p]
                    self._cudart = lib
            except OSError:
                pass
        return self._cudart

    def pin(self):
        self.pinned = None
        if self.device != "cuda" or not self.shm_size:
            return
        import ctypes
        lib = self.cudart()
        if not lib:
            return
        view = ctypes.c_char.from_buffer(self.shm)
        address = ctypes.addressof(view)
        del view                    # the mapping can be closed again
        if lib.cudaHostRegister(address, self.shm_size, 0) == 0:
            self.pinned = address
        else:
            lib.cudaGetLastError()  # not left for the next launch's check to find

    def unpin(self):
        if getattr(self, "pinned", None):
            lib = self.cudart()
            if lib.cudaHostUnregister(self.pinned) != 0:
                lib.cudaGetLastError()
        self.pinned = None

    # --- requests ---
    def import_source(self, name, source):
        """source as the module name, from a file of its own in the runner's directory."""
        import importlib.util
        if name == "kgym_candidate":
            kept_extensions()
        path = os.path.join(self.args["dir"], name + ".py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def op_build(self, req):
        if self.role != "builder":
            return {"error": "build is the builder's request", "kind": "internal"}
        try:
            self.import_source("kgym_candidate", req["candidate"])
        except BaseException as exc:   # noqa: B036
            return {"error": "the candidate's module does not import", "kind": "compile_error",
                    "traceback": trimmed_traceback(exc, 4000)}
        return {"ok": True}

    def op_load(self, req):
        import torch
        self.entry = req.get("entry") or "Model"
        self.candidate_entry = req.get("candidate_entry") or "ModelNew"
        names = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
        self.cast = names.get(req.get("dtype") or "")
        try:
            self.task = self.import_source("kgym_task", req["task"])
            #  The module's constants as written: a size that names none of
            #  them (KernelBench's own shape, often the timing size) means these,
            #  whatever size came before it.
            self.written = {name: value for name, value in vars(self.task).items()
                            if type(value) is int and not name.startswith("_")}
            for need in ("get_inputs", self.entry):
                if not hasattr(self.task, need):
                    return {"error": f"the task's module has no '{need}'", "kind": "invalid"}
        except BaseException as exc:   # noqa: B036 - whatever the task raises is the task's fault
            return {"error": "the task's module does not import", "kind": "invalid",
                    "traceback": trimmed_traceback(exc, 4000)}
        if self.role != "candidate":
            return {"ok": True}
        try:
            self.cand = self.import_source("kgym_candidate", req["candidate"])
        except BaseException as exc:   # noqa: B036
            return {"error": "the candidate's module does not import", "kind": "compile_error",
                    "traceback": trimmed_traceback(exc, 4000)}
        if not hasattr(self.cand, self.candidate_entry):
            return {"error": f"the candidate defines no '{self.candidate_entry}'", "kind": "compile_error"}
        return {"ok": True, "extensions": dict(EXTENSIONS)} if EXTENSIONS else {"ok": True}

    def op_size(self, req):
        import torch
        for name, value in getattr(self, "written", {}).items():
            setattr(self.task, name, value)
        for name, value in (req.get("constants") or {}).items():
            if not isinstance(getattr(self.task, name, None), int):
                return {"error": f"the task's module has no integer constant '{name}'", "kind": "invalid"}
            setattr(self.task, name, int(value))
        try:
            init = list(self.task.get_init_inputs()) if hasattr(self.task, "get_init_inputs") else []
        except BaseException as exc:   # noqa: B036
            return {"error": "get_init_inputs() failed", "kind": "invalid",
                    "traceback": trimmed_traceback(exc, 4000)}
        module = self.task if self.role != "candidate" else self.cand
        name = self.entry if self.role != "candidate" else self.candidate_entry
        target = getattr(module, name)
        try:
            torch.manual_seed(int(req["seed"]))
            if isinstance(target, type):
                model = target(*init)
                if isinstance(model, torch.nn.Module):
                    model = model.to(self.device)
                    if self.cast is not None:
                        model = model.to(self.cast)
                    model.eval()
                self.model = model
            else:
                self.model = target
            #  The baseline of "compile" tasks: torch.compile of the reference
            #  (timed; the expected outputs stay the eager reference's).
            self.baseline = None
            if req.get("compile") and self.role != "candidate":
                if not hasattr(torch, "compile"):
                    return {"error": "baseline 'compile' needs torch.compile (torch >= 2.0); this "
                                     f"interpreter has torch {torch.__version__}", "kind": "invalid"}
                self.baseline = torch.compile(self.model)
        except BaseException as exc:   # noqa: B036
            return {"error": f"building {name} failed", "kind": "invalid" if self.role != "candidate"
                    else self.build_kind(exc), "traceback": trimmed_traceback(exc, 4000)}
        return {"ok": True}

    @staticmethod
    def build_kind(exc):
        """An extension or Triton build failing is a compile error; anything else a runtime error."""
        text = f"{type(exc).__name__}: {exc}"
        for mark in ("Error building extension", "CompilationError", "ninja", "nvcc", "CalledProcessError"):
            if mark in text:
                return "compile_error"
        return "runtime_error"

    def op_inputs(self, req):
        import random
        import torch
        seed = int(req["seed"])
        #  Both programs make the same inputs: whatever generator the task's
        #  get_inputs draws from (torch's, Python's, numpy's) starts from the seed.
        torch.manual_seed(seed)
        random.seed(seed)
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed(seed % (1 << 32))
        try:
            #  On a GPU, made there: every run has inputs of its own, and
            #  making them on the host would cost more than the kernel.
            if self.device != "cpu" and hasattr(torch, "device") and hasattr(torch.device, "__enter__"):
                with torch.device(self.device):
                    made = list(self.task.get_inputs())
            else:
                made = list(self.task.get_inputs())
        except BaseException as exc:   # noqa: B036
            return {"error": "get_inputs() failed", "kind": "invalid", "traceback": trimmed_traceback(exc, 4000)}
        inputs = []
        for value in made:
            if isinstance(value, torch.Tensor):
                value = value.to(self.device)
                if self.cast is not None and value.is_floating_point():
                    value = value.to(self.cast)
            inputs.append(value)
        self.inputs = inputs
        if self.device == "cuda":
            torch.cuda.synchronize()
        reply = {"ok": True, "inputs": [self.meta(v) for v in inputs]}
        if "share" in req:
            reply["shared"], reply["shared_end"] = self.share_inputs(int(req["share"]))
        return reply

    #  A timed run's inputs on the CPU, handed over (python_backend's
    #  s_give_inputs): the reference copies the inputs it made into its shared
    #  memory (share_inputs); the supervisor copies those bytes to each
    #  program's own, and each call runs on views of them (given_inputs).
    SHARED_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8",
                     "uint8", "int16", "int32", "int64", "bool")

    def share_inputs(self, at):
        """The inputs' bytes from at (each tensor's at a multiple of 64), and how to rebuild them:
        (metas, end), or (why not, None) when an input is none of: a plain CPU tensor of a dtype
        above (a view: its storage's span, at most 4 times its size), an int, a float (finite), a
        bool, a str, None, a list or tuple of these (4 deep, 4096 items in all at most)."""
        import math
        import torch
        copies = []
        left = 4096

        def share(value, depth):
            nonlocal at, left
            left -= 1
            if left < 0 or depth > 4:
                raise ValueError("its inputs nest too deep or hold too many values")
            if type(value) is torch.Tensor:
                name = str(value.dtype).replace("torch.", "")
                if value.layout != torch.strided or value.device.type != "cpu" or name not in self.SHARED_DTYPES:
                    raise ValueError(f"an input is a {name} tensor on {value.device.type} ({value.layout})")
                extent = 1 + sum((n - 1) * s for n, s in zip(value.shape, value.stride())) if value.numel() else 0
                if extent > 4 * value.numel() + 64:
                    raise ValueError(f"an input is a {name} view spanning {extent} elements for {value.numel()}")
                nbytes = extent * value.element_size()
                meta = {"kind": "tensor", "dtype": name, "shape": list(value.shape), "offset": at,
                        "stride": list(value.stride()), "nbytes": nbytes, "grad": bool(value.requires_grad)}
                if extent:
                    copies.append((value.detach().as_strided((extent,), (1,), value.storage_offset()), at))
                at = (at + nbytes + 63) // 64 * 64
                return meta
            if value is None or type(value) in (int, bool, str) or (type(value) is float and math.isfinite(value)):
                return {"kind": "value", "value": value}
            if type(value) in (list, tuple):
                return {"kind": type(value).__name__, "items": [share(v, depth + 1) for v in value]}
            raise ValueError(f"an input is a {type(value).__name__}")

        try:
            metas = [share(v, 0) for v in self.inputs or []]
        except Exception as why:   # noqa: BLE001 (anything it cannot say: not handed over)
            return str(why)[:150], None
        shm = self.mapped(max(at, 1))
        for value, offset in copies:
            self.to_shm(shm, value, offset)
        return metas, at

    def given_inputs(self, metas):
        """The inputs as views of the bytes the supervisor wrote where metas say."""
        import torch
        shm = None

        def end(m):
            if m["kind"] == "tensor":
                return m["offset"] + m["nbytes"]
            return max((end(i) for i in m.get("items", [])), default=0)

        def rebuild(m):
            if m["kind"] == "value":
                return m["value"]
            if m["kind"] in ("list", "tuple"):
                items = [rebuild(i) for i in m["items"]]
                return items if m["kind"] == "list" else tuple(items)
            dtype = getattr(torch, m["dtype"])
            if m["nbytes"] == 0:
                value = torch.empty(m["shape"], dtype=dtype)
            else:
                value = torch.frombuffer(shm, dtype=torch.uint8, count=m["nbytes"], offset=m["offset"])
                value = value.view(dtype).as_strided(m["shape"], m["stride"], 0)
            if m.get("grad"):
                value.requires_grad_(True)
            return value

        shm = self.mapped(max(max((end(m) for m in metas), default=0), 1))
        self.viewed = True
        self.inputs = [rebuild(m) for m in metas]

    @staticmethod
    def to_shm(shm, value, offset):
        """A tensor's bytes into the mapping at offset, in its order (a view is copied straight
        there: no temporary, whose allocation would cost page faults as the heap's state goes)."""
        import torch
        value = value.detach()
        nbytes = value.numel() * value.element_size()
        dst = torch.frombuffer(shm, dtype=torch.uint8, count=nbytes, offset=offset)
        if value.is_contiguous():
            dst.copy_(value.reshape(-1).view(torch.uint8))
        else:
            dst.view(value.dtype).view(value.shape).copy_(value)

    def meta(self, value):
        import torch
        if not isinstance(value, torch.Tensor):
            return {"kind": type(value).__name__}
        return {"kind": "tensor" if type(value) is torch.Tensor else type(value).__name__,
                "shape": list(value.shape), "dtype": dtype_names().get(value.dtype, str(value.dtype)),
                "device": value.device.type, "nbytes": value.numel() * value.element_size()}

    def op_call(self, req):
        import torch
        slots = req.get("slots")
        profile = req.get("profile") and self.device == "cuda"
        #  A timed call's GPU time: events on the current stream around forward
        #  (the profiler stays out of timed calls: its own cost is milliseconds).
        events = req.get("events") and self.device == "cuda" and not profile
        prof = None
        gpu = None
        marks = [time.perf_counter()]     # where a timed call's wall time went (a trace, never trusted)
        #  A timed call on a GPU makes its inputs first, in the same request:
        #  the supervisor's clock then runs from the moment they exist, so no
        #  work on them (a wrapped get_inputs, GPU work left in flight) can
        #  happen outside the window it times.
        if "seed" in req:
            made = self.op_inputs(req)
            if "error" in made:
                return made
            marks.append(time.perf_counter())
        try:
            #  A timed call on the CPU on inputs handed over (share_inputs).
            if "given" in req:
                self.given_inputs(req["given"])
            if profile:
                prof = self.profile_start()
            model = self.baseline if req.get("baseline") and getattr(self, "baseline", None) else self.model
            if events:
                began, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                marks.append(time.perf_counter())
                began.record()
            with torch.no_grad():
                result = model(*self.inputs)
            if events:
                ended.record()
                marks.append(time.perf_counter())
            outputs = list(result) if isinstance(result, (tuple, list)) else [result]
            if self.device == "cuda":
                torch.cuda.synchronize()
                marks.append(time.perf_counter())
            if events:
                gpu = {"event_us": began.elapsed_time(ended) * 1000.0}
            if prof is not None:
                gpu = self.profile_stop(prof)
                prof = None
            metas = [self.meta(v) for v in outputs]
            #  The outputs, as bytes, where the supervisor said (it compares them).
            if slots is None:
                offset, slots = 0, []
                for m in metas:
                    slots.append({"offset": offset, "nbytes": m.get("nbytes", 0)})
                    offset += (m.get("nbytes", 0) + 63) // 64 * 64
            if len(slots) != len(outputs):
                return {"outputs": metas, "gpu": gpu}
            end = max((s["offset"] + s["nbytes"] for s in slots), default=0)
            copies = [(value, slot["offset"]) for value, m, slot in zip(outputs, metas, slots)
                      if m["kind"] == "tensor" and m["nbytes"] == slot["nbytes"] and m["nbytes"]]
            #  The inputs after the call, from the first multiple of 64 after the outputs.
            inputs_at = in_metas = None
            if req.get("inputs"):
                inputs_at = at = (end + 63) // 64 * 64
                in_metas = [self.meta(v) for v in self.inputs or []]
                for value, m in zip(self.inputs or [], in_metas):
                    if m["kind"] == "tensor" and m["nbytes"]:
                        copies.append((value, at))
                        at = (at + m["nbytes"] + 63) // 64 * 64
                end = max(end, at)
            shm = self.mapped(end)
            for value, offset in copies:
                self.to_shm(shm, value, offset)
            if self.device == "cuda" and slots:
                torch.cuda.synchronize()    # every copy landed (into pinned memory, too) before the reply
            if events and gpu is not None and len(marks) >= 4:
                marks.append(time.perf_counter())
                gpu["phases_us"] = [round((b - a) * 1e6, 1) for a, b in zip(marks, marks[1:])]
                gpu["pinned"] = bool(getattr(self, "pinned", None))
            reply = {"outputs": metas}
            if inputs_at is not None:
                reply["inputs_at"], reply["inputs"] = inputs_at, in_metas
            if gpu is not None:
                reply["gpu"] = gpu
            return reply
        except BaseException as exc:   # noqa: B036
            if prof is not None:
                try:
                    prof.__exit__(None, None, None)
                except BaseException:   # noqa: B036
                    pass
            fault = "CUDA error" in str(exc) or "cudaError" in str(exc) or "illegal memory" in str(exc)
            return {"error": f"{type(exc).__name__} in forward", "kind": self.build_kind(exc),
                    "fatal": bool(fault), "traceback": trimmed_traceback(exc, 4000)}

    def profile_start(self):
        from torch.profiler import profile, ProfilerActivity
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        return prof

    def profile_stop(self, prof):
        """GPU activity of one call: kernels (name, start, end), copies and sets, all streams."""
        prof.__exit__(None, None, None)
        kernels, spans = [], []
        for event in prof.events():
            dev = getattr(event, "device_type", None)
            if dev is None or "CUDA" not in str(dev):
                continue
            start = event.time_range.start
            end = event.time_range.end
            name = event.name
            kind = "memcpy" if name.startswith("Memcpy") else "memset" if name.startswith("Memset") else "kernel"
            spans.append((start, end, kind, name))
        spans.sort()
        busy = 0.0
        for start, end, kind, name in spans:
            if kind == "kernel":
                kernels.append({"name": name, "us": end - start})
        kernel_spans = [(s, e) for s, e, k, _ in spans if k != "memcpy" or not _.startswith("Memcpy DtoH")]
        if kernel_spans:
            first = min(s for s, _ in kernel_spans)
            last = max(e for _, e in kernel_spans)
            busy = last - first
        return {"span_us": busy, "kernels": kernels}

    def op_warm(self, req):
        """Fault in heap memory for the calls ahead (CPU): blocks of 16 MiB (under the mmap
        threshold steady_malloc sets, so they come from the heap), written, then freed, and kept
        (no trim): glibc's heap walks upward through some ten times a call's bytes before it
        reuses what was freed, and until then every call's tensors land on fresh pages, a page
        fault each 4 KiB (~10 us on a VM: 2.5 ms for a 1 MiB output), in one program's calls
        and not the other's as their heaps' states go."""
        import torch
        left = max(0, min(int(req.get("bytes", 0)), 4 << 30))
        blocks = []
        while left > 0:
            block = torch.empty(min(left, 16 << 20), dtype=torch.uint8)
            block.fill_(1)
            blocks.append(block)
            left -= block.numel()
        del blocks
        return {"ok": True}

    def op_flush(self, req):
        import torch
        if self.device == "cuda":
            if getattr(self, "scratch", None) is None:
                l2 = torch.cuda.get_device_properties(0).L2_cache_size
                self.scratch = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")
                self.flushes = 0
            self.flushes += 1
            self.scratch.fill_(self.flushes)
            torch.cuda.synchronize()
        return {"ok": True}

    def op_copy(self, req):
        import torch
        nbytes = int(req["nbytes"])
        repeat = max(1, min(int(req.get("repeat", 5)), 50))
        src = torch.zeros(max(nbytes, 1), dtype=torch.uint8, device=self.device)
        shm = self.mapped(max(nbytes, 1))
        dst = torch.frombuffer(shm, dtype=torch.uint8, count=max(nbytes, 1), offset=0)
        seconds = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            dst.copy_(src)
            seconds.append(time.perf_counter() - t0)
        return {"seconds": seconds}

    def serve(self):
        import torch
        if self.role in ("candidate", "builder"):
            #  Ahead of the job (a runner starts while another job runs): torch's
            #  extension module imports setuptools and hipify, ~0.4 s. It also asks
            #  torch.cuda.is_available(): counted through NVML it does not start
            #  CUDA's driver API in this process before "start" (0.24 s, not 0.43).
            saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
            try:
                kept_extensions()
            finally:
                if saved is None:
                    del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
                else:
                    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved
        info = {"hello": True, "python": sys.version.split()[0], "torch": torch.__version__,
                "role": self.role, "device": self.device, "pid": os.getpid()}
        if self.device == "cuda":
            try:
                import triton
                info["triton"] = triton.__version__
            except ImportError:
                info["triton"] = None
        try:
            start = self.channel.recv()
        except EOFError:
            return 0
        if start.get("op") != "start":
            self.channel.send({"error": f"expected start, got {start.get('op')!r}", "kind": "internal"})
            return 2
        if self.device == "cuda":
            if not torch.cuda.is_available():
                self.channel.send({"error": "torch sees no CUDA device", "kind": "internal"})
                return 2
            torch.cuda.init()
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = props.name
            #  Extensions built here and by the builder (which has no GPU to ask)
            #  for the same architectures: the same build, found up to date.
            os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{props.major}.{props.minor}+PTX")
            info["arch"] = os.environ["TORCH_CUDA_ARCH_LIST"]
            #  The profiler's first session costs seconds (CUPTI starts): paid
            #  now, by a runner started ahead before its job comes.
            try:
                prof = self.profile_start()
                torch.ones(1, device="cuda").add_(1)
                torch.cuda.synchronize()
                self.profile_stop(prof)
            except Exception:   # noqa: BLE001
                pass
        self.channel.send(info)
        ops = {"load": self.op_load, "build": self.op_build, "size": self.op_size, "inputs": self.op_inputs, "call": self.op_call,
               "flush": self.op_flush, "copy": self.op_copy, "warm": self.op_warm}
        while True:
            try:
                req = self.channel.recv()
            except EOFError:
                return 0
            op = req.get("op")
            if op == "exit":
                return 0
            handler = ops.get(op)
            if handler is None:
                self.channel.send({"error": f"unknown op {op!r}", "kind": "internal"})
                continue
            self.channel.send(handler(req))


def steady_malloc():
    """Keep freed memory in the process (glibc's malloc): no trim of the heap's top, no mmap for
    blocks under 32 MiB. Otherwise a call's tensors land, call after call, on pages given back to
    the kernel after the last one, or not, as the heap's state goes, and the page faults (ms at a
    few MB) fall on one program's call and not the other's."""
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 2 ** 31 - 1)      # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)         # M_MMAP_THRESHOLD (glibc's most)
    except (OSError, AttributeError):
        pass


def main(argv):
    args = {}
    it = iter(argv[1:])
    for key in it:
        if key.startswith("--"):
            args[key[2:]] = next(it, "")
    work = args.get("dir") or os.getcwd()
    #  Every cache and temporary file of this process in its own directory.
    for var, sub in (("TRITON_CACHE_DIR", "triton"), ("TORCH_EXTENSIONS_DIR", "extensions"),
                     ("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("XDG_CACHE_HOME", "cache"),
                     ("TMPDIR", "tmp"), ("HOME", "")):
        path = os.path.join(work, sub) if sub else work
        os.makedirs(path, exist_ok=True)
        os.environ[var] = path
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    #  The tools a build runs (ninja, nvcc, ptxas): the interpreter's own
    #  bin folder (a virtual environment's ninja) and the CUDA toolkit's.
    paths = [os.path.dirname(os.path.abspath(sys.executable))]
    cuda = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else "")
    if cuda:
        os.environ["CUDA_HOME"] = cuda
        paths.append(os.path.join(cuda, "bin"))
    os.environ["PATH"] = os.pathsep.join(paths + [os.environ.get("PATH", "/usr/bin:/bin")])
    if args.get("gpu"):
        os.environ["CUDA_VISIBLE_DEVICES"] = args["gpu"]
    if args.get("arch"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = args["arch"]
    os.environ.setdefault("OMP_NUM_THREADS", args.get("threads", "1"))
    sys.dont_write_bytecode = True
    sys.path.insert(0, work)
    os.chdir(work)
    steady_malloc()
    runner = Runner(args)
    return runner.serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
