#!/usr/bin/env node
// OpenClaw's own verdicts for transcripts in deloop's events format: the
// oracle of the differential test (crates/deloop-core/tests/loops_openclaw_differential.rs).
//
// It runs the detector of the installed npm package `openclaw` (2026.9.6,
// installed by scripts/setup-openclaw.sh): `detectToolCallLoop`,
// `recordToolCall` and `recordToolCallOutcome` from dist/tool-loop-detection-*.mjs,
// the tool-name normaliser `normalizeToolPolicyName`, and the post-compaction
// guard `createPostCompactionLoopGuard` (not exported by the package: its
// source region is read from the bundle that holds it and evaluated as is).
// Nothing of the detector is re-implemented here; this file only replays.
//
// Replay conventions (those of shared/corpora/openclaw-loops, the way
// OpenClaw's runtime drives the detector):
// * each agent (absent or blank = "main") is one session: one state object,
//   one sliding window of records; run ids are passed as the scope;
// * a call is judged (`detectToolCallLoop`, config `{enabled: true}`) and
//   then recorded (`recordToolCall`); a critical call is blocked: it is
//   recorded with the veto outcome (`outcomeKind: "tool-loop-veto"`, as the
//   runtime's batch admission does) and its own result event is ignored;
// * a result attaches to the oldest earlier call with the same id that has no
//   result yet (no id: the oldest call waiting for one) and is passed to
//   `recordToolCallOutcome` with that call's tool, arguments and run;
//   `error` (a string; other values as JSON text) is the outcome when present,
//   else `result` (absent = null);
// * a compaction arms the post-compaction guard of its (agent, run); each
//   recorded outcome with a result hash is observed by the guard of its
//   (agent, run), and when the guard aborts, the call that outcome answers
//   gets its verdict (critical, compaction_loop_persisted, count);
// * user turns change nothing in OpenClaw's detector.
//
// Usage:
//   node scripts/openclaw-oracle.mjs [FILE|-]
//       one transcript (events JSON lines); prints one line per call:
//       {"index": i, "level": ..., "detector": ..., "count": ...}
//   node scripts/openclaw-oracle.mjs --batch [FILE|-]
//       one scenario per input line: {"name": ..., "events": [event, ...]};
//       prints one line per scenario: {"name": ..., "verdicts": [[level, detector, count], ...]}
//       (a scenario that cannot be replayed gives {"name": ..., "error": "..."}).
// The package is found through --openclaw DIR, DELOOP_OPENCLAW_DIR, or the
// cache folder of setup-openclaw.sh. Exit code 2 on bad input or a missing package.

import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { homedir } from "node:os";
import { pathToFileURL } from "node:url";

const VERSION = "2026.9.6";

// OpenClaw's logger writes every warning to the console and to a log file
// under /tmp/openclaw; the oracle wants neither. Read lazily, so set first.
process.env.OPENCLAW_LOG_LEVEL = "silent";

function fail(message) {
  process.stderr.write(`openclaw-oracle: ${message}\n`);
  process.exit(2);
}

function packageDir(explicit) {
  if (explicit) return explicit;
  if (process.env.DELOOP_OPENCLAW_DIR) return process.env.DELOOP_OPENCLAW_DIR;
  const cache =
    process.env.DELOOP_CACHE ||
    join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "deloop");
  return join(cache, `openclaw-${VERSION}`, "node_modules", "openclaw");
}

// Maps the original names of a bundle's exports to their minified aliases,
// from its final `export { original as alias, ... }` clause.
function exportAliases(text, file) {
  const m = text.match(/export\s*\{([^}]*)\}\s*;?\s*$/);
  if (!m) fail(`${file}: no export clause`);
  const names = new Map();
  for (const part of m[1].split(",")) {
    const [orig, alias] = part.trim().split(/\s+as\s+/);
    if (orig) names.set(orig, alias ?? orig);
  }
  return names;
}

async function importNamed(dist, pattern, wanted) {
  const file = readdirSync(dist).find((f) => pattern.test(f));
  if (!file) fail(`no module matching ${pattern} in ${dist}`);
  const path = join(dist, file);
  const aliases = exportAliases(readFileSync(path, "utf8"), file);
  const mod = await import(pathToFileURL(path).href);
  const out = {};
  for (const name of wanted) {
    const alias = aliases.get(name);
    if (!alias || typeof mod[alias] !== "function") fail(`${file} does not export ${name}`);
    out[name] = mod[alias];
  }
  return out;
}

// The post-compaction guard's source region, evaluated with a silent logger.
function loadPostCompactionGuard(dist) {
  const marker = "//#region src/agents/embedded-agent-runner/post-compaction-loop-guard.ts";
  for (const file of readdirSync(dist)) {
    if (!file.endsWith(".mjs")) continue;
    const text = readFileSync(join(dist, file), "utf8");
    const start = text.indexOf(marker);
    if (start < 0) continue;
    const end = text.indexOf("//#endregion", start);
    if (end < 0) fail(`${file}: unterminated post-compaction guard region`);
    const region = text.slice(start, end);
    if (!region.includes("function createPostCompactionLoopGuard(")) {
      fail(`${file}: the post-compaction region has no createPostCompactionLoopGuard`);
    }
    const silent = () => ({ info() {}, warn() {}, error() {}, debug() {}, trace() {} });
    // eslint-disable-next-line no-new-func
    return new Function("createSubsystemLogger", `${region}\nreturn createPostCompactionLoopGuard;`)(silent);
  }
  fail(`no bundle in ${dist} holds the post-compaction guard`);
}

function parseArgs(argv) {
  const opts = { batch: false, openclaw: undefined, file: "-" };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    if (a === "--batch") opts.batch = true;
    else if (a === "--openclaw") opts.openclaw = argv[++i];
    else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: openclaw-oracle.mjs [--batch] [--openclaw DIR] [FILE|-]\n");
      process.exit(0);
    } else opts.file = a;
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const pkg = packageDir(opts.openclaw);
if (!existsSync(join(pkg, "package.json"))) {
  fail(`openclaw ${VERSION} not found at ${pkg}; run: bash scripts/setup-openclaw.sh`);
}
const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
if (version !== VERSION) fail(`${pkg} holds openclaw ${version}, expected ${VERSION}`);
const dist = join(pkg, "dist");
const detector = await importNamed(dist, /^tool-loop-detection-[A-Za-z0-9_-]+\.mjs$/, [
  "detectToolCallLoop",
  "recordToolCall",
  "recordToolCallOutcome",
]);
const policy = await importNamed(dist, /^tool-policy-shared-[A-Za-z0-9_-]+\.mjs$/, [
  "normalizeToolPolicyName",
]);
const createPostCompactionLoopGuard = loadPostCompactionGuard(dist);
const CONFIG = { enabled: true };
const VETO = { details: { status: "blocked", deniedReason: "tool-loop" } };

function trimmed(value) {
  if (typeof value !== "string") return undefined;
  const t = value.trim();
  return t === "" ? undefined : t;
}

// Replays one transcript (an array of event objects); returns one
// [level, detector, count] per call event.
function replay(events) {
  const sessions = new Map(); // agent -> OpenClaw session state
  const guards = new Map(); // agent \0 run -> post-compaction guard
  const calls = []; // {id, tool, args, run, agent, blocked, answered}
  const verdicts = [];
  const session = (agent) => {
    let s = sessions.get(agent);
    if (!s) sessions.set(agent, (s = { toolCallHistory: [] }));
    return s;
  };
  const guard = (agent, run) => {
    const key = `${agent}\0${run ?? ""}\0${run === undefined ? "none" : "run"}`;
    let g = guards.get(key);
    if (!g) guards.set(key, (g = createPostCompactionLoopGuard({ enabled: true })));
    return g;
  };
  events.forEach((ev, n) => {
    const where = `event ${n + 1}`;
    if (ev === null || typeof ev !== "object" || Array.isArray(ev)) {
      throw new Error(`${where}: not an object`);
    }
    const agent = trimmed(ev.agent) ?? "main";
    const run = trimmed(ev.run);
    switch (ev.type) {
      case "call": {
        if (typeof ev.tool !== "string") throw new Error(`${where}: call without tool`);
        const tool = policy.normalizeToolPolicyName(ev.tool || "tool");
        const args = ev.args === undefined ? null : ev.args;
        const id = typeof ev.id === "string" ? ev.id : undefined;
        const scope = run ? { runId: run } : undefined;
        const state = session(agent);
        const v = detector.detectToolCallLoop(state, tool, args, CONFIG, scope);
        const level = v.stuck ? v.level : "ok";
        verdicts.push([level, v.stuck ? v.detector : null, v.stuck ? v.count : null]);
        detector.recordToolCall(state, tool, args, id, CONFIG, scope);
        const blocked = level === "critical";
        if (blocked) {
          const last = state.toolCallHistory.at(-1);
          if (last) last.outcomeKind = "tool-loop-veto";
        }
        calls.push({ id, tool, args, run, agent, blocked, answered: false });
        break;
      }
      case "result": {
        const id = typeof ev.id === "string" ? ev.id : undefined;
        const index =
          id === undefined
            ? calls.findIndex((c) => !c.answered)
            : calls.findIndex((c) => !c.answered && c.id === id);
        if (index < 0) {
          throw new Error(
            id === undefined
              ? `${where}: result without id while no call waits for a result`
              : `${where}: result for call id ${JSON.stringify(id)} matches no earlier call waiting for a result`,
          );
        }
        const call = calls[index];
        call.answered = true;
        if (call.blocked) break;
        const hasError = ev.error !== undefined && ev.error !== null;
        const error = !hasError ? undefined : typeof ev.error === "string" ? ev.error : JSON.stringify(ev.error);
        const result = hasError ? undefined : ev.result === undefined ? null : ev.result;
        const record = detector.recordToolCallOutcome(session(call.agent), {
          toolName: call.tool,
          toolParams: call.args,
          toolCallId: id,
          result,
          error,
          config: CONFIG,
          ...(call.run && { runId: call.run }),
        });
        if (record?.resultHash) {
          const verdict = guard(call.agent, call.run).observe({
            toolName: record.toolName,
            argsHash: record.argsHash,
            resultHash: record.resultHash,
          });
          if (verdict.shouldAbort) verdicts[index] = ["critical", verdict.detector, verdict.count];
        }
        break;
      }
      case "compaction":
        guard(agent, run).armPostCompaction();
        break;
      case "user":
      case "user_turn":
        break;
      default:
        throw new Error(`${where}: unknown event type ${JSON.stringify(ev.type)}`);
    }
  });
  return verdicts;
}

function readInput(file) {
  try {
    return readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (e) {
    fail(`cannot read ${file}: ${e.message}`);
  }
}

function parseLine(line, n) {
  try {
    return JSON.parse(line);
  } catch (e) {
    fail(`line ${n}: not valid JSON: ${e.message}`);
  }
}

const lines = readInput(opts.file).split("\n");
const out = [];
if (opts.batch) {
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    const sc = parseLine(line, i + 1);
    const name = sc?.name ?? String(i);
    try {
      if (!Array.isArray(sc?.events)) throw new Error("no events array");
      out.push(JSON.stringify({ name, verdicts: replay(sc.events) }));
    } catch (e) {
      out.push(JSON.stringify({ name, error: e.message }));
    }
  });
} else {
  const events = [];
  lines.forEach((line, i) => {
    if (line.trim()) events.push(parseLine(line, i + 1));
  });
  let verdicts;
  try {
    verdicts = replay(events);
  } catch (e) {
    fail(e.message);
  }
  verdicts.forEach(([level, det, count], index) => {
    out.push(JSON.stringify({ index, level, detector: det, count }));
  });
}
process.stdout.write(out.length ? `${out.join("\n")}\n` : "");
