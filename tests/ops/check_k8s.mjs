// Offline checks of the Kubernetes manifests in deploy/kubernetes/:
//
//   1. every kustomization (base, overlays/*, monitoring) renders (`kubectl kustomize`);
//   2. every rendered object validates against the Kubernetes (and prometheus-operator) JSON
//      schemas of kubernetes-models (types, enums, required fields);
//   3. every object type-checks as its TypeScript interface, so unknown or misspelled fields fail
//      (the schemas alone accept them);
//   4. the sidecar contract: native sidecar (or the legacy variant's ordinary container), gRPC
//      probes on the health port and the service names chgate registers, restricted security
//      context, settings only from real CHGATE_* variables, API on loopback, the password from a
//      Secret file, a grace period covering preStop + drain, a memory limit above the budget, and a
//      PodMonitor that selects the pod's metrics port;
//   5. the gateway (deploy/kubernetes/gateway, and gateway-statefulset): cert-manager
//      Certificates against a small schema of their own (kubernetes-models has none), the API over
//      TLS with its certificate, client CA, tokens and policy as files of Secrets, a Service for
//      it, a NetworkPolicy that limits who reaches it, and the Certificate naming the Service;
//   6. the spool of persisted acks (CHGATE_SPOOL_DIR): a writable mount of its own, on an
//      emptyDir on disk with a sizeLimit (and as much ephemeral-storage requested) or on a
//      StatefulSet's volume claim writable through fsGroup, sized for the spool's bound plus one
//      segment with a quarter to spare; a StatefulSet names a headless Service, and the
//      gateway-statefulset pod equals the gateway Deployment's but for the spool's storage.
//
//   node tests/ops/check_k8s.mjs [--chgate build/server/chgate]
import { readdirSync, existsSync, readFileSync, statSync, mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { spawnSync } from "node:child_process";
import YAML from "yaml";
import {
  Reporter, repoPath, run, have, typeCheck, parseDuration, parseSize, parseQuantity,
  chgateEnvVars,
} from "./lib/common.mjs";

const args = process.argv.slice(2);
const chgateBin = args.includes("--chgate") ? args[args.indexOf("--chgate") + 1] : repoPath("build/server/chgate");
const r = new Reporter("check-k8s");
const K8S = process.env.CHGATE_OPS_K8S_DIR || repoPath("deploy/kubernetes");

// The health service names chgate registers (server/service/health; checked live by
// tests/ops/live_check.py and tests/e2e HealthTest).
const HEALTH_NAMES = new Set(["", "liveness", "readiness", "buffer"]);
// chgate's defaults of --spool-max-bytes and --spool-segment-bytes.
const SPOOL_MAX_DEFAULT = "1GiB";
const SPOOL_SEGMENT_DEFAULT = "64MiB";
// Volume types the restricted Pod Security Standard allows.
const RESTRICTED_VOLUMES = new Set(["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
  "persistentVolumeClaim", "projected", "secret"]);

// --- 1. render ---------------------------------------------------------------------------------
const dirs = ["base", ...readdirSync(join(K8S, "overlays")).map((d) => `overlays/${d}`), "monitoring",
  "gateway", "gateway-statefulset"]
  .filter((d) => existsSync(join(K8S, d, "kustomization.yaml")));
const rendered = {};
if (!have("kubectl")) {
  r.fail("kubectl (with its built-in kustomize) is needed to render the kustomizations",
    "it ships with the machine image; install kubectl 1.27 or newer");
  r.finish();
}
for (const d of dirs) {
  const out = run("kubectl", ["kustomize", join(K8S, d)]);
  if (!r.check(out.status === 0, `${d}: kustomize renders`, out.stderr.trim())) continue;
  rendered[d] = YAML.parseAllDocuments(out.stdout).map((doc) => doc.toJSON()).filter(Boolean);
}

// --- 2. schemas --------------------------------------------------------------------------------
function modelModule(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}
// cert-manager.io/v1 Certificate: the fields chgate's manifests use, with their types and
// enums (cert-manager's CRD), and no others.
const CERT_SPEC_FIELDS = new Set(["secretName", "issuerRef", "dnsNames", "uris", "ipAddresses",
  "commonName", "duration", "renewBefore", "privateKey", "usages", "secretTemplate",
  "subject", "isCA", "emailAddresses", "revisionHistoryLimit"]);
const CERT_USAGES = new Set(["signing", "digital signature", "content commitment",
  "key encipherment", "key agreement", "data encipherment", "cert sign", "crl sign",
  "encipher only", "decipher only", "any", "server auth", "client auth", "code signing",
  "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping",
  "ocsp signing", "microsoft sgc", "netscape sgc"]);
const goDuration = (v) => typeof v === "string" && /^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$/.test(v);
function checkCertManager(id, doc) {
  if (doc.kind !== "Certificate") {
    r.fail(`${id}: no schema for cert-manager.io/v1 ${doc.kind}`);
    return;
  }
  const spec = doc.spec ?? {};
  const problems = [];
  for (const k of Object.keys(doc)) {
    if (!["apiVersion", "kind", "metadata", "spec"].includes(k)) problems.push(`unknown field ${k}`);
  }
  for (const k of Object.keys(spec)) if (!CERT_SPEC_FIELDS.has(k)) problems.push(`unknown field spec.${k}`);
  if (typeof spec.secretName !== "string" || !spec.secretName) problems.push("spec.secretName is required");
  const ref = spec.issuerRef ?? {};
  if (typeof ref.name !== "string" || !ref.name) problems.push("spec.issuerRef.name is required");
  for (const k of Object.keys(ref)) if (!["name", "kind", "group"].includes(k)) problems.push(`unknown field spec.issuerRef.${k}`);
  if (ref.kind !== undefined && !["Issuer", "ClusterIssuer"].includes(ref.kind) && ref.group === "cert-manager.io") {
    problems.push(`spec.issuerRef.kind ${ref.kind} is not Issuer or ClusterIssuer`);
  }
  if (!(spec.dnsNames?.length || spec.uris?.length || spec.ipAddresses?.length || spec.commonName)) {
    problems.push("no name: set dnsNames, uris, ipAddresses or commonName");
  }
  for (const f of ["dnsNames", "uris", "ipAddresses", "usages"]) {
    if (spec[f] !== undefined && !(Array.isArray(spec[f]) && spec[f].every((x) => typeof x === "string"))) {
      problems.push(`spec.${f} is a list of strings`);
    }
  }
  for (const u of spec.usages ?? []) if (!CERT_USAGES.has(u)) problems.push(`unknown usage "${u}"`);
  for (const f of ["duration", "renewBefore"]) {
    if (spec[f] !== undefined && !goDuration(spec[f])) problems.push(`spec.${f} "${spec[f]}" is not a duration`);
  }
  const pk = spec.privateKey ?? {};
  for (const k of Object.keys(pk)) if (!["algorithm", "size", "rotationPolicy", "encoding"].includes(k)) problems.push(`unknown field spec.privateKey.${k}`);
  if (pk.algorithm !== undefined && !["RSA", "ECDSA", "Ed25519"].includes(pk.algorithm)) problems.push(`privateKey.algorithm ${pk.algorithm}`);
  if (pk.rotationPolicy !== undefined && !["Never", "Always"].includes(pk.rotationPolicy)) problems.push(`privateKey.rotationPolicy ${pk.rotationPolicy}`);
  if (pk.size !== undefined && !Number.isInteger(pk.size)) problems.push("privateKey.size is an integer");
  r.check(problems.length === 0, `${id}: valid against chgate's cert-manager.io/v1 Certificate schema`, problems.join("; "));
}

const tsSources = {};
for (const [d, docs] of Object.entries(rendered)) {
  const lines = [];
  for (const [i, doc] of docs.entries()) {
    const id = `${d}: ${doc.kind}/${doc.metadata?.name}`;
    if (doc.apiVersion === "cert-manager.io/v1") {
      checkCertManager(id, doc);  // no schema in kubernetes-models (a CRD)
      continue;
    }
    const mod = modelModule(doc.apiVersion, doc.kind);
    let Model;
    try {
      Model = (await import(mod))[doc.kind];
    } catch (e) {
      r.fail(`${id}: no schema for ${doc.apiVersion} ${doc.kind}`, e.message);
      continue;
    }
    try {
      new Model(doc).validate();
      r.pass(`${id}: valid against the ${doc.apiVersion} ${doc.kind} schema`);
    } catch (e) {
      r.fail(`${id}: schema validation`, e.message);
    }
    lines.push(`import type { I${doc.kind} as T${i} } from "${mod}";`);
    lines.push(`export const doc${i}: T${i} = ${JSON.stringify(doc, null, 2)};`);
  }
  tsSources[`${d.replace(/\//g, "_")}.ts`] = lines.join("\n") + "\n";
}

// --- 3. unknown fields (TypeScript excess property checks) -------------------------------------
const diags = typeCheck(tsSources);
for (const f of Object.keys(tsSources)) {
  const mine = diags.filter((x) => x.file === f);
  const d = f.replace(/\.ts$/, "").replace(/_/g, "/");
  r.check(mine.length === 0, `${d}: no unknown or mistyped fields (TypeScript types of kubernetes-models)`,
    () => mine.map((x) => `line ${x.line}: ${x.message}\n      ${(x.text ?? "").split("\n")[x.line - 1]?.trim()}`).join("\n"));
}
const stray = diags.filter((x) => !tsSources[x.file]);
r.check(stray.length === 0, "type-check setup has no errors", () => stray.map((x) => x.message).join("\n"));

// --- 4. the sidecar contract -------------------------------------------------------------------
let envVars = null;
try {
  envVars = chgateEnvVars(chgateBin);
} catch (e) {
  r.fail(`CHGATE_* variables from ${chgateBin} --help`, e.message);
}

function envOf(container, docs) {
  const env = {};
  for (const src of container.envFrom ?? []) {
    const cm = docs.find((o) => o.kind === "ConfigMap" && o.metadata.name === src.configMapRef?.name);
    if (!cm) throw new Error(`envFrom names ConfigMap ${src.configMapRef?.name}, which the render lacks`);
    Object.assign(env, cm.data);
  }
  for (const e of container.env ?? []) env[e.name] = e.value;
  return env;
}
const portOf = (addr) => Number(String(addr).split(":").pop());
const isLoopback = (addr) => /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/.test(addr);
// `chgate spool wait-drained [--at-least=D] [--timeout=D]` as a preStop exec command: null when
// the hook is something else.
const waitDrained = (hook) => {
  const cmd = hook?.exec?.command ?? [];
  if (!/(^|\/)chgate$/.test(cmd[0] ?? "") || cmd[1] !== "spool" || cmd[2] !== "wait-drained") return null;
  const opt = (name, dflt) => parseDuration(cmd.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt);
  return { atLeast: opt("at-least", "0s"), timeout: opt("timeout", "30s") };
};
// How long a preStop hook may hold the container (the most), and how long it surely holds it.
const sleepSeconds = (hook) => hook?.sleep ? hook.sleep.seconds
  : hook?.exec?.command?.[0] === "sleep" ? Number(hook.exec.command[1])
  : waitDrained(hook)?.timeout ?? 0;
const minHoldSeconds = (hook) => waitDrained(hook) ? waitDrained(hook).atLeast : sleepSeconds(hook);

for (const [d, docs] of Object.entries(rendered)) {
  for (const dep of docs.filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet")) {
    const id = `${d}: ${dep.kind}/${dep.metadata.name}`;
    const pod = dep.spec.template.spec;
    const legacy = d.includes("legacy");
    const gateway = d.startsWith("gateway");
    const init = pod.initContainers ?? [];
    let chgate = init.find((c) => c.name === "chgate");
    if (gateway) {
      chgate = pod.containers.find((c) => c.name === "chgate");
      r.check(chgate && pod.containers.length === 1 && init.length === 0,
        `${id}: chgate is the pod's only container (gateway)`);
    } else if (legacy) {
      r.check(!chgate, `${id}: chgate is not an init container (legacy variant)`);
      chgate = pod.containers.find((c) => c.name === "chgate");
      r.check(chgate && chgate.restartPolicy === undefined, `${id}: chgate is an ordinary container`);
      const json = JSON.stringify(dep);
      r.check(!/"sleep":\{/.test(json), `${id}: no lifecycle sleep action (needs 1.30)`);
      r.check(!init.some((c) => c.restartPolicy), `${id}: no native sidecar left`);
      // The kubelet starts containers in order and waits for each one's postStart hook: chgate
      // first, with a hook that returns once chgate answers, holds the application back.
      r.check(pod.containers[0]?.name === "chgate", `${id}: chgate is the first container (started before the application)`);
      if (chgate) checkPostStartWait(id, chgate);
    } else {
      r.check(chgate?.restartPolicy === "Always", `${id}: chgate is a native sidecar (init container, restartPolicy Always)`);
    }
    if (!chgate) continue;
    const apps = pod.containers.filter((c) => c !== chgate);

    let env = {};
    try {
      env = envOf(chgate, docs);
      r.pass(`${id}: chgate's settings resolve (${Object.keys(env).length} variables)`);
    } catch (e) {
      r.fail(`${id}: chgate's settings resolve`, e.message);
    }
    if (envVars) {
      const unknown = Object.keys(env).filter((k) => !envVars.has(k));
      r.check(unknown.length === 0, `${id}: every setting is a CHGATE_* variable chgate reads`, `unknown: ${unknown.join(", ")}`);
    }
    const listen = env.CHGATE_LISTEN ?? "127.0.0.1:50051";
    if (gateway) {
      checkGateway(id, dep, chgate, env, docs);
    } else if (listen.startsWith("unix:")) {
      checkSharedSocket(id, pod, chgate, apps, listen, env);
    } else {
      r.check(isLoopback(listen) && env.CHGATE_ALLOW_REMOTE_API === undefined,
        `${id}: the API listens on loopback only (${listen})`);
    }
    const healthPort = portOf(env.CHGATE_HEALTH_LISTEN ?? "[::]:50052");
    const metricsPort = portOf(env.CHGATE_METRICS_LISTEN ?? "[::]:9464");
    r.check(!isLoopback(env.CHGATE_HEALTH_LISTEN ?? "[::]:50052") && !isLoopback(env.CHGATE_METRICS_LISTEN ?? "[::]:9464"),
      `${id}: health and metrics listen on the pod address`);
    const ports = Object.fromEntries((chgate.ports ?? []).map((p) => [p.name, p.containerPort]));
    r.check(ports["grpc-health"] === healthPort, `${id}: port grpc-health = CHGATE_HEALTH_LISTEN's port (${healthPort})`);
    r.check(ports["chgate-metrics"] === metricsPort, `${id}: port chgate-metrics = CHGATE_METRICS_LISTEN's port (${metricsPort})`);
    // A port named plain "metrics" would be the application's to use; chgate's has its own name.
    r.check(!ports.metrics, `${id}: chgate declares no port named "metrics" (it would clash with the application's)`);

    // Buffer-based readiness is opt-in (overlays/buffer-readiness); everywhere else the pod's
    // readiness must not follow the buffer.
    const bufferReadiness = d.includes("buffer-readiness");
    // A sidecar's startupProbe gates the application's start, so it waits for "readiness" (the
    // API served; chgate answers it from before its spool's recovery). A gateway's waits for
    // "liveness" only: its Service routes by the readinessProbe.
    const probes = { startupProbe: gateway ? "liveness" : "readiness", livenessProbe: "liveness",
      readinessProbe: bufferReadiness ? "buffer" : "readiness" };
    for (const [p, want] of Object.entries(probes)) {
      const g = chgate[p]?.grpc;
      r.check(g && g.port === healthPort && g.service === want && HEALTH_NAMES.has(g.service),
        `${id}: ${p} is gRPC on port ${healthPort}, service "${want}"`, JSON.stringify(chgate[p]));
    }
    if (chgate.readinessProbe?.grpc?.service === "buffer") {
      const rp = chgate.readinessProbe;
      r.check((rp.successThreshold ?? 1) >= 2 && (rp.failureThreshold ?? 3) * (rp.periodSeconds ?? 10) >= 10,
        `${id}: the buffer readiness probe needs 2 successes to return and 10 s of failures to leave`,
        JSON.stringify(rp));
    }
    const sp = chgate.startupProbe ?? {};
    r.check((sp.periodSeconds ?? 10) * (sp.failureThreshold ?? 3) >= (gateway ? 20 : 120),
      `${id}: the startupProbe allows at least ${gateway ? 20 : 120} s to start` +
      (gateway ? "" : " (the spool's recovery from a cold disk)"));

    // Restricted Pod Security Standard.
    const psc = pod.securityContext ?? {};
    r.check(psc.seccompProfile?.type === "RuntimeDefault", `${id}: pod seccompProfile RuntimeDefault`);
    r.check(pod.automountServiceAccountToken === false, `${id}: no service account token mounted`);
    for (const c of [...init, ...pod.containers]) {
      const sc = c.securityContext ?? {};
      const nonRoot = (sc.runAsNonRoot ?? psc.runAsNonRoot) === true && (sc.runAsUser ?? psc.runAsUser) !== 0;
      r.check(nonRoot && sc.allowPrivilegeEscalation === false &&
        JSON.stringify(sc.capabilities?.drop) === '["ALL"]' && !sc.capabilities?.add && !sc.privileged,
        `${id}: container ${c.name} meets the restricted Pod Security Standard`, JSON.stringify(sc));
    }
    r.check(chgate.securityContext?.readOnlyRootFilesystem === true && (chgate.securityContext?.runAsUser ?? psc.runAsUser) === 10001,
      `${id}: chgate runs as 10001 on a read-only root filesystem`);
    const badVolumes = (pod.volumes ?? []).filter((v) => !Object.keys(v).some((k) => RESTRICTED_VOLUMES.has(k)));
    r.check(badVolumes.length === 0, `${id}: only volume types the restricted standard allows`, JSON.stringify(badVolumes));

    // The password: a file from a Secret volume, never a variable.
    const pwFile = env.CHGATE_PASSWORD_FILE;
    const mount = (chgate.volumeMounts ?? []).find((m) => pwFile?.startsWith(m.mountPath + "/"));
    const vol = mount && (pod.volumes ?? []).find((v) => v.name === mount.name);
    const item = vol?.secret?.items?.find((it) => `${mount.mountPath}/${it.path}` === pwFile);
    r.check(Boolean(vol?.secret && mount.readOnly && (item || !vol.secret.items)),
      `${id}: CHGATE_PASSWORD_FILE (${pwFile}) is a file of Secret ${vol?.secret?.secretName}, mounted read-only`);
    const envNames = [...init, ...pod.containers].flatMap((c) => (c.env ?? []).map((e) => e.name));
    r.check(!envNames.some((n) => /PASSWORD(?!_FILE)/.test(n)), `${id}: no password in an environment variable`);

    // Shutdown: the grace period covers what runs before and during the drain.
    const grace = pod.terminationGracePeriodSeconds ?? 30;
    const drain = parseDuration(env.CHGATE_DRAIN_TIMEOUT ?? "20s");
    const appPreStop = Math.max(0, ...apps.map((c) => sleepSeconds(c.lifecycle?.preStop)));
    const chgatePreStop = sleepSeconds(chgate.lifecycle?.preStop);
    // Native: chgate is stopped after the app (preStop + its shutdown, allowed 15 s) has exited.
    // Legacy: chgate's own preStop sleep outlasts the app, then it drains.
    const need = gateway ? chgatePreStop + drain + 10
      : legacy ? Math.max(chgatePreStop, appPreStop + 15) + drain + 10
      : appPreStop + 15 + chgatePreStop + drain + 10;
    r.check(grace >= need, `${id}: terminationGracePeriodSeconds ${grace} >= ${need} (preStop, app shutdown, ${drain} s drain, margin)`);
    if (legacy) {
      // All preStop hooks start together and each container gets SIGTERM after its own: chgate
      // must keep accepting rows until the application has stopped (its preStop + up to 15 s of
      // shutdown) with a margin, not exactly then.
      const chgateHolds = minHoldSeconds(chgate.lifecycle?.preStop);
      r.check(chgateHolds >= appPreStop + 15 + 5,
        `${id}: chgate's preStop (at least ${chgateHolds} s) outlasts the app's preStop (${appPreStop} s) + 15 s shutdown + 5 s margin`);
    }
    // A spool on an emptyDir goes with the pod: the pod waits for it to drain before chgate stops.
    const spoolMount = (chgate.volumeMounts ?? []).find((m) => env.CHGATE_SPOOL_DIR &&
      (env.CHGATE_SPOOL_DIR === m.mountPath || env.CHGATE_SPOOL_DIR.startsWith(m.mountPath + "/")));
    const spoolVolume = spoolMount && (pod.volumes ?? []).find((v) => v.name === spoolMount.name);
    if (spoolVolume?.emptyDir) {
      r.check(waitDrained(chgate.lifecycle?.preStop) !== null,
        `${id}: the emptyDir spool is waited for at shutdown (preStop: chgate spool wait-drained)`);
    }

    // Memory: the sizing rule of docs/operations.md, measured by tests/e2e/memory_e2e_test.py (peak RSS with
    // ClickHouse paused and bursts of concurrent callers): 2.5 x the budget + 64 MiB.
    const budget = parseSize(env.CHGATE_MEMORY_BUDGET ?? "256MiB");
    const limit = chgate.resources?.limits?.memory;
    r.check(limit && parseQuantity(limit) >= 2.5 * budget + 64 * 1024 ** 2,
      `${id}: chgate memory limit ${limit} >= 2.5 x CHGATE_MEMORY_BUDGET (${env.CHGATE_MEMORY_BUDGET}) + 64Mi`);
    r.check(chgate.resources?.requests?.cpu && chgate.resources?.requests?.memory,
      `${id}: chgate has CPU and memory requests`);

    checkSpool(id, dep, chgate, env);
    if (dep.kind === "StatefulSet") {
      const labels = dep.spec.template.metadata.labels ?? {};
      const svc = docs.find((o) => o.kind === "Service" && o.metadata.name === dep.spec.serviceName);
      r.check(svc?.spec.clusterIP === "None" &&
        Object.entries(svc.spec.selector ?? {}).every(([k, v]) => labels[k] === v),
      `${id}: serviceName ${dep.spec.serviceName} is a headless Service selecting the pods`);
    }

    // The PodMonitor selects this pod and scrapes the named metrics port.
    const labels = dep.spec.template.metadata.labels ?? {};
    const monitors = docs.filter((o) => o.kind === "PodMonitor" &&
      Object.entries(o.spec.selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v));
    const endpoint = monitors[0]?.spec.podMetricsEndpoints.find((e) => e.port === "chgate-metrics" && (e.path ?? "/metrics") === "/metrics");
    r.check(monitors.length === 1 && endpoint,
      `${id}: one PodMonitor selects the pod and scrapes port "chgate-metrics" at /metrics`);
    if (monitors.length === 1 && endpoint) {
      const pm = monitors[0];
      const relabel = endpoint.relabelings ?? [];
      r.check(relabel.some((x) => x.targetLabel === "job" && x.replacement === "chgate" && !x.sourceLabels) &&
        relabel.some((x) => x.targetLabel === "application" &&
          JSON.stringify(x.sourceLabels) === '["__meta_kubernetes_pod_label_app_kubernetes_io_name"]'),
        `${id}: PodMonitor ${pm.metadata.name} labels targets job="chgate" and application (the alerts aggregate by them)`,
        JSON.stringify(relabel));
      r.check((pm.spec.podTargetLabels ?? []).includes("app.kubernetes.io/name"),
        `${id}: PodMonitor ${pm.metadata.name} copies the pod's app.kubernetes.io/name (podTargetLabels)`);
      r.check("app.kubernetes.io/name" in (pm.spec.selector?.matchLabels ?? {}),
        `${id}: PodMonitor ${pm.metadata.name} selects by the application's name, not every chgate pod of the namespace`);
    }
  }
}

// The spool of persisted acks. chgate writes nothing but CHGATE_SPOOL_DIR (its root filesystem is
// read-only), so the directory must be a writable volume of its own: an emptyDir on the node's
// disk (kept across chgate's restarts, lost with the pod) or a volume claim of a StatefulSet
// (kept across pods). The kubelet evicts a pod whose emptyDir outgrows its sizeLimit, and chgate
// cannot see that limit, so the spool's bound (CHGATE_SPOOL_MAX_BYTES, all segment files) plus
// one segment must leave a quarter of the volume for what the bound does not count (quarantined
// and dead-letter files) and for the file system's own share.
function checkSpool(id, workload, chgate, env) {
  const dir = env.CHGATE_SPOOL_DIR;
  const pod = workload.spec.template.spec;
  const claims = workload.spec.volumeClaimTemplates ?? [];
  if (!dir) {
    r.check(workload.kind !== "StatefulSet", `${id}: a StatefulSet is for the spool, but CHGATE_SPOOL_DIR is not set`);
    return;
  }
  const mount = (chgate.volumeMounts ?? []).find((m) => m.mountPath === dir);
  if (!r.check(mount && !mount.readOnly && !mount.subPath,
    `${id}: CHGATE_SPOOL_DIR (${dir}) is a writable volume mount of its own`,
    JSON.stringify(chgate.volumeMounts))) return;
  const vol = (pod.volumes ?? []).find((v) => v.name === mount.name);
  const claim = claims.find((c) => c.metadata?.name === mount.name);
  let size;
  let what;
  if (claim && !vol) {
    what = "volume claim";
    size = claim.spec?.resources?.requests?.storage;
    const psc = pod.securityContext ?? {};
    const group = chgate.securityContext?.runAsGroup ?? psc.runAsGroup;
    r.check(psc.fsGroup !== undefined && psc.fsGroup === group,
      `${id}: the spool's volume is made writable for chgate's group (fsGroup ${psc.fsGroup} = runAsGroup ${group})`);
    r.check((claim.spec?.accessModes ?? []).every((m) => m === "ReadWriteOnce" || m === "ReadWriteOncePod"),
      `${id}: the spool's claim is ReadWriteOnce or ReadWriteOncePod (one replica writes it)`,
      JSON.stringify(claim.spec?.accessModes));
  } else if (vol?.emptyDir) {
    what = "emptyDir";
    size = vol.emptyDir.sizeLimit;
    r.check(vol.emptyDir.medium === undefined || vol.emptyDir.medium === "",
      `${id}: the spool's emptyDir is on disk (medium Memory would count against chgate's memory limit)`);
    const request = chgate.resources?.requests?.["ephemeral-storage"];
    r.check(size && request && parseQuantity(request) >= parseQuantity(size),
      `${id}: chgate requests ephemeral-storage (${request}) >= the spool's sizeLimit (${size})`);
  } else {
    r.fail(`${id}: the spool's volume ${mount.name} is an emptyDir or one of the StatefulSet's volume claims`,
      JSON.stringify(vol ?? null));
    return;
  }
  if (workload.kind === "StatefulSet") {
    r.check(what === "volume claim", `${id}: the StatefulSet keeps the spool on a volume claim`);
  }
  if (!r.check(Boolean(size), `${id}: the spool's ${what} has a size`)) return;
  const max = env.CHGATE_SPOOL_MAX_BYTES ?? SPOOL_MAX_DEFAULT;
  const segment = env.CHGATE_SPOOL_SEGMENT_BYTES ?? SPOOL_SEGMENT_DEFAULT;
  r.check(parseSize(max) + parseSize(segment) <= 0.75 * parseQuantity(size),
    `${id}: CHGATE_SPOOL_MAX_BYTES (${max}) + one segment (${segment}) <= 3/4 of the spool's ${what} (${size})`);
}

// Runs the legacy variant's postStart hook with stand-ins for chgate-cli (failing a given number
// of times, recording its arguments) and sleep (instant): it must return 0 once chgate answers,
// ask for the readiness name on the health port, and give up with a non-zero status after a
// bounded number of tries instead of holding the pod forever.
function checkPostStartWait(id, chgate) {
  const cmd = chgate.lifecycle?.postStart?.exec?.command;
  if (!r.check(Array.isArray(cmd) && cmd[0] === "/bin/sh" && cmd[1] === "-c" && /chgate-cli/.test(cmd[2] ?? ""),
    `${id}: chgate's postStart hook is a shell loop around chgate-cli`, JSON.stringify(chgate.lifecycle?.postStart))) return;
  const dir = mkdtempSync(join(tmpdir(), "chgate-poststart-"));
  try {
    writeFileSync(join(dir, "chgate-cli"), `#!/bin/sh
echo "$*" >>"${dir}/calls"
n=$(wc -l <"${dir}/calls")
[ "$n" -gt "$FAILURES" ]
`, { mode: 0o755 });
    writeFileSync(join(dir, "sleep"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    const runHook = (failures) => {
      rmSync(join(dir, "calls"), { force: true });
      const out = spawnSync("/bin/sh", ["-c", cmd[2]], {
        env: { PATH: `${dir}:/usr/bin:/bin`, FAILURES: String(failures) }, encoding: "utf8", timeout: 20000 });
      const calls = existsSync(join(dir, "calls")) ? readFileSync(join(dir, "calls"), "utf8").trim().split("\n") : [];
      return { status: out.status, calls };
    };
    const ready = runHook(3);
    r.check(ready.status === 0 && ready.calls.length === 4,
      `${id}: postStart returns 0 once chgate answers (after 3 failed checks: ${ready.calls.length} calls)`, JSON.stringify(ready));
    r.check(/--addr 127\.0\.0\.1:50052 .*health --service readiness/.test(ready.calls[0] ?? ""),
      `${id}: postStart asks the health port for "readiness"`, ready.calls[0]);
    const never = runHook(1000);
    r.check(never.status !== 0 && never.calls.length >= 10 && never.calls.length <= 120,
      `${id}: postStart gives up after a bounded number of tries (${never.calls.length}) when chgate never answers`,
      JSON.stringify({ status: never.status, calls: never.calls.length }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The gateway's API: TLS from Secret files, a Service, a NetworkPolicy, a Certificate naming the
// Service.
function secretFileOf(pod, container, path) {
  const mount = (container.volumeMounts ?? []).find((m) => path?.startsWith(m.mountPath + "/"));
  const vol = mount && (pod.volumes ?? []).find((v) => v.name === mount.name);
  if (!vol?.secret || !mount.readOnly) return null;
  const rel = path.slice(mount.mountPath.length + 1);
  if (vol.secret.items && !vol.secret.items.some((it) => it.path === rel)) return null;
  return vol.secret.secretName;
}
// A sidecar's API on a Unix socket: the socket's directory is an emptyDir volume that chgate and
// every application container mount there (same volume, same path), nobody read-only on it, and
// an application that names chgate's address (CHGATE_ADDRESS) names this socket.
function checkSharedSocket(id, pod, chgate, apps, listen, env) {
  const path = listen.replace(/^unix:(\/\/)?/, "");
  const dir = path.slice(0, path.lastIndexOf("/"));
  r.check(path.startsWith("/") && dir.length > 0 && env.CHGATE_ALLOW_REMOTE_API === undefined,
    `${id}: the API is an absolute Unix socket path (${listen})`);
  const mountOf = (c) => (c.volumeMounts ?? []).find((m) => m.mountPath === dir);
  const own = mountOf(chgate);
  const vol = own && (pod.volumes ?? []).find((v) => v.name === own.name);
  r.check(vol?.emptyDir !== undefined && !own.readOnly,
    `${id}: the socket's directory ${dir} is a writable emptyDir of chgate's`, JSON.stringify(chgate.volumeMounts));
  r.check(vol?.emptyDir?.sizeLimit !== undefined, `${id}: the socket's emptyDir has a sizeLimit`);
  for (const app of apps) {
    const m = mountOf(app);
    r.check(m?.name === own?.name && !m.readOnly,
      `${id}: ${app.name} mounts chgate's socket volume at ${dir} (connecting needs write access)`);
    const address = (app.env ?? []).find((e) => e.name === "CHGATE_ADDRESS")?.value;
    if (address !== undefined) {
      r.check(address === listen || address === `unix://${path}`,
        `${id}: ${app.name}'s CHGATE_ADDRESS is chgate's socket (${address})`);
    }
  }
  const mode = env.CHGATE_LISTEN_SOCKET_MODE ?? "0660";
  r.check((parseInt(mode, 8) & 0o060) === 0o060 && pod.securityContext?.fsGroup !== undefined,
    `${id}: the socket is group read-write (${mode}) and the pod has an fsGroup to own it`);
}

function checkGateway(id, dep, chgate, env, docs) {
  const pod = dep.spec.template.spec;
  const listen = env.CHGATE_LISTEN ?? "127.0.0.1:50051";
  r.check(!isLoopback(listen) && env.CHGATE_ALLOW_REMOTE_API === "true" &&
    env.CHGATE_ALLOW_INSECURE_REMOTE_API === undefined,
    `${id}: the API listens on the pod address (${listen}) without the insecure opt-in`);
  const files = {};
  for (const v of ["CHGATE_API_TLS_CERT_FILE", "CHGATE_API_TLS_KEY_FILE", "CHGATE_API_TLS_CLIENT_CA_FILE",
    "CHGATE_API_POLICY_FILE"]) {
    files[v] = secretFileOf(pod, chgate, env[v]);
    r.check(Boolean(files[v]), `${id}: ${v} (${env[v]}) is a file of a Secret, mounted read-only`);
  }
  if (env.CHGATE_API_TOKENS_FILE !== undefined) {
    r.check(Boolean(secretFileOf(pod, chgate, env.CHGATE_API_TOKENS_FILE)),
      `${id}: CHGATE_API_TOKENS_FILE (${env.CHGATE_API_TOKENS_FILE}) is a file of a Secret, mounted read-only`);
  }
  const apiPort = portOf(listen);
  const ports = Object.fromEntries((chgate.ports ?? []).map((p) => [p.name, p.containerPort]));
  r.check(ports["grpc-api"] === apiPort, `${id}: port grpc-api = CHGATE_LISTEN's port (${apiPort})`);
  const labels = dep.spec.template.metadata.labels ?? {};
  const selects = (sel) => Object.entries(sel ?? {}).every(([k, v]) => labels[k] === v);
  const svc = docs.find((o) => o.kind === "Service" && selects(o.spec.selector) &&
    o.spec.ports?.some((p) => p.targetPort === "grpc-api" || p.targetPort === apiPort));
  r.check(Boolean(svc), `${id}: a Service selects the pods and forwards to the API port`);
  const np = docs.find((o) => o.kind === "NetworkPolicy" && selects(o.spec.podSelector?.matchLabels));
  const apiRules = (np?.spec.ingress ?? []).filter((rule) => (rule.ports ?? []).some((p) => p.port === apiPort || p.port === "grpc-api"));
  r.check(Boolean(np) && np.spec.policyTypes?.includes("Ingress") && apiRules.length > 0 &&
    apiRules.every((rule) => rule.from?.length > 0),
    `${id}: a NetworkPolicy selects the pods and admits the API port only from selected peers`);
  // A namespace is named by kubernetes.io/metadata.name (set by the API server); an empty
  // namespaceSelector, or a pod label alone, is a label any pod (in any namespace) can set.
  const namesNamespaces = (peer) => (peer.namespaceSelector?.matchExpressions ?? []).some((e) =>
    e.key === "kubernetes.io/metadata.name" && e.operator === "In" && e.values?.length > 0) ||
    Boolean(peer.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"]);
  r.check(apiRules.length > 0 && apiRules.every((rule) => (rule.from ?? []).every(namesNamespaces)),
    `${id}: the API's NetworkPolicy peers name their namespaces (kubernetes.io/metadata.name)`,
    JSON.stringify(apiRules));
  const pdb = docs.find((o) => o.kind === "PodDisruptionBudget" && selects(o.spec.selector?.matchLabels));
  r.check(Boolean(pdb) && (pdb.spec.maxUnavailable === 1 || pdb.spec.minAvailable >= 1),
    `${id}: a PodDisruptionBudget keeps all but one replica through voluntary disruptions`);
  const spread = dep.spec.template.spec.topologySpreadConstraints ?? [];
  r.check(["kubernetes.io/hostname", "topology.kubernetes.io/zone"].every((key) =>
    spread.some((c) => c.topologyKey === key && selects(c.labelSelector?.matchLabels))),
    `${id}: replicas spread over nodes and zones`, JSON.stringify(spread));
  const cert = docs.find((o) => o.kind === "Certificate" && o.spec.secretName === files.CHGATE_API_TLS_CERT_FILE);
  const ns = svc?.metadata.namespace ?? "default";
  r.check(Boolean(cert) && cert.spec.dnsNames?.includes(`${svc?.metadata.name}.${ns}.svc`),
    `${id}: a Certificate writes the API's certificate Secret (${files.CHGATE_API_TLS_CERT_FILE}) and names the Service`,
    JSON.stringify(cert?.spec.dnsNames));
}

// gateway-statefulset runs the gateway's pod: its template may differ from the gateway
// Deployment's only in the spool's storage (the Deployment's emptyDir, and the ephemeral-storage
// requested for it), and in the generated ConfigMap's hash.
function withoutSpoolStorage(template) {
  const t = structuredClone(template);
  t.spec.volumes = (t.spec.volumes ?? []).filter((v) => !v.emptyDir || v.name !== "spool");
  for (const c of [...(t.spec.initContainers ?? []), ...t.spec.containers]) {
    if (c.resources?.requests) delete c.resources.requests["ephemeral-storage"];
    for (const e of c.envFrom ?? []) {
      if (e.configMapRef?.name) e.configMapRef.name = e.configMapRef.name.replace(/-[a-z0-9]{10}$/, "");
    }
  }
  return t;
}
function differences(a, b, path = "template", out = []) {
  if (out.length >= 5) return out;
  if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) differences(a[k], b[k], `${path}.${k}`, out);
  } else if (JSON.stringify(a) !== JSON.stringify(b)) {
    out.push(`${path}: ${JSON.stringify(a)} (Deployment) vs ${JSON.stringify(b)} (StatefulSet)`);
  }
  return out;
}
if (rendered["gateway-statefulset"]) {
  const sts = rendered["gateway-statefulset"].find((o) => o.kind === "StatefulSet");
  const gw = (rendered.gateway ?? []).find((o) => o.kind === "Deployment");
  const deleted = !rendered["gateway-statefulset"].some((o) => o.kind === "Deployment");
  r.check(Boolean(sts && gw) && deleted,
    "gateway-statefulset: a StatefulSet replaces the gateway's Deployment");
  if (sts && gw) {
    const diff = differences(withoutSpoolStorage(gw.spec.template), withoutSpoolStorage(sts.spec.template));
    r.check(diff.length === 0,
      "gateway-statefulset: its pod equals the gateway Deployment's but for the spool's storage",
      () => `edit gateway/deployment.yaml and gateway-statefulset/statefulset.yaml together:\n${diff.join("\n")}`);
  }
}

// The monitoring kustomization: rules and dashboard present.
const mon = rendered.monitoring ?? [];
r.check(mon.some((o) => o.kind === "PrometheusRule" && o.spec.groups?.length),
  "monitoring: PrometheusRule with chgate's alert groups");
const dashCm = mon.find((o) => o.kind === "ConfigMap" && o.metadata.labels?.grafana_dashboard === "1");
let dashOk = false;
try {
  dashOk = Boolean(dashCm && JSON.parse(Object.values(dashCm.data)[0]).uid);
} catch { /* reported below */ }
r.check(dashOk, "monitoring: dashboard ConfigMap labelled grafana_dashboard: \"1\" holding the dashboard JSON");

r.finish();
