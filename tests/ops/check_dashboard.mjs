// Offline checks of the Grafana dashboard (deploy/kubernetes/monitoring/chgate-dashboard.json) and of the metric
// names the dashboard and the alert rules use:
//
//   1. the JSON type-checks against @grafana/schema (dashboard, panels, and the options of
//      timeseries and stat panels), so misspelled or mistyped keys fail;
//   2. a stable uid, a `datasource` variable of type datasource, every datasource reference going
//      through it (no hard-coded uid, no __inputs), unique panel ids, panels inside the 24-column
//      grid without overlaps, unique refIds;
//   3. every PromQL expression (panel targets and variable queries, with Grafana's variables
//      substituted) parses (promtool check rules on a generated rule file);
//   4. every chgate_* metric they name is declared in server/metrics/families.h. (The live check,
//      tests/ops/live_check.py, checks the same names against a running chgate's /metrics.)
//   5. the alert table of docs/operations.md lists exactly the rules' alerts, with their severities.
//
//   node tests/ops/check_dashboard.mjs              run the checks
//   node tests/ops/check_dashboard.mjs --metrics    print the metric families used, one a line
import { readFileSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import { Reporter, repoPath, run, have, typeCheck, declaredMetricNames, OPS_DIR } from "./lib/common.mjs";

const DASH = process.env.CHGATE_OPS_DASHBOARD || repoPath("deploy/kubernetes/monitoring/chgate-dashboard.json");
const RULES = repoPath("deploy/prometheus/chgate-alerts.yml");
const UID = "chgate-sidecar";

const text = readFileSync(DASH, "utf8");
const dash = JSON.parse(text);
const rules = YAML.parse(readFileSync(RULES, "utf8"));

const allPanels = (dash.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
const exprs = []; // {where, expr}
for (const p of allPanels) {
  for (const t of p.targets ?? []) exprs.push({ where: `panel ${p.id} "${p.title}" ${t.refId}`, expr: t.expr });
}
const variableExprs = [];
for (const v of dash.templating?.list ?? []) {
  if (v.type !== "query") continue;
  const q = typeof v.query === "string" ? v.query : v.query?.query;
  const m = /^label_values\((.*),\s*\w+\)$/.exec(q ?? "");
  variableExprs.push({ where: `variable ${v.name}`, expr: m ? m[1] : q });
}
const ruleExprs = rules.groups.flatMap((g) => g.rules.map((rr) => ({ where: `rule ${rr.alert ?? rr.record}`, expr: rr.expr })));

// Metric families named by an expression: histogram series map to their family.
function families(expr) {
  const names = new Set();
  for (const m of expr.matchAll(/\b(chgate_[a-z0-9_]+)/g)) {
    names.add(m[1].replace(/_(bucket|sum|count)$/, ""));
  }
  return names;
}
const used = new Set([...exprs, ...variableExprs, ...ruleExprs].flatMap((e) => [...families(e.expr)]));

if (process.argv.includes("--metrics")) {
  console.log([...used].sort().join("\n"));
  process.exit(0);
}

const r = new Reporter("check-dashboard");

// --- 1. types ----------------------------------------------------------------------------------
const LOOSE = `
// Grafana's enums are TypeScript enums; dashboard JSON holds their values.
type Loose<T> = T extends string ? \`\${T}\` : T extends number | boolean | null | undefined ? T
  : T extends Array<infer U> ? Array<Loose<U>> : T extends object ? { [K in keyof T]: Loose<T[K]> } : T;
`;
const tsLines = [
  `import type { Dashboard } from "@grafana/schema/dist/esm/raw/dashboard/x/Dashboard_types.gen";`,
  `import type * as TimeSeries from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";`,
  `import type * as Stat from "@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen";`,
  LOOSE,
  `export const dashboard: Loose<Dashboard> = ${JSON.stringify(dash, null, 2)};`,
];
const PANEL_TYPES = { timeseries: "TimeSeries", stat: "Stat" };
for (const p of allPanels) {
  const ns = PANEL_TYPES[p.type];
  if (!ns) continue;
  tsLines.push(`export const panel${p.id}Options: Loose<${ns}.Options> = ${JSON.stringify(p.options ?? {}, null, 2)};`);
  if (ns === "TimeSeries") {
    tsLines.push(`export const panel${p.id}Custom: Loose<TimeSeries.FieldConfig> = ${JSON.stringify(p.fieldConfig?.defaults?.custom ?? {}, null, 2)};`);
  }
}
const diags = typeCheck({ "dashboard.ts": tsLines.join("\n") + "\n" });
r.check(diags.length === 0, "dashboard JSON type-checks against @grafana/schema (dashboard, panels, timeseries/stat options)",
  () => diags.map((x) => `line ${x.line}: ${x.message}\n      ${(x.text ?? "").split("\n")[x.line - 1]?.trim()}`).join("\n"));
const unknownTypes = allPanels.filter((p) => p.type !== "row" && !PANEL_TYPES[p.type]);
r.check(unknownTypes.length === 0, "every panel is a row, timeseries or stat panel (their options are type-checked)",
  unknownTypes.map((p) => `${p.id}: ${p.type}`).join(", "));

// --- 2. structure ------------------------------------------------------------------------------
r.check(dash.uid === UID, `stable uid "${UID}"`, `uid is ${dash.uid}`);
r.check(!("__inputs" in dash) && !text.includes("${DS_"), "no __inputs / ${DS_...} (exported-for-sharing dashboards break under provisioning)");
const dsVar = (dash.templating?.list ?? []).find((v) => v.type === "datasource");
r.check(dsVar?.name === "datasource" && dsVar.query === "prometheus", "a `datasource` variable of type datasource (prometheus)");
const badRefs = [];
(function walk(node, path) {
  if (Array.isArray(node)) node.forEach((x, i) => walk(x, `${path}[${i}]`));
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "datasource" && v && typeof v === "object" && v.uid !== "${datasource}") badRefs.push(`${path}.${k} = ${JSON.stringify(v)}`);
      if (k === "datasource" && typeof v === "string") badRefs.push(`${path}.${k} = "${v}"`);
      walk(v, `${path}.${k}`);
    }
  }
})(dash, "$");
r.check(badRefs.length === 0, "every datasource reference is ${datasource} (no hard-coded uid)", badRefs.join("\n"));
const ids = allPanels.map((p) => p.id);
r.check(ids.every((id) => Number.isInteger(id)) && new Set(ids).size === ids.length, `unique panel ids (${ids.length} panels)`,
  `ids: ${ids.join(",")}`);
const cells = new Map();
const overlaps = [];
for (const p of allPanels) {
  const g = p.gridPos ?? {};
  if (!(g.w > 0 && g.h > 0 && g.x >= 0 && g.y >= 0 && g.x + g.w <= 24)) overlaps.push(`panel ${p.id}: gridPos ${JSON.stringify(g)} outside the grid`);
  for (let x = g.x; x < g.x + g.w; x++) {
    for (let y = g.y; y < g.y + g.h; y++) {
      const k = `${x},${y}`;
      if (cells.has(k)) overlaps.push(`panels ${cells.get(k)} and ${p.id} overlap at ${k}`);
      cells.set(k, p.id);
    }
  }
}
r.check(overlaps.length === 0, "panels fit the 24-column grid without overlapping", [...new Set(overlaps)].slice(0, 10).join("\n"));
const refIssues = allPanels.filter((p) => p.type !== "row").filter((p) => {
  const refs = (p.targets ?? []).map((t) => t.refId);
  return refs.length === 0 || new Set(refs).size !== refs.length || (p.targets ?? []).some((t) => !t.expr);
});
r.check(refIssues.length === 0, "every data panel has queries with an expression and a unique refId",
  refIssues.map((p) => p.id).join(", "));

// --- 3. PromQL syntax (promtool parses rule expressions) ----------------------------------------
function substitute(expr) {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, "5m").replace(/\$\{?(\w+)\}?/g, ".*");
}
if (!have("promtool")) {
  r.fail("promtool is needed to parse PromQL", "apt-get install prometheus (deploy/install-ops-deps.sh)");
} else {
  const dir = join(OPS_DIR, ".tmp", `promql-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const all = [...exprs, ...variableExprs];
  const file = join(dir, "dashboard-exprs.yml");
  writeFileSync(file, YAML.stringify({
    groups: [{ name: "dashboard", rules: all.map((e, i) => ({ record: `chgate_dashboard:expr${i}`, expr: substitute(e.expr) })) }],
  }));
  const out = run("promtool", ["check", "rules", file]);
  let detail = out.stdout + out.stderr;
  for (const [i, e] of all.entries()) detail = detail.replaceAll(`expr${i}`, `expr${i} (${e.where})`);
  r.check(out.status === 0, `${all.length} PromQL expressions of the dashboard parse (promtool)`, detail.trim());
  rmSync(dir, { recursive: true, force: true });
}

// --- 4. metric names ---------------------------------------------------------------------------
const declared = declaredMetricNames(readFileSync(repoPath("server/metrics/families.h"), "utf8"));
r.check(declared.size > 20, `server/metrics/families.h declares ${declared.size} chgate metrics`);
for (const [what, list] of [["dashboard", [...exprs, ...variableExprs]], ["alert rules", ruleExprs]]) {
  const names = new Set(list.flatMap((e) => [...families(e.expr)]));
  const missing = [...names].filter((n) => !declared.has(n));
  r.check(missing.length === 0, `the ${what} use ${names.size} metric families, all declared by chgate`,
    `not declared: ${missing.join(", ")}`);
}
const unused = [...declared].filter((n) => !used.has(n));
r.check(unused.length === 0, "every metric chgate declares appears on the dashboard or in an alert",
  `unused: ${unused.join(", ")}`);

// --- 5. the alert table of docs/operations.md -------------------------------------------------
// Every alert of the rules is a row of the table (`| \`Name\` | severity | fires when |`) with the
// rule's severity, and every row an alert of the rules.
const opsDoc = readFileSync(repoPath("docs/operations.md"), "utf8");
const documented = new Map();
for (const m of opsDoc.matchAll(/^\| `(Chgate\w+)` \| (\w+) \|/gm)) documented.set(m[1], m[2]);
const ruled = new Map(rules.groups.flatMap((g) => g.rules.filter((rr) => rr.alert)
  .map((rr) => [rr.alert, rr.labels?.severity])));
const undocumented = [...ruled.keys()].filter((a) => !documented.has(a));
const unruled = [...documented.keys()].filter((a) => !ruled.has(a));
const wrongSeverity = [...ruled].filter(([a, sev]) => documented.has(a) && documented.get(a) !== sev)
  .map(([a, sev]) => `${a}: rule ${sev}, docs ${documented.get(a)}`);
r.check(undocumented.length === 0 && unruled.length === 0 && wrongSeverity.length === 0,
  `docs/operations.md's alert table names the ${ruled.size} alerts of the rules with their severities`,
  [undocumented.length ? `not in the table: ${undocumented.join(", ")}` : "",
   unruled.length ? `no such rule: ${unruled.join(", ")}` : "",
   wrongSeverity.join("; ")].filter(Boolean).join(" / "));

r.finish();
