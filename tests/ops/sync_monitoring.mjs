// Keeps deploy/kubernetes/monitoring/chgate-alerts.yaml in step with its source: the
// PrometheusRule wraps the groups of deploy/prometheus/chgate-alerts.yml. (The dashboard has one
// copy, deploy/kubernetes/monitoring/chgate-dashboard.json, which compose mounts too.)
//
//   node tests/ops/sync_monitoring.mjs --write   regenerate it
//   node tests/ops/sync_monitoring.mjs --check   fail if it differs (CI)
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import YAML from "yaml";
import { repoPath, Reporter } from "./lib/common.mjs";

const mode = process.argv[2];
if (mode !== "--write" && mode !== "--check") {
  console.error("usage: sync_monitoring.mjs --write|--check");
  process.exit(2);
}

const rulesSrc = repoPath("deploy/prometheus/chgate-alerts.yml");
const rulesDst = repoPath("deploy/kubernetes/monitoring/chgate-alerts.yaml");

const groups = YAML.parse(readFileSync(rulesSrc, "utf8")).groups;
const rule = {
  apiVersion: "monitoring.coreos.com/v1",
  kind: "PrometheusRule",
  // release: kube-prometheus-stack is what that chart's Prometheus selects rules by when it is
  // installed under that release name (ruleSelector release: <release name>).
  metadata: { name: "chgate", labels: { "app.kubernetes.io/name": "chgate", release: "kube-prometheus-stack" } },
  spec: { groups },
};
const header =
  "# Generated from deploy/prometheus/chgate-alerts.yml by\n" +
  "# `node tests/ops/sync_monitoring.mjs --write`: edit that file, not this one.\n" +
  "# Apply once per cluster. release: kube-prometheus-stack is the label kube-prometheus-stack's\n" +
  "# Prometheus selects rules by when the chart's release has that name; for another release name\n" +
  "# patch the label (docs/operations.md, Alerts).\n";
const ruleText = header + YAML.stringify(rule, { lineWidth: 100, indentSeq: true });

const r = new Reporter("sync-monitoring");
if (mode === "--write") {
  writeFileSync(rulesDst, ruleText);
  r.pass("wrote deploy/kubernetes/monitoring/chgate-alerts.yaml");
} else {
  const have = existsSync(rulesDst) ? YAML.parse(readFileSync(rulesDst, "utf8")) : null;
  r.check(isDeepStrictEqual(have, rule),
    "deploy/kubernetes/monitoring/chgate-alerts.yaml matches deploy/prometheus/chgate-alerts.yml",
    "run `node tests/ops/sync_monitoring.mjs --write`");
}
r.finish();
