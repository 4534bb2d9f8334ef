"""The policy's prompt for a task: kgym.prompt(task, lang=..., format=...).

The wording is templates/prompt.txt, shipped with the package; `kgym
prompt` (client/client_prompt.c) renders the same file built into the
binary, by the same rules, so both give the same text for the same task
(python/tests/test_prompt.py compares them). The answer format it asks
for is the one kgym.extract reads back.

    kgym.prompt("cpu/rmsnorm_f32")                        # text
    kgym.prompt(task, lang="triton", format="chat")       # OpenAI-style messages
    kgym.prompt(task, format="json", feedback=result)     # multi-turn: the last result's feedback
"""

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import pytorch
from .tasks import TaskError, resolve_task

TEMPLATE = Path(__file__).resolve().parent / "templates" / "prompt.txt"
LANGS = ("triton", "cuda", "c", "ptx")
FORMATS = ("text", "json", "chat")
_KEY = re.compile(r"\{\{([a-z_]+)\}\}")
_ANNOTATION = ("description", "comment")

_sections = None


class PromptError(ValueError):
    """A task, language or format the prompt cannot be made for."""


def template_sections(path=None):
    """{section name: text} of the template (docs/trainers.md)."""
    global _sections
    if path is None and _sections is not None:
        return _sections
    text = Path(path or TEMPLATE).read_text(encoding="utf-8")
    sections, name, lines = {}, None, []
    for line in text.split("\n"):
        if line.startswith("@@ "):
            if name is not None:
                sections[name] = "\n".join(lines).rstrip("\n")
            name, lines = line[3:].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        sections[name] = "\n".join(lines).rstrip("\n")
    if path is None:
        _sections = sections
    return sections


def _render(name, values):
    text = template_sections().get(name)
    if text is None:
        raise PromptError("the prompt template has no section %r" % name)

    def sub(m):
        if m.group(1) not in values:
            raise PromptError("template section %r uses {{%s}}, which the code does not set"
                              % (name, m.group(1)))
        return values[m.group(1)]
    return _KEY.sub(sub, text)


def _g(value):
    return "%g" % float(value)


def _is_annotation(key):
    return key in _ANNOTATION or key.startswith("x-")


def _sizes_text(task, timed_mark):
    sizes = task.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        sizes = [{}]
    timed = task.get("timing_size", 0)
    parts = []
    for i, size in enumerate(sizes):
        items = [(k, v) for k, v in (size.items() if isinstance(size, dict) else [])
                 if not _is_annotation(k)]
        text = ", ".join("%s = %s" % (k, v) for k, v in items) or "as written"
        if timed_mark and i == timed:
            text += " (timed)"
        parts.append(text)
    return "; ".join(parts)


def _size_names(task):
    sizes = task.get("sizes")
    first = sizes[0] if isinstance(sizes, list) and sizes and isinstance(sizes[0], dict) else {}
    return ", ".join(k for k in first if not _is_annotation(k))


def _arg_line(arg):
    name = arg.get("name", "?")
    kind = arg.get("kind", "?")
    dtype = arg.get("dtype", "?")
    if kind == "scalar":
        value = arg.get("value")
        shown = value if isinstance(value, str) else _g(value) if isinstance(value, (int, float)) else "?"
        return "- %s: scalar %s = %s" % (name, dtype, shown)
    shape = arg.get("shape") if isinstance(arg.get("shape"), list) else []
    line = "- %s: %s %s [%s]" % (name, kind, dtype, ", ".join(str(d) for d in shape))
    init = arg.get("init")
    if kind in ("input", "inout") and isinstance(init, dict) and isinstance(init.get("dist"), str):
        params = ", ".join("%s=%s" % (k, _g(v)) for k, v in init.items()
                           if k != "dist" and isinstance(v, (int, float)))
        line += " from %s(%s)" % (init["dist"], params)
    return line


def _tolerance(task, module):
    tol = task.get("tolerance") if isinstance(task.get("tolerance"), dict) else {}
    if tol.get("exact") is True:
        return "bit for bit"
    default = 1e-2 if module else 1e-5
    atol = tol.get("atol", default)
    rtol = tol.get("rtol", default)
    return "within atol = %s, rtol = %s" % (_g(atol), _g(rtol))


def _pick_lang(task, module, backend, lang):
    python = task.get("python") if isinstance(task.get("python"), dict) else {}
    kernel = python.get("kernel", "any")
    if module:
        allowed = ("c",) if backend == "cpu" else ("triton", "cuda")
        default = "c" if backend == "cpu" else ("cuda" if kernel == "cuda" else "triton")
    else:
        allowed = ("c",) if backend == "cpu" else ("cuda", "ptx")
        ref_lang = task.get("reference", {}).get("lang")
        default = ref_lang if ref_lang in allowed else allowed[0]
    if lang is None:
        return default
    if lang not in LANGS:
        raise PromptError("lang %r is not one of %s" % (lang, ", ".join(LANGS)))
    if lang not in allowed:
        raise PromptError("a %s task on %s takes lang %s, not %s" % (
            "PyTorch" if module else "kgym C/CUDA", backend, " or ".join(allowed), lang))
    if module and kernel in ("triton", "cuda") and lang != kernel:
        raise PromptError("task %s wants %s kernels (python.kernel), not %s"
                          % (task.get("name"), kernel, lang))
    return lang


def local_gpu():
    """The local GPU in words, "NVIDIA H200 (sm_90)", or None when there is
    none (nvidia-smi is asked)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.stdout.strip().split("\n")[0] if out.returncode == 0 else ""
    if "," not in line:
        return None
    name, cap = (x.strip() for x in line.rsplit(",", 1))
    return "%s (sm_%s)" % (name, cap.replace(".", "")) if name and cap else None


def _load_result(feedback):
    """A result map from a Result, a dict, a path to RESULT.json or JSON text."""
    if feedback is None:
        return None
    if hasattr(feedback, "raw") and hasattr(feedback, "status"):
        raw = dict(feedback.raw or {})
        for key in ("status", "reward", "speedup", "message", "feedback"):
            raw.setdefault(key, getattr(feedback, key, None))
        return raw
    if isinstance(feedback, dict):
        return feedback
    if isinstance(feedback, (str, bytes, os.PathLike)):
        text = feedback.decode() if isinstance(feedback, bytes) else os.fspath(feedback)
        if not text.lstrip().startswith("{"):
            try:
                text = Path(text).read_text(encoding="utf-8")
            except OSError as exc:
                raise PromptError("cannot read the feedback result %s: %s" % (text, exc.strerror or exc)) from None
        return result_from_text(text)
    raise PromptError("feedback is a Result, a result dict, a path or JSON text, not %s"
                      % type(feedback).__name__)


def result_from_text(text):
    """A result object from RESULT.json text: one JSON object, or the last
    non-blank line of JSON lines (kgym eval's output)."""
    try:
        value = json.loads(text)
    except ValueError:
        lines = [l for l in text.split("\n") if l.strip()]
        try:
            value = json.loads(lines[-1]) if lines else None
        except ValueError as exc:
            raise PromptError("the feedback result is not JSON: %s" % exc) from None
    if not isinstance(value, dict):
        raise PromptError("the feedback result is not a JSON object")
    return value


def _report(result):
    status = result.get("status")
    line = "status: %s" % (status if isinstance(status, str) else "unknown")
    for key in ("reward", "speedup"):
        value = result.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            line += ", %s %s" % (key, _g(value))
    lines = [line]
    message = result.get("message")
    feedback = result.get("feedback")
    if isinstance(message, str) and message:
        lines.append(message)
    if isinstance(feedback, str) and feedback and feedback != message:
        lines.append(feedback)
    return "\n".join(lines)


def build(task, lang=None, gpu=None, feedback=None):
    """The prompt as a dict: task, kind, lang, gpu, answer (the fence the
    extractor reads), system, user."""
    if not isinstance(task, dict) or not isinstance(task.get("name"), str):
        raise PromptError("a task object with a name is needed")
    ref = task.get("reference")
    if not isinstance(ref, dict) or not isinstance(ref.get("source"), str):
        raise PromptError("task %s has no reference source" % task["name"])
    backend = task.get("backend")
    if not isinstance(backend, str):
        raise PromptError("task %s has no backend" % task["name"])
    module = pytorch.is_module_task(task)
    kind = "module" if module else "kernel"
    lang = _pick_lang(task, module, backend, lang)
    source = ref["source"].rstrip("\n")
    values = {"name": task["name"], "tolerance": _tolerance(task, module), "source": source}
    parts = []
    if module:
        python = task.get("python") if isinstance(task.get("python"), dict) else {}
        entry = python.get("entry", "Model")
        is_class = entry[:1].isupper()
        candidate = python.get("candidate_entry") or ("ModelNew" if is_class else entry)
        values.update(entry=entry, candidate_entry=candidate,
                      baseline=" (the reference compiled with torch.compile)"
                      if python.get("baseline") == "compile" else "")
        parts.append(_render("task.module", values))
        parts.append(_render("lang.module." + lang, values))
        kernel = python.get("kernel", "any")
        if backend != "cpu" and kernel in ("triton", "cuda", "any"):
            values["share"] = _g(100 * float(python.get("library_share_max", 0.5)))
            parts.append(_render("rule." + kernel, values))
        parts.append(_render("reference.module", values))
        o = pytorch.outline(ref["source"])
        consts = ", ".join("%s = %d" % kv for kv in o.constants.items()) if not o.error else ""
        values["list"] = consts
        values["constants"] = _render("constants" if consts else "constants.none", values)
        dtype = python.get("dtype")
        values["dtype"] = _render("dtype", dict(values, dtype=dtype)) if dtype else _render("dtype.none", values)
        sizes = task.get("sizes")
        values["sizes"] = _sizes_text(task, True)
        parts.append(_render("shapes.module" if isinstance(sizes, list) and len(sizes) > 1
                             else "shapes.module.one", values))
    else:
        description = task.get("description")
        values["description"] = " " + description if isinstance(description, str) and description else ""
        parts.append(_render("task.kernel", values))
        parts.append(_render("lang.kernel." + lang, values))
        values["fence"] = ref.get("lang") or ("c" if backend == "cpu" else "cuda")
        parts.append(_render("reference.kernel", values))
        args = [a for a in task.get("args", []) if isinstance(a, dict)]
        values["args"] = "\n".join(_arg_line(a) for a in args)
        values["sizes"] = _sizes_text(task, True)
        parts.append(_render("shapes.kernel", values))
        names = [a.get("name", "?") for a in args]
        values["arg_json"] = ", ".join(json.dumps(n) for n in names)
        values["arg_names"] = ", ".join(names)
        values["size_names"] = _size_names(task)
    if backend == "cpu":
        parts.append(_render("target.cpu", values))
    elif gpu:
        parts.append(_render("target.gpu", dict(values, gpu=gpu)))
    else:
        parts.append(_render("target.gpu.unknown", values))
    if module:
        parts.append(_render("answer.module." + ("class" if values["entry"][:1].isupper()
                                                 else "function"), values))
    else:
        parts.append(_render("answer.kernel." + lang, values))
    result = _load_result(feedback)
    if result is not None:
        parts.append(_render("feedback", dict(values, report=_report(result))))
    return {"task": task["name"], "kind": kind, "lang": lang, "gpu": gpu,
            "answer": "python" if module else lang,
            "system": _render("system", values), "user": "\n\n".join(parts)}


_UNSET = object()


def prompt(task, lang=None, format="text", feedback=None, gpu=_UNSET):
    """The policy's prompt for task (a task object, JSON text, a path, a
    KernelBench .py file or a bundled example name): format "text" (a
    str: system, a blank line, user), "json" (the dict of build()) or
    "chat" (OpenAI-style messages: system and user). lang: triton, cuda
    (PyTorch tasks on cuda; default triton unless python.kernel is cuda),
    c (CPU tasks), cuda or ptx (kgym CUDA tasks). feedback: the previous
    turn's result (Result, dict, RESULT.json path or JSON text). gpu: the
    target GPU in words; default the local one (nvidia-smi), if any."""
    if format not in FORMATS:
        raise PromptError("format %r is not one of %s" % (format, ", ".join(FORMATS)))
    try:
        task = resolve_task(task)
    except TaskError as exc:
        raise PromptError(str(exc)) from None
    if gpu is _UNSET:
        gpu = local_gpu()
    p = build(task, lang=lang, gpu=gpu, feedback=feedback)
    if format == "json":
        return p
    if format == "chat":
        return [{"role": "system", "content": p["system"]}, {"role": "user", "content": p["user"]}]
    return p["system"] + "\n\n" + p["user"] + "\n"
