//! `acts serve`: the HTTP API of `acts-server` over the store, until
//! Ctrl-C or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;

use crate::failure::Failure;
use crate::session::open_engine_with;

/// Serves until a stop signal; the exit code is 0 after a clean stop.
pub(crate) async fn run(store: &str, listen: &str) -> Result<u8, Failure> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        Failure::input(format!(
            "--listen '{listen}' is not an address (host:port, e.g. 127.0.0.1:7878)"
        ))
    })?;
    if !addr.ip().is_loopback() {
        return Err(Failure::input(format!(
            "--listen {addr}: acts serve has no access control yet, so it listens on loopback only \
             (127.0.0.1 or [::1]); anyone who can reach {addr} could start, answer and remove processes"
        )));
    }
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            " (is another `acts serve` running? pick another port with --listen)"
        } else {
            ""
        };
        Failure::run(format!("cannot listen on {addr}: {e}{hint}"))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::run(format!("cannot read the listening address: {e}")))?;
    let engine = open_engine_with(store, None, true).await?;
    crate::owner::note_api(store, &format!("http://{bound}"));
    // A service's stderr may be closed by whoever started it: a failed
    // write of these notes is not a reason to stop.
    let _ = writeln!(
        std::io::stderr(),
        "acts serve: listening on http://{bound} (store {store}); the API is under /api/v1; \
         loopback only (no access control yet); Ctrl-C stops"
    );
    acts_server::serve(engine, listener, acts_server::shutdown_signal())
        .await
        .map_err(|e| Failure::run(format!("the server failed: {e}")))?;
    let _ = writeln!(
        std::io::stderr(),
        "acts serve: stopped; everything acknowledged is stored"
    );
    Ok(0)
}
