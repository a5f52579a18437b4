//! An HTTPS listener for `axum::serve`: a task accepts TCP connections and runs each
//! TLS handshake on a task of its own (bounded in time, so a slow or silent peer holds
//! up nobody), and the server takes the finished TLS streams. A peer that fails the
//! handshake — plain HTTP, an untrusted certificate — is logged and dropped.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::tls::ServerTls;

/// Longest a TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Finished handshakes waiting for the server to take them.
const QUEUE: usize = 64;

/// TLS connections, handshake done, for `axum::serve`.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `tcp` (on the current runtime) and handshaking with `tls`;
    /// accepting ends when the returned listener is dropped.
    pub fn spawn(name: &str, tcp: TcpListener, tls: &ServerTls) -> std::io::Result<TlsListener> {
        let addr = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(QUEUE);
        tokio::spawn(accept_loop(
            name.to_owned(),
            tcp,
            TlsAcceptor::from(tls.config()),
            tx,
        ));
        Ok(TlsListener { ready, addr })
    }
}

/// Accepts until the listener is dropped, handshaking each connection on its own task.
async fn accept_loop(
    name: String,
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            r = tcp.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(server = %name, error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = ready.closed() => return,
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        let name = name.clone();
        tokio::spawn(async move {
            let handshake = async {
                if !starts_tls(&stream).await? {
                    refuse_plain_http(stream).await;
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "plain HTTP on the HTTPS listener",
                    ));
                }
                acceptor.accept(stream).await
            };
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => {
                    tracing::debug!(server = %name, %peer, error = %e, "TLS handshake failed");
                }
                Err(_) => {
                    tracing::debug!(server = %name, %peer, "TLS handshake timed out");
                }
            }
        });
    }
}

/// Whether the peer's first byte opens a TLS handshake record (content type 22).
async fn starts_tls(stream: &TcpStream) -> std::io::Result<bool> {
    let mut first = [0u8; 1];
    let n = stream.peek(&mut first).await?;
    Ok(n == 1 && first[0] == TLS_HANDSHAKE_RECORD)
}

/// The content type of a TLS handshake record: what a TLS client sends first.
const TLS_HANDSHAKE_RECORD: u8 = 22;

/// The answer to a peer speaking plain HTTP to an HTTPS listener.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
content-type: text/plain\r\n\
connection: close\r\n\
content-length: 51\r\n\
\r\n\
this service speaks HTTPS only: use an https:// URL";

/// Tells a plain-HTTP peer to use HTTPS, then closes the connection.
async fn refuse_plain_http(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Take the request off the socket first: closing with unread bytes would reset the
    // connection before the peer reads the answer.
    let mut request = [0u8; 8192];
    let _ = stream.read(&mut request).await;
    let _ = stream.write_all(PLAIN_HTTP_ANSWER).await;
    let _ = stream.shutdown().await;
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task only ends once this listener is gone; never resolve.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
