#!/usr/bin/env bash
# Every offline check of the deployment files, in one run (`make validate-deploy` installs what
# they need, builds chgate and starts the local ClickHouse first):
#
#   yamllint           every YAML file of the repository (.yamllint)
#   alert rules        promtool check rules + test rules (deploy/prometheus/), and every alert's
#                      runbook_url names its section of runbook.md
#   alertmanager       amtool check-config and routes of deploy/alertmanager/, and every alert it
#                      names exists in the rules
#   monitoring copies  deploy/kubernetes/monitoring/chgate-alerts.yaml matches deploy/prometheus
#   kubernetes         check_k8s.mjs: render, schemas, unknown fields, the sidecar contract, the
#                      spool's volume
#   containers         check_containers.mjs: Dockerfile lint, compose config + schema, Prometheus
#                      config, Grafana provisioning
#   dashboard          check_dashboard.mjs: schema, ids, datasource, PromQL, metric names
#   negative controls  the checks above fail on copies with known mistakes
#   live               live_check.py: exposure, live scrape, a real Prometheus scraping chgate
#   runtime rootfs     runtime_rootfs.sh: the runtime image's packages run chgate as 10001 (root only)
#
#   tests/ops/validate.sh [--chgate build/server/chgate] [--skip-rootfs]
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OPS=tests/ops
CHGATE=$ROOT/build/server/chgate
SKIP_ROOTFS=false
while (($# > 0)); do
  case $1 in
    --chgate) CHGATE=$(realpath "$2"); shift ;;
    --skip-rootfs) SKIP_ROOTFS=true ;;
    *) echo "usage: $0 [--chgate PATH] [--skip-rootfs]" >&2; exit 2 ;;
  esac
  shift
done

passed=0
failed=0
skipped=0
report=()
step() {
  local name=$1
  shift
  local t0=$SECONDS
  printf '\n--- %s\n' "$name"
  if "$@"; then
    passed=$((passed + 1))
    report+=("$(printf '%4ds  ok    %s' $((SECONDS - t0)) "$name")")
  else
    failed=$((failed + 1))
    report+=("$(printf '%4ds  FAIL  %s' $((SECONDS - t0)) "$name")")
  fi
}
skip() {
  skipped=$((skipped + 1))
  report+=("$(printf '%4ds  skip  %s (%s)' 0 "$1" "$2")")
  printf '\n--- %s: skipped (%s)\n' "$1" "$2"
}

yaml_files() {
  git ls-files -co --exclude-standard -- '*.yml' '*.yaml'
}
run_yamllint() {
  local files
  mapfile -t files < <(yaml_files)
  echo "yamllint: ${#files[@]} files"
  yamllint -s "${files[@]}"
}
run_rules() {
  promtool check rules deploy/prometheus/chgate-alerts.yml &&
    (cd deploy/prometheus && promtool test rules chgate-alerts.test.yml) &&
    run_runbook
}
# Every alert links its own section of the runbook: runbook_url ends in the alert's name in lower
# case (the anchor of its `## Name` heading), and the heading exists.
run_runbook() {
  local rules=deploy/prometheus/chgate-alerts.yml runbook=deploy/prometheus/runbook.md rc=0 name n=0
  for name in $(sed -n 's/^ *- alert: //p' "$rules"); do
    n=$((n + 1))
    grep -q "runbook_url: $runbook#${name,,}\$" "$rules" || { echo "$name: no runbook_url $runbook#${name,,}"; rc=1; }
    grep -qx "## $name" "$runbook" || { echo "$name: no section \"## $name\" in $runbook"; rc=1; }
  done
  ((rc == 0)) && echo "runbook: all $n alerts link their own section"
  return $rc
}

# The Alertmanager example: a valid configuration, chgate's critical alerts reach the on-call and
# warnings the ticket queue, and every alert name its inhibition rules use is one of the rules'
# (a renamed alert would otherwise silently stop being inhibited).
run_alertmanager() {
  local config=deploy/alertmanager/chgate-alertmanager.yml got rc=0 name
  amtool check-config "$config" || return 1
  got=$(amtool config routes test --config.file="$config" alertname=ChgateRowsDropped severity=critical 2>/dev/null)
  [[ $got == chgate-oncall ]] || { echo "critical chgate alert routed to '$got'"; rc=1; }
  got=$(amtool config routes test --config.file="$config" alertname=ChgateBatchesFailing severity=warning 2>/dev/null)
  [[ $got == chgate-tickets ]] || { echo "warning chgate alert routed to '$got'"; rc=1; }
  for name in $(grep -o 'Chgate[A-Z][A-Za-z]*' "$config" | sort -u); do
    if ! grep -q "alert: $name\$" deploy/prometheus/chgate-alerts.yml; then
      echo "$config names $name, which deploy/prometheus/chgate-alerts.yml does not define"
      rc=1
    fi
  done
  ((rc == 0)) && echo "alertmanager: config valid, routes as intended, every inhibited alert exists"
  return $rc
}

# The checks must fail on copies with known mistakes; otherwise a check that silently passes
# everything would go unnoticed.
expect_fail() {
  local what=$1 pattern=$2
  shift 2
  local out
  if out=$("$@" 2>&1); then
    echo "negative control: $what: the check passed a broken copy"
    return 1
  fi
  if ! grep -q -- "$pattern" <<<"$out"; then
    echo "negative control: $what: failed, but without naming \"$pattern\":"
    echo "$out" | grep -E 'FAIL|error' | head -n 10
    return 1
  fi
  echo "negative control: $what: caught"
}
run_negative_controls() {
  local tmp rc=0
  mkdir -p "$ROOT/.local"
  tmp=$(mktemp -d "$ROOT/.local/ops-neg.XXXXXX")
  # Kubernetes: a misspelled field, a probe on an unregistered health name, an unknown variable.
  cp -r deploy/kubernetes "$tmp/k8s"
  sed -i 's/restartPolicy: Always/restartPolcy: Always/' "$tmp/k8s/base/deployment.yaml"
  expect_fail "kubernetes unknown field" "restartPolcy" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/base/deployment.yaml "$tmp/k8s/base/deployment.yaml"
  sed -i 's/service: readiness/service: ready/' "$tmp/k8s/base/deployment.yaml"
  expect_fail "kubernetes probe service name" 'readinessProbe is gRPC' \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/base/deployment.yaml "$tmp/k8s/base/deployment.yaml"
  echo "CHGATE_BATCH_DELAY=1s" >>"$tmp/k8s/base/chgate.env"
  expect_fail "kubernetes unknown setting" "CHGATE_BATCH_DELAY" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/base/chgate.env "$tmp/k8s/base/chgate.env"
  # Gateway: a misspelled Certificate field, and an API exposed without its TLS certificate.
  sed -i 's/renewBefore:/renewBefor:/' "$tmp/k8s/gateway/certificate.yaml"
  expect_fail "cert-manager Certificate unknown field" "spec.renewBefor" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/gateway/certificate.yaml "$tmp/k8s/gateway/certificate.yaml"
  sed -i '/^CHGATE_API_TLS_CERT_FILE=/d' "$tmp/k8s/gateway/gateway.env"
  expect_fail "gateway API without TLS" "CHGATE_API_TLS_CERT_FILE" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/gateway/gateway.env "$tmp/k8s/gateway/gateway.env"
  # Spool: a bound its emptyDir cannot hold, and a gateway StatefulSet whose pod drifted from the
  # gateway Deployment's.
  sed -i 's/^CHGATE_SPOOL_MAX_BYTES=.*/CHGATE_SPOOL_MAX_BYTES=2GiB/' "$tmp/k8s/base/chgate.env"
  expect_fail "spool bound too large for its volume" "CHGATE_SPOOL_MAX_BYTES (2GiB)" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/base/chgate.env "$tmp/k8s/base/chgate.env"
  sed -i 's/memory: 1344Mi/memory: 1400Mi/' "$tmp/k8s/gateway/deployment.yaml"
  expect_fail "gateway StatefulSet pod drifted" "but for the spool's storage" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/gateway/deployment.yaml "$tmp/k8s/gateway/deployment.yaml"
  # Sidecar socket: the application no longer mounts chgate's socket volume.
  python3 - "$tmp/k8s/base/deployment.yaml" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
marker = "          volumeMounts:\n            - name: chgate-socket\n              mountPath: /run/chgate\n      volumes:"
assert marker in text, "the app's socket mount is not where the negative control expects it"
open(path, "w").write(text.replace(marker, "      volumes:"))
PY
  expect_fail "application without chgate's socket volume" "mounts chgate's socket volume" \
    env CHGATE_OPS_K8S_DIR="$tmp/k8s" node $OPS/check_k8s.mjs --chgate "$CHGATE" || rc=1
  cp deploy/kubernetes/base/deployment.yaml "$tmp/k8s/base/deployment.yaml"
  # Dashboard: a misspelled gridPos key, a metric chgate does not export, a hard-coded datasource.
  jq '.panels[1].gridPos.width = 3' deploy/kubernetes/monitoring/chgate-dashboard.json >"$tmp/d1.json"
  expect_fail "dashboard unknown field" '"width"' env CHGATE_OPS_DASHBOARD="$tmp/d1.json" node $OPS/check_dashboard.mjs || rc=1
  jq '.panels[2].targets[0].expr = "sum(rate(chgate_ingest_rowz_total[5m]))"' deploy/kubernetes/monitoring/chgate-dashboard.json >"$tmp/d2.json"
  expect_fail "dashboard unknown metric" "chgate_ingest_rowz_total" env CHGATE_OPS_DASHBOARD="$tmp/d2.json" node $OPS/check_dashboard.mjs || rc=1
  jq '.panels[2].targets[0].expr = "sum(rate(chgate_ingest_rows_total[5m])"' deploy/kubernetes/monitoring/chgate-dashboard.json >"$tmp/d3.json"
  expect_fail "dashboard PromQL syntax" "parse error" env CHGATE_OPS_DASHBOARD="$tmp/d3.json" node $OPS/check_dashboard.mjs || rc=1
  jq '.panels[4].datasource = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}' deploy/kubernetes/monitoring/chgate-dashboard.json >"$tmp/d4.json"
  expect_fail "dashboard hard-coded datasource" "P1809F7CD0C75ACF3" env CHGATE_OPS_DASHBOARD="$tmp/d4.json" node $OPS/check_dashboard.mjs || rc=1
  # Compose: an unknown key. Dockerfile: an unpinned base image.
  sed 's/    read_only: true/    read_onlly: true/' docker-compose.yml >"$ROOT/.neg-compose.yml"
  expect_fail "compose unknown key" "read_onlly" \
    env CHGATE_OPS_COMPOSE="$ROOT/.neg-compose.yml" node $OPS/check_containers.mjs --chgate "$CHGATE" || rc=1
  rm -f "$ROOT/.neg-compose.yml"
  sed 's/^FROM debian:12.11-slim AS runtime/FROM debian:latest AS runtime/' Dockerfile >"$ROOT/.neg-Dockerfile"
  expect_fail "Dockerfile latest tag" "latest" \
    env CHGATE_OPS_DOCKERFILE="$ROOT/.neg-Dockerfile" node $OPS/check_containers.mjs --chgate "$CHGATE" || rc=1
  rm -f "$ROOT/.neg-Dockerfile"
  # Alert rules: the unit tests notice a changed threshold.
  mkdir -p "$tmp/rules"
  sed 's/> 0.8$/> 0.9/' deploy/prometheus/chgate-alerts.yml >"$tmp/rules/chgate-alerts.yml"
  cp deploy/prometheus/chgate-alerts.test.yml "$tmp/rules/"
  expect_fail "alert threshold changed" "ChgateBufferNearBudget" \
    bash -c "cd '$tmp/rules' && promtool test rules chgate-alerts.test.yml" || rc=1
  rm -rf "$tmp"
  return $rc
}

live() {
  /usr/bin/python3 $OPS/live_check.py --chgate "$CHGATE"
}
rootfs() {
  $OPS/runtime_rootfs.sh --chgate "$CHGATE"
}

t_all=$SECONDS
step "yamllint (every YAML file)" run_yamllint
step "alert rules (promtool check rules, test rules)" run_rules
step "alertmanager example (amtool check-config, routes, alert names)" run_alertmanager
step "monitoring copies in sync (sync_monitoring.mjs --check)" node $OPS/sync_monitoring.mjs --check
step "kubernetes manifests (check_k8s.mjs)" node $OPS/check_k8s.mjs --chgate "$CHGATE"
step "Dockerfile, compose, Prometheus config, Grafana provisioning (check_containers.mjs)" \
  node $OPS/check_containers.mjs --chgate "$CHGATE"
step "Grafana dashboard (check_dashboard.mjs)" node $OPS/check_dashboard.mjs
step "negative controls (the checks catch known mistakes)" run_negative_controls
step "live: exposure, /metrics, Prometheus scraping chgate (live_check.py)" live
if $SKIP_ROOTFS; then
  skip "runtime rootfs (runtime_rootfs.sh)" "--skip-rootfs"
elif ((EUID != 0)); then
  skip "runtime rootfs (runtime_rootfs.sh)" "needs root"
else
  step "runtime rootfs: the image's packages run chgate as 10001 (runtime_rootfs.sh)" rootfs
fi

printf '\n===== validate-deploy: %ds =====\n' $((SECONDS - t_all))
printf '%s\n' "${report[@]}"
echo "validate-deploy: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
