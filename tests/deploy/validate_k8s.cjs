// Offline validation of kgym's Kubernetes manifests (tests/test_deploy.sh k8s).
//
//   node validate_k8s.cjs --kustomize DIR [--kustomize DIR ...] [--rendered FILE ...]
//
// --kustomize DIR renders DIR's kustomization.yaml here (resources, namespace,
// labels, images: the subset deploy/k8s uses; anything else is refused so the
// check never silently skips a feature). --rendered FILE takes the output of
// `kubectl kustomize` instead. Every document is then
//   1. validated against the Kubernetes OpenAPI schema (kubernetes-models'
//      validators: types, required fields, enums, formats), and
//   2. walked for unknown keys against the same models' type declarations
//      (the API server drops unknown fields silently, the schema allows them;
//      a misspelt `terminationGracePeriodSecond` would pass both),
// plus kgym's own rules (the issue's deployment contract). Prints one line per
// object and every problem; exits 1 on any problem.
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const MODELS = path.dirname(require.resolve("kubernetes-models/package.json"));
const MODULES = path.dirname(MODELS);

// apiVersion/kind -> model module (a path under node_modules).
const KINDS = {
  "v1/Namespace": "kubernetes-models/v1/Namespace",
  "v1/ConfigMap": "kubernetes-models/v1/ConfigMap",
  "v1/Service": "kubernetes-models/v1/Service",
  "v1/PersistentVolumeClaim": "kubernetes-models/v1/PersistentVolumeClaim",
  "v1/Secret": "kubernetes-models/v1/Secret",
  "apps/v1/Deployment": "kubernetes-models/apps/v1/Deployment",
  "policy/v1/PodDisruptionBudget": "kubernetes-models/policy/v1/PodDisruptionBudget",
  "autoscaling/v2/HorizontalPodAutoscaler": "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler",
  "monitoring.coreos.com/v1/PodMonitor": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor",
};

const problems = [];
let context = "";                   // the object being walked, for messages
function problem(where, text) {
  problems.push(`${where}: ${text}`);
}

// ---------------------------------------------------------------------------
// A minimal kustomize: enough for deploy/k8s, strict about the rest.

function render(dir) {
  const file = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
    .map((f) => path.join(dir, f)).find((f) => fs.existsSync(f));
  if (!file) throw new Error(`${dir}: no kustomization.yaml`);
  const k = YAML.parse(fs.readFileSync(file, "utf8"));
  const known = new Set(["apiVersion", "kind", "namespace", "labels", "resources", "images"]);
  for (const key of Object.keys(k))
    if (!known.has(key)) throw new Error(`${file}: kustomize field '${key}' is not supported by this checker`);
  let docs = [];
  for (const res of k.resources || []) {
    const full = path.join(dir, res);
    if (fs.statSync(full).isDirectory())
      docs = docs.concat(render(full));
    else
      for (const d of YAML.parseAllDocuments(fs.readFileSync(full, "utf8"))) {
        if (d.errors.length) throw new Error(`${full}: ${d.errors[0].message}`);
        const obj = d.toJS();
        if (obj) docs.push({ obj, source: path.relative(process.cwd(), full) });
      }
  }
  for (const { obj } of docs) {
    if (k.namespace && obj.kind !== "Namespace" && obj.metadata) obj.metadata.namespace = k.namespace;
    for (const group of k.labels || []) {
      obj.metadata.labels = { ...(obj.metadata.labels || {}), ...group.pairs };
      if (group.includeSelectors) throw new Error(`${file}: labels.includeSelectors is not supported here`);
    }
    for (const image of k.images || []) {
      for (const c of containersOf(obj))
        if (c.image === image.name || (c.image || "").startsWith(image.name + ":"))
          c.image = `${image.newName || image.name}:${image.newTag || "latest"}`;
    }
  }
  return docs;
}

function containersOf(obj) {
  const spec = obj.spec && obj.spec.template && obj.spec.template.spec;
  return spec ? [...(spec.containers || []), ...(spec.initContainers || [])] : [];
}

// ---------------------------------------------------------------------------
// Unknown keys: the models' .d.ts files declare each type's properties.

const declCache = new Map();

// Properties of a type body ("\"name\"?: Type; ..." between braces): name -> type text.
function parseBody(text) {
  const props = {};
  let depth = 0, item = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === ">" && text[i - 1] === "=") { item += c; continue; }        // "=>" is no bracket
    if ("{<([".includes(c)) depth++;
    if ("}>)]".includes(c)) depth--;
    if (c === ";" && depth === 0) {
      const m = item.trim().match(/^"([^"]+)"\??:\s*([\s\S]+)$/);
      if (m) props[m[1]] = m[2].trim();
      item = "";
    } else item += c;
  }
  return props;
}

// The body of the brace block opening at text[open].
function braceBody(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "{") depth++;
    if (text[i] === "}" && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

// The interface declared in a model's .d.ts: its properties and the imports
// that name other types. null when the file declares no interface (a scalar
// alias such as IntOrString or Quantity).
function declaration(file) {
  if (declCache.has(file)) return declCache.get(file);
  const text = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const imports = {};
  for (const m of text.matchAll(/import \{([^}]+)\} from "([^"]+)";/g))
    for (const name of m[1].split(",").map((x) => x.trim()).filter(Boolean))
      imports[name] = m[2].startsWith(".") ? path.resolve(path.dirname(file), m[2]) : path.join(MODULES, m[2]);
  const start = text.match(/export interface I\w+(?: extends [\w, ]+)? \{/);
  const result = start ? { props: parseBody(braceBody(text, start.index + start[0].length - 1)), imports } : null;
  declCache.set(file, result);
  return result;
}

function walk(value, type, decl, where) {
  if (value === null || value === undefined) return;
  type = type.trim();
  let m;
  if ((m = type.match(/^Array<([\s\S]+)>$/))) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, m[1], decl, `${where}[${i}]`));
    return;
  }
  if ((m = type.match(/^\{\s*\[key: string\]: ([\s\S]+?);?\s*\}$/))) {
    if (typeof value === "object")
      for (const [k, v] of Object.entries(value)) walk(v, m[1], decl, `${where}.${k}`);
    return;
  }
  if (typeof value !== "object" || Array.isArray(value)) return;
  if (type.startsWith("{") && type.endsWith("}")) {
    // An inline object type (CRD models declare nested types so).
    checkObject(value, { props: parseBody(braceBody(type, 0)), imports: decl.imports }, where);
    return;
  }
  if (/^I[A-Za-z0-9]+$/.test(type) && decl.imports[type]) {
    const inner = declaration(decl.imports[type] + ".d.ts");
    if (inner) checkObject(value, inner, where);
  }
  // Scalars and unions of literals: the schema checks them.
}

function checkObject(obj, decl, where) {
  for (const [key, value] of Object.entries(obj)) {
    if (!(key in decl.props)) {
      problem(`${context}${where || "(top)"}`, `unknown key '${key}'`);
      continue;
    }
    walk(value, decl.props[key], decl, where ? `${where}.${key}` : key);
  }
}

// ---------------------------------------------------------------------------
// kgym's own rules (deploy/OPERATIONS.md and the issue).

function get(obj, dotted) {
  return dotted.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function kgymRules(obj, where) {
  const name = obj.metadata && obj.metadata.name;
  if (obj.kind === "Deployment" && name === "kgym-broker") {
    if (obj.spec.replicas !== 1) problem(where, "the broker must run as exactly one replica");
    if (get(obj, "spec.strategy.type") !== "Recreate") problem(where, "the broker's strategy must be Recreate");
    const c = obj.spec.template.spec.containers[0];
    for (const probe of ["readinessProbe", "livenessProbe"])
      if (!get(c, `${probe}.httpGet.path`)) problem(where, `broker: no ${probe}`);
    if (!(c.args || []).some((a) => a.startsWith("--db="))) problem(where, "broker: no --db (jobs must survive a restart)");
  }
  if (obj.kind === "Deployment" && name === "kgym-worker") {
    const spec = obj.spec.template.spec;
    const c = spec.containers[0];
    if (get(c, "resources.limits")["nvidia.com/gpu"] !== 1) problem(where, "worker: one nvidia.com/gpu per pod");
    if (!(spec.tolerations || []).some((t) => t.key === "nvidia.com/gpu")) problem(where, "worker: GPU taint not tolerated");
    if (get(c, "startupProbe.httpGet.path") !== "/healthz") problem(where, "worker: startupProbe on /healthz");
    if (get(c, "livenessProbe.httpGet.path") !== "/healthz") problem(where, "worker: livenessProbe on /healthz");
    if (get(c, "readinessProbe.httpGet.path") !== "/readyz") problem(where, "worker: readinessProbe on /readyz");
    const grace = spec.terminationGracePeriodSeconds || 30;
    if (grace < 900) problem(where, `worker: terminationGracePeriodSeconds ${grace} < 900 (longer than the longest job)`);
    if (!(c.args || []).some((a) => a.startsWith("--metrics="))) problem(where, "worker: no --metrics");
  }
  if (obj.kind === "PodMonitor") {
    const app = get(obj, "spec.selector.matchLabels")["app.kubernetes.io/name"];
    if (app !== name) problem(where, `PodMonitor ${name} selects ${app}`);
    if (get(obj, "spec.jobLabel") !== "app.kubernetes.io/name") problem(where, "PodMonitor: jobLabel must give job=kgym-broker/kgym-worker (the alert rules use it)");
  }
  if (obj.kind === "Service" && name === "kgym-broker") {
    if ((obj.spec.type || "ClusterIP") !== "ClusterIP") problem(where, "broker Service must be ClusterIP");
    const ports = (obj.spec.ports || []).map((p) => p.port).sort();
    if (ports.join(",") !== "5555,5556,9555") problem(where, `broker Service ports ${ports} (want 5555,5556,9555)`);
  }
}

// ---------------------------------------------------------------------------

function validate(docs, label) {
  const seen = new Set();
  const counts = {};
  for (const { obj, source } of docs) {
    const where = `${label}: ${obj.kind}/${obj.metadata && obj.metadata.name} (${source})`;
    const key = `${obj.apiVersion}/${obj.kind}`;
    const module = KINDS[key];
    if (!module) {
      problem(where, `apiVersion/kind ${key} not expected here`);
      continue;
    }
    const id = `${obj.kind}/${obj.metadata.namespace || ""}/${obj.metadata.name}`;
    if (seen.has(id)) problem(where, "defined twice");
    seen.add(id);
    const Model = require(path.join(MODULES, module))[module.split("/").pop()];
    try {
      new Model(obj).validate();
    } catch (e) {
      problem(where, `schema: ${e.message}`);
    }
    const decl = declaration(path.join(MODULES, module + ".d.ts"));
    context = `${where}: `;
    checkObject(obj, decl, "");
    context = "";
    if (obj.kind !== "Namespace" && obj.metadata.namespace !== "kgym") problem(where, "not in namespace kgym");
    kgymRules(obj, where);
    counts[obj.kind] = (counts[obj.kind] || 0) + 1;
  }
  console.log(`${label}: ${docs.length} objects (${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")})`);
}

function selfTest() {
  // The unknown-key walk must catch a misspelt field deep in a pod template,
  // or a clean run proves nothing.
  const bad = {
    apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "x" },
    spec: { selector: { matchLabels: { a: "b" } }, template: { metadata: { labels: { a: "b" } },
      spec: { terminationGracePeriodSecond: 5, containers: [{ name: "c", image: "i",
        resources: { limits: { cpu: "1" } }, readinessProbe: { httpGet: { path: "/", port: 1, hots: "x" } } }] } } },
  };
  const before = problems.length;
  checkObject(bad, declaration(path.join(MODELS, "apps/v1/Deployment.d.ts")), "");
  const found = problems.splice(before);
  const want = ["spec.template.spec: unknown key 'terminationGracePeriodSecond'",
                "spec.template.spec.containers[0].readinessProbe.httpGet: unknown key 'hots'"];
  for (const w of want)
    if (!found.includes(w)) problem("self-test", `the unknown-key check missed: ${w} (found: ${found.join("; ")})`);
  if (found.length !== want.length) problem("self-test", `unexpected findings: ${found.join("; ")}`);
}

function main() {
  const args = process.argv.slice(2);
  selfTest();
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === "--kustomize") validate(render(value), `render ${value}`);
    else if (flag === "--rendered") {
      const docs = YAML.parseAllDocuments(fs.readFileSync(value, "utf8")).map((d) => d.toJS())
        .filter(Boolean).map((obj) => ({ obj, source: path.basename(value) }));
      validate(docs, `kubectl ${path.basename(value)}`);
    } else {
      console.error(`usage: validate_k8s.cjs --kustomize DIR | --rendered FILE ...`);
      process.exit(2);
    }
  }
  for (const p of problems) console.log(`PROBLEM ${p}`);
  console.log(problems.length ? `${problems.length} problems` : "k8s manifests valid");
  process.exit(problems.length ? 1 : 0);
}

main();
