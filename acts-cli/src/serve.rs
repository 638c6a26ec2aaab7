//! `acts serve`: the HTTP API of `acts-server` over the store, until
//! Ctrl-C or SIGTERM, with the access tokens of its config file and of
//! `ACTS_TOKENS`.

use std::io::Write;
use std::net::SocketAddr;

use acts_server::{Auth, ServerOptions};

use crate::config::ConfigFile;
use crate::failure::Failure;
use crate::session::open_engine_with;

/// Where `acts serve` listens unless told otherwise.
const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// Where `acts serve` was told to listen: its HTTP API, and the gRPC
/// protocol if asked for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Listen<'a> {
    /// `--listen`.
    pub(crate) http: Option<&'a str>,
    /// `--grpc`.
    pub(crate) grpc: Option<&'a str>,
}

/// A bound listener and its address.
type Bound = (tokio::net::TcpListener, SocketAddr);

/// The server's options (access tokens, stream bounds) and the bound
/// listener of `acts serve`: from the config file, `ACTS_TOKENS` and
/// `--listen` (loopback only without tokens), and the gRPC listener if
/// `--grpc` or the config's `grpc:` asks for one (the same loopback rule).
pub(crate) async fn listen_with_grpc(
    at: Listen<'_>,
    cfg: &ConfigFile,
) -> Result<
    (
        ServerOptions,
        tokio::net::TcpListener,
        SocketAddr,
        Option<Bound>,
    ),
    Failure,
> {
    let listen = at.http;
    let streams = cfg.streams;
    let grpc = at.grpc.map(str::to_owned).or(cfg.grpc.clone());
    let mut tokens = cfg.tokens.clone();
    tokens.extend(crate::config::env_tokens()?);
    let auth =
        Auth::from_tokens(&tokens).map_err(|e| Failure::input(format!("access tokens: {e}")))?;
    let listen = listen
        .map(str::to_owned)
        .or(cfg.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let (listener, bound) = bind("--listen", &listen, &auth).await?;
    let grpc = match grpc {
        Some(g) => Some(bind("--grpc", &g, &auth).await?),
        None => None,
    };
    Ok((ServerOptions::new(auth, streams), listener, bound, grpc))
}

/// Binds `listen` (the value of `flag`): loopback only without tokens.
async fn bind(flag: &str, listen: &str, auth: &Auth) -> Result<Bound, Failure> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        Failure::input(format!(
            "{flag} '{listen}' is not an address (host:port, e.g. {DEFAULT_LISTEN})"
        ))
    })?;
    if !auth.is_enabled() && !addr.ip().is_loopback() {
        return Err(Failure::input(format!(
            "{flag} {addr}: no access token is configured, so every request would be the admin; \
             acts serve then listens on loopback only (127.0.0.1 or [::1]). Make tokens with \
             `acts token new --principal NAME --role ROLE` and list them under `tokens:` in \
             --config FILE (or ACTS_TOKENS)"
        )));
    }
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            format!(" (is another `acts serve` running? pick another port with {flag})")
        } else {
            String::new()
        };
        Failure::run(format!("cannot listen on {addr}: {e}{hint}"))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::run(format!("cannot read the listening address: {e}")))?;
    Ok((listener, bound))
}

/// How the access is described in the start-up note.
pub(crate) fn access_note(auth: &Auth) -> String {
    if auth.is_enabled() {
        format!(
            "{} access token(s); requests need 'Authorization: Bearer <token>'",
            auth.len()
        )
    } else {
        "no access tokens: every request is the local admin, so loopback only".to_owned()
    }
}

/// Serves until a stop signal; the exit code is 0 after a clean stop.
pub(crate) async fn run(
    store: &str,
    at: Listen<'_>,
    config: &ConfigFile,
    lease: Option<acts::LeaseConfig>,
    backup_dir: Option<&std::path::Path>,
) -> Result<u8, Failure> {
    let (options, listener, bound, grpc) = listen_with_grpc(at, config).await?;
    let options = match backup_dir {
        Some(dir) if dir.is_dir() => options.with_backup_dir(dir),
        Some(dir) => {
            return Err(Failure::input(format!(
                "--backup-dir {}: no such folder (make it first: backups go into it)",
                dir.display()
            )));
        }
        None => options,
    };
    // before anything says it listens: a stop sent then must stop it cleanly
    let signal = acts_server::shutdown_signal();
    let node = lease.as_ref().map(|l| l.node.clone());
    let engine = open_engine_with(store, None, true, lease, &config.packages()).await?;
    crate::owner::note_api(store, &format!("http://{bound}"));
    let access = access_note(options.auth());
    let persistence = engine.storage().persistence();
    // A service's stderr may be closed by whoever started it: a failed
    // write of these notes is not a reason to stop.
    let shown = acts::redacted_url(store);
    let _ = writeln!(
        std::io::stderr(),
        "acts serve: listening on http://{bound} (store {shown}{}); the dashboard is at \
         http://{bound}/ and the API under /api/v1; {access}; Ctrl-C stops",
        node.map_or_else(String::new, |n| format!(", owned as node '{n}'"))
    );
    if let Some(note) = persistence_note(&persistence) {
        let _ = writeln!(std::io::stderr(), "acts serve: {note}");
    }
    let _ = writeln!(std::io::stderr(), "acts serve: {}", config.packages_note());
    if let Some(note) = crate::telemetry::note() {
        let _ = writeln!(std::io::stderr(), "acts serve: {note}");
    }
    let (stopping, http_stop) = grpc_then_http(signal, grpc, |listener, at, stop| {
        let _ = writeln!(
            std::io::stderr(),
            "acts serve: the gRPC protocol of acts-server 0.25 on {at} (acts-channel: \
             ActsChannel::connect(\"http://{at}\")); {access}"
        );
        let served = acts_server::serve_grpc(engine.clone(), options.clone(), listener, stop);
        tokio::spawn(async move { served.await.map_err(|e| e.to_string()) })
    });
    let http = acts_server::serve(engine.clone(), options, listener, http_stop).await;
    after_http(http, stopping).await?;
    let _ = writeln!(
        std::io::stderr(),
        "acts serve: stopped; {}",
        stop_note(
            &engine.storage().persistence(),
            engine.runtime().stats().writer.failures
        )
    );
    Ok(0)
}

/// A gRPC server's task (its error as text).
pub(crate) type GrpcTask = tokio::task::JoinHandle<Result<(), String>>;

/// One stop signal for a gRPC server (started by `start` on its bound
/// listener with its shutdown future, if there is one) and the HTTP
/// server beside it: the gRPC server stops first (its answered acks are
/// applied), then the HTTP one (which closes the engine or leaves the
/// cluster). Returns the stop's task (the gRPC server's outcome) and the
/// HTTP server's shutdown future.
pub(crate) fn grpc_then_http(
    signal: impl Future<Output = ()> + Send + 'static,
    grpc: Option<Bound>,
    start: impl FnOnce(
        tokio::net::TcpListener,
        SocketAddr,
        std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> GrpcTask,
) -> (
    tokio::task::JoinHandle<Result<(), String>>,
    impl Future<Output = ()> + Send + 'static,
) {
    let (grpc_stop_tx, grpc_stop) = tokio::sync::watch::channel(false);
    let (http_stop_tx, mut http_stop) = tokio::sync::watch::channel(false);
    let grpc = grpc.map(|(listener, at)| {
        let mut stop = grpc_stop;
        start(
            listener,
            at,
            Box::pin(async move {
                let _ = stop.wait_for(|s| *s).await;
            }),
        )
    });
    let stopping = tokio::spawn(async move {
        signal.await;
        let _ = grpc_stop_tx.send(true);
        let grpc = match grpc {
            Some(task) => match task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("the gRPC server failed: {e}")),
                Err(e) => Err(format!("the gRPC server failed: {e}")),
            },
            None => Ok(()),
        };
        let _ = http_stop_tx.send(true);
        grpc
    });
    let http_stop = async move {
        let _ = http_stop.wait_for(|s| *s).await;
    };
    (stopping, http_stop)
}

/// The outcome of an HTTP server that ran beside [`grpc_then_http`]'s
/// gRPC server: its own failure, or the gRPC server's.
pub(crate) async fn after_http(
    http: std::io::Result<()>,
    stopping: tokio::task::JoinHandle<Result<(), String>>,
) -> Result<(), Failure> {
    if http.is_err() {
        // failed on its own: no stop signal is coming
        stopping.abort();
    }
    http.map_err(|e| Failure::run(format!("the server failed: {e}")))?;
    match stopping.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::run(e)),
        Err(e) => Err(Failure::run(format!("the stop failed: {e}"))),
    }
}

/// What the start-up says of a store that does not sync every
/// acknowledged write (`None`: it does).
pub(crate) fn persistence_note(p: &acts::Persistence) -> Option<String> {
    (!p.is_synced()).then(|| format!("warning: {p}"))
}

/// What the stop claims: only what the store guarantees (as it is set up
/// now, and what it saw while it ran: a Redis that evicted keys), and how
/// many commits the store refused (`failures`: their work was never
/// acknowledged).
pub(crate) fn stop_note(p: &acts::Persistence, failures: u64) -> String {
    let stored = if p.is_synced() {
        "everything acknowledged is stored".to_owned()
    } else {
        format!("everything acknowledged was handed to the store, but {p}")
    };
    match failures {
        0 => stored,
        n => format!(
            "{stored}; the store refused {n} commit{} while acts ran (what {} carried was not \
             acknowledged)",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "they" }
        ),
    }
}
