// Shared helpers of the deployment checks in tests/ops/.
import { mkdirSync, writeFileSync, rmSync } from "node:fs";
import { dirname, join, resolve, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import ts from "typescript";

export const OPS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const ROOT = resolve(OPS_DIR, "../..");

export function repoPath(p) {
  return join(ROOT, p);
}

export function rel(p) {
  return relative(ROOT, p) || ".";
}

// Counts checks and prints one line per failure (and per pass with --verbose-style detail), then
// a closing "N passed, N failed" line; finish() exits non-zero on any failure.
export class Reporter {
  constructor(name) {
    this.name = name;
    this.passed = 0;
    this.failed = 0;
  }
  pass(text) {
    this.passed++;
    console.log(`${this.name}: ok   ${text}`);
  }
  fail(text, detail) {
    this.failed++;
    console.log(`${this.name}: FAIL ${text}${detail ? `\n    ${String(detail).replace(/\n/g, "\n    ")}` : ""}`);
  }
  check(cond, text, detail) {
    if (cond) this.pass(text);
    else this.fail(text, typeof detail === "function" ? detail() : detail);
    return !!cond;
  }
  finish() {
    console.log(`${this.name}: ${this.passed} passed, ${this.failed} failed`);
    process.exit(this.failed === 0 ? 0 : 1);
  }
}

export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 << 20, ...opts });
  if (r.error && r.error.code === "ENOENT") return { status: 127, stdout: "", stderr: `${cmd}: not found` };
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}

export function have(cmd) {
  return run("sh", ["-c", `command -v ${cmd}`]).status === 0;
}

// Type-checks TypeScript sources (name -> text) written under tests/ops/.tmp/ (so that
// node_modules resolves) with the strict compiler settings; returns the diagnostics as
// [{file, line, message}]. Object literals assigned to typed constants get TypeScript's excess
// property check, which is what catches unknown (misspelled) fields.
export function typeCheck(sources) {
  const dir = join(OPS_DIR, ".tmp", `tc-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const files = [];
  for (const [name, text] of Object.entries(sources)) {
    const f = join(dir, name);
    writeFileSync(f, text);
    files.push(f);
  }
  const options = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    types: [],
  };
  const program = ts.createProgram(files, options);
  const diags = ts.getPreEmitDiagnostics(program).map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (!d.file) return { file: "", line: 0, message };
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    return { file: relative(dir, d.file.fileName), line: line + 1, text: d.file.text, message };
  });
  rmSync(dir, { recursive: true, force: true });
  return diags;
}

// "250ms", "5s", "1m", "1h" -> seconds.
export function parseDuration(text) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(String(text).trim());
  if (!m) throw new Error(`not a duration: ${text}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
}

// chgate sizes: "128MiB", "16MB", "1048576" -> bytes.
export function parseSize(text) {
  const m = /^(\d+)\s*(KiB|MiB|GiB|KB|MB|GB|B)?$/.exec(String(text).trim());
  if (!m) throw new Error(`not a size: ${text}`);
  const mult = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, KB: 1e3, MB: 1e6, GB: 1e9 };
  return Number(m[1]) * mult[m[2] ?? "B"];
}

// Kubernetes quantities for memory: "384Mi", "1Gi", "500M", "1000000" -> bytes.
export function parseQuantity(text) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(text).trim());
  if (!m) throw new Error(`not a quantity: ${text}`);
  const mult = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
}

// The CHGATE_* variables the binary reads, from `chgate --help` ("--name=VALUE  [CHGATE_NAME]").
export function chgateEnvVars(binary) {
  const r = run(binary, ["--help"]);
  const names = new Set([...(r.stdout + r.stderr).matchAll(/\[(CHGATE_[A-Z0-9_]+)\]/g)].map((m) => m[1]));
  if (names.size === 0) throw new Error(`${binary} --help lists no CHGATE_* variables`);
  return names;
}

// Metric family names chgate declares, from server/metrics/families.h (inline constexpr char kX[] = "...").
export function declaredMetricNames(source) {
  return new Set([...source.matchAll(/constexpr char k\w+\[\] = "(chgate_[a-z0-9_]+)"/g)].map((m) => m[1]));
}
