//! The `connections` table of `[server]` and `[proxy]`: how long a client
//! connection may take to send its request, how long it may stay idle, and
//! how many may be open at once (docs/deployment.md explains each).

use std::time::Duration;

use serde::Deserialize;

use crate::server::SettingsError;

/// `[server.connections]`, `[proxy.connections]`: deadlines and the cap on
/// client connections, so that slow or silent clients cannot hold them.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionSettings {
    /// Seconds a connection has to send a complete request head, from its
    /// first byte (or from the accept); past it the connection is closed.
    /// Default 10 (1 to 300).
    pub header_read_timeout_secs: u64,
    /// Seconds a kept-alive connection may stay open with no request in
    /// flight. Default 60 (1 to 3600).
    pub keep_alive_timeout_secs: u64,
    /// Seconds a request's whole body has to arrive, from its head; past it
    /// the request is answered 408 and its concurrency permit freed.
    /// Default 60 (1 to 3600).
    pub body_read_timeout_secs: u64,
    /// Connections open at once. At the cap the connection waiting longest
    /// without a request in flight is closed to make room; when every one
    /// has a request in flight, a new one is refused with 503. Keep it
    /// below the process's file limit (`ulimit -n`). Default 4096 (1 to
    /// 1,000,000).
    pub max_connections: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            header_read_timeout_secs: 10,
            keep_alive_timeout_secs: 60,
            body_read_timeout_secs: 60,
            max_connections: 4096,
        }
    }
}

/// The keys of one table, for errors (`server.connections.…`).
struct Keys {
    header: &'static str,
    keep_alive: &'static str,
    body: &'static str,
    max: &'static str,
}

const SERVER_KEYS: Keys = Keys {
    header: "server.connections.header_read_timeout_secs",
    keep_alive: "server.connections.keep_alive_timeout_secs",
    body: "server.connections.body_read_timeout_secs",
    max: "server.connections.max_connections",
};

const PROXY_KEYS: Keys = Keys {
    header: "proxy.connections.header_read_timeout_secs",
    keep_alive: "proxy.connections.keep_alive_timeout_secs",
    body: "proxy.connections.body_read_timeout_secs",
    max: "proxy.connections.max_connections",
};

/// Which table a [`ConnectionSettings`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `[server.connections]`.
    Server,
    /// `[proxy.connections]`.
    Proxy,
}

impl ConnectionSettings {
    /// Checks every value against its bounds; the error names the key.
    pub fn validate(&self, table: Table) -> Result<(), SettingsError> {
        let keys = match table {
            Table::Server => &SERVER_KEYS,
            Table::Proxy => &PROXY_KEYS,
        };
        let within = |key: &'static str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(SettingsError {
                    key,
                    message: format!("{v} is out of range: use {lo} to {hi}"),
                })
            }
        };
        within(keys.header, self.header_read_timeout_secs, 1, 300)?;
        within(keys.keep_alive, self.keep_alive_timeout_secs, 1, 3600)?;
        within(keys.body, self.body_read_timeout_secs, 1, 3600)?;
        within(keys.max, self.max_connections as u64, 1, 1_000_000)
    }

    /// [`ConnectionSettings::body_read_timeout_secs`] as a duration.
    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_secs(self.body_read_timeout_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bounds_name_the_key() {
        ConnectionSettings::default()
            .validate(Table::Server)
            .unwrap();
        for (s, key) in [
            (
                ConnectionSettings {
                    header_read_timeout_secs: 0,
                    ..Default::default()
                },
                "proxy.connections.header_read_timeout_secs",
            ),
            (
                ConnectionSettings {
                    keep_alive_timeout_secs: 3601,
                    ..Default::default()
                },
                "proxy.connections.keep_alive_timeout_secs",
            ),
            (
                ConnectionSettings {
                    body_read_timeout_secs: 0,
                    ..Default::default()
                },
                "proxy.connections.body_read_timeout_secs",
            ),
            (
                ConnectionSettings {
                    max_connections: 0,
                    ..Default::default()
                },
                "proxy.connections.max_connections",
            ),
        ] {
            let err = s.validate(Table::Proxy).unwrap_err();
            assert_eq!(err.key, key);
            assert!(err.message.contains("out of range"), "{err}");
        }
    }

    #[test]
    fn a_toml_table_reads_and_unknown_keys_are_errors() {
        let s: ConnectionSettings = toml::from_str("max_connections = 8").unwrap();
        assert_eq!(s.max_connections, 8);
        assert_eq!(s.header_read_timeout_secs, 10);
        assert!(toml::from_str::<ConnectionSettings>("max_conns = 8").is_err());
    }
}
