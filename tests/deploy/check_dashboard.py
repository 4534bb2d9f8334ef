#!/usr/bin/env python3
"""check_dashboard - a Grafana dashboard's queries against kgym's real /metrics.

    check_dashboard.py DASHBOARD.json RULES.yml REGISTRY.c PAGE...

PAGE: /metrics pages scraped from a running broker and worker. Every query
(panel targets, template variables, annotations) must name at least one
metric, and each metric it names must be a family on those pages (a
histogram's _bucket/_sum/_count included) or a series the recording rules in
RULES.yml record. Label names in matchers and in by/on/without/ignoring/
group_left/group_right must be labels those metrics carry: on the pages, or
as REGISTRY.c (common_metrics_kgym.c) declares them for a family that has no
sample yet (a counter nothing moved); instance and job are Prometheus's.
Grafana's variables are replaced by plain values first; the queries, so
replaced, are written to OUT_RULES (when $KGYM_DASHBOARD_RULES names a file)
for `promtool check rules` to parse. Exit 1 with a line per problem.
"""
import json
import os
import re
import sys

FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count", "count_over_time", "count_values", "delta",
    "deriv", "exp", "floor", "group", "histogram_quantile", "holt_winters", "idelta",
    "increase", "irate", "label_join", "label_replace", "label_values", "last_over_time", "ln",
    "log10", "log2", "max", "max_over_time", "min", "min_over_time", "predict_linear",
    "quantile", "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort",
    "sort_desc", "sqrt", "stddev", "stddev_over_time", "stdvar", "sum", "sum_over_time",
    "time", "timestamp", "topk", "vector", "and", "or", "unless", "by", "without", "on",
    "ignoring", "group_left", "group_right", "bool", "offset", "inf", "nan",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*\"")


def substitute(expr):
    """Grafana's variables as Prometheus would see them."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    expr = expr.replace("$__range", "1h")
    return re.sub(r"\$\{?[a-zA-Z_]+\}?", ".*", expr)


def read_pages(paths):
    """family -> set of label names seen on its samples."""
    families, types = {}, {}
    for path in paths:
        for line in open(path):
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split()[:4]
                types[name] = kind
                families.setdefault(name, set())
            elif line.strip() and not line.startswith("#"):
                m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
                if not m:
                    continue
                name = m.group(1)
                for suffix in ("_bucket", "_sum", "_count"):
                    base = name[: -len(suffix)] if name.endswith(suffix) else None
                    if base and types.get(base) == "histogram":
                        name = base
                labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", m.group(3) or ""))
                families.setdefault(name, set()).update(labels)
    return families, types


def declared(path):
    """family -> label names, as the C registry declares them."""
    text = open(path).read()
    out = {}
    for name, labels in re.findall(
            r'common_metrics_\w+\s*\(\s*\w+\s*,\s*"([a-z_]+)"\s*,(?:\s*"(?:[^"\\]|\\.)*")+\s*,\s*(NULL|"[^"]*")',
            text):
        out[name] = set() if labels == "NULL" else {l for l in labels.strip('"').split(",") if l}
    return out


def recorded(path):
    text = open(path).read()
    return set(re.findall(r"^\s*-?\s*record:\s*(\S+)", text, re.M))


def queries(dash):
    """(where, expr) for every query in the dashboard."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((f"panel '{p.get('title')}' {t.get('refId')}", t.get("expr", "")))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else q or ""
            out.append((f"variable ${v.get('name')}", q))
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f"annotation '{a.get('name')}'", a["expr"]))
    return out


def check(where, expr, families, types, rules):
    problems = []
    plain = substitute(expr)
    # label_values(metric, label): Grafana's variable query.
    lv = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_]+)\s*\)\s*", plain)
    if lv:
        metrics, label_sets = {lv.group(1)}, [lv.group(2)]
    else:
        label_sets = []
        for _, labels in GROUPING.findall(plain):
            label_sets += [l.strip() for l in labels.split(",") if l.strip()]
        stripped = GROUPING.sub(" ", plain)
        for name, body in SELECTOR.findall(stripped):
            for label, _ in MATCHER.findall(body):
                if label not in ("__name__", "instance", "job") and name in families \
                        and label not in families[name]:
                    problems.append(f"{where}: {name} has no label '{label}' on the pages")
        stripped = re.sub(r"\{[^}]*\}", " ", stripped)
        stripped = re.sub(r"\"[^\"]*\"", " ", stripped)
        stripped = re.sub(r"\[[^\]]*\]", " ", stripped)
        words = re.findall(r"(?<![0-9.])\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b", stripped)
        metrics = {w for w in words if w not in FUNCTIONS}
    if not metrics:
        problems.append(f"{where}: names no metric: {expr}")
    known_labels = {"le"}
    for m in sorted(metrics):
        base = m
        for suffix in ("_bucket", "_sum", "_count"):
            if m.endswith(suffix) and types.get(m[: -len(suffix)]) == "histogram":
                base = m[: -len(suffix)]
        if base in families:
            known_labels |= families[base]
        elif m not in rules:
            problems.append(f"{where}: '{m}' is not a metric kgym exports (nor a recorded rule)")
    if any(m in rules for m in metrics):
        known_labels = None          # recorded series: their labels are the rules' business
    for label in label_sets:
        if known_labels is not None and label not in known_labels | {"instance", "job"}:
            problems.append(f"{where}: groups by '{label}', which none of {sorted(metrics)} has")
    return problems, plain


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    dash = json.load(open(sys.argv[1]))
    rules = recorded(sys.argv[2])
    registry = declared(sys.argv[3])
    families, types = read_pages(sys.argv[4:])
    if len(registry) < 20:
        print(f"only {len(registry)} families declared in {sys.argv[3]}: not kgym's registry")
        return 1
    for name in families:
        families[name] |= registry.get(name, set())
    kgym = sorted(f for f in families if f.startswith("kgym_"))
    if len(kgym) < 20:
        print(f"only {len(kgym)} kgym families on the pages: not a broker's and a worker's /metrics")
        return 1
    problems, plain, used = [], [], set()
    for where, expr in queries(dash):
        p, q = check(where, expr, families, types, rules)
        problems += p
        if not q.startswith("label_values"):
            plain.append(q)
        used |= {f for f in families if re.search(r"\b" + re.escape(f) + r"(_bucket|_sum|_count)?\b", q)}
    out = os.environ.get("KGYM_DASHBOARD_RULES")
    if out:
        with open(out, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, q in enumerate(plain):
                f.write(f"      - record: dashboard:query:{i}\n        expr: {json.dumps(q)}\n")
    for p in problems:
        print("  " + p)
    unused = sorted(set(kgym) - used)
    print(f"  {len(plain)} queries; {len(used)} of the pages' families used"
          + (f"; not shown: {', '.join(unused)}" if unused else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
