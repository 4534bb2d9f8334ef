"""Tasks and jobs: where a task comes from, and how a job is put together.

A task may be given as
  - a task object (a dict with "name", "backend", "args", ...), or a job
    object holding one under "task";
  - JSON text of either (what a dataset column usually holds);
  - a path to a task JSON file, or to a folder holding task.json;
  - a path to a KernelBench-format module (`.py`): its PyTorch task, as
    `kgym import kernelbench` makes it (kgym.pytorch);
  - the name of a bundled example: "cpu/rmsnorm_f32" (or
    "examples/cpu/rmsnorm_f32", or a bare "gelu_f32" when only one backend
    has it).
Files are read once and kept (keyed by path and modification time).

The bundled examples are looked for, first found wins: in $KGYM_EXAMPLES;
in the repository's examples/ (running from a checkout); in the installed
package (`pip install ./python` ships their task, candidates and
expected.json as kgym/examples); in <prefix>/share/kgym/examples, where
`meson install` puts them, for the prefixes of this Python, /usr/local and
/usr.
"""

import json
import os
import sys
import threading
from pathlib import Path

EXAMPLES_ENV = "KGYM_EXAMPLES"

EVAL_KEYS = ("seed", "trials", "warmup", "timed", "timeout", "compile_timeout", "profile",
             "check_only", "feedback_bytes")
REWARD_KEYS = ("compile_error", "incorrect", "runtime_error", "timeout", "clip", "shape")


class TaskError(ValueError):
    """A task that cannot be found or read."""


def examples_places():
    """Where bundled examples are looked for, in order (see the module
    docstring)."""
    env = os.environ.get(EXAMPLES_ENV)
    if env:
        return [Path(env)]
    package = Path(__file__).resolve().parent
    places = [package.parent.parent / "examples", package / "examples"]
    for prefix in (sys.prefix, "/usr/local", sys.base_prefix, "/usr"):
        place = Path(prefix) / "share" / "kgym" / "examples"
        if place not in places:
            places.append(place)
    return places


def _has_tasks(folder):
    return any(folder.glob("*/*/task.json"))


def examples_dir():
    """The bundled examples folder (the first of examples_places() that
    holds tasks; $KGYM_EXAMPLES as given), or None."""
    places = examples_places()
    if os.environ.get(EXAMPLES_ENV):
        return places[0]
    return next((p for p in places if p.is_dir() and _has_tasks(p)), None)


def list_examples(backend=None):
    """Bundled task names, "cpu/gelu_f32" style, sorted."""
    root = examples_dir()
    if root is None:
        return []
    names = []
    for be in ("cpu", "cuda"):
        if backend and be != backend:
            continue
        d = root / be
        if d.is_dir():
            names += ["%s/%s" % (be, t.name) for t in sorted(d.iterdir()) if (t / "task.json").is_file()]
    return names


def example_path(name):
    """The folder of a bundled example, or None."""
    root = examples_dir()
    if root is None or not isinstance(name, str):
        return None
    name = name.strip().strip("/")
    if name.startswith("examples/"):
        name = name[len("examples/"):]
    if "/" in name:
        p = root / name
        return p if (p / "task.json").is_file() else None
    hits = [root / be / name for be in ("cpu", "cuda") if (root / be / name / "task.json").is_file()]
    if len(hits) > 1:
        raise TaskError("task %r is ambiguous: say %s" % (
            name, " or ".join("%s/%s" % (h.parent.name, name) for h in hits)))
    return hits[0] if hits else None


def example_candidates(name):
    """{candidate name: candidate object} of a bundled example."""
    d = example_path(name)
    if d is None:
        raise TaskError("no bundled example %r" % name)
    out = {}
    for f in sorted((d / "candidates").glob("*.json")):
        out[f.stem] = _load_json(f)
    return out


def example_expected(name):
    """The expected.json map of a bundled example (statuses, plus "fast")."""
    d = example_path(name)
    if d is None:
        raise TaskError("no bundled example %r" % name)
    return _load_json(d / "expected.json")


_cache = {}
_cache_lock = threading.Lock()
_CACHE_MAX = 512


def _load_json(path):
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise TaskError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read())
    except OSError as exc:
        raise TaskError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    except ValueError as exc:
        raise TaskError("%s: %s" % (path, exc)) from None
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = value
    return value


def resolve_task(spec):
    """The task object a spec names (see the module docstring); TaskError
    when there is none."""
    if isinstance(spec, dict):
        if "task" in spec and isinstance(spec["task"], (dict, str)) and "args" not in spec:
            return resolve_task(spec["task"])
        return spec
    if isinstance(spec, bytes):
        spec = spec.decode("utf-8", "replace")
    if hasattr(spec, "__fspath__"):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise TaskError("a task is a dict, JSON text, a path or a bundled example name, not %s"
                        % type(spec).__name__)
    text = spec.strip()
    if not text:
        raise TaskError("empty task")
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise TaskError("task JSON: %s" % exc) from None
        if not isinstance(value, dict):
            raise TaskError("task JSON is not an object")
        return resolve_task(value)
    p = Path(text)
    if p.is_dir() and (p / "task.json").is_file():
        return _load_json(p / "task.json")
    if p.is_file() and p.suffix == ".py":
        return _module_file(p)
    if p.is_file():
        return resolve_task(_load_json(p))
    d = example_path(text)
    if d is not None:
        return _load_json(d / "task.json")
    known = list_examples()
    if known:
        where = "bundled: %s" % ", ".join(known)
    else:
        where = "no bundled examples found; looked in %s" % ", ".join(
            str(p) for p in examples_places())
        if os.environ.get(EXAMPLES_ENV):
            where += " ($%s)" % EXAMPLES_ENV
    raise TaskError("task %r is not a file, a folder with task.json, or a bundled example (%s)"
                    % (text[:200], where))


def _module_file(path):
    from . import pytorch
    try:
        with open(path, "rb") as f:
            data = f.read(pytorch.MAX_SOURCE + 2)
    except OSError as exc:
        raise TaskError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    try:
        return pytorch.module_task(data.decode("utf-8"), pytorch.task_name(path))
    except UnicodeDecodeError:
        raise TaskError("%s is not UTF-8 text" % path) from None
    except pytorch.ModuleError as exc:
        raise TaskError("%s is not a KernelBench-format problem: %s" % (path, exc)) from None


def task_backend(task):
    backend = task.get("backend") if isinstance(task, dict) else None
    if not isinstance(backend, str) or not backend:
        raise TaskError("task has no backend ('cpu' or 'cuda')")
    return backend


def split_opts(opts, eval_defaults=None, reward_defaults=None):
    """(eval dict, reward dict, tag, group, trajectory) from submit options:
    eval keys (seed=, trials=, timeout=, ...) or eval={...}; reward={...}
    or reward_clip=2.0 style; tag=; group=; trajectory=. TypeError on an
    unknown option."""
    opts = dict(opts)
    ev = dict(eval_defaults or {})
    rw = dict(reward_defaults or {})
    extra_eval = opts.pop("eval", None)
    extra_reward = opts.pop("reward", None)
    if extra_eval is not None:
        if not isinstance(extra_eval, dict):
            raise TypeError("eval= wants a dict")
        ev.update(extra_eval)
    if extra_reward is not None:
        if not isinstance(extra_reward, dict):
            raise TypeError("reward= wants a dict")
        rw.update(extra_reward)
    for key in EVAL_KEYS:
        if key in opts:
            value = opts.pop(key)
            if value is not None:
                ev[key] = value
    for key in list(opts):
        if key.startswith("reward_") and key[7:] in REWARD_KEYS:
            value = opts.pop(key)
            if value is not None:
                rw[key[7:]] = value
    tag = opts.pop("tag", None)
    group = opts.pop("group", None)
    trajectory = opts.pop("trajectory", None)
    if opts:
        raise TypeError("unknown option(s): %s (eval keys: %s; or eval=, reward=, reward_<key>=, "
                        "tag=, group=, trajectory=)" % (", ".join(sorted(opts)), ", ".join(EVAL_KEYS)))
    return ev, rw, tag, group, trajectory


def make_job(task, candidate, ev=None, rw=None, tag=None):
    """The job object of docs/task-format.md."""
    job = {"task": task, "candidate": candidate}
    if ev:
        job["eval"] = ev
    if rw:
        job["reward"] = rw
    if tag is not None:
        job["tag"] = str(tag)
    return job
