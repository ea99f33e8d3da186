// Keeps deploy/kubernetes/monitoring/ in step with its sources: the PrometheusRule wraps the
// groups of deploy/prometheus/chgate-alerts.yml, and chgate-dashboard.json is a byte copy of
// deploy/grafana/dashboards/chgate.json (kustomize cannot read files outside its folder).
//
//   node tests/ops/sync_monitoring.mjs --write   regenerate both
//   node tests/ops/sync_monitoring.mjs --check   fail if either differs (CI)
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
const dashSrc = repoPath("deploy/grafana/dashboards/chgate.json");
const rulesDst = repoPath("deploy/kubernetes/monitoring/chgate-alerts.yaml");
const dashDst = repoPath("deploy/kubernetes/monitoring/chgate-dashboard.json");

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
  "# patch the label (README, Alerts).\n";
const ruleText = header + YAML.stringify(rule, { lineWidth: 100, indentSeq: true });
const dashText = readFileSync(dashSrc, "utf8");

const r = new Reporter("sync-monitoring");
if (mode === "--write") {
  writeFileSync(rulesDst, ruleText);
  writeFileSync(dashDst, dashText);
  r.pass("wrote deploy/kubernetes/monitoring/chgate-alerts.yaml and chgate-dashboard.json");
} else {
  const have = existsSync(rulesDst) ? YAML.parse(readFileSync(rulesDst, "utf8")) : null;
  r.check(isDeepStrictEqual(have, rule),
    "deploy/kubernetes/monitoring/chgate-alerts.yaml matches deploy/prometheus/chgate-alerts.yml",
    "run `node tests/ops/sync_monitoring.mjs --write`");
  const dash = existsSync(dashDst) ? readFileSync(dashDst, "utf8") : null;
  r.check(dash === dashText,
    "deploy/kubernetes/monitoring/chgate-dashboard.json is a copy of deploy/grafana/dashboards/chgate.json",
    "run `node tests/ops/sync_monitoring.mjs --write`");
}
r.finish();
