'use strict'
// The built package against the `deloop` command line on the same inputs:
// clamp (real model answers from shared/data), rescue and repair (the
// vendored JSON corpora), check (the vendored OpenClaw scenarios).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const deloop = require('..')
const { sharedData, corpus, runCli } = require('./helpers')

function camel(report) {
  return {
    detector: report.detector,
    period: report.period,
    unit: report.unit,
    start: report.start,
    keepBytes: report.keep_bytes,
    removedBytes: report.removed_bytes,
  }
}

for (const seed of [false, true]) {
  test(`clamp matches the CLI on real answers (seedCompat ${seed})`, (t) => {
    const file = sharedData('data/real-llm-text/cases.jsonl', 'node clamp differential')
    if (!file) return t.skip('no shared data')
    const texts = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).text)
    let cut = 0
    for (const text of texts) {
      const r = runCli(['clamp', '--json', ...(seed ? ['--seed-compat'] : [])], text)
      assert.ok(r.code === 0 || r.code === 3, r.stderr)
      const want = JSON.parse(r.stdout)
      const got = deloop.clamp(text, { seedCompat: seed })
      assert.equal(got.text, want.text)
      assert.equal(got.clamped, want.clamped)
      assert.deepEqual(got.reports, want.reports.map(camel))
      if (want.clamped) {
        assert.equal(got.detector, want.detector)
        assert.equal(got.removedBytes, want.removed_bytes)
      }
      cut += got.clamped
    }
    assert.ok(cut > 0)
  })
}

function jsonInputs() {
  const inputs = []
  for (const name of ['jsonrepair', 'json-repair-py']) {
    for (const line of fs.readFileSync(path.join(corpus(name), 'cases.jsonl'), 'utf8').split('\n')) {
      if (line.trim()) inputs.push(JSON.parse(line).input)
    }
  }
  return inputs
}

test('repair and rescue match the CLI on the JSON corpora', () => {
  const inputs = jsonInputs()
  assert.ok(inputs.length > 500)
  let rescued = 0
  for (const text of inputs) {
    const r = runCli(['repair'], text)
    if (r.code === 0) {
      const doc = deloop.repairJson(text)
      assert.equal(doc + '\n', r.stdout)
      const value = JSON.parse(doc)
      if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length) {
        const key = Object.keys(value)[0]
        const want = JSON.parse(runCli(['rescue', '--json', '--key', key], text).stdout)
        if (want.ok) {
          assert.deepEqual(deloop.rescueJson(text, key), want.value)
          rescued += 1
        }
      }
    } else {
      const cls = r.code === 1 ? deloop.NotFoundError : deloop.InputError
      assert.throws(() => deloop.repairJson(text), (e) => e instanceof cls && r.stderr.includes(e.message))
    }
  }
  assert.ok(rescued > 100)
})

for (const profile of ['openclaw', 'default', 'strict']) {
  test(`check matches the CLI on the OpenClaw scenarios (${profile})`, () => {
    const dir = path.join(corpus('openclaw-loops'), 'scenarios')
    let calls = 0
    for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort()) {
      const transcript = fs.readFileSync(path.join(dir, f))
      const r = runCli(['check', '--json', '--profile', profile], transcript)
      assert.ok(r.code === 0 || r.code === 3, r.stderr)
      const want = r.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)).filter((l) => !l.summary)
      const got = deloop.check(transcript, { profile }).map((v) => ({
        index: v.index,
        tool: v.tool,
        level: v.level,
        detector: v.detector ?? null,
        count: v.count ?? null,
        message: v.message,
        fingerprint: v.fingerprint ?? null,
      }))
      assert.deepEqual(got, want, f)
      calls += got.length
    }
    assert.ok(calls > 1000)
  })
}
