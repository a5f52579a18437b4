//! An HTTP server on a thread of its own: bind a [`Listener`], [`HttpServer::spawn`] an
//! axum router on it, and [`HttpServer::stop`] it — requests in flight finish, and
//! connections still open after the drain time are closed. A listener given a
//! [`ServerTls`] ([`Listener::with_tls`]) speaks HTTPS only, and reads its certificate
//! and key again on SIGHUP.

use std::future::Future;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::watch;

use crate::tls::ServerTls;
use crate::tls_listener::TlsListener;

/// A bound TCP listener, ready to be served (non-blocking), plain HTTP or HTTPS.
#[derive(Debug)]
pub struct Listener {
    inner: std::net::TcpListener,
    addr: SocketAddr,
    tls: Option<ServerTls>,
}

impl Listener {
    /// Binds `addr` (port 0 picks one).
    pub fn bind(addr: SocketAddr) -> Result<Listener, std::io::Error> {
        let inner = std::net::TcpListener::bind(addr)?;
        let addr = inner.local_addr()?;
        inner.set_nonblocking(true)?;
        Ok(Listener {
            inner,
            addr,
            tls: None,
        })
    }

    /// Serves HTTPS only with `tls` (plain HTTP for `None`).
    pub fn with_tls(mut self, tls: Option<ServerTls>) -> Listener {
        self.tls = tls;
        self
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` when serving TLS, `http` otherwise.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

/// Why a server could not be started.
#[derive(Debug)]
pub struct SpawnError {
    /// What could not be started: `the async runtime` or `the server thread`.
    pub what: &'static str,
    /// Why.
    pub source: std::io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start {}: {}", self.what, self.source)
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Resolves when the server is asked to stop: what a task running beside the server
/// (a periodic sweep, say) waits for.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Waits until the server is asked to stop.
    pub async fn requested(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// A running HTTP server; stops on [`HttpServer::stop`] or when dropped.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    scheme: &'static str,
    stop: Option<watch::Sender<bool>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Serves `app` on `listener` from a thread named `name`. On [`HttpServer::stop`]
    /// it stops accepting, lets requests in flight finish, and closes connections still
    /// open after `drain`.
    pub fn spawn(
        name: &str,
        listener: Listener,
        app: Router,
        drain: Duration,
    ) -> Result<HttpServer, SpawnError> {
        HttpServer::spawn_with(name, listener, app, drain, |_| async {})
    }

    /// Like [`HttpServer::spawn`], with `task(stop)` running beside the server on its
    /// runtime until it returns; it should return once `stop` resolves, and the thread
    /// ends when both the server and the task are done.
    pub fn spawn_with<T, F>(
        name: &str,
        listener: Listener,
        app: Router,
        drain: Duration,
        task: T,
    ) -> Result<HttpServer, SpawnError>
    where
        T: FnOnce(Stop) -> F + Send + 'static,
        F: Future<Output = ()> + 'static,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| SpawnError {
                what: "the async runtime",
                source,
            })?;
        // Installed before the thread starts, so a SIGHUP sent as soon as the server
        // is up reloads rather than ends the process.
        let hangup = match &listener.tls {
            Some(tls) => {
                let _enter = runtime.enter();
                let signal =
                    tokio::signal::unix::signal(SignalKind::hangup()).map_err(|source| {
                        SpawnError {
                            what: "the SIGHUP handler",
                            source,
                        }
                    })?;
                Some((signal, tls.clone()))
            }
            None => None,
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let addr = listener.addr;
        let scheme = listener.scheme();
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::join!(
                        serve(&label, listener, app, drain, stop_rx.clone()),
                        reload_on_hangup(&label, hangup, Stop(stop_rx.clone())),
                        task(Stop(stop_rx)),
                    );
                });
            })
            .map_err(|source| SpawnError {
                what: "the server thread",
                source,
            })?;
        Ok(HttpServer {
            addr,
            scheme,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://ip:port` (`https://` when serving TLS).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Stops serving and waits for the thread: requests in flight finish, connections
    /// still open after the drain time are closed.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the HTTP server thread panicked");
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Reloads the certificate and key on every SIGHUP until the server stops; a bad pair
/// is logged and the one in use stays.
async fn reload_on_hangup(name: &str, hangup: Option<(Signal, ServerTls)>, mut stop: Stop) {
    let Some((mut signal, tls)) = hangup else {
        return;
    };
    loop {
        tokio::select! {
            _ = stop.requested() => return,
            received = signal.recv() => {
                if received.is_none() {
                    return;
                }
            }
        }
        match tls.reload() {
            Ok(()) => tracing::info!(
                server = name,
                cert_file = %tls.cert_file().display(),
                "SIGHUP: TLS certificate and key reloaded"
            ),
            Err(e) => tracing::error!(
                server = name,
                error = %e,
                "SIGHUP: TLS certificate and key not reloaded; the ones in use stay"
            ),
        }
    }
}

/// Serves until asked to stop, then drains for at most `drain`.
async fn serve(
    name: &str,
    listener: Listener,
    app: Router,
    drain: Duration,
    stop: watch::Receiver<bool>,
) {
    let tcp = match tokio::net::TcpListener::from_std(listener.inner) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(server = name, error = %e, "cannot serve the listener");
            return;
        }
    };
    match &listener.tls {
        None => serve_on(name, tcp, app, drain, stop).await,
        Some(tls) => match TlsListener::spawn(name, tcp, tls) {
            Ok(l) => serve_on(name, l, app, drain, stop).await,
            Err(e) => tracing::error!(server = name, error = %e, "cannot serve the listener"),
        },
    }
}

/// Serves `listener` until asked to stop, then drains for at most `drain`.
async fn serve_on<L>(
    name: &str,
    listener: L,
    app: Router,
    drain: Duration,
    stop: watch::Receiver<bool>,
) where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let mut graceful = Stop(stop.clone());
    let mut deadline = Stop(stop);
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        graceful.requested().await;
    });
    tokio::select! {
        r = serve => {
            if let Err(e) = r {
                tracing::error!(server = name, error = %e, "HTTP server failed");
            }
        }
        _ = async move {
            deadline.requested().await;
            tokio::time::sleep(drain).await;
        } => {
            tracing::warn!(server = name, "connections still open after {drain:?}; closing them");
        }
    }
}
