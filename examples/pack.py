#!/usr/bin/python3
"""pack.py - build the example tasks' and candidates' JSON from their sources.

Layout of one example task (see README.md):

    examples/<backend>/<task>/
        task.in.json          the task, with every "source" given as "@FILE"
                              (FILE under src/, e.g. "@ref.c", "@baseline.cu")
        expected.json         {"<candidate>": "<status>", ..., "fast": [...]}
        src/ref.c             reference source (ref.cu for CUDA)
        src/baseline.c        baseline source (optional)
        src/<cand>.c|.cu      a candidate's source ...
        src/<cand>.json       ... and its other keys (options, workspace, launches)
        task.json             GENERATED: task.in.json with the sources inlined
        candidates/<cand>.json  GENERATED: {"source": ..., <keys of src/<cand>.json>}

Usage:
    pack.py            regenerate every task.json and candidates/*.json
    pack.py --check    regenerate nothing; exit 1 when a generated file is
                       missing, stale or out of date, or expected.json does
                       not match the candidates
    pack.py [--check] DIR...   only the task directories given

Python 3 standard library only.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("cpu", "cuda")
SOURCE_EXT = {"cpu": (".c",), "cuda": (".cu",)}
RESERVED = ("ref", "baseline")        # src/ stems that are not candidates
STATUSES = ("ok", "compile_error", "incorrect", "runtime_error", "timeout",
            "invalid", "internal_error")


class PackError(Exception):
    pass


def dump(obj):
    """The one JSON text layout of every generated file."""
    return json.dumps(obj, indent=2, ensure_ascii=True) + "\n"


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise PackError("%s: %s" % (rel(path), e))


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise PackError("%s: %s" % (rel(path), e))


def rel(path):
    return os.path.relpath(path, os.path.dirname(HERE))


def inline_source(program, srcdir, where):
    """Replace program["source"] = "@FILE" by the text of srcdir/FILE."""
    if not isinstance(program, dict):
        raise PackError("%s: not an object" % where)
    src = program.get("source")
    if not isinstance(src, str) or not src.startswith("@"):
        raise PackError('%s: "source" must be "@FILE" (a file under src/)' % where)
    name = src[1:]
    if not name or "/" in name or name.startswith("."):
        raise PackError("%s: bad source reference %r" % (where, src))
    out = {}
    for key, value in program.items():
        out[key] = read_text(os.path.join(srcdir, name)) if key == "source" else value
    return out


def build_task(taskdir):
    """Returns ({path: text} of generated files, [candidate names])."""
    backend = os.path.basename(os.path.dirname(taskdir))
    if backend not in BACKENDS:
        raise PackError("%s: parent folder must be one of %s" % (rel(taskdir), BACKENDS))
    srcdir = os.path.join(taskdir, "src")
    task_in = load_json(os.path.join(taskdir, "task.in.json"))
    if not isinstance(task_in, dict):
        raise PackError("%s/task.in.json: not an object" % rel(taskdir))
    if task_in.get("backend") != backend:
        raise PackError("%s/task.in.json: backend %r, folder says %r"
                        % (rel(taskdir), task_in.get("backend"), backend))
    if task_in.get("name") != os.path.basename(taskdir):
        raise PackError("%s/task.in.json: name %r differs from its folder"
                        % (rel(taskdir), task_in.get("name")))
    task = {}
    for key, value in task_in.items():
        if key in ("reference", "baseline"):
            value = inline_source(value, srcdir, "%s/task.in.json %s" % (rel(taskdir), key))
        task[key] = value
    if "reference" not in task:
        raise PackError("%s/task.in.json: no reference" % rel(taskdir))
    files = {os.path.join(taskdir, "task.json"): dump(task)}

    names = []
    for entry in sorted(os.listdir(srcdir)):
        stem, ext = os.path.splitext(entry)
        if ext not in SOURCE_EXT[backend] or stem in RESERVED:
            continue
        side = os.path.join(srcdir, stem + ".json")
        if not os.path.exists(side):
            raise PackError("%s: no sidecar %s" % (rel(os.path.join(srcdir, entry)), rel(side)))
        keys = load_json(side)
        if not isinstance(keys, dict) or "source" in keys:
            raise PackError('%s: must be an object without "source"' % rel(side))
        cand = {"source": read_text(os.path.join(srcdir, entry))}
        cand.update(keys)
        files[os.path.join(taskdir, "candidates", stem + ".json")] = dump(cand)
        names.append(stem)
    # A sidecar without a source is a mistake too.
    for entry in sorted(os.listdir(srcdir)):
        stem, ext = os.path.splitext(entry)
        if ext == ".json" and stem not in names:
            raise PackError("%s: sidecar without a source" % rel(os.path.join(srcdir, entry)))
    return files, names


def check_expected(taskdir, names):
    path = os.path.join(taskdir, "expected.json")
    exp = load_json(path)
    if not isinstance(exp, dict):
        raise PackError("%s: not an object" % rel(path))
    problems = []
    fast = exp.get("fast", [])
    statuses = {k: v for k, v in exp.items() if k != "fast"}
    for name in names:
        if name not in statuses:
            problems.append("%s: no expected status for %s" % (rel(path), name))
    for name, status in statuses.items():
        if name not in names:
            problems.append("%s: %s is not a candidate" % (rel(path), name))
        elif status not in STATUSES:
            problems.append("%s: %s: unknown status %r" % (rel(path), name, status))
    if not isinstance(fast, list):
        problems.append('%s: "fast" must be a list' % rel(path))
    else:
        for name in fast:
            if statuses.get(name) != "ok":
                problems.append('%s: "fast" lists %s, which is not expected ok' % (rel(path), name))
    if "naive" in names and statuses.get("naive") != "ok":
        problems.append("%s: naive must be expected ok" % rel(path))
    return problems


def task_dirs(args):
    if args:
        return [os.path.abspath(a) for a in args]
    out = []
    for backend in BACKENDS:
        base = os.path.join(HERE, backend)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            d = os.path.join(base, name)
            if os.path.isfile(os.path.join(d, "task.in.json")):
                out.append(d)
    return out


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if any(a.startswith("-") for a in args):
        sys.stderr.write(__doc__)
        return 2
    problems = []
    written = 0
    for taskdir in task_dirs(args):
        try:
            files, names = build_task(taskdir)
            problems += check_expected(taskdir, names)
        except PackError as e:
            problems.append(str(e))
            continue
        # Generated candidates that no source produces any more.
        canddir = os.path.join(taskdir, "candidates")
        if os.path.isdir(canddir):
            for entry in sorted(os.listdir(canddir)):
                path = os.path.join(canddir, entry)
                if path not in files:
                    if check:
                        problems.append("%s: stale (no source); run examples/pack.py" % rel(path))
                    else:
                        os.remove(path)
        for path, text in sorted(files.items()):
            try:
                with open(path, encoding="utf-8") as f:
                    current = f.read()
            except OSError:
                current = None
            if current == text:
                continue
            if check:
                what = "missing" if current is None else "out of date"
                problems.append("%s: %s; run examples/pack.py" % (rel(path), what))
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                written += 1
    for p in problems:
        sys.stderr.write("pack.py: %s\n" % p)
    if not check and not problems:
        print("pack.py: %d file(s) written" % written)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
