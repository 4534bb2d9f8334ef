# Where a timed Python call's time goes on a GPU, outside kgym: one process, no sandbox.
#   python3 bench/pygpu/launch_probe.py [N]
# For torch.relu and a Triton ReLU on 4096 x 8192 f32 (fresh inputs every call, as kgym's
# runner makes them), prints medians of N calls (default 30), in us:
#   cpu     forward's CPU time (launch included), no wait
#   events  CUDA events around forward (began.record() just before it)
#   total   began.record() to the end of the synchronize after it
# in four settings: events as the runner records them; with 300 us of CPU work in forward
# before its launch (does the start event wait for the first launch?); the same with
# began.query() after the record (does a query send it to the GPU at once?); and with a
# second process's kernel (another CUDA context, as kgym's reference flushing the L2) run
# just before each call. Then what making one call's inputs costs, piece by piece, as the
# runner makes them (torch.manual_seed, get_inputs under `with torch.device("cuda")`, the
# pristine copy, the wait).
import statistics, subprocess, sys, time
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


OTHER = """
import sys, torch
s = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
sys.stdout.write("ready\\n"); sys.stdout.flush()
for line in sys.stdin:
    s.fill_(1); torch.cuda.synchronize()
    sys.stdout.write("ok\\n"); sys.stdout.flush()
"""


def spin(us):
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def measure(fn, n, delay_us=0, query=False, other=None):
    cpu, ev, total = [], [], []
    for i in range(n + 3):
        torch.manual_seed(i)
        x = torch.randn(4096, 8192, device="cuda")
        keep = x.clone()
        torch.cuda.synchronize()
        if other is not None:
            other.stdin.write("go\n")
            other.stdin.flush()
            other.stdout.readline()
        began, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        began.record()
        if query:
            began.query()
        if delay_us:
            spin(delay_us)
        y = fn(x)
        ended.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        if i >= 3:
            cpu.append((t1 - t0) * 1e6)
            ev.append(began.elapsed_time(ended) * 1e3)
            total.append((t2 - t0) * 1e6)
        del y, keep
    return statistics.median(cpu), statistics.median(ev), statistics.median(total)


def inputs_pieces(n):
    marks = {"manual_seed": [], "randn (device mode)": [], "randn (device=)": [], "clone": [],
             "synchronize": []}
    for i in range(n + 3):
        t0 = time.perf_counter()
        torch.manual_seed(i)
        t1 = time.perf_counter()
        with torch.device("cuda"):
            x = torch.randn(4096, 8192)
        t2 = time.perf_counter()
        x2 = torch.randn(4096, 8192, device="cuda")
        t3 = time.perf_counter()
        keep = x.clone()
        t4 = time.perf_counter()
        torch.cuda.synchronize()
        t5 = time.perf_counter()
        if i >= 3:
            for key, a, b in zip(marks, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5)):
                marks[key].append((b - a) * 1e6)
        del x, x2, keep
    print("inputs, medians (us):", ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in marks.items()))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    print(torch.cuda.get_device_name(0), "torch", torch.__version__, "triton", triton.__version__)
    other = subprocess.Popen([sys.executable, "-c", OTHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    other.stdout.readline()
    settings = [("as the runner", {}), ("300 us CPU before launch", {"delay_us": 300}),
                ("same, began.query()", {"delay_us": 300, "query": True}),
                ("another context's kernel before", {"other": other}),
                ("same, began.query()", {"other": other, "query": True})]
    for name, fn in (("torch.relu", torch.relu), ("triton relu", triton_relu)):
        fn(torch.zeros(1024, device="cuda"))
        for setting, kw in settings:
            c, e, t = measure(fn, n, **kw)
            print(f"{name:12s} {setting:34s} cpu {c:8.1f} events {e:8.1f} total {t:8.1f}")
    other.stdin.close()
    other.wait()
    inputs_pieces(n)


if __name__ == "__main__":
    main()
