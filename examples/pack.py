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

The PyTorch pool (examples/pytorch/<task>/, see README.md) is packed too:

    examples/pytorch/<task>/
        task.in.json          the task with "reference": {"lang": "python",
                              "source": "@ref.py"}, no "backend", and
                              "targets": {"cuda": {...}, "cpu": {...}}: each
                              target's own keys (sizes, timing_size, python,
                              and "eval", the settings its candidates are
                              graded with), merged over the common ones
        src/ref.py            the task module (KernelBench's convention)
        src/<cand>.py         a candidate, whose leading comment holds one
                              "# expect: cuda=STATUS cpu=STATUS" line
        task.<target>.json    GENERATED: the task for that target
        candidates/<cand>.json  GENERATED: {"lang": "python", "source": ...}
        expected.json         GENERATED from the "# expect:" lines:
                              {"<target>": {"eval": {...}, "<cand>": STATUS,
                              ..., "fast": [...], "slow": [...]}}

Python 3 standard library only.
"""

import ast
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("cpu", "cuda")
SOURCE_EXT = {"cpu": (".c",), "cuda": (".cu",)}
RESERVED = ("ref", "baseline")        # src/ stems that are not candidates
STATUSES = ("ok", "compile_error", "incorrect", "runtime_error", "timeout",
            "invalid", "internal_error")
POOL = "pytorch"                      # the PyTorch pool's folder
POOL_TARGETS = ("cuda", "cpu")        # where its tasks run
LISTS = ("fast", "slow")              # keys of an expected map that are not candidates
POOL_RESERVED = LISTS + ("eval",)


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
        raise PackError("%s: parent folder must be one of %s" % (rel(taskdir), BACKENDS + (POOL,)))
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


def module_names(text, where):
    """(top-level int constants, top-level defined names) of a Python module."""
    try:
        tree = ast.parse(text, where)
    except SyntaxError as e:
        raise PackError("%s: line %s: %s" % (where, e.lineno, e.msg))
    ints, defined = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defined.add(target.id)
                    value = node.value
                    if (isinstance(value, ast.Constant) and isinstance(value.value, int)
                            and not isinstance(value.value, bool)):
                        ints.add(target.id)
    return ints, defined


EXPECT = re.compile(r"^#\s*expect:\s*(.*?)\s*$")


def parse_expect(text, targets, where):
    """The "# expect: cuda=ok+fast cpu=-" line of a candidate's leading
    comment: {target: (statuses, "fast"|"slow"|None)} for each graded target."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        m = EXPECT.match(line)
        if m:
            lines.append(m.group(1))
    if len(lines) != 1:
        raise PackError('%s: its leading comment needs one "# expect: %s" line (found %d)'
                        % (where, " ".join("%s=STATUS" % t for t in targets), len(lines)))
    out, seen = {}, set()
    for token in lines[0].split():
        target, _, spec = token.partition("=")
        if target not in targets or target in seen or not spec:
            raise PackError("%s: expect: %r is not TARGET=STATUS for one of %s, each once"
                            % (where, token, ", ".join(targets)))
        seen.add(target)
        if spec == "-":
            continue
        spec, _, mark = spec.partition("+")
        statuses = spec.split("|")
        for status in statuses:
            if status not in STATUSES:
                raise PackError("%s: expect: unknown status %r" % (where, status))
        if mark and mark not in LISTS:
            raise PackError("%s: expect: +%s is not +fast or +slow" % (where, mark))
        if mark and "ok" not in statuses:
            raise PackError("%s: expect: +%s needs ok among the statuses" % (where, mark))
        out[target] = (statuses, mark or None)
    missing = [t for t in targets if t not in seen]
    if missing:
        raise PackError("%s: expect: says nothing of %s (write %s=- when it is not graded there)"
                        % (where, ", ".join(missing), missing[0]))
    if not out:
        raise PackError("%s: expect: graded on no target" % where)
    return out


def build_pool_task(taskdir):
    """A task of the PyTorch pool: ({path: text} of generated files, [candidate names])."""
    srcdir = os.path.join(taskdir, "src")
    where = "%s/task.in.json" % rel(taskdir)
    task_in = load_json(os.path.join(taskdir, "task.in.json"))
    if not isinstance(task_in, dict):
        raise PackError("%s: not an object" % where)
    if task_in.get("name") != os.path.basename(taskdir):
        raise PackError("%s: name %r differs from its folder" % (where, task_in.get("name")))
    if "backend" in task_in:
        raise PackError('%s: no "backend": each of "targets" makes a task.<target>.json' % where)
    per_target = task_in.get("targets")
    if (not isinstance(per_target, dict) or not per_target
            or any(t not in POOL_TARGETS for t in per_target)):
        raise PackError('%s: "targets" must be an object with some of %s'
                        % (where, ", ".join(POOL_TARGETS)))
    reference = task_in.get("reference")
    if not isinstance(reference, dict) or reference.get("lang") != "python":
        raise PackError('%s: the reference must be {"lang": "python", "source": "@ref.py"}' % where)
    reference = inline_source(reference, srcdir, where + " reference")
    ints, defined = module_names(reference["source"], rel(os.path.join(srcdir, "ref.py")))
    targets = [t for t in POOL_TARGETS if t in per_target]

    files, evals, candidate_entry = {}, {}, {}
    for target in targets:
        overrides = per_target[target]
        if not isinstance(overrides, dict) or "backend" in overrides or "targets" in overrides:
            raise PackError('%s: targets.%s must be an object without "backend" or "targets"'
                            % (where, target))
        task = {"name": task_in["name"], "backend": target}
        for key, value in task_in.items():
            if key not in ("name", "targets"):
                task[key] = reference if key == "reference" else value
        for key, value in overrides.items():
            if key == "python" and isinstance(value, dict):
                value = dict(task.get("python", {}), **value)
            task[key] = value
        evals[target] = task.pop("eval", {})
        if not isinstance(evals[target], dict):
            raise PackError("%s: targets.%s.eval must be an object" % (where, target))
        python = task.get("python", {})
        entry = python.get("entry", "Model")
        for name in (entry, "get_inputs", "get_init_inputs"):
            if name not in defined:
                raise PackError("%s: src/ref.py defines no %s" % (where, name))
        candidate_entry[target] = python.get(
            "candidate_entry", "ModelNew" if entry[:1].isupper() else entry)
        sizes = task.get("sizes", [{}])
        if not isinstance(sizes, list) or not all(isinstance(s, dict) for s in sizes):
            raise PackError("%s: targets.%s.sizes must be a list of objects" % (where, target))
        for size in sizes:
            for name in size:
                if name not in ints:
                    raise PackError("%s: targets.%s: size %s: %s is not an int constant of src/ref.py"
                                    % (where, target, json.dumps(size), name))
        files[os.path.join(taskdir, "task.%s.json" % target)] = dump(task)

    expected = {t: {"eval": evals[t]} for t in targets}
    lists = {t: {k: [] for k in LISTS} for t in targets}
    names = []
    for entry in sorted(os.listdir(srcdir)):
        stem, ext = os.path.splitext(entry)
        path = os.path.join(srcdir, entry)
        if ext != ".py":
            raise PackError("%s: the pool's src/ holds .py files only" % rel(path))
        if stem == "ref":
            continue
        if stem in POOL_RESERVED:
            raise PackError("%s: %r names a key of expected.json, not a candidate" % (rel(path), stem))
        text = read_text(path)
        verdicts = parse_expect(text, targets, rel(path))
        if all("compile_error" in v[0] for v in verdicts.values()):
            pass                        # meant not to compile: nothing to look at
        else:
            _, cand_defined = module_names(text, rel(path))
            for target in verdicts:
                if candidate_entry[target] not in cand_defined:
                    raise PackError("%s: defines no %s" % (rel(path), candidate_entry[target]))
        if stem == "naive" or stem.endswith("_naive"):
            if not any(v[0] == ["ok"] for v in verdicts.values()):
                raise PackError("%s: a naive candidate must be expected ok somewhere" % rel(path))
        for target, (statuses, mark) in verdicts.items():
            expected[target][stem] = statuses[0] if len(statuses) == 1 else statuses
            if mark:
                lists[target][mark].append(stem)
        files[os.path.join(taskdir, "candidates", stem + ".json")] = dump(
            {"lang": "python", "source": text})
        names.append(stem)
    for target in targets:
        expected[target].update(lists[target])
    files[os.path.join(taskdir, "expected.json")] = dump(expected)
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
    for backend in BACKENDS + (POOL,):
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
            if os.path.basename(os.path.dirname(taskdir)) == POOL:
                files, names = build_pool_task(taskdir)
            else:
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
