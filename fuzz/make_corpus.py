#!/usr/bin/env python3
"""Write the seed corpora and dictionaries of the fuzz targets.

    fuzz/make_corpus.py            # rewrite fuzz/corpus/<target>/ and fuzz/dict/

Seeds are small on purpose: one job per bundled example task (its first
candidate, so the task, a candidate and every key shape the parser knows
are there), the same jobs as msgpack bodies, one frame set per protocol
command plus malformed ones, msgpack values of every type, and edge-case
expressions. The fuzzers grow their own corpora elsewhere (docs/fuzzing.md);
only these seeds are kept in the tree. Python 3 standard library only, so
msgpack is encoded here the way msgpack-c packs (smallest int format,
float64 reals, str for strings).
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")


def mp(value, f32=False):
    """msgpack bytes of a JSON value (f32: reals as float32)."""
    if value is None:
        return b"\xc0"
    if value is True:
        return b"\xc3"
    if value is False:
        return b"\xc2"
    if isinstance(value, int):
        if 0 <= value <= 0x7F:
            return bytes([value])
        if -32 <= value < 0:
            return struct.pack(">b", value)
        if value >= 0:
            for tag, fmt, top in ((0xCC, ">B", 0xFF), (0xCD, ">H", 0xFFFF),
                                  (0xCE, ">I", 0xFFFFFFFF), (0xCF, ">Q", 2**64 - 1)):
                if value <= top:
                    return bytes([tag]) + struct.pack(fmt, value)
        for tag, fmt, low in ((0xD0, ">b", -2**7), (0xD1, ">h", -2**15),
                              (0xD2, ">i", -2**31), (0xD3, ">q", -2**63)):
            if value >= low:
                return bytes([tag]) + struct.pack(fmt, value)
        raise ValueError(value)
    if isinstance(value, float):
        if f32:
            return b"\xca" + struct.pack(">f", value)
        return b"\xcb" + struct.pack(">d", value)
    if isinstance(value, str):
        raw = value.encode()
        n = len(raw)
        if n < 32:
            return bytes([0xA0 | n]) + raw
        if n < 256:
            return b"\xd9" + bytes([n]) + raw
        if n < 65536:
            return b"\xda" + struct.pack(">H", n) + raw
        return b"\xdb" + struct.pack(">I", n) + raw
    if isinstance(value, list):
        n = len(value)
        head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
        return head + b"".join(mp(v, f32) for v in value)
    if isinstance(value, dict):
        n = len(value)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return head + b"".join(mp(k) + mp(v, f32) for k, v in value.items())
    raise TypeError(type(value))


def write(target, name, data):
    folder = os.path.join(FUZZ, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def example_jobs():
    """(name, job) for each bundled task with its first candidate."""
    jobs = []
    for backend in ("cpu", "cuda"):
        base = os.path.join(ROOT, "examples", backend)
        for task_name in sorted(os.listdir(base)):
            folder = os.path.join(base, task_name)
            with open(os.path.join(folder, "task.json")) as f:
                task = json.load(f)
            cands = sorted(os.listdir(os.path.join(folder, "candidates")))
            pick = "naive.json" if "naive.json" in cands else cands[0]
            with open(os.path.join(folder, "candidates", pick)) as f:
                cand = json.load(f)
            # Sources are the bulk and the parser only bounds them: keep seeds small.
            task["reference"]["source"] = "ref"
            if "baseline" in task:
                task["baseline"]["source"] = "base"
            cand["source"] = "cand"
            jobs.append(("%s_%s" % (backend, task_name), {"task": task, "candidate": cand}))
    return jobs


def job_seeds():
    jobs = example_jobs()
    # One job with every optional key, and one with expressions everywhere.
    name, full = jobs[0]
    full = json.loads(json.dumps(full))
    full["eval"] = {"seed": 42, "trials": 2, "warmup": 1, "timed": 5, "timeout": 2.5,
                    "compile_timeout": 10, "profile": False, "check_only": True,
                    "feedback_bytes": 100}
    full["reward"] = {"compile_error": -1, "incorrect": -0.5, "runtime_error": -0.25,
                      "timeout": 0, "clip": 4, "shape": "log"}
    full["tag"] = "seed-full"
    full["x-note"] = {"any": [1, 2.5, None]}
    jobs.append(("full_keys", full))
    exprs = {
        "task": {"name": "expr.task", "backend": "cuda", "bytes": "M*N*4+max(M,N)",
                 "args": [{"name": "x", "kind": "input", "dtype": "bf16",
                           "shape": ["cdiv(M,4)*4", "N%7+1", 2], "init": {"dist": "randint", "low": -3, "high": 9}},
                          {"name": "y", "kind": "inout", "dtype": "i8", "shape": [],
                           "init": {"dist": "arange", "start": 1, "step": 2}},
                          {"name": "n", "kind": "scalar", "dtype": "i64", "value": "-(M-N)/3"},
                          {"name": "s", "kind": "scalar", "dtype": "f16", "value": 65504}],
                 "sizes": [{"M": 5, "N": 0, "comment": "tail"}, {"N": 1099511627776, "M": 1}],
                 "timing_size": 1, "tolerance": {"atol": 0, "rtol": 0.5},
                 "reference": {"source": "r", "lang": "ptx", "launches": [{"kernel": "k"}]},
                 "baseline": {"source": "b", "workspace": 16, "launches": [{"kernel": "b", "args": ["workspace"]}]}},
        "candidate": {"source": "c", "options": ["-O3", "--use_fast_math"], "workspace": "min(M,N,8)*2",
                      "name": "cand",
                      "launches": [{"kernel": "k1", "grid": ["cdiv(N,256)"], "block": [256, "1"],
                                    "shared": "M*4", "args": ["x", "y", "n", "s", "workspace"]},
                                   {"kernel": "k2", "grid": [4.0, 1, 1], "args": []}]},
    }
    jobs.append(("expressions", exprs))
    # Every count at its limit, so one mutation crosses it: 16 size names,
    # 64 args (integer scalars of every dtype among them), 32 options.
    names = ["S%d" % i for i in range(16)]
    dtypes = ["i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"]
    args = [{"name": "t%d" % i, "kind": ("input", "output", "inout")[i % 3],
             "dtype": dtypes[i % 8], "shape": [names[i % 16]] if i % 4 else []}
            for i in range(56)]
    args += [{"name": "v%d" % i, "kind": "scalar", "dtype": dtypes[i],
              "value": (-128, 255, -2**31, 2**53, 65504, 1e38, 3.4e38, -1e300)[i]}
             for i in range(8)]
    limits = {
        "task": {"name": "limits", "backend": "cpu", "args": args,
                 "sizes": [{n: i for i, n in enumerate(names)},
                           {n: 2**40 if i == 0 else 1 for i, n in enumerate(names)}],
                 "reference": {"source": "r", "launches": [{"kernel": "k"}]}},
        "candidate": {"source": "c", "options": ["-O%d" % (i % 4) for i in range(32)],
                      "launches": [{"kernel": "k", "args": ["t0"] * 65}]},
    }
    jobs.append(("limits", limits))
    return jobs


def seed_jobs():
    for name, job in job_seeds():
        write("job_json", name + ".json", json.dumps(job, separators=(",", ":")))
        write("job_mpk", name + ".mpk", mp(job))
    # A foreign encoder: float32 reals.
    name, job = job_seeds()[0]
    write("job_mpk", name + ".f32.mpk", mp(job, f32=True))
    write("job_json", "not_an_object.json", "[1, 2.5, \"x\", null, true]")
    # What the broker keys: the jobs with caller bookkeeping, and results to mark.
    for name, job in job_seeds():
        marked = dict(job, tag="t-" + name, group="g", trajectory="tr")
        marked.setdefault("eval", {})["seed"] = 7
        write("cache_key", name + ".mpk", mp(marked))
    write("cache_key", "result.mpk", mp({"status": "ok", "reward": 1.5, "speedup": 1.5,
                                         "tag": "first", "message": ""}))
    write("cache_key", "name_bytes.bin", "gelu\u00e9\U0001F600".encode() + b"\xff\xc0\x80")


def seed_mpk():
    values = {
        "nil": None, "true": True, "false": False,
        "ints": [0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1,
                 -1, -32, -33, -128, -129, -32768, -32769, -2**31, -2**31 - 1, -2**63],
        "reals": [0.0, -0.0, 1.5, 1e-6, 1e300, -2.5e-308],
        "strings": ["", "a", "x" * 31, "y" * 32, "z" * 255, "w" * 256, "\u00e9\u4e2d\U0001f600"],
        "nested": {"a": [{"b": [[[]]]}], "c": {}, "d": [None, True, {"e": "f"}]},
        "result": {"candidate": "naive", "status": "ok", "reward": 1.25, "speedup": 1.25,
                   "job": 7, "queue_s": 0.01, "worker": "w0", "sizes": [{"max_abs": 0.0}]},
        "big_array": list(range(40)),
        "big_map": {"k%d" % i: i for i in range(20)},
        # 73 values within the tight limits' width and depth: over their total.
        "wide_nested": [[0] * 8] * 8,
    }
    for name, value in values.items():
        write("mpk", name + ".mpk", mp(value))
    write("mpk", "float32.mpk", mp([1.5, -0.25], f32=True))
    raw = {
        "bin8.mpk": b"\xc4\x03abc",
        "bin16.mpk": b"\xc5\x00\x02hi",
        "str32.mpk": b"\xdb\x00\x00\x00\x01z",
        "array32.mpk": b"\xdd\x00\x00\x00\x02\x01\x02",
        "map32.mpk": b"\xdf\x00\x00\x00\x01\xa1k\xc0",
        "fixext1.mpk": b"\xd4\x01\x00",
        "ext8.mpk": b"\xc7\x02\x05ab",
        "uint64_max.mpk": b"\xcf" + b"\xff" * 8,
        "nan.mpk": b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",
        "never_used.mpk": b"\xc1",
        "huge_map_count.mpk": b"\xdf\xff\xff\xff\xff",
        "truncated_str.mpk": b"\xda\x01\x00ab",
        "trailing.mpk": b"\x01\x02",
        "dup_key.mpk": b"\x82\xa1a\x01\xa1a\x02",
        "int_key.mpk": b"\x81\x01\x02",
        "bad_utf8.mpk": b"\xa2\xc3\x28",
        "deep.mpk": b"\x91" * 40 + b"\xc0",
    }
    for name, data in raw.items():
        write("mpk", name, data)


def frames(cmd, header, body=None, version=1, sig=b"KGYM"):
    """The fuzz_one_msg layout: flags, frame 0, header, body."""
    frame0 = sig + bytes([version, cmd])
    hb = header if isinstance(header, bytes) else mp(header)
    out = bytes([1 if body is not None else 0, len(frame0)]) + frame0
    out += struct.pack(">H", len(hb)) + hb
    if body is not None:
        out += body
    return out


def seed_msg():
    body = mp({"task": {}, "candidate": {}})
    seeds = {
        "ready": frames(1, {"backend": "cpu", "device": "CPU x16", "capacity": 8, "name": "w0", "pid": 1234}),
        "heartbeat": frames(2, {}),
        "disconnect": frames(3, {"reason": "bye"}),
        "submit": frames(4, {"ref": 1, "backend": "cuda", "tag": "t"}, body),
        "accepted": frames(5, {"ref": 1, "job": 2}),
        "job": frames(6, {"job": 2, "attempt": 1}, body),
        "result_worker": frames(7, {"job": 2, "attempt": 1, "ref": 0}, mp({"status": "ok"})),
        "result_client": frames(7, {"job": 2, "attempt": 1, "ref": 1, "queue_s": 0.5, "worker": "w0"},
                                mp({"status": "ok"})),
        "error": frames(8, {"code": 440, "reason": "unknown peer", "ref": 3, "job": 4}),
        "unknown_keys": frames(1, {"backend": "cpu", "device": "d", "capacity": 1, "name": "n",
                                   "x-new": {"a": [1, 2, {"b": None}]}}),
        "bad_version": frames(2, {}, version=2),
        "heartbeat_client": frames(2, {"client": "c-1", "state": "busy"}),
        "submit_retry": frames(4, {"ref": 9, "backend": "cpu", "client": "c-1", "retry": 1}, body),
        "fetch": frames(9, {"ref": 1, "client": "c-1", "job": 3, "tag": "t"}),
        "done": frames(10, {"ref": 1, "count": 2, "pending": 0}),
        "drain": frames(11, {"ref": 1, "name": "w0", "reason": "maintenance"}),
        "cancel": frames(12, {"ref": 2, "job": 9, "client": "c-1"}),
        "query": frames(13, {"ref": 3}, mp({"what": "job", "job": 9})),
        "answer": frames(14, {"ref": 3}, mp({"jobs": []})),
        "summary": frames(15, {"group": "g-1"}, mp({"group": "g-1", "count": 8})),
        "submit_group": frames(4, {"ref": 5, "backend": "cuda", "group": "g-1", "group_size": 8,
                                   "trajectory": "t-1", "cache": "refresh"}, body),
        "bad_command": frames(16, {}),
        "bad_signature": frames(2, {}, sig=b"KGYN"),
        "missing_body": frames(4, {"ref": 1, "backend": "cpu"}),
        "unexpected_body": frames(2, {}, b"\xc0"),
        "empty_body": frames(6, {"job": 1, "attempt": 1}, b""),
        "dup_field": frames(5, b"\x83\xa3ref\x01\xa3job\x02\xa3ref\x03"),
        "negative_int": frames(5, {"ref": -1, "job": 2}),
        "u32_overflow": frames(6, {"job": 1, "attempt": 2**32}, body),
        "long_str": frames(3, {"reason": "r" * 256}),
        "nul_str": frames(3, {"reason": "a\u0000b"}),
        "trailing": frames(2, mp({}) + b"\x00"),
        "not_a_map": frames(2, [1, 2]),
        "float_queue_s": frames(7, {"job": 1, "queue_s": 3}, b"\xc0"),
    }
    for name, data in seeds.items():
        write("msg", name + ".bin", data)


def seed_expr():
    # Byte 0 picks the variable set (fuzz_targets.c): 0 sizes, 1 extremes, 2 small, 3 zeros.
    exprs = [
        (0, "M"), (0, "M*N+K"), (0, "cdiv(M,4)*4"), (0, "min(M,N,K,B)"), (0, "max(1)"),
        (0, "-(M-N)/3"), (0, "(M+1)%7"), (0, " ( M ) * ( N ) "), (0, "B*B"),
        (0, "9223372036854775807"), (0, "9223372036854775808"), (0, "-9223372036854775807-1"),
        (1, "B/N"), (1, "B%N"), (1, "-B"), (1, "K+M"), (1, "cdiv(B,M)"), (1, "cdiv(K,K)"),
        (2, "cdiv(K,N)"), (2, "K/N"), (2, "K%N"), (2, "cdiv(-7,2)"),
        (3, "M/K"), (3, "M%K"), (3, "cdiv(M,K)"), (3, "1/0"),
        (0, "((((((((((M))))))))))"), (0, "-" * 70 + "1"), (0, "max(1,2,3,4,5,6,7,8,9)"),
        (0, "foo(1)"), (0, "Q"), (0, "1 2"), (0, ")"), (0, ""), (0, "M\tN"), (0, "cdiv(1)"),
        (0, "1" * 1025),
    ]
    for i, (vs, text) in enumerate(exprs):
        write("expr", "%02d.txt" % i, bytes([vs]) + text.encode())


def write_dicts():
    folder = os.path.join(FUZZ, "dict")
    os.makedirs(folder, exist_ok=True)

    def esc(raw):
        return "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else "\\x%02x" % b
                       for b in raw)

    keys = ["task", "candidate", "eval", "reward", "tag", "name", "backend", "description",
            "comment", "x-", "args", "sizes", "timing_size", "tolerance", "atol", "rtol",
            "reference", "baseline", "bytes", "kind", "dtype", "shape", "init", "value",
            "dist", "mean", "std", "low", "high", "start", "step", "source", "lang", "options",
            "workspace", "launches", "kernel", "grid", "block", "shared", "seed", "trials",
            "warmup", "timed", "timeout", "compile_timeout", "profile", "check_only",
            "feedback_bytes", "compile_error", "incorrect", "runtime_error", "clip"]
    values = ["cpu", "cuda", "input", "output", "inout", "scalar", "f16", "bf16", "f32", "f64",
              "i8", "u8", "i32", "i64", "normal", "uniform", "randint", "zeros", "ones",
              "arange", "c", "ptx", "linear", "log", "cdiv(", "min(", "max("]
    header_keys = ["backend", "device", "capacity", "name", "pid", "reason", "ref", "job",
                   "attempt", "queue_s", "worker", "tag", "code", "client", "retry", "state",
                   "count", "pending", "status", "group", "group_size", "trajectory", "cache",
                   "host"]

    lines = ["# msgpack type bytes and kgym keys as msgpack str (fuzz/make_corpus.py)"]
    for tag in (b"\xc0", b"\xc2", b"\xc3", b"\xca", b"\xcb", b"\xcc", b"\xcd", b"\xce", b"\xcf",
                b"\xd0", b"\xd1", b"\xd2", b"\xd3", b"\xd9", b"\xda", b"\xdb", b"\xdc", b"\xdd",
                b"\xde", b"\xdf", b"\xc4", b"\xc7", b"\xd4", b"\xdf\xff\xff\xff\xff",
                b"\xdd\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff", b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff",
                b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00", b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00"):
        lines.append('"%s"' % esc(tag))
    for word in sorted(set(keys + values + header_keys)):
        lines.append('"%s"' % esc(mp(word)))
    with open(os.path.join(folder, "msgpack.dict"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = ["# kgym protocol: signature, commands, header keys (fuzz/make_corpus.py)",
             '"KGYM\\x01"']
    for cmd in range(0, 18):
        lines.append('"KGYM\\x01%s"' % esc(bytes([cmd])))
    for word in header_keys:
        lines.append('"%s"' % esc(mp(word)))
    for tag in (b"\x80", b"\x81", b"\x85", b"\xcf", b"\xce\xff\xff\xff\xff", b"\xcb", b"\xd9\xff"):
        lines.append('"%s"' % esc(tag))
    with open(os.path.join(folder, "msg.dict"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = ["# job JSON keys and values (fuzz/make_corpus.py)"]
    for word in sorted(set(keys + values)):
        lines.append('"\\"%s\\""' % esc(word.encode()))
    for tok in ["null", "true", "false", "1e308", "-1", "0.5", "4.0", "1099511627776",
                "9223372036854775807", "9223372036854775808", "2147483648", "{}", "[]", ":", ","]:
        lines.append('"%s"' % esc(tok.encode()))
    with open(os.path.join(folder, "job_json.dict"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = ["# expression tokens (fuzz/make_corpus.py)"]
    for tok in ["cdiv(", "min(", "max(", "M", "N", "K", "B", "+", "-", "*", "/", "%", "(", ")",
                ",", "9223372036854775807", "9223372036854775808", "2147483647", "1099511627776",
                "-1", "0", " "]:
        lines.append('"%s"' % esc(tok.encode()))
    with open(os.path.join(folder, "expr.dict"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    seed_jobs()
    seed_mpk()
    seed_msg()
    seed_expr()
    write_dicts()
    return 0


if __name__ == "__main__":
    sys.exit(main())
