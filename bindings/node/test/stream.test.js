'use strict'
// guardStream on a real HTTP stream: a server on 127.0.0.1 streams a
// looping reply (OpenAI chat chunks as server-sent events) without end;
// the guard yields the healthy text and the marker, then aborts the
// request, which the server sees as a closed connection.

const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const deloop = require('..')

const INTRO = 'Here is the plan for the migration of the archive. '
const UNIT = 'we check the logs and then '
const MAX_DELTAS = 20000

function loopServer() {
  const state = { sent: 0, closedByClient: null }
  let resolveClosed
  state.closedByClient = new Promise((r) => (resolveClosed = r))
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    let i = 0
    const timer = setInterval(() => {
      if (i > MAX_DELTAS) {
        clearInterval(timer)
        res.end('data: [DONE]\n\n')
        return
      }
      const content = i === 0 ? INTRO : UNIT
      const chunk = { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] }
      res.write(`data: ${JSON.stringify(chunk)}\n\n`)
      state.sent += 1
      i += 1
    }, 1)
    res.on('close', () => {
      clearInterval(timer)
      if (i <= MAX_DELTAS) resolveClosed(true)
    })
  })
  return { server, state }
}

// Server-sent events from a fetch body, parsed into chunk objects.
async function* sseEvents(body) {
  const decoder = new TextDecoder()
  let buf = ''
  for await (const bytes of body) {
    buf += decoder.decode(bytes, { stream: true })
    let end
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end)
      buf = buf.slice(end + 2)
      const data = event.startsWith('data: ') ? event.slice(6) : null
      if (data && data !== '[DONE]') yield JSON.parse(data)
    }
  }
}

test('guardStream aborts the request on a cut', async () => {
  const { server, state } = loopServer()
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  try {
    const controller = new AbortController()
    const res = await fetch(`http://127.0.0.1:${server.address().port}/v1/chat/completions`, {
      method: 'POST',
      body: '{}',
      signal: controller.signal,
    })
    let cut = null
    let text = ''
    for await (const delta of deloop.guardStream(sseEvents(res.body), { abort: controller, onCut: (c) => (cut = c) })) {
      text += delta
    }
    assert.equal(cut.detector, 'word_period')
    assert.ok(text.startsWith(INTRO))
    assert.ok(text.endsWith(' […]'))
    assert.equal(controller.signal.aborted, true)
    // The wait is a deadline, not a measurement.
    const closed = await Promise.race([state.closedByClient, new Promise((r) => setTimeout(() => r(false), 60000))])
    assert.equal(closed, true, 'the client did not close the connection')
    assert.ok(state.sent < MAX_DELTAS)
  } finally {
    server.closeAllConnections()
    await new Promise((r) => server.close(r))
  }
})
