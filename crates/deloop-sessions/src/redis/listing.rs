//! The session listing of a shared store: `SCAN` with `MATCH` on the
//! sessions' meta keys (`<prefix>:{<hash>}:m`) and a `COUNT`, node by node
//! (every primary of a cluster), then each session's name, event number
//! and TTL read by the [`SUMMARY`](super::scripts::SUMMARY) script.
//!
//! The cursor is `<node>-<scan cursor>`: the index of the node in the
//! address order of the primaries, and that node's `SCAN` cursor. A page
//! stops after [`MAX_SCAN_STEPS`] steps even when it holds fewer sessions
//! than asked, so a keyspace full of other keys costs each request a
//! bounded amount of work; the client follows `next`.

use futures_util::StreamExt as _;

use super::RedisStore;
use crate::{SessionError, SessionPage, SessionSummary, MAX_CURSOR_BYTES, MAX_LIST_LIMIT};

/// `SCAN` steps one page takes at most.
const MAX_SCAN_STEPS: usize = 32;
/// Sessions whose summary is read at once.
const SUMMARY_CONCURRENCY: usize = 16;

/// Where a listing stands: a node and its `SCAN` cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    node: usize,
    scan: u64,
}

impl Position {
    fn parse(cursor: Option<&str>) -> Result<Self, SessionError> {
        let Some(c) = cursor else {
            return Ok(Position { node: 0, scan: 0 });
        };
        let bad = || {
            SessionError::Invalid(format!(
                "the cursor {:?} is not one this store made; pass a page's `next`",
                c.chars().take(64).collect::<String>()
            ))
        };
        if c.len() > MAX_CURSOR_BYTES {
            return Err(bad());
        }
        let (node, scan) = c.split_once('-').ok_or_else(bad)?;
        Ok(Position {
            node: node.parse().map_err(|_| bad())?,
            scan: scan.parse().map_err(|_| bad())?,
        })
    }

    fn render(self) -> String {
        format!("{}-{}", self.node, self.scan)
    }
}

/// `prefix` with the glob characters of `MATCH` escaped.
fn glob_escape(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl RedisStore {
    /// One page of the listing (see the [module docs](self)).
    pub(super) async fn list_page(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<SessionPage, SessionError> {
        let mut at = Position::parse(cursor)?;
        let limit = limit.clamp(1, MAX_LIST_LIMIT);
        let conn = self
            .conn
            .get()
            .await
            .map_err(|e| self.store_error("connecting", &e))?;
        let nodes = conn
            .scan_nodes()
            .await
            .map_err(|e| self.store_error("listing the cluster's primaries", &e))?;
        if at.node >= nodes.len() {
            // The cluster lost a primary since the cursor was made.
            return Ok(SessionPage {
                sessions: Vec::new(),
                next: None,
            });
        }
        let pattern = format!("{}:{{*}}:m", glob_escape(&self.settings.key_prefix));
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut steps = 0;
        while keys.len() < limit && at.node < nodes.len() && steps < MAX_SCAN_STEPS {
            let (next, found) = conn
                .scan(&nodes[at.node], at.scan, &pattern, limit - keys.len())
                .await
                .map_err(|e| self.store_error("listing sessions", &e))?;
            keys.extend(found);
            steps += 1;
            at = if next == 0 {
                Position {
                    node: at.node + 1,
                    scan: 0,
                }
            } else {
                Position {
                    node: at.node,
                    scan: next,
                }
            };
        }
        let summaries: Vec<Option<SessionSummary>> = futures_util::stream::iter(keys)
            .map(|k| self.summary(k))
            .buffered(SUMMARY_CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let mut sessions: Vec<SessionSummary> = summaries.into_iter().flatten().collect();
        sessions.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(SessionPage {
            sessions,
            next: (at.node < nodes.len()).then(|| at.render()),
        })
    }

    /// The summary of the session whose meta key is `key`; `None` when it
    /// expired meanwhile or the key is not a session's.
    async fn summary(&self, key: Vec<u8>) -> Result<Option<SessionSummary>, SessionError> {
        let conn = self
            .conn
            .get()
            .await
            .map_err(|e| self.store_error("connecting", &e))?;
        let mut inv = self.scripts.summary.prepare_invoke();
        inv.key(key);
        let got: Option<(String, u64, i64)> = conn
            .invoke(&inv)
            .await
            .map_err(|e| self.store_error("reading a session's summary", &e))?;
        let ttl = u64::try_from(self.settings.idle_ttl.as_millis()).unwrap_or(u64::MAX);
        Ok(got.map(|(session, events, pttl)| SessionSummary {
            session,
            events,
            // A key without a TTL (-1) was touched by something else: it
            // reads as just used.
            idle_ms: ttl.saturating_sub(u64::try_from(pttl).unwrap_or(ttl)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_hostile_ones_are_refused() {
        let p = Position { node: 2, scan: 981 };
        assert_eq!(Position::parse(Some(&p.render())).unwrap(), p);
        assert_eq!(
            Position::parse(None).unwrap(),
            Position { node: 0, scan: 0 }
        );
        for bad in [
            "",
            "x",
            "1-",
            "-1",
            "1-2-3",
            "99999999999999999999999-1",
            "a-b",
        ] {
            assert!(
                matches!(Position::parse(Some(bad)), Err(SessionError::Invalid(_))),
                "{bad:?}"
            );
        }
        let long = "1".repeat(MAX_CURSOR_BYTES + 1);
        assert!(Position::parse(Some(&long)).is_err());
    }

    #[test]
    fn the_prefix_is_matched_literally() {
        assert_eq!(glob_escape("deloop"), "deloop");
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
