//! `[server]` limits that keep one server usable by many users: disk space
//! for `/healthz`, connection timeouts and caps, and the shutdown deadline.
//! Each key is optional; these are the defaults.

use std::time::Duration;

use super::ServerConfig;

pub const DEFAULT_MIN_FREE_DISK_MB: u64 = 256;
pub const DEFAULT_HEADER_TIMEOUT_S: u64 = 10;
pub const DEFAULT_KEEPALIVE_IDLE_S: u64 = 60;
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
pub const DEFAULT_MAX_STREAMS_PER_USER: usize = 64;
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 256;
pub const DEFAULT_SHUTDOWN_DEADLINE_S: u64 = 30;
pub const DEFAULT_MAX_UPLOAD_MB: u64 = 20;

/// The connection limits of `agentd serve`'s HTTP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub header_timeout: Duration,
    pub keepalive_idle: Duration,
    pub max_connections: usize,
    /// Requests (event streams) open at once on one HTTP/2 connection.
    pub http2_max_streams: u32,
}

impl ServerConfig {
    pub fn min_free_disk_bytes(&self) -> u64 {
        self.min_free_disk_mb
            .unwrap_or(DEFAULT_MIN_FREE_DISK_MB)
            .saturating_mul(1024 * 1024)
    }

    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            // Zero would close every connection at once: one second at least.
            header_timeout: seconds(self.header_timeout_s, DEFAULT_HEADER_TIMEOUT_S),
            keepalive_idle: seconds(self.keepalive_idle_s, DEFAULT_KEEPALIVE_IDLE_S),
            max_connections: self
                .max_connections
                .unwrap_or(DEFAULT_MAX_CONNECTIONS)
                .max(1),
            http2_max_streams: self
                .http2_max_streams
                .unwrap_or(DEFAULT_HTTP2_MAX_STREAMS)
                .max(1),
        }
    }

    pub fn max_streams_per_user(&self) -> usize {
        self.max_streams_per_user
            .unwrap_or(DEFAULT_MAX_STREAMS_PER_USER)
            .max(1)
    }

    /// The largest file `POST …/files` takes.
    pub fn max_upload_bytes(&self) -> u64 {
        self.max_upload_mb
            .unwrap_or(DEFAULT_MAX_UPLOAD_MB)
            .saturating_mul(1024 * 1024)
    }

    pub fn shutdown_deadline(&self) -> Duration {
        seconds(self.shutdown_deadline_s, DEFAULT_SHUTDOWN_DEADLINE_S)
    }
}

fn seconds(value: Option<u64>, default: u64) -> Duration {
    Duration::from_secs(value.unwrap_or(default).max(1))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    #[test]
    fn limits_default_and_parse_from_the_server_table() {
        let defaults = Config::parse("").unwrap().server;
        assert_eq!(defaults.min_free_disk_bytes(), 256 * 1024 * 1024);
        assert_eq!(defaults.connection_limits().max_connections, 4096);
        assert_eq!(defaults.connection_limits().http2_max_streams, 256);
        assert_eq!(defaults.max_streams_per_user(), 64);
        assert_eq!(defaults.shutdown_deadline(), Duration::from_secs(30));

        let server = Config::parse(
            "[server]\nmin_free_disk_mb = 1\nheader_timeout_s = 2\nkeepalive_idle_s = 0\n\
             max_connections = 9\nmax_streams_per_user = 3\nshutdown_deadline_s = 5\n\
             http2_max_streams = 7\n",
        )
        .unwrap()
        .server;
        assert_eq!(server.min_free_disk_bytes(), 1024 * 1024);
        let limits = server.connection_limits();
        assert_eq!(limits.header_timeout, Duration::from_secs(2));
        assert_eq!(
            limits.keepalive_idle,
            Duration::from_secs(1),
            "at least 1 s"
        );
        assert_eq!(limits.max_connections, 9);
        assert_eq!(limits.http2_max_streams, 7);
        assert_eq!(server.max_streams_per_user(), 3);
        assert_eq!(server.shutdown_deadline(), Duration::from_secs(5));
        assert!(Config::parse("[server]\nmax_conections = 9\n").is_err());
    }
}
