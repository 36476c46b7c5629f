//! An address where nothing listens, held for as long as the test needs it.
//!
//! Binding a listener on port 0 and dropping it frees the port for the next test that binds
//! port 0, which may then answer at the "dead" address (two MCP tests once met that way: one
//! test's unreachable server was the other's live one). A socket that is bound but never
//! listens keeps the port taken while every connection to it is refused.

use tokio::net::TcpSocket;

/// A loopback port that refuses connections until this is dropped.
pub struct ClosedPort {
    socket: TcpSocket,
}

impl ClosedPort {
    pub fn new() -> Self {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket.bind("127.0.0.1:0".parse().unwrap()).expect("a free port");
        Self { socket }
    }

    /// `host:port` of the refused port.
    pub fn address(&self) -> String {
        self.socket.local_addr().expect("a bound socket").to_string()
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::ClosedPort;

    #[tokio::test]
    async fn the_port_refuses_connections_and_cannot_be_taken_while_held() {
        let closed = ClosedPort::new();
        let address = closed.address();
        let refused = tokio::net::TcpStream::connect(&address).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(tokio::net::TcpListener::bind(&address).await.is_err(), "{address} was taken");
        drop(closed);
        assert!(tokio::net::TcpListener::bind(&address).await.is_ok(), "{address} is free again");
    }
}
