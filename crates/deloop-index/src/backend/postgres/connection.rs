//! Connections to one PostgreSQL database: the URL (and its password,
//! never printed: [`redact`]), a small tokio runtime and a deadpool pool
//! shared by every index opened on the same URL in the process, the
//! deadlines of each call, and what a failure means ([`Failure`]: the
//! server is unreachable, or a statement is wrong).

use crate::backend::redact;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::{Error, Result};

/// The variable read for the password when the URL has none (then
/// `PGPASSWORD`).
pub const PASSWORD_ENV: &str = "DELOOP_DB_PASSWORD";
/// Connections per database URL and process.
const POOL_SIZE: usize = 16;
/// Added to a read's deadline so the server's own `statement_timeout`
/// (which names the statement) usually answers first.
const CALL_MARGIN: Duration = Duration::from_secs(1);
/// A write (one transaction of many statements, each bounded by the
/// timeout) may take this many timeouts in all.
const WRITE_TIMEOUTS: u32 = 20;

/// A failure inside a database call, named with the database afterwards.
pub(super) enum Failure {
    /// From the server or the connection.
    Db(tokio_postgres::Error),
    /// From the pool (no connection in time, or connecting failed).
    Pool(deadpool_postgres::PoolError),
    /// A failure of deloop's own (a check, a bad schema).
    Index(Error),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Db(e)
    }
}

impl From<deadpool_postgres::PoolError> for Failure {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Failure::Pool(e)
    }
}

impl Failure {
    fn into_error(self, location: &str, timeout: Duration) -> Error {
        const CHECK: &str = "check that the server is running and that the URL (host, port, \
                             user, database) and the password (in the URL or DELOOP_DB_PASSWORD) \
                             are right";
        match self {
            Failure::Index(e) => e,
            Failure::Db(e) | Failure::Pool(deadpool_postgres::PoolError::Backend(e)) => {
                let message = db_message(location, &e, CHECK);
                if unreachable(&e) {
                    Error::Unavailable(message)
                } else {
                    Error::Postgres(message)
                }
            }
            Failure::Pool(deadpool_postgres::PoolError::Timeout(_)) => Error::Unavailable(format!(
                "PostgreSQL index {location}: no connection within {} ms ({CHECK}; \
                 [index] db_timeout_ms sets the wait)",
                timeout.as_millis()
            )),
            Failure::Pool(e) => Error::Postgres(format!("PostgreSQL index {location}: {e}")),
        }
    }
}

/// True when `e` says the server cannot be reached now rather than that a
/// statement is wrong: no server error at all (I/O, a closed connection, a
/// connect timeout), or SQLSTATE class 08 (connection), 57P01-57P03
/// (shutdown, crash, starting up), 53300 (too many connections) or 57014
/// (a statement cancelled at `statement_timeout`: the server is too slow
/// now, which a retry may not be).
fn unreachable(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08")
                || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "57014")
        }
    }
}

fn db_message(location: &str, e: &tokio_postgres::Error, check: &str) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut m = format!("PostgreSQL index {location}: {}", db.message());
            if let Some(d) = db.detail() {
                m.push_str(&format!(" ({d})"));
            }
            if let Some(h) = db.hint() {
                m.push_str(&format!("; {h}"));
            }
            m
        }
        None => {
            let cause = std::error::Error::source(e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            format!("PostgreSQL index {location}: {e}{cause}; {check}")
        }
    }
}

pub(super) type CallResult<T> = std::result::Result<T, Failure>;

/// A tokio runtime that is shut down without waiting when dropped (a drop
/// inside another runtime must not block it).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The runtime and pool of one database URL, shared in the process.
pub(super) struct Shared {
    rt: OwnedRuntime,
    pool: Pool,
    /// The URL without its password.
    pub(super) location: String,
    /// Connecting, waiting for a pooled connection, each statement.
    timeout: Duration,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("location", &self.location)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The shared runtime and pool for `url` and `timeout` (made on first
    /// use).
    pub(super) fn for_url(url: &str, timeout: Duration) -> Result<Arc<Shared>> {
        type Registry = Vec<((String, Duration), Weak<Shared>)>;
        static SHARED: Mutex<Registry> = Mutex::new(Vec::new());
        let mut all = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = all
            .iter()
            .find(|((u, t), _)| u == url && *t == timeout)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(s);
        }
        let shared = Arc::new(Shared::new(url, timeout)?);
        all.push(((url.to_string(), timeout), Arc::downgrade(&shared)));
        Ok(shared)
    }

    pub(super) fn new(url: &str, timeout: Duration) -> Result<Shared> {
        let location = redact(url);
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| {
            Error::BadInput(format!(
                "invalid PostgreSQL URL {location}: {e}; expected postgres://USER@HOST:PORT/DATABASE"
            ))
        })?;
        if config.get_password().is_none() {
            let from_env = [PASSWORD_ENV, "PGPASSWORD"]
                .iter()
                .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
            if let Some(p) = from_env {
                config.password(p);
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(timeout);
        }
        // The URL's own `options` come after, so a `statement_timeout`
        // there wins.
        let statement = format!("-c statement_timeout={}", timeout.as_millis());
        let options = match config.get_options() {
            Some(o) => format!("{statement} {o}"),
            None => statement,
        };
        config.options(options);
        if config.get_application_name().is_none() {
            config.application_name("deloop");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("deloop-postgres")
            .enable_all()
            .build()
            .map_err(|source| Error::Io {
                path: "a runtime for PostgreSQL".into(),
                source,
            })?;
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
            .build()
            .map_err(|e| Error::Postgres(format!("PostgreSQL index {location}: {e}")))?;
        Ok(Shared {
            rt: OwnedRuntime(Some(rt)),
            pool,
            location,
            timeout,
        })
    }

    /// Runs `f` (a read: a few statements) with a pooled connection on
    /// this URL's runtime and waits for it, at most the timeout and a
    /// margin.
    pub(super) fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: Future<Output = CallResult<T>> + Send + 'static,
    {
        self.call_within(self.timeout + CALL_MARGIN, f)
    }

    /// [`Shared::call`] for a write: one transaction of many statements,
    /// each bounded by the timeout, with [`WRITE_TIMEOUTS`] timeouts in all.
    pub(super) fn call_write<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: Future<Output = CallResult<T>> + Send + 'static,
    {
        self.call_within(self.timeout * WRITE_TIMEOUTS + CALL_MARGIN, f)
    }

    fn call_within<T, F, Fut>(&self, deadline: Duration, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: Future<Output = CallResult<T>> + Send + 'static,
    {
        let rt = self
            .rt
            .0
            .as_ref()
            .expect("the runtime lives as long as Shared");
        let fut = f(self.pool.clone());
        let out = if tokio::runtime::Handle::try_current().is_err() {
            rt.block_on(async { tokio::time::timeout(deadline, fut).await })
        } else {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            rt.spawn(async move {
                let _ = tx.send(tokio::time::timeout(deadline, fut).await);
            });
            rx.recv().unwrap_or_else(|_| {
                Ok(Err(Failure::Index(Error::Postgres(
                    "the PostgreSQL runtime stopped".into(),
                ))))
            })
        };
        match out {
            Ok(r) => r.map_err(|f| f.into_error(&self.location, self.timeout)),
            Err(_) => Err(Error::Unavailable(format!(
                "PostgreSQL index {}: no answer within {} ms ([index] db_timeout_ms sets \
                 the deadline)",
                self.location,
                deadline.as_millis()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::DEFAULT_DB_TIMEOUT;

    #[test]
    fn passwords_never_survive_redaction() {
        for (url, shown) in [
            ("postgres://u:pw@h:5432/db", "postgres://u@h:5432/db"),
            (
                "postgresql://u:p:w@x@h/db?sslmode=disable",
                "postgresql://u@h/db?sslmode=disable",
            ),
            (
                "postgres://u@h/db?password=pw&application_name=a",
                "postgres://u@h/db?application_name=a",
            ),
            ("postgres://h/db?PASSWORD=pw", "postgres://h/db"),
            ("postgres://u@h:1/db", "postgres://u@h:1/db"),
        ] {
            assert_eq!(redact(url), shown);
            assert!(!redact(url).contains("pw"));
        }
    }

    #[test]
    fn a_bad_url_is_named_without_its_password() {
        let err = Shared::new("postgres://u:secret@h:notaport/db", DEFAULT_DB_TIMEOUT)
            .unwrap_err()
            .to_string();
        assert!(err.contains("postgres://u@h:notaport/db"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}
