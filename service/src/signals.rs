//! SIGTERM and SIGINT: a service installs the handlers before it says it is serving
//! (so a signal sent as soon as the banner appears is never fatal), then waits.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM and SIGINT handlers, on a runtime of their own.
#[derive(Debug)]
pub struct Signals {
    rt: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Installs the handlers: from now on SIGTERM and SIGINT no longer end the process,
    /// they wake [`Signals::wait`].
    pub fn install() -> Result<Signals, std::io::Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (term, int) = {
            let _enter = rt.enter();
            (
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            )
        };
        Ok(Signals { rt, term, int })
    }

    /// Waits for SIGTERM or SIGINT; returns the signal's name.
    pub fn wait(mut self) -> &'static str {
        self.rt.block_on(async {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        })
    }
}
