//! What the server knows of one client connection: its id and address, its verified TLS
//! certificate, who it has authenticated as, and a reply delay after a failed login.

/// Per-connection facts a command may need.
#[derive(Default)]
pub struct ConnInfo {
    pub id: i64,
    pub peer: String,
    /// The address the client reached the server on (`ip:port`; empty when unknown).
    pub local: String,
    /// The subject (RFC 2253) of the client's verified TLS certificate.
    pub certificate_subject: Option<String>,
    /// Who the connection has authenticated as.
    pub session: parking_lot::Mutex<crate::access::session::Session>,
    /// Milliseconds to hold the next reply back (a failed authentication), waited on the
    /// connection's task so that it costs the client time, not a server thread.
    reply_delay_ms: std::sync::atomic::AtomicU64,
    /// The `client.application.name` the driver sent in its handshake.
    pub app_name: parking_lot::Mutex<Option<String>>,
    /// Close the connection instead of sending the current reply (a `failCommand` fail
    /// point with `closeConnection`).
    close_instead_of_reply: std::sync::atomic::AtomicBool,
}

impl ConnInfo {
    pub fn new(id: i64, peer: String) -> ConnInfo {
        ConnInfo {
            id,
            peer,
            ..Default::default()
        }
    }

    pub fn delay_reply(&self, ms: u64) {
        self.reply_delay_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn take_reply_delay(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.reply_delay_ms
                .swap(0, std::sync::atomic::Ordering::Relaxed),
        )
    }

    pub fn close_instead_of_reply(&self) {
        self.close_instead_of_reply
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the reply must not be sent and the connection closed (once).
    pub fn take_close_request(&self) -> bool {
        self.close_instead_of_reply
            .swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the client connects from a loopback address.
    pub fn is_local(&self) -> bool {
        self.peer
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback())
    }
}
