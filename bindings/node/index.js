'use strict'
// deloop for Node: the native guards (native.js, built by `napi build`)
// with the package's JavaScript surface: error classes, the OpenClaw
// drop-in (`detectToolCallLoop`, `recordToolCall`, `recordToolCallOutcome`)
// and `guardStream` for async-iterable streams. Nothing is judged here.

const native = require('./native.js')

/** Base of deloop's errors; the message is the command line's. */
class DeloopError extends Error {}
/** Bad input or settings. */
class InputError extends DeloopError {}
/** The input holds nothing to rescue. */
class NotFoundError extends DeloopError {}
for (const [C, name] of [
  [DeloopError, 'DeloopError'],
  [InputError, 'InputError'],
  [NotFoundError, 'NotFoundError'],
]) {
  Object.defineProperty(C.prototype, 'name', { value: name })
}

// Native errors carry `code` InvalidArg (input) or GenericFailure (nothing
// rescued); other errors (a wrong argument type) pass unchanged.
function wrap(fn) {
  return function deloopCall(...args) {
    try {
      return fn.apply(this, args)
    } catch (e) {
      if (e && e.code === 'InvalidArg') throw new InputError(e.message)
      if (e && e.code === 'GenericFailure') throw new NotFoundError(e.message)
      throw e
    }
  }
}

const clamp = wrap(native.clamp)
const clampRepetition = wrap(native.clampRepetition)
const clampSubstringRepetition = wrap(native.clampSubstringRepetition)
const nativeRescue = wrap(native.rescueJson)
/** The value of `key` from broken JSON model output, or the whole repaired document. */
function rescueJson(text, key, options) {
  return JSON.parse(nativeRescue(text, key, options))
}
const repairJson = wrap(native.repairJson)
const check = wrap(native.check)

/** A text stream under the loop guard (see index.d.ts). */
class StreamGuard {
  constructor(options) {
    this._g = wrap(() => new native.StreamGuard(options))()
  }
  push(chunk) {
    return wrap(() => this._g.push(chunk))()
  }
  finish() {
    return wrap(() => this._g.finish())()
  }
  get cut() {
    return this._g.cut
  }
  get received() {
    return this._g.received
  }
}

/** One agent's tool calls judged as they happen (see index.d.ts). */
class ToolLoopGuard {
  constructor(profile, config) {
    this._g = wrap(() => new native.ToolLoopGuard(profile, config))()
  }
  call(tool, args, options) {
    return wrap(() => this._g.call(tool, args === undefined ? null : args, options))()
  }
  result(id, result, options) {
    return wrap(() => this._g.result(id, result, options))()
  }
  compaction(options) {
    return wrap(() => this._g.compaction(options))()
  }
  get adjustments() {
    return this._g.adjustments
  }
}

// ---- OpenClaw drop-in -------------------------------------------------
// OpenClaw keeps a session's history in `state.toolCallHistory` and
// `detectToolCallLoop` only reads it; `recordToolCall` and
// `recordToolCallOutcome` write it. Here each state object gets a hidden
// deloop guard (profile `openclaw`) that judges and records a call at
// once: `detectToolCallLoop` judges and remembers the call, and the
// following `recordToolCall` of that same call records nothing more.

const guards = new WeakMap()

function sessionOf(state, config) {
  let s = guards.get(state)
  if (!s) {
    s = { guard: new ToolLoopGuard('openclaw', config ?? null), pending: null }
    guards.set(state, s)
  }
  return s
}

function runOf(scope) {
  return typeof scope?.runId === 'string' && scope.runId.trim() !== '' ? scope.runId.trim() : undefined
}

function callKey(toolName, params, run) {
  return JSON.stringify([toolName, params ?? null, run ?? null])
}

/**
 * OpenClaw's `detectToolCallLoop(state, toolName, params, config, scope)`:
 * `{ stuck: false }` or `{ stuck: true, level, detector, count, message,
 * warningKey }`, judged by deloop's `openclaw` profile.
 */
function detectToolCallLoop(state, toolName, params, config, scope) {
  if (!config?.enabled) return { stuck: false }
  const s = sessionOf(state, config)
  const run = runOf(scope)
  const v = s.guard.call(toolName, params ?? null, { run })
  s.pending = callKey(toolName, params, run)
  if (v.level === 'ok') return { stuck: false }
  return {
    stuck: true,
    level: v.level,
    detector: v.detector,
    count: v.count,
    message: v.message,
    warningKey: `${v.detector}:${toolName}:${v.fingerprint ?? ''}`,
  }
}

/** OpenClaw's `recordToolCall(state, toolName, params, toolCallId, config, scope)`. */
function recordToolCall(state, toolName, params, toolCallId, config, scope) {
  const s = sessionOf(state, config)
  const run = runOf(scope)
  const key = callKey(toolName, params, run)
  if (s.pending === key) {
    s.pending = null
    return
  }
  s.pending = null
  s.guard.call(toolName, params ?? null, { run })
}

/**
 * OpenClaw's `recordToolCallOutcome(state, { toolName, toolParams,
 * toolCallId, result, error, runId })`: attaches the outcome to the oldest
 * call of that tool with those arguments still waiting.
 */
function recordToolCallOutcome(state, params) {
  const s = guards.get(state)
  if (!s) return undefined
  const run = runOf({ runId: params.runId })
  const error = params.error === undefined || params.error === null
    ? undefined
    : typeof params.error === 'string' ? params.error : JSON.stringify(params.error)
  try {
    return s.guard.result(null, error === undefined ? (params.result ?? null) : undefined, {
      error,
      tool: params.toolName,
      args: params.toolParams ?? null,
      run,
    })
  } catch (e) {
    // OpenClaw records an outcome without a waiting call as a record of
    // its own; deloop has nothing to attach it to and ignores it.
    if (e instanceof InputError) return undefined
    throw e
  }
}

// ---- Streams -----------------------------------------------------------

function textDelta(event) {
  if (typeof event === 'string') return event
  if (event == null || typeof event !== 'object') return null
  if (Array.isArray(event.choices)) {
    let text = ''
    for (const c of event.choices) {
      if ((c.index ?? 0) === 0 && typeof c.delta?.content === 'string') text += c.delta.content
    }
    return text || null
  }
  if (event.type === 'response.output_text.delta' && typeof event.delta === 'string') return event.delta
  if (event.type === 'content_block_delta' && event.delta?.type === 'text_delta') return event.delta.text
  return null
}

/**
 * Guards an async-iterable stream (strings, OpenAI chunks, Responses
 * events, Anthropic events): yields the safe text deltas; on a cut it
 * yields the marker, aborts the request (`options.abort`: an
 * AbortController, or a function) and ends the iteration.
 */
async function* guardStream(stream, options = {}) {
  const { abort, onCut, ...settings } = options
  const guard = new StreamGuard(settings)
  const iterator = stream[Symbol.asyncIterator]()
  let cut = false
  try {
    for (;;) {
      const { value, done } = await iterator.next()
      if (done) break
      const delta = textDelta(value)
      if (delta == null || delta === '') continue
      const safe = guard.push(delta)
      if (safe) yield safe
      if (guard.cut) {
        cut = true
        break
      }
    }
    if (!cut) {
      const rest = guard.finish()
      if (rest) yield rest
    }
  } finally {
    if (cut) {
      if (typeof abort === 'function') abort()
      else if (abort && typeof abort.abort === 'function') abort.abort()
      else if (typeof stream.controller?.abort === 'function') stream.controller.abort()
      if (typeof onCut === 'function') onCut(guard.cut)
    }
    if (typeof iterator.return === 'function') {
      try {
        await iterator.return()
      } catch {
        // The aborted request's own error: the stream is over either way.
      }
    }
  }
}

module.exports = {
  DeloopError,
  InputError,
  NotFoundError,
  clamp,
  clampRepetition,
  clampSubstringRepetition,
  rescueJson,
  repairJson,
  check,
  StreamGuard,
  ToolLoopGuard,
  detectToolCallLoop,
  recordToolCall,
  recordToolCallOutcome,
  guardStream,
  textDelta,
}
