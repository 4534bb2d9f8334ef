"""The environment as callable tools, for agentic RL (multi-turn kernel agents).

    tools = kgym.tools.Tools(client, task)             # bound to one task (one rollout)
    tools.schemas()        # [{"type": "function", "function": {"name", "description", "parameters"}}, ...]
    text = tools.call("run", {"code": "..."})          # or the arguments as JSON text
    tools.results          # every Result the calls got, in order; tools.best() the best graded

Three tools, in the function-calling JSON schema form (OpenAI's tools list,
which vLLM, SGLang, veRL and TRL read too), each with a Python handler bound
to a kgym client that returns the text a model reads:

    compile   builds the candidate and checks it once on the task's sizes
              (eval.check_only, one trial, no profile): "compiled" or the
              compiler's log; a cheap first step.
    run       grades it (correctness on every size, timing against the
              reference): the status line and the worker's feedback.
    profile   grades it with the profile: the status line and a table of
              where the time goes (the candidate's kernels, the reference's
              and its dominant operators).

`code` is the candidate: for a PyTorch task the whole module defining
ModelNew (or a completion with a ```python block); for a C/CUDA task the
source with `// kgym: launch ...` lines (or a completion with fenced blocks
and a ```json plan, as kgym.extract reads). What the model got wrong (an
unknown tool, a missing argument, no gradable kernel) comes back as text for
it; an infrastructure failure (broker lost, internal_error) raises
KgymError unless on_infra="text", so no policy is taught by kgym's fault.
"""

import json

from .client import KgymError, default_client
from .extract import extract
from .pytorch import is_module_task
from .result import Result
from .tasks import TaskError, resolve_task

TOOL_NAMES = ("compile", "run", "profile")

_CODE_PYTHON = ("The candidate: the whole Python module (imports, your kernels and "
                "`class ModelNew(nn.Module)`), as plain code or in a ```python block.")
_CODE_KERNEL = ("The candidate: the kernel source with its launch plan as comment lines "
                "(`// kgym: launch kernel=NAME grid=... block=... args=...`), or the source in a "
                "fenced block followed by a ```json launch plan.")
_DESCRIPTIONS = {
    "compile": "Compile the candidate and check it once on the task's sizes, without timing. "
               "Returns 'compiled' and the check's verdict, or the compiler's errors. Cheap: use it "
               "first.",
    "run": "Grade the candidate: correctness on every size, then timing against the reference. "
           "Returns the status (ok, compile_error, incorrect, runtime_error, timeout), the reward, "
           "the speedup and feedback on what went wrong.",
    "profile": "Grade the candidate with the profiler: the status, then a table of its kernels "
               "(launches, time, share of the total) beside the reference's, to see where the "
               "time goes.",
}


def _num(value, fmt):
    return fmt % value if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def profile_table(result):
    """The text of a result's profile: the candidate's kernels, the
    reference's, and the reference's dominant operators when the result
    has them (profile.reference.operators)."""
    profile = result.profile if isinstance(result, Result) else (result or {}).get("profile")
    if not isinstance(profile, dict):
        return "(no profile)"
    if profile.get("available") is False:
        return "(profile unavailable: %s)" % (profile.get("reason") or "no reason given")
    lines = ["%-10s %-32s %5s %12s %12s %6s" % ("program", "kernel", "runs", "total_us", "mean_us", "share")]

    def rows(who, kernels):
        for k in kernels if isinstance(kernels, list) else []:
            if not isinstance(k, dict):
                continue
            name = str(k.get("name", "?"))
            if k.get("kind") in ("own", "library"):
                name += " (%s)" % k["kind"]
            lines.append("%-10s %-32.32s %5s %12s %12s %6s" % (
                who, name, _num(k.get("launches"), "%d"), _num(k.get("total_us"), "%.1f"),
                _num(k.get("mean_us"), "%.1f"),
                _num(100 * k["share"] if isinstance(k.get("share"), (int, float)) else None, "%.0f%%")))

    rows("candidate", profile.get("kernels"))
    for who in ("baseline", "reference"):
        part = profile.get(who)
        if isinstance(part, dict):
            rows(who, part.get("kernels"))
    share = profile.get("library_share")
    if isinstance(share, (int, float)):
        lines.append("library kernels: %.0f%% of the candidate's GPU time" % (100 * share))
    ops = (profile.get("reference") or {}).get("operators") if isinstance(profile.get("reference"), dict) else None
    if isinstance(ops, list) and ops:
        lines.append("reference's operators by share of its time: " + ", ".join(
            "%s %.0f%%" % (o.get("name"), 100 * o.get("share", 0)) for o in ops[:8]
            if isinstance(o, dict) and isinstance(o.get("share"), (int, float))))
    return "\n".join(lines)


class Tools:
    """compile, run and profile as function-calling tools bound to a client
    and (usually) one task. Without a task, each tool takes a `task`
    argument (a bundled example name or a task file path)."""

    def __init__(self, client=None, task=None, *, eval=None, trajectory=None, on_infra="raise",
                 max_chars=4000):
        if on_infra not in ("raise", "text"):
            raise ValueError("on_infra is 'raise' or 'text', not %r" % (on_infra,))
        self.client = client if client is not None else default_client()
        self.task = resolve_task(task) if task is not None else None
        self.eval = dict(eval or {})
        self.trajectory = trajectory
        self.on_infra = on_infra
        self.max_chars = max_chars
        self.results = []           # every Result, in call order
        self.handlers = {"compile": self.compile, "run": self.run, "profile": self.profile}

    def schemas(self):
        """The tools in the common function-calling JSON schema form."""
        module = self.task is not None and is_module_task(self.task)
        code = _CODE_PYTHON if module else _CODE_KERNEL if self.task is not None else (
            "The candidate: for a PyTorch task the whole module defining ModelNew; for a C/CUDA "
            "task the source with `// kgym: launch ...` lines.")
        out = []
        for name in TOOL_NAMES:
            props = {"code": {"type": "string", "description": code}}
            required = ["code"]
            if self.task is None:
                props["task"] = {"type": "string", "description": "The task: a bundled example "
                                 "name (cpu/rmsnorm_f32) or a task file path."}
                required.insert(0, "task")
            out.append({"type": "function", "function": {
                "name": name, "description": _DESCRIPTIONS[name],
                "parameters": {"type": "object", "properties": props, "required": required,
                               "additionalProperties": False}}})
        return out

    def call(self, name, arguments=None):
        """Run tool name with arguments (a dict, or JSON text as a model's
        tool call carries them): the text for the model."""
        if name not in self.handlers:
            return "unknown tool %r: the tools are %s" % (name, ", ".join(TOOL_NAMES))
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as exc:
                return "the arguments of %s are not JSON: %s" % (name, exc)
        if not isinstance(arguments, dict):
            return "the arguments of %s are a JSON object with \"code\"" % name
        unknown = sorted(set(arguments) - {"code", "task"})
        if unknown:
            return "%s takes code%s, not %s" % (name, "" if self.task is not None else " and task",
                                                ", ".join(unknown))
        if not isinstance(arguments.get("code"), str) or not arguments["code"].strip():
            return "%s needs \"code\": the candidate's source" % name
        return self.handlers[name](arguments["code"], task=arguments.get("task"))

    def best(self):
        """The best graded Result so far (highest reward), or None."""
        graded = [r for r in self.results if r.reward is not None]
        return max(graded, key=lambda r: r.reward) if graded else None

    # -- the handlers

    def compile(self, code, task=None):
        r, text = self._grade(code, task, {"check_only": True, "trials": 1, "profile": False})
        if r is None:
            return text
        if r.status == "compile_error":
            log = (r.compile_log or r.feedback or r.message or "").strip()
            return self._cut("status: compile_error\n" + log)
        if r.status in ("invalid", "internal_error"):
            return self._cut(r.feedback_text(self.max_chars))
        return self._cut("compiled. One check on the task's sizes (not timed): %s\n%s"
                         % (r.status, (r.feedback or r.message or "").strip())).rstrip()

    def run(self, code, task=None):
        r, text = self._grade(code, task, {})
        return text if r is None else r.feedback_text(self.max_chars)

    def profile(self, code, task=None):
        r, text = self._grade(code, task, {"profile": True})
        if r is None:
            return text
        head = r.feedback_text(self.max_chars // 2)
        return self._cut(head + "\n\n" + profile_table(r))

    # -- inside

    def _cut(self, text):
        if self.max_chars and len(text) > self.max_chars:
            return text[:self.max_chars - 15] + "\n...[truncated]"
        return text

    def _candidate(self, code, task):
        """The Extraction of code for task."""
        if "```" in code:
            return extract(code, task)
        if is_module_task(task):
            return extract("```python\n%s\n```" % code, task)
        lang = "c" if task.get("backend") == "cpu" else "cuda"
        return extract("```%s\n%s\n```" % (lang, code), task)

    def _grade(self, code, task, eval_over):
        """(Result, None), or (None, the text for the model) when nothing was graded."""
        if self.task is not None and task is not None:
            return None, "this tool is bound to task %s: call it with code only" % self.task.get("name")
        if self.task is None and task is None:
            return None, "say which task: the tools take \"task\" (a bundled example name or a path)"
        try:
            t = self.task if self.task is not None else resolve_task(task)
        except TaskError as exc:
            return None, "unknown task: %s" % exc
        ex = self._candidate(code, t)
        if not ex.ok:
            return None, ex.feedback
        opts = {"eval": dict(self.eval, **eval_over)}
        if self.trajectory is not None:
            opts["trajectory"] = self.trajectory
        r = self.client.grade(t, ex, raise_on_error=False, **opts)
        self.results.append(r)
        if r.error or r.status == "internal_error":
            if self.on_infra == "raise":
                raise KgymError("kgym could not grade the tool call (%s): %s"
                                % (r.error or r.status, r.message), r)
            return None, ("kgym could not grade this (its own failure, not the kernel's): %s"
                          % (r.message or r.error))
        return r, None
