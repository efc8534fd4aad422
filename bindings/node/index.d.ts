// Types of the `deloop` Node package (index.js over the native addon).

/** Base of deloop's errors; the message is the command line's. */
export declare class DeloopError extends Error {}
/** Bad input or settings (invalid UTF-8, out-of-range settings, limits, bad transcripts). */
export declare class InputError extends DeloopError {}
/** The input holds nothing to rescue (no JSON, or no such key). */
export declare class NotFoundError extends DeloopError {}

/** A table of the config file (`[words]`, `[substring]`, …) with its key names. */
export type Table = Record<string, unknown>

/** Guard settings: `seedCompat`, or the config file's tables. */
export interface ClampOptions {
  seedCompat?: boolean
  words?: Table
  substring?: Table
  healthy?: Table
  near?: Table
  /** Replace invalid UTF-8 in a Buffer with U+FFFD instead of refusing it. */
  lossy?: boolean
}

export interface Report {
  detector: string
  period: number
  unit: string
  start: number
  keepBytes: number
  removedBytes: number
}

/** The fields of `deloop clamp --json`, in camelCase. */
export interface ClampResult {
  text: string
  clamped: boolean
  detector?: string
  period?: number
  unit?: string
  start?: number
  keepBytes?: number
  removedBytes?: number
  reports: Report[]
}

/** Cuts repetition loops out of `text`, as `deloop clamp` does. */
export declare function clamp(text: string | Buffer, options?: ClampOptions): ClampResult
/** The seed's `clampRepetition`; with `seedCompat` exactly the seed's output, without it deloop's whole guard. */
export declare function clampRepetition(text: string | Buffer, options?: ClampOptions): string
/** The seed's `clampSubstringRepetition`; with `seedCompat` exactly the seed's output. */
export declare function clampSubstringRepetition(text: string | Buffer, options?: ClampOptions): string

export interface Cut {
  detector: string
  period: number
  unit: string
  start: number
  keepBytes: number
  marker: string
  savedChars: number
  lateBytes: number
}

export interface StreamGuardOptions extends ClampOptions {
  /** Hold back what a later cut could still remove (default true). */
  exact?: boolean
}

/** A text stream under the loop guard: show what `push` returns; once `cut` is set, stop. */
export declare class StreamGuard {
  constructor(options?: StreamGuardOptions)
  push(chunk: string): string
  push(chunk: Buffer): Buffer
  finish(): string | Buffer
  get cut(): Cut | null
  get received(): number
}

/** The value of `key` from broken JSON model output, or the whole repaired document. */
export declare function rescueJson(text: string | Buffer, key?: string | null, options?: { lossy?: boolean }): unknown
/** One valid, compact JSON document recovered from broken model output. */
export declare function repairJson(text: string | Buffer, options?: { lossy?: boolean }): string

export interface Verdict {
  index: number
  level: 'ok' | 'warning' | 'critical'
  detector?: string
  count?: number
  message: string
  fingerprint?: string
  id?: string
  tool?: string
  terminateRun: boolean
}

/** One agent's tool calls judged as they happen (the session API's judge, in process). */
export declare class ToolLoopGuard {
  constructor(profile?: 'default' | 'openclaw' | 'strict' | null, config?: Record<string, unknown> | null)
  call(tool: string, args?: unknown, options?: { id?: string; agent?: string; run?: string }): Verdict
  result(
    id: string | null | undefined,
    result?: unknown,
    options?: { error?: string; tool?: string; args?: unknown; agent?: string; run?: string },
  ): Verdict | null
  compaction(options?: { agent?: string; run?: string }): void
  get adjustments(): string[]
}

/** Replays a transcript as `deloop check --json`: one verdict per call. */
export declare function check(
  transcript: string | Buffer,
  options?: { format?: 'auto' | 'events' | 'openai' | 'anthropic'; profile?: string; config?: Record<string, unknown>; lossy?: boolean },
): Verdict[]

/** OpenClaw's session state (its `toolCallHistory` is not used). */
export type OpenClawState = object
export type LoopDetectionResult =
  | { stuck: false }
  | { stuck: true; level: 'warning' | 'critical'; detector: string; count: number; message: string; warningKey: string }

/** OpenClaw's `detectToolCallLoop`, judged by deloop's `openclaw` profile. */
export declare function detectToolCallLoop(
  state: OpenClawState,
  toolName: string,
  params: unknown,
  config?: { enabled?: boolean; [key: string]: unknown },
  scope?: { runId?: string },
): LoopDetectionResult
/** OpenClaw's `recordToolCall`. */
export declare function recordToolCall(
  state: OpenClawState,
  toolName: string,
  params: unknown,
  toolCallId?: string,
  config?: { enabled?: boolean; [key: string]: unknown },
  scope?: { runId?: string },
): void
/** OpenClaw's `recordToolCallOutcome`. */
export declare function recordToolCallOutcome(
  state: OpenClawState,
  params: { toolName: string; toolParams: unknown; toolCallId?: string; result?: unknown; error?: unknown; runId?: string },
): Verdict | null | undefined

export interface GuardStreamOptions extends StreamGuardOptions {
  /** Aborted on a cut: an AbortController, or a function. */
  abort?: AbortController | (() => void)
  /** Called with the cut. */
  onCut?: (cut: Cut) => void
}

/** The safe text deltas of an async-iterable stream; aborts the request on a cut. */
export declare function guardStream(stream: AsyncIterable<unknown>, options?: GuardStreamOptions): AsyncGenerator<string>

/** The text an SDK stream event adds to the reply, if any. */
export declare function textDelta(event: unknown): string | null
