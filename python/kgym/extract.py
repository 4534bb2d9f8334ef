"""Kernel extraction: a model's completion -> a kgym candidate object.

PyTorch tasks (a reference with lang "python", docs/pytorch-tasks.md): the
answer is the whole module in a ```python (or ```py) block defining
`ModelNew` (the task's candidate_entry); with several, the last closed one
that defines it wins; the candidate is {"lang": "python", "source": ...}.
client/client_extract.c reads Python answers by the same rules (`kgym
submit --completion`).

C/CUDA tasks, the format (for prompt writers; docs/trainers.md has the long version):

1. The source is a fenced code block: ```cuda (also ```cu, ```cpp, ```c++)
   for CUDA tasks, ```c for CPU tasks (```ptx gives lang "ptx"). When there
   are several, the last block of the best-fitting language wins, so a model
   may show drafts before its final answer. Reasoning inside
   <think>...</think> is skipped.
2. The launch plan, first match wins:
   a. a fenced ```json block holding {"launches": [...], "options": [...],
      "workspace": ...} (a full candidate with "source" works too);
   b. comment lines in the source:
        // kgym: launch kernel=rmsnorm grid=cdiv(M,4),1,1 block=128 shared=0 args=x,w,y,M,N,eps
        // kgym: options -O3
        // kgym: workspace M*4
      (one `launch` line per launch, in order; every key but kernel is
      optional; values are integers or expressions over the task's size
      names);
   c. with neither: one launch of the only extern "C" __global__ kernel
      (CUDA) or the only non-static top-level function (C), with every task
      argument in order (grid and block default to 1).
3. Anything missing or ambiguous makes the completion `invalid` with
   feedback that says exactly what was missing; nothing is sent to a broker.
"""

import json
import re
import shlex
from dataclasses import dataclass
from typing import Optional

_LANGS = {
    "cuda": "cuda", "cu": "cuda", "cuh": "cuda",
    "cpp": "cpp", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "hpp": "cpp",
    "c": "c", "h": "c",
    "ptx": "ptx",
    "json": "json", "jsonc": "json", "json5": "json",
    "python": "python", "py": "python", "python3": "python",
    "": "",
}

#  Source languages in order of preference per backend.
_PREFER = {
    "cuda": ("cuda", "cpp", "ptx", "c", ""),
    "cpu": ("c", "cpp", "", "cuda"),
    None: ("cuda", "cpp", "c", "ptx", ""),
}

_LAUNCH_KEYS = ("kernel", "grid", "block", "shared", "args")
_PLAN_KEYS = ("launches", "options", "workspace", "lang", "name", "source", "description",
              "comment")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_KEYWORDS = frozenset("if for while switch return sizeof do else case default goto typedef "
                        "struct union enum __attribute__ __declspec main".split())

FORMAT_HINT = (
    "Expected: the kernel source in one fenced code block (```cuda for CUDA tasks, ```c for "
    "CPU tasks) and a launch plan: either a ```json block like "
    '{"launches": [{"kernel": "NAME", "grid": ["cdiv(N,256)", 1, 1], "block": [256, 1, 1], '
    '"args": ["x", "y", "N"]}]} or a comment line in the source like '
    "`// kgym: launch kernel=NAME grid=cdiv(N,256) block=256 args=x,y,N`.")


PYTHON_HINT = (
    "Expected: the whole module in one ```python block defining `class ModelNew(nn.Module)` "
    "(your Triton kernels, or a load_inline extension, and the class whose forward runs them), "
    "as the prompt asks.")


class ExtractionError(ValueError):
    """A completion with no gradable kernel; .feedback says what was missing."""

    def __init__(self, feedback):
        super().__init__(feedback)
        self.feedback = feedback


@dataclass
class Block:
    lang: str           # normalised: cuda, cpp, c, ptx, json, "" (untagged), or the raw tag
    info: str           # the info string as written
    body: str
    line: int           # 1-based line of the opening fence
    closed: bool


@dataclass
class Extraction:
    candidate: Optional[dict]
    feedback: str = ""          # "" when a candidate was found
    plan: str = ""              # where the launch plan came from: json, comments, auto
    lang: str = ""              # the source block's language
    problem: str = ""           # what was missing, in a few words ("" when ok)

    @property
    def ok(self):
        return self.candidate is not None


def completion_text(completion):
    """The text of a completion: a str, a chat message dict, or a list of
    messages (the last assistant message's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content", "")
        if isinstance(content, list):      # content parts
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content if isinstance(content, str) else ""
    if isinstance(completion, (list, tuple)):
        msgs = [m for m in completion if isinstance(m, dict)]
        for m in reversed(msgs):
            if m.get("role", "assistant") == "assistant":
                return completion_text(m)
        return completion_text(msgs[-1]) if msgs else ""
    return "" if completion is None else str(completion)


def code_blocks(text):
    """Every fenced block (``` or ~~~, 3 or more) in order; an unclosed one
    runs to the end and has closed=False."""
    lines = text.split("\n")
    blocks = []
    i = 0
    opener = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)([^`]*)$")
    while i < len(lines):
        m = opener.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        info = (m.group(2) + m.group(3)).strip()
        tag = m.group(2).strip().lower().lstrip("{.").rstrip("}")
        lang = _LANGS.get(tag, tag)
        closer = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{%d,}[ \t\r]*$" % len(fence))
        j = i + 1
        while j < len(lines) and not closer.match(lines[j]):
            j += 1
        closed = j < len(lines)
        blocks.append(Block(lang, info, "\n".join(lines[i + 1:j]), i + 1, closed))
        i = j + 1
    return blocks


def _strip_reasoning(text):
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1], None
    if "<think>" in text:
        return "", ("the completion ends inside <think>...</think> (cut off while reasoning?): "
                    "there is no answer after the reasoning")
    return text, None


def _blank_comments(src, keep_strings=True):
    """src with comments (and, unless keep_strings, string and char literal
    contents) replaced by spaces; same length, same line breaks."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j, n)
            if j < n and src[j] == c:
                j += 1                  # the closing quote; an unclosed literal ends at the newline
            text = src[i:j]
            out.append(text if keep_strings else re.sub(r"[^\n]", " ", text))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cuda_kernels(src):
    """[(name, is_extern_c)] of the __global__ functions of a CUDA source."""
    s = _blank_comments(src)
    s = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", s)
    extern_block = re.search(r'extern\s*"C"\s*\{', s) is not None
    out = []
    for m in re.finditer(r"\b__global__\b", s):
        start = max(s.rfind(";", 0, m.start()), s.rfind("}", 0, m.start()),
                    s.rfind("{", 0, m.start()), s.rfind("#", 0, m.start())) + 1
        if s[start - 1:start] == "#":        # a preprocessor line: start after it
            nl = s.find("\n", start)
            start = nl + 1 if 0 <= nl < m.start() else start
        paren = s.find("(", m.end())
        if paren < 0:
            continue
        head = s[start:paren]
        name = re.search(r"([A-Za-z_]\w*)\s*$", head)
        if not name:
            continue
        is_c = re.search(r'extern\s*"C"', head) is not None or extern_block
        if "template" in head.split("__global__")[0]:
            is_c = False
        out.append((name.group(1), is_c))
    return out


def c_functions(src):
    """[(name, exported)] of the top-level function definitions of a C
    source; exported is False for static and inline ones."""
    s = _blank_comments(src, keep_strings=False)
    s = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: " " * len(m.group(0)), s)
    out = []
    depth, last = 0, 0
    for i, ch in enumerate(s):
        if ch == "{":
            if depth == 0:
                head = s[last:i].strip()
                fn = _c_function_head(head)
                if fn:
                    out.append(fn)
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                last = i + 1
        elif ch == ";" and depth == 0:
            last = i + 1
    return out


def _c_function_head(head):
    if not head.endswith(")"):
        return None
    depth = 0
    for k in range(len(head) - 1, -1, -1):
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                break
    else:
        return None
    m = re.search(r"([A-Za-z_]\w*)\s*$", head[:k])
    if not m or m.group(1) in _C_KEYWORDS:
        return None
    words = set(re.findall(r"[A-Za-z_]\w*", head[:m.start()]))
    if "typedef" in words:
        return None
    exported = not (words & {"static", "inline", "__inline", "__inline__"})
    return m.group(1), exported


def _split_top(text, sep):
    """Split at sep outside parentheses, brackets and quotes."""
    parts, depth, cur, quote = [], 0, [], None
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if depth == 0 and (ch == sep or (sep == " " and ch.isspace())):
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p != ""] if sep == " " else parts


def _unwrap(value):
    value = value.strip()
    if len(value) >= 2 and value[0] + value[-1] in ("[]", "()", '""', "''"):
        inner = value[1:-1]
        if value[0] in "\"'" or _split_top(inner, ",") != [inner] or value[0] == "[":
            return inner.strip()
        # (a) alone: an expression in parentheses; keep it
    return value


def _int_or_expr(text, where):
    text = text.strip().strip("\"'")
    if not text:
        raise ExtractionError("%s: empty value" % where)
    if re.fullmatch(r"\d+", text):
        return int(text)
    return text


def _parse_launch(body, line):
    where = "line %d: `kgym: launch`" % line
    body = re.sub(r"\s*,\s*", ",", body)
    body = re.sub(r"\s*=\s*", "=", body)
    launch = {}
    for n, tok in enumerate(_split_top(body, " ")):
        if "=" not in tok:
            if n == 0 and _IDENT.match(tok):
                launch["kernel"] = tok
                continue
            raise ExtractionError("%s: cannot read '%s' (write key=value: %s=)"
                                  % (where, tok, "=, ".join(_LAUNCH_KEYS)))
        key, value = tok.split("=", 1)
        key = key.lower()
        if key not in _LAUNCH_KEYS:
            raise ExtractionError("%s: unknown key '%s' (keys: %s)" % (where, key, ", ".join(_LAUNCH_KEYS)))
        if key in launch:
            raise ExtractionError("%s: '%s' given twice" % (where, key))
        if key == "kernel":
            value = value.strip("\"'")
            if not _IDENT.match(value):
                raise ExtractionError("%s: kernel '%s' is not an identifier" % (where, value))
            launch["kernel"] = value
        elif key in ("grid", "block"):
            items = _split_top(_unwrap(value), ",")
            if not 1 <= len(items) <= 3:
                raise ExtractionError("%s: %s takes 1 to 3 values, not %d" % (where, key, len(items)))
            launch[key] = [_int_or_expr(v, "%s %s" % (where, key)) for v in items]
        elif key == "shared":
            launch["shared"] = _int_or_expr(_unwrap(value), where + " shared")
        else:
            inner = _unwrap(value)
            names = [a.strip().strip("\"'") for a in inner.split(",")] if inner else []
            for a in names:
                if not _IDENT.match(a):
                    raise ExtractionError("%s: argument '%s' is not a name" % (where, a))
            launch["args"] = names
    if "kernel" not in launch:
        raise ExtractionError("%s: no kernel= (which function to launch)" % where)
    return launch


_DIRECTIVE = re.compile(r"^[ \t]*(?://+|/\*+)[ \t]*kgym[ \t]*:[ \t]*(.*?)[ \t]*(?:\*+/)?[ \t]*$",
                        re.IGNORECASE)


def comment_plan(src):
    """The plan from `// kgym: ...` lines of a source: a dict with
    "launches" (maybe empty), maybe "options" and "workspace"; or None when
    there is no such line. ExtractionError for a line it cannot read."""
    plan = {"launches": []}
    seen = False
    for n, text in enumerate(src.split("\n"), 1):
        m = _DIRECTIVE.match(text)
        if not m:
            continue
        seen = True
        parts = m.group(1).split(None, 1)
        token = parts[0].rstrip(":") if parts else ""
        rest = parts[1] if len(parts) > 1 else ""
        word = token.lower()
        if "=" in token and word.split("=", 1)[0] == "workspace":
            word, rest = "workspace", token.split("=", 1)[1] + " " + rest
        if word == "launch":
            plan["launches"].append(_parse_launch(rest, n))
        elif word in ("options", "option"):
            try:
                opts = shlex.split(rest)
            except ValueError as exc:
                raise ExtractionError("line %d: `kgym: options`: %s" % (n, exc)) from None
            plan.setdefault("options", []).extend(opts)
        elif word == "workspace":
            value = rest.strip().lstrip("=").strip()
            plan["workspace"] = _int_or_expr(value, "line %d: `kgym: workspace`" % n)
        else:
            raise ExtractionError("line %d: unknown directive `kgym: %s` (directives: launch, "
                                  "options, workspace)" % (n, word))
    return plan if seen else None


def _task_arg_names(task):
    args = task.get("args") if isinstance(task, dict) else None
    if not isinstance(args, list):
        return None
    return [a.get("name") for a in args if isinstance(a, dict) and isinstance(a.get("name"), str)]


def check_plan(plan, task=None, where="launch plan"):
    """Raise ExtractionError when a plan is not one kgym can run: launches
    missing or malformed, unknown keys, argument names the task lacks."""
    if not isinstance(plan, dict):
        raise ExtractionError("%s is not a JSON object" % where)
    for key in plan:
        if key not in _PLAN_KEYS and not key.startswith("x-"):
            raise ExtractionError("%s: unknown key '%s' (keys: launches, options, workspace)" % (where, key))
    launches = plan.get("launches")
    if not isinstance(launches, list) or not launches:
        raise ExtractionError('%s has no "launches": give a list of {"kernel": NAME, "grid": [...], '
                              '"block": [...], "args": [...]}' % where)
    names = _task_arg_names(task)
    allowed = set(names or ()) | ({"workspace"} if plan.get("workspace") is not None else set())
    for i, launch in enumerate(launches):
        w = "%s: launches[%d]" % (where, i)
        if not isinstance(launch, dict):
            raise ExtractionError("%s is not an object" % w)
        for key in launch:
            if key not in _LAUNCH_KEYS:
                raise ExtractionError("%s: unknown key '%s' (keys: %s)" % (w, key, ", ".join(_LAUNCH_KEYS)))
        kernel = launch.get("kernel")
        if not isinstance(kernel, str) or not _IDENT.match(kernel):
            raise ExtractionError('%s: "kernel" must name the function to launch' % w)
        for key in ("grid", "block"):
            value = launch.get(key)
            if value is None:
                continue
            if isinstance(value, (int, str)) and not isinstance(value, bool):
                launch[key] = [value]
            elif not isinstance(value, list) or not 1 <= len(value) <= 3:
                raise ExtractionError("%s: %s must be a list of 1 to 3 integers or expressions" % (w, key))
        args = launch.get("args")
        if args is not None:
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ExtractionError("%s: args must be a list of argument names" % w)
            if names is not None:
                bad = [a for a in args if a not in allowed]
                if bad:
                    raise ExtractionError("%s: unknown argument(s) %s; the task's arguments are %s%s" % (
                        w, ", ".join(bad), ", ".join(names),
                        " (and workspace)" if "workspace" in allowed else
                        " (workspace only when the plan gives one)" if "workspace" in bad else ""))
    options = plan.get("options")
    if options is not None and (not isinstance(options, list)
                                or not all(isinstance(o, str) for o in options)):
        raise ExtractionError("%s: options must be a list of strings" % where)
    return plan


def _pick_source(blocks, backend):
    code = [b for b in blocks if b.lang not in ("json", "python") and b.lang in _LANGS
            and not (b.lang == "" and b.body.lstrip().startswith(("{", "[")))]
    closed = [b for b in code if b.closed]
    for lang in _PREFER.get(backend, _PREFER[None]):
        hits = [b for b in closed if b.lang == lang]
        if hits:
            return hits[-1], None
    if code:
        b = code[-1]
        return None, ("the ```%s block opened at line %d is never closed (was the completion cut "
                      "off?)" % (b.info or "", b.line))
    others = [b for b in blocks if b.lang not in _LANGS or b.lang == "python"]
    if others:
        return None, ("no C/CUDA code block: found only ```%s; the source must be in a ```%s block"
                      % (", ```".join(sorted({b.info.split()[0] for b in others if b.info})),
                         "c" if backend == "cpu" else "cuda"))
    return None, "no fenced code block with the kernel source"


def _pick_json_plan(blocks):
    err = None
    for b in reversed(blocks):
        looks = b.lang == "json" or (b.lang == "" and b.body.lstrip().startswith("{"))
        if not looks:
            continue
        if not b.closed:
            err = err or "the ```json block opened at line %d is never closed" % b.line
            continue
        try:
            value = json.loads(b.body)
        except ValueError as exc:
            err = err or "the ```json block at line %d is not valid JSON: %s" % (b.line, exc)
            continue
        if isinstance(value, dict) and ("launches" in value or "source" in value):
            return value, b, None
        err = err or ('the ```json block at line %d has no "launches" key' % b.line)
    return None, None, err


def extract(completion, task=None, *, backend=None):
    """An Extraction of a completion (str, chat message, or message list).
    task (a task object) sharpens the checks: the backend picks the source
    language, argument names are checked against the task's."""
    if backend is None and isinstance(task, dict) and isinstance(task.get("backend"), str):
        backend = task["backend"]
    text = completion_text(completion)
    python = _is_module_task(task) or (task is None and _looks_python(text))
    try:
        blocks = _answer_blocks(text)
        if python:
            return _extract_python(blocks, _candidate_entry(task))
        return _extract(blocks, task, backend)
    except ExtractionError as exc:
        return Extraction(None, _feedback(exc.feedback, python), problem=exc.feedback)


def _feedback(what, python=False):
    return "kgym could not grade this completion: %s. %s" % (what.rstrip("."),
                                                             PYTHON_HINT if python else FORMAT_HINT)


def _is_module_task(task):
    ref = task.get("reference") if isinstance(task, dict) else None
    return isinstance(ref, dict) and ref.get("lang") == "python"


def _candidate_entry(task):
    """What a PyTorch task's candidate must define (docs/pytorch-tasks.md)."""
    python = task.get("python") if isinstance(task, dict) else None
    python = python if isinstance(python, dict) else {}
    entry = python.get("entry") if isinstance(python.get("entry"), str) else "Model"
    given = python.get("candidate_entry")
    if isinstance(given, str) and given:
        return given
    return "ModelNew" if entry[:1].isupper() else entry


def defines(source, name):
    """True when a line of source, at column 0, defines name: `class name`,
    `def name`, `async def name` or `name = ...` (read without parsing, so
    a module with a syntax error still counts; the grader reports that)."""
    n = re.escape(name)
    return re.search(r"(?m)^(?:(?:class|def|async[ \t]+def)[ \t]+%s\b|%s[ \t]*(?::[^=\n]*)?=(?!=))"
                     % (n, n), source) is not None


def _looks_python(text):
    """Without a task: a completion whose answer is a ```python block with ModelNew."""
    return any(b.lang == "python" and defines(b.body, "ModelNew") for b in code_blocks(text))


def _answer_blocks(text):
    """The fenced blocks of the answer: after the reasoning, never empty."""
    text, why = _strip_reasoning(text)
    if why:
        raise ExtractionError(why)
    if not text.strip():
        raise ExtractionError("the completion is empty")
    return code_blocks(text)


def _extract_python(blocks, entry):
    python = [b for b in blocks if b.lang == "python" or (b.lang == "" and defines(b.body, entry))]
    defining = [b for b in python if defines(b.body, entry)]
    closed = [b for b in defining if b.closed]
    if closed:
        block = closed[-1]
        if not block.body.strip():
            raise ExtractionError("the ```python block at line %d is empty" % block.line)
        return Extraction({"lang": "python", "source": block.body}, plan="module", lang="python")
    if defining:
        raise ExtractionError("the ```python block opened at line %d, which defines `%s`, is never "
                              "closed (was the completion cut off?)" % (defining[-1].line, entry))
    if python:
        raise ExtractionError("no ```python block defines `%s` (%d ```python block%s, none with "
                              "`class %s` at the start of a line)"
                              % (entry, len(python), "" if len(python) == 1 else "s", entry))
    others = sorted({(b.info.split() or [""])[0] for b in blocks if b.info})
    if others:
        raise ExtractionError("no ```python block: found only ```%s" % ", ```".join(others))
    raise ExtractionError("no fenced ```python block with the module")


def _extract(blocks, task, backend):
    plan, plan_block, plan_err = _pick_json_plan(blocks)
    if plan is not None and isinstance(plan.get("source"), str):
        # A whole candidate as JSON.
        check_plan(plan, task, "the ```json candidate")
        cand = {k: v for k, v in plan.items() if k in ("source", "launches", "options", "workspace", "lang", "name")}
        return Extraction(cand, plan="json", lang=cand.get("lang", ""))
    block, src_err = _pick_source([b for b in blocks if b is not plan_block], backend)
    if block is None:
        raise ExtractionError(src_err)
    src = block.body
    if not src.strip():
        raise ExtractionError("the ```%s block at line %d is empty" % (block.info, block.line))
    lang = "ptx" if block.lang == "ptx" else ("c" if backend == "cpu" else
                                               "cuda" if backend == "cuda" else block.lang)
    how = "json"
    if plan is None:
        try:
            plan = comment_plan(src)
        except ExtractionError as exc:
            raise ExtractionError("in the ```%s block: %s" % (block.info or "code", exc.feedback)) from None
        how = "comments"
        if plan is not None and not plan["launches"]:
            if plan_err:
                raise ExtractionError(plan_err)
            plan["launches"] = _auto_launches(src, lang, backend, task)
            how = "auto"
    if plan is None:
        if plan_err:
            raise ExtractionError(plan_err)
        plan = {"launches": _auto_launches(src, lang, backend, task)}
        how = "auto"
    check_plan(plan, task)
    cand = {"source": src, "launches": plan["launches"]}
    for key in ("options", "workspace"):
        if plan.get(key) is not None:
            cand[key] = plan[key]
    if lang == "ptx" or plan.get("lang"):
        cand["lang"] = plan.get("lang") or lang
    return Extraction(cand, plan=how, lang=lang)


def _auto_launches(src, lang, backend, task):
    if lang == "ptx":
        raise ExtractionError("a PTX source needs a launch plan (a ```json block)")
    cuda_like = backend == "cuda" or (backend is None and "__global__" in src)
    if cuda_like:
        kernels = cuda_kernels(src)
        exported = [k for k, c in kernels if c]
        if len(exported) == 1:
            return [{"kernel": exported[0]}]
        if not kernels:
            raise ExtractionError("no launch plan, and no extern \"C\" __global__ kernel in the source")
        if not exported:
            raise ExtractionError("no launch plan, and kernel(s) %s are not extern \"C\" (declare "
                                  "`extern \"C\" __global__ void %s(...)` so kgym finds it by name)"
                                  % (", ".join(k for k, _ in kernels), kernels[0][0]))
        raise ExtractionError("no launch plan, and %d extern \"C\" kernels (%s): say which to launch, "
                              "in what order, with what grid and block" % (len(exported), ", ".join(exported)))
    funcs = c_functions(src)
    exported = [f for f, e in funcs if e]
    if len(exported) == 1:
        return [{"kernel": exported[0]}]
    if not exported:
        raise ExtractionError("no launch plan, and no non-static function in the source")
    raise ExtractionError("no launch plan, and %d functions (%s): say which one to call with "
                          "`// kgym: launch kernel=NAME`, or make the helpers static"
                          % (len(exported), ", ".join(exported)))


def extract_candidate(completion, task=None, *, backend=None):
    """The candidate object of a completion; ExtractionError (with
    .feedback) when there is none."""
    ex = extract(completion, task, backend=backend)
    if ex.candidate is None:
        raise ExtractionError(ex.feedback)
    return ex.candidate
