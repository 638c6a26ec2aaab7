//! The server's listener: every connection it accepts is dropped once its
//! socket has taken no byte for a set time while the server had something
//! to send. A client that stops reading (a stream subscriber that never
//! reads, a slow-loris reader of a large answer) cannot pin the buffers
//! of its connection forever.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// A [`TcpListener`] whose connections fail a write that has not moved a
/// byte for `stall` (see the module docs).
#[derive(Debug)]
pub struct StallListener {
    inner: TcpListener,
    stall: Duration,
}

impl StallListener {
    /// Wraps `inner`; its connections' writes may wait `stall` at most.
    pub fn new(inner: TcpListener, stall: Duration) -> Self {
        Self { inner, stall }
    }
}

impl axum::serve::Listener for StallListener {
    type Io = StallIo;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        (
            StallIo {
                io,
                stall: self.stall,
                waiting: None,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// One accepted connection (see [`StallListener`]).
#[derive(Debug)]
pub struct StallIo {
    io: TcpStream,
    stall: Duration,
    /// Since a write found the socket full: when that becomes an error.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl StallIo {
    /// Passes on a write's outcome: progress clears the wait; a socket
    /// that stays full past the stall is an error (the connection ends).
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => {
                let stall = self.stall;
                let sleep = self.waiting.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep_until(Instant::now() + stall))
                });
                if sleep.as_mut().poll(cx).is_ready() {
                    self.waiting = None;
                    tracing::debug!("a client took no byte for {stall:?}: disconnected");
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client took no byte for {stall:?}"),
                    )));
                }
                Poll::Pending
            }
            ready => {
                self.waiting = None;
                ready
            }
        }
    }
}

impl AsyncRead for StallIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
