'use strict'
// The package's API: settings, errors, hostile input, the seed's drop-ins.

const test = require('node:test')
const assert = require('node:assert/strict')
const deloop = require('..')

const LOOP = 'Intro sentence here. ' + 'the cat sat on the mat '.repeat(40)
const S109_UNIT = 'la continuación de un proceso de automatización automático o la de '

test('clamp cuts a loop and reports it', () => {
  const out = deloop.clamp(LOOP)
  assert.equal(out.clamped, true)
  assert.equal(out.detector, 'word_period')
  assert.ok(out.text.endsWith(' […]'))
  assert.equal(out.removedBytes, Buffer.byteLength(LOOP) - out.keepBytes)
  const healthy = deloop.clamp('A short healthy answer.')
  assert.equal(healthy.clamped, false)
  assert.equal(healthy.text, 'A short healthy answer.')
  assert.deepEqual(healthy.reports, [])
})

test('settings take the config file names and bounds, with the CLI message', () => {
  const text = 'Intro sentence here. ' + 'one two '.repeat(12)
  assert.equal(deloop.clamp(text).clamped, true)
  assert.equal(deloop.clamp(text, { words: { min_run: 30 }, substring: { min_copies: 50 } }).clamped, false)
  assert.throws(() => deloop.clamp(text, { words: { max_period: 40 } }), {
    name: 'InputError',
    message:
      'guard setting words.max_period = 40 is out of range: expected 1 to 16 (short periods); ' +
      'change the flag or config value (the bounds are listed in docs/repetition.md)',
  })
  assert.throws(() => deloop.clamp(text, { words: { max_perod: 4 } }), /max_perod/)
  assert.throws(() => new deloop.StreamGuard({ substring: { min_copies: 1 } }), deloop.InputError)
  assert.throws(() => deloop.clamp(text, { seedCompat: true, words: { min_run: 30 } }), /use one of them/)
})

test('the seed drop-ins give the seed outputs', () => {
  const s109 = 'El informe describe la migración del archivo y, en resumen, ' + S109_UNIT.repeat(40)
  assert.equal(
    deloop.clampRepetition(s109, { seedCompat: true }),
    'El informe describe la migración del archivo y, en resumen, ' +
      'la continuación de un proceso de automatización automático […]',
  )
  const wifi = 'El wifi se configura accediendo a 192.168.1.1. El wifi requiere una contraseña.'
  assert.equal(deloop.clampRepetition(wifi, { seedCompat: true }), wifi)
  assert.equal(deloop.clampSubstringRepetition(wifi, { seedCompat: true }), wifi)
  const resak = 'Claro: ' + 'resak-'.repeat(300)
  assert.equal(deloop.clampSubstringRepetition(resak, { seedCompat: true }), 'Claro:')
  // The word guard alone does not see a loop inside one token.
  assert.equal(deloop.clampRepetition(resak, { seedCompat: true }), resak)
  // Without the option: deloop's whole guard, `deloop clamp`'s text.
  assert.equal(deloop.clampRepetition(resak), deloop.clamp(resak).text)
})

test('invalid UTF-8 in a Buffer is refused or replaced', () => {
  const bad = Buffer.concat([Buffer.from('Intro. '), Buffer.from([0xff, 0xfe]), Buffer.from(' the cat sat on the mat'.repeat(40))])
  assert.throws(() => deloop.clamp(bad), { name: 'InputError', message: /offset 7/ })
  const out = deloop.clamp(bad, { lossy: true })
  assert.ok(out.clamped && out.text.includes('\ufffd'))
  assert.throws(() => deloop.rescueJson(Buffer.from([0x7b, 0xff]), 'a'), /not valid UTF-8/)
  assert.throws(() => deloop.check(Buffer.from('{"type":"call","tool":"\xff"}\n', 'latin1')), /not valid UTF-8/)
  // A lone surrogate in a JS string becomes U+FFFD on the way in.
  assert.equal(deloop.clamp('a\ud800b').text, 'a\ufffdb')
})

test('a 100 MB string', () => {
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(Math.floor(100_000_000 / 45))
  const out = deloop.clamp(text)
  assert.equal(out.detector, 'word_period')
  assert.ok(out.text.length < 200)
  assert.throws(() => deloop.repairJson(text), /over the limit/)
})

test('deeply nested JSON is an error, not a crash', () => {
  assert.throws(() => deloop.repairJson('['.repeat(100_000)), { name: 'InputError', message: /nested deeper/ })
  let value = deloop.rescueJson('['.repeat(900) + ']'.repeat(900))
  let depth = 0
  while (Array.isArray(value) && value.length) {
    value = value[0]
    depth += 1
  }
  assert.equal(depth, 899)
})

test('rescue and repair', () => {
  assert.equal(deloop.rescueJson('Sure! {"answer": "yes", "n": 2,}', 'answer'), 'yes')
  assert.deepEqual(deloop.rescueJson('```json\n{"a": [1, 2,]}\n```'), { a: [1, 2] })
  assert.equal(deloop.repairJson("{'a': True}"), '{"a":true}')
  assert.throws(() => deloop.rescueJson('{"a": 1}', 'b'), { name: 'NotFoundError', message: /nothing rescued/ })
  assert.throws(() => deloop.repairJson('just prose'), deloop.NotFoundError)
})

test('the stream guard in exact mode shows only what stays', () => {
  const g = new deloop.StreamGuard()
  let shown = ''
  for (let i = 0; i < LOOP.length && !g.cut; i += 7) shown += g.push(LOOP.slice(i, i + 7))
  assert.equal(g.cut.detector, 'word_period')
  assert.equal(g.cut.lateBytes, 0)
  assert.ok(shown.endsWith(g.cut.marker))
  assert.equal(shown, deloop.clamp(LOOP).text)
  assert.equal(g.push('more'), '')
  const b = new deloop.StreamGuard()
  const out = Buffer.concat([b.push(Buffer.from('hello ')), b.finish()])
  assert.equal(out.toString(), 'hello ')
  assert.throws(() => b.push('x'), /not both/)
})

test('the live guard gives the verdicts check gives on the same transcript', () => {
  const guard = new deloop.ToolLoopGuard('openclaw')
  const lines = []
  const levels = []
  for (let i = 0; i < 25; i++) {
    const v = guard.call('read', { path: '/a' }, { id: `c${i}` })
    levels.push(v.level)
    assert.equal(v.index, i)
    assert.equal(guard.result(`c${i}`, { content: 'same' }), null)
    lines.push(JSON.stringify({ type: 'call', id: `c${i}`, tool: 'read', args: { path: '/a' } }))
    lines.push(JSON.stringify({ type: 'result', id: `c${i}`, result: { content: 'same' } }))
  }
  assert.ok(levels.includes('critical'))
  const verdicts = deloop.check(lines.join('\n'), { profile: 'openclaw' })
  assert.deepEqual(verdicts.map((v) => v.level), levels)
  assert.throws(() => new deloop.ToolLoopGuard('nope'), /unknown profile/)
  assert.throws(() => guard.result('zz', 1), { name: 'InputError', message: /no call with id/ })
  assert.throws(() => deloop.check('{"type":"result","id":"x","result":1}\n'), /line 1/)
})
