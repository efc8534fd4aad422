//! The server-side scripts. Each touches the two keys of one session, which
//! share a hash tag, so each runs on one slot of a cluster.
//!
//! A session is a hash `m` (`epoch`, `seq`, `snapv`, `bytes`, `name`,
//! `snap`) and a list `l`: the events after the snapshot, the `i`-th
//! (0-based) being event number `snapv + 1 + i`. `snap` is the session's
//! state after event `snapv` (absent while `snapv` is 0). `epoch` is chosen
//! when the session is created, so a process never mistakes a new session
//! for an old one of the same name (forgotten or expired in between).

use redis::Script;

/// Appends one event and answers what the judge needs.
///
/// KEYS: meta, log. ARGV: event, the caller's epoch, the caller's event
/// number (the state it holds), TTL in ms, the log's cap in events, its cap
/// in bytes, an epoch for a new session, the session's name.
///
/// Answers `{epoch, seq, snapv, from, snap|nil, bytes, reset, entries}`:
/// the caller continues from the state after event `from` (its own, or the
/// snapshot's when `from` is `snapv`) by applying `entries`, events
/// `from + 1 ..= seq`; the last is the caller's. `reset` is 1 when the
/// session had lost a key (evicted) and started again.
pub(crate) const EVENT: &str = r#"
local m, l = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', m, 'epoch')
local reset = 0
if epoch then
  local seq = tonumber(redis.call('HGET', m, 'seq'))
  local snapv = tonumber(redis.call('HGET', m, 'snapv'))
  if redis.call('LLEN', l) ~= seq - snapv then
    redis.call('DEL', m, l)
    epoch = false
    reset = 1
  end
end
if not epoch then
  epoch = ARGV[7]
  redis.call('DEL', l)
  redis.call('HSET', m, 'epoch', epoch, 'seq', 0, 'snapv', 0, 'bytes', 0, 'name', ARGV[8])
end
local snapv = tonumber(redis.call('HGET', m, 'snapv'))
local len = tonumber(redis.call('HGET', m, 'seq')) - snapv
local bytes = tonumber(redis.call('HGET', m, 'bytes'))
if len >= tonumber(ARGV[5]) or bytes + #ARGV[1] > tonumber(ARGV[6]) then
  return redis.error_reply('DELOOPFULL the session log holds ' .. len .. ' events and ' .. bytes .. ' bytes')
end
redis.call('RPUSH', l, ARGV[1])
local seq = redis.call('HINCRBY', m, 'seq', 1)
bytes = redis.call('HINCRBY', m, 'bytes', #ARGV[1])
local ttl = tonumber(ARGV[4])
redis.call('PEXPIRE', m, ttl)
redis.call('PEXPIRE', l, ttl)
local from = tonumber(ARGV[3])
local snap = false
if epoch ~= ARGV[2] or from < snapv or from >= seq then
  from = snapv
  if snapv > 0 then snap = redis.call('HGET', m, 'snap') end
end
return {epoch, seq, snapv, from, snap, bytes, reset, redis.call('LRANGE', l, from - snapv, -1)}
"#;

/// Saves the state after event `version` and drops the events it covers.
///
/// KEYS: meta, log. ARGV: epoch, version, snapshot, TTL in ms. Answers 1
/// when saved, 0 when the session changed epoch or a snapshot as new or
/// newer is already there.
pub(crate) const SNAPSHOT: &str = r#"
local m, l = KEYS[1], KEYS[2]
if redis.call('HGET', m, 'epoch') ~= ARGV[1] then return 0 end
local snapv = tonumber(redis.call('HGET', m, 'snapv'))
local seq = tonumber(redis.call('HGET', m, 'seq'))
local ver = tonumber(ARGV[2])
if ver <= snapv or ver > seq then return 0 end
local n = ver - snapv
local dropped = 0
for _, e in ipairs(redis.call('LRANGE', l, 0, n - 1)) do dropped = dropped + #e end
redis.call('LTRIM', l, n, -1)
redis.call('HINCRBY', m, 'bytes', -dropped)
redis.call('HSET', m, 'snapv', ver, 'snap', ARGV[3])
local ttl = tonumber(ARGV[4])
redis.call('PEXPIRE', m, ttl)
if redis.call('EXISTS', l) == 1 then redis.call('PEXPIRE', l, ttl) end
return 1
"#;

/// Reads a whole session without changing it: the same answer as
/// [`EVENT`] with `from = snapv`, or nil when there is no such session.
pub(crate) const READ: &str = r#"
local m, l = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', m, 'epoch')
if not epoch then return false end
local snapv = tonumber(redis.call('HGET', m, 'snapv'))
local seq = tonumber(redis.call('HGET', m, 'seq'))
local snap = false
if snapv > 0 then snap = redis.call('HGET', m, 'snap') end
return {epoch, seq, snapv, snapv, snap, tonumber(redis.call('HGET', m, 'bytes')), 0, redis.call('LRANGE', l, 0, -1)}
"#;

/// What the listing shows of one session, without changing it.
///
/// KEYS: meta. Answers `{name, seq, pttl}`, or nil when the key is gone or
/// is not a session's.
pub(crate) const SUMMARY: &str = r#"
local m = KEYS[1]
if redis.call('TYPE', m).ok ~= 'hash' then return false end
local v = redis.call('HMGET', m, 'name', 'seq')
if not v[1] or not v[2] then return false end
return {v[1], tonumber(v[2]), redis.call('PTTL', m)}
"#;

/// The scripts, hashed once (sent by `EVALSHA`, loaded on a miss).
pub(crate) struct Scripts {
    pub event: Script,
    pub snapshot: Script,
    pub read: Script,
    pub summary: Script,
}

impl Scripts {
    pub fn new() -> Self {
        Scripts {
            event: Script::new(EVENT),
            snapshot: Script::new(SNAPSHOT),
            read: Script::new(READ),
            summary: Script::new(SUMMARY),
        }
    }
}
