"""PyTorch-reference tasks (docs/pytorch-tasks.md) from KernelBench-format
modules, read without running them: the same rules as `kgym import
kernelbench` (client/client_import.c, client/client_pysource.c), so a
`.py` path gives the same task here as there.

    outline(source)            -> Outline: constants, classes, functions, names each body uses
    module_task(source, name)  -> the task object (sizes by the tail rule)
    task_name(path)            -> "L1_19_ReLU" for "level1/19_ReLU.py"
"""

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_SOURCE = 1 << 20            # bytes of a module (TASK_MAX_SOURCE)
MAX_VARIED = 16                 # constants varied in the extra sizes (TASK_MAX_SIZE_VARS)
MAX_VALUE = 1 << 40             # the largest size value kgym takes
_INT64_MAX = (1 << 63) - 1

#  `NAME = INT` alone, the literal as Python writes integers (no sign, no parentheses).
_CONSTANT = re.compile(r"([A-Za-z_]\w*)[ \t\\\n]*=[ \t\\\n]*"
                       r"(0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+"
                       r"|[1-9](?:_?[0-9])*|0(?:_?0)*)\Z")
_LEVEL = re.compile(r"level[_-]?(\d{1,3})\Z", re.IGNORECASE)


@dataclass
class Outline:
    error: str = ""                                  # the SyntaxError, "" when it parses
    constants: dict = field(default_factory=dict)    # name -> int, in source order
    classes: set = field(default_factory=set)
    functions: set = field(default_factory=set)
    uses: dict = field(default_factory=dict)         # class or function name -> names it refers to


def _names(nodes):
    out = set()
    for node in nodes:
        if node is None:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                out.add(sub.id)
    return out


def outline(source):
    """The top-level outline of a module's source (never runs it)."""
    out = Outline()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        out.error = "line %s: %s" % (getattr(exc, "lineno", "?"), getattr(exc, "msg", exc))
        return out
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            out.classes.add(stmt.name)
            out.functions.discard(stmt.name)
            out.uses[stmt.name] = _names(stmt.bases + [k.value for k in stmt.keywords] + stmt.body)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.functions.add(stmt.name)
            out.classes.discard(stmt.name)
            a = stmt.args
            header = (a.defaults + [d for d in a.kw_defaults if d is not None]
                      + [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs
                         + [a.vararg, a.kwarg] if x is not None] + [stmt.returns])
            out.uses[stmt.name] = _names(header + stmt.body)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            if not isinstance(target, ast.Name):
                continue
            text = ast.get_source_segment(source, stmt) or ""
            m = _CONSTANT.match(text) if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            value = int(m.group(2).replace("_", ""), 0) if m and m.group(2).strip("0_") else 0
            if m and value <= _INT64_MAX:
                out.constants[target.id] = value
            else:
                out.constants.pop(target.id, None)
    return out


def tail(value):
    """The tail value of a constant in its extra size: the largest odd
    number at most half of it, at least 3; 0 when under 4."""
    if value < 4:
        return 0
    half = value // 2
    odd = half if half % 2 else half - 1
    return odd if odd >= 3 else 3


def sizes(source_outline, entry="Model"):
    """The task's "sizes" by the import's rule, or None for one size."""
    o = source_outline
    varied = [(n, v) for n, v in o.constants.items()
              if v <= MAX_VALUE and tail(v) and n in o.uses.get("get_inputs", ())
              and n not in o.uses.get("get_init_inputs", ()) and n not in o.uses.get(entry, ())]
    varied = varied[:MAX_VARIED]
    if not varied:
        return None
    out = [{n: v for n, v in varied}]
    for i in range(len(varied)):
        out.append({n: (tail(v) if k == i else v) for k, (n, v) in enumerate(varied)})
    return out


def _clean(text):
    return "".join(chr(b) if (chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_-.")) else "_"
                   for b in text.encode("utf-8", "replace"))


def task_name(path):
    """A problem file's task name (client_import_name): the stem, "L<n>_"
    in front when a folder of the path is level<n>."""
    p = Path(path)
    stem = p.name
    if "." in stem[1:]:
        stem = stem[:stem.rindex(".")]
    stem = _clean(stem) or "problem"
    level = None
    for part in reversed(p.parent.parts):
        m = _LEVEL.match(part)
        if m:
            level = int(m.group(1))
            break
    name = ("L%d_%s" % (level, stem)) if level is not None else stem
    return name[:127]


class ModuleError(ValueError):
    """A module that is not a KernelBench-format problem; .problem is the
    import's code (syntax_error, no_model, ...)."""

    def __init__(self, problem, reason):
        super().__init__(reason)
        self.problem = problem


def module_task(source, name, *, backend="cuda", dtype=None, kernel=None, entry="Model"):
    """The task object of a KernelBench-format module (client_import_module)."""
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE:
        raise ModuleError("too_large", "the module is over kgym's %d bytes" % MAX_SOURCE)
    if not source.strip():
        raise ModuleError("empty", "the module is empty")
    o = outline(source)
    if o.error:
        raise ModuleError("syntax_error", "syntax error: " + o.error)
    if entry not in o.classes:
        raise ModuleError("no_model", "no top-level 'class %s'%s" % (
            entry, " (it is a function)" if entry in o.functions else ""))
    for fn in ("get_inputs", "get_init_inputs"):
        if fn not in o.functions:
            raise ModuleError("no_" + fn, "no top-level 'def %s()'" % fn)
    task = {"name": name, "backend": backend, "reference": {"lang": "python", "source": source}}
    s = sizes(o, entry)
    if s:
        task["sizes"] = s
        task["timing_size"] = 0
    python = {}
    if dtype:
        python["dtype"] = dtype
    python["entry"] = entry
    python["kernel"] = kernel or ("torch" if backend == "cpu" else "any")
    task["python"] = python
    return task


def is_module_task(task):
    """True for a task whose reference is a Python module."""
    ref = task.get("reference") if isinstance(task, dict) else None
    return isinstance(ref, dict) and ref.get("lang") == "python"
