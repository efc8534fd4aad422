//! The connection to Valkey/Redis: made on first use (so a server starts
//! while the store is down), one node or a cluster (found by asking the
//! node), reconnecting by itself after a failure.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{FromRedisValue, IntoConnectionInfo, RedisResult, ScriptInvocation, Value};
use tokio::sync::OnceCell;

/// One node (through a connection manager) or a cluster.
#[derive(Clone)]
pub(crate) enum Conn {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    pub async fn invoke<T: FromRedisValue>(&self, inv: &ScriptInvocation<'_>) -> RedisResult<T> {
        match self {
            Conn::Node(c) => inv.invoke_async(&mut c.clone()).await,
            Conn::Cluster(c) => inv.invoke_async(&mut c.clone()).await,
        }
    }

    pub async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> RedisResult<T> {
        match self {
            Conn::Node(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        }
    }
}

/// A node a listing scans: the single node, or one primary of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ScanNode {
    /// The one node of a single-node store.
    Single,
    /// A cluster primary by address.
    Primary(String, u16),
}

impl Conn {
    /// The nodes that hold keys: the node itself, or every primary of the
    /// cluster (from `CLUSTER SLOTS`) in address order, so a cursor naming
    /// the `i`-th one means the same node on the next request.
    pub async fn scan_nodes(&self) -> RedisResult<Vec<ScanNode>> {
        let c = match self {
            Conn::Node(_) => return Ok(vec![ScanNode::Single]),
            Conn::Cluster(c) => c,
        };
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let slots = c
            .clone()
            .route_command(
                cmd,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            )
            .await?;
        let mut nodes = Vec::new();
        if let Value::Array(ranges) = slots {
            for range in ranges {
                // [start, end, [host, port, id, …], replicas…]
                let Value::Array(parts) = range else { continue };
                let Some(Value::Array(primary)) = parts.into_iter().nth(2) else {
                    continue;
                };
                let mut it = primary.into_iter();
                let (Some(host), Some(port)) = (it.next(), it.next()) else {
                    continue;
                };
                let host: String = redis::from_redis_value(host)?;
                let port: u16 = redis::from_redis_value(port)?;
                nodes.push(ScanNode::Primary(host, port));
            }
        }
        nodes.sort();
        nodes.dedup();
        Ok(nodes)
    }

    /// One `SCAN cursor MATCH pattern COUNT count` step on `node`: the
    /// next cursor (`0` at the end) and the keys found.
    pub async fn scan(
        &self,
        node: &ScanNode,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> RedisResult<(u64, Vec<Vec<u8>>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        match (self, node) {
            (Conn::Node(c), _) => cmd.query_async(&mut c.clone()).await,
            (Conn::Cluster(c), ScanNode::Primary(host, port)) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                let v = c.clone().route_command(cmd, routing).await?;
                Ok(redis::from_redis_value(v)?)
            }
            (Conn::Cluster(_), ScanNode::Single) => Ok((0, Vec::new())),
        }
    }
}

/// Connects on first use; a failed attempt is tried again by the next call.
pub(crate) struct LazyConn {
    url: String,
    password: Option<String>,
    timeout: Duration,
    cell: OnceCell<Conn>,
}

impl LazyConn {
    pub fn new(url: String, password: Option<String>, timeout: Duration) -> Self {
        LazyConn {
            url,
            password,
            timeout,
            cell: OnceCell::new(),
        }
    }

    /// The URL as parsed, with the password of the settings when the URL
    /// has none.
    fn info(&self) -> RedisResult<redis::ConnectionInfo> {
        let info = self.url.as_str().into_connection_info()?;
        Ok(match &self.password {
            Some(p) if info.redis_settings().password().is_none() => {
                let settings = info.redis_settings().clone().set_password(p.clone());
                info.set_redis_settings(settings)
            }
            _ => info,
        })
    }

    pub async fn get(&self) -> RedisResult<&Conn> {
        self.cell.get_or_try_init(|| self.connect()).await
    }

    async fn connect(&self) -> RedisResult<Conn> {
        let info = self.info()?;
        let client = redis::Client::open(info.clone())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let node = ConnectionManager::new_with_config(client, config).await?;
        let cluster_info: String = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut node.clone())
            .await?;
        if !cluster_info.contains("cluster_enabled:1") {
            return Ok(Conn::Node(node));
        }
        let client = ClusterClientBuilder::new(vec![info])
            .connection_timeout(self.timeout)
            .response_timeout(self.timeout)
            .retries(2)
            .build()?;
        Ok(Conn::Cluster(client.get_async_connection().await?))
    }
}

/// `url` without its user and password, for logs and messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<an unreadable store URL>".into();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redaction_drops_user_and_password() {
        assert_eq!(
            redact("redis://user:s3cret@db.example:6380/2"),
            "redis://db.example:6380/2"
        );
        assert_eq!(redact("rediss://:p@h:1"), "rediss://h:1");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(redact("s3cret"), "<an unreadable store URL>");
    }
}
