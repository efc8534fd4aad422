'use strict'
// Shared helpers of the package's tests: the repository, the `deloop`
// binary the differential tests compare against, and the data rule of the
// Rust suites (one printed line and a skip, unless CI=true).

const path = require('node:path')
const fs = require('node:fs')
const { spawnSync } = require('node:child_process')

const ROOT = path.resolve(__dirname, '..', '..', '..')

function flag(name) {
  const v = (process.env[name] || '').trim().toLowerCase()
  return v !== '' && v !== '0' && v !== 'false'
}

/** The real-data path under shared/, or null after one line (a failure when CI=true). */
function sharedData(rel, suite) {
  const base = process.env.DELOOP_SHARED_DIR || path.join(ROOT, '..', 'shared')
  const p = path.join(base, rel)
  if (fs.existsSync(p)) return p
  const msg = `${suite}: skipped, real data ${p} not found (put deloop's shared data folder beside the checkout or set DELOOP_SHARED_DIR)`
  if (flag('CI') || flag('DELOOP_REQUIRE_DATA')) {
    throw new Error(`${msg}; CI=true or DELOOP_REQUIRE_DATA=1 makes missing data a failure`)
  }
  process.stderr.write(msg + '\n')
  return null
}

function realRequired() {
  return flag('CI') || flag('DELOOP_REQUIRE_REAL')
}

function corpus(name) {
  const p = path.join(ROOT, 'testdata', 'corpora', name)
  if (!fs.existsSync(p)) throw new Error(`vendored corpus ${p} is missing from the checkout`)
  return p
}

let bin
/** The `deloop` command line: $DELOOP_BIN, else target/debug/deloop (built when missing). */
function deloopBin() {
  if (bin) return bin
  if (process.env.DELOOP_BIN) return (bin = process.env.DELOOP_BIN)
  const target = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target')
  bin = path.join(target, 'debug', 'deloop')
  if (!fs.existsSync(bin)) {
    const r = spawnSync('cargo', ['build', '-q', '-p', 'deloop'], { cwd: ROOT, stdio: 'inherit' })
    if (r.status !== 0) throw new Error('cargo build -p deloop failed')
  }
  return bin
}

/** Runs the command line: { code, stdout, stderr }. */
function runCli(args, input) {
  const r = spawnSync(deloopBin(), args, { input, maxBuffer: 1 << 28, timeout: 120000 })
  return { code: r.status, stdout: r.stdout.toString(), stderr: r.stderr.toString() }
}

module.exports = { ROOT, sharedData, realRequired, corpus, runCli }
