'use strict'
// The OpenClaw drop-in (detectToolCallLoop, recordToolCall,
// recordToolCallOutcome) against OpenClaw's own detector (npm openclaw
// 2026.9.6, run by scripts/openclaw-oracle.mjs) on the vendored
// scenarios, replayed the way OpenClaw's runtime drives its detector (the
// oracle's conventions). Scenarios with compactions are left out: the
// post-compaction guard is not part of detectToolCallLoop's API.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const deloop = require('..')
const { ROOT, corpus, realRequired } = require('./helpers')

const VERSION = '2026.9.6'
const CONFIG = { enabled: true }
const VETO = { details: { status: 'blocked', deniedReason: 'tool-loop' } }

function openclawDir() {
  if (process.env.DELOOP_OPENCLAW_DIR) return process.env.DELOOP_OPENCLAW_DIR
  const cache = process.env.DELOOP_CACHE || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'deloop')
  return path.join(cache, `openclaw-${VERSION}`, 'node_modules', 'openclaw')
}

function trimmed(v) {
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined
}

// The drop-in, driven as the oracle drives OpenClaw.
function replay(events) {
  const states = new Map()
  const calls = []
  const verdicts = []
  const state = (agent) => {
    if (!states.has(agent)) states.set(agent, {})
    return states.get(agent)
  }
  for (const ev of events) {
    const agent = trimmed(ev.agent) ?? 'main'
    const run = trimmed(ev.run)
    const scope = run ? { runId: run } : undefined
    if (ev.type === 'call') {
      const args = ev.args === undefined ? null : ev.args
      const s = state(agent)
      const v = deloop.detectToolCallLoop(s, ev.tool, args, CONFIG, scope)
      verdicts.push(v.stuck ? [v.level, v.detector, v.count] : ['ok', null, null])
      deloop.recordToolCall(s, ev.tool, args, ev.id, CONFIG, scope)
      const blocked = v.stuck && v.level === 'critical'
      if (blocked) {
        deloop.recordToolCallOutcome(s, { toolName: ev.tool, toolParams: args, toolCallId: ev.id, result: VETO, runId: run })
      }
      calls.push({ id: ev.id, tool: ev.tool, args, run, agent, blocked, answered: false })
    } else if (ev.type === 'result') {
      const i = typeof ev.id === 'string' ? calls.findIndex((c) => !c.answered && c.id === ev.id) : calls.findIndex((c) => !c.answered)
      const call = calls[i]
      call.answered = true
      if (call.blocked) continue
      const hasError = ev.error !== undefined && ev.error !== null
      deloop.recordToolCallOutcome(state(call.agent), {
        toolName: call.tool,
        toolParams: call.args,
        toolCallId: ev.id,
        result: hasError ? undefined : ev.result ?? null,
        error: hasError ? (typeof ev.error === 'string' ? ev.error : JSON.stringify(ev.error)) : undefined,
        runId: call.run,
      })
    }
  }
  return verdicts
}

test('detectToolCallLoop gives OpenClaw 2026.9.6 verdicts on the vendored scenarios', (t) => {
  const present = fs.existsSync(path.join(openclawDir(), 'package.json'))
  if (!present) {
    const msg = `node openclaw drop-in: skipped, its component is not installed (run scripts/setup-openclaw.sh)`
    if (realRequired()) throw new Error(`${msg}; CI=true or DELOOP_REQUIRE_REAL=1 makes a missing component a failure`)
    process.stderr.write(msg + '\n')
    return t.skip(msg)
  }
  const dir = path.join(corpus('openclaw-loops'), 'scenarios')
  const scenarios = []
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort()) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8')
    const events = text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l))
    if (!events.some((e) => e.type === 'compaction')) scenarios.push({ name: f, events })
  }
  // One oracle process for every scenario (loading OpenClaw takes seconds).
  const input = scenarios.map((s) => JSON.stringify(s)).join('\n') + '\n'
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'deloop-openclaw-'))
  const file = path.join(tmp, 'scenarios.jsonl')
  fs.writeFileSync(file, input)
  const oracle = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'openclaw-oracle.mjs'), '--batch', file], {
    maxBuffer: 1 << 26,
  })
  fs.rmSync(tmp, { recursive: true, force: true })
  assert.equal(oracle.status, 0, oracle.stderr.toString())
  const want = new Map()
  for (const line of oracle.stdout.toString().split('\n').filter((l) => l.trim())) {
    const r = JSON.parse(line)
    assert.equal(r.error, undefined, `${r.name}: ${r.error}`)
    want.set(r.name, r.verdicts)
  }
  let compared = 0
  let calls = 0
  const differ = []
  for (const s of scenarios) {
    const got = replay(s.events)
    if (JSON.stringify(got) !== JSON.stringify(want.get(s.name))) differ.push(s.name)
    compared += 1
    calls += got.length
  }
  assert.deepEqual(differ, [])
  assert.ok(compared > 40 && calls > 1000, `${compared} scenarios, ${calls} calls`)
})
