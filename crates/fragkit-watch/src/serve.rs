//! HTTP for a running watch: the live page (/), its data (/api/state, /events as
//! server-sent events) and Prometheus text exposition (/metrics).
//!
//! The watch thread publishes a finished snapshot once per tick; handlers only clone it,
//! so a scrape never waits for a tick and never sees half of one.
//!
//! The pages list file paths, so the server defends itself as a local service must:
//! a request whose Host is not the address it came in on or a localhost name gets 421
//! (a DNS-rebinding page in a browser cannot read the data), a client has
//! [`HEADER_READ_TIMEOUT`] to send its request head, and at most [`MAX_CONNECTIONS`]
//! connections are served at once (more are closed as they are accepted).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use tokio::sync::{broadcast, Semaphore};
use tower::ServiceExt;

/// Time a client gets to send a request's head (line and headers). Enough for any real
/// client on a loopback or LAN link; a half-sent request is closed after it.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once (each open page holds one for its event stream). Further
/// connections are accepted and closed at once, so they cannot pile up.
pub(crate) const MAX_CONNECTIONS: usize = 64;

const PAGE: &str = include_str!("page.html");

/// The latest tick as the server hands it out.
#[derive(Default)]
pub(crate) struct Published {
    pub json: Arc<String>,
    pub metrics: Arc<String>,
}

pub struct Live {
    state: RwLock<Published>,
    tx: broadcast::Sender<Arc<String>>,
}

impl Live {
    pub fn new() -> Arc<Live> {
        let (tx, _) = broadcast::channel(16);
        Arc::new(Live {
            state: RwLock::new(Published {
                json: Arc::new("{}".into()),
                metrics: Arc::new(String::new()),
            }),
            tx,
        })
    }

    /// Publish a tick: later requests see it, open event streams receive it.
    pub fn publish(&self, json: String, metrics: String) {
        let json = Arc::new(json);
        *self.state.write().unwrap() = Published {
            json: json.clone(),
            metrics: Arc::new(metrics),
        };
        let _ = self.tx.send(json);
    }
}

/// Check the address: loopback unless `any` (the page shows file names).
pub fn check_listen(addr: &SocketAddr, any: bool) -> Result<()> {
    if !addr.ip().is_loopback() && !any {
        anyhow::bail!(
            "--listen {addr}: not a loopback address; the page and /metrics show file names, so fragkit listens on 127.0.0.1 or ::1 unless --listen-any is given"
        );
    }
    Ok(())
}

/// Bind now (so a busy port is an error at start, and port 0 is resolved) and serve on a
/// background thread with its own small tokio runtime. Returns the bound address.
pub fn start(addr: SocketAddr, live: Arc<Live>) -> Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("--listen {addr}: cannot listen"))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("fragkit-http")
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("fragkit-http".into())
        .spawn(move || {
            rt.block_on(async move {
                let app = Router::new()
                    .route("/", get(page))
                    .route("/metrics", get(metrics))
                    .route("/api/state", get(state))
                    .route("/events", get(events))
                    .with_state(live);
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => serve(l, app).await,
                    Err(e) => fragkit_sys::stderr_line!("fragkit: http server: {e}"),
                }
            })
        })?;
    Ok(bound)
}

/// Accept loop: one task per connection, each holding one of MAX_CONNECTIONS permits.
async fn serve(listener: tokio::net::TcpListener, app: Router) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of file descriptors or similar: let connections finish first.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let local = stream.local_addr().ok();
        let app = app.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(
                move |req: axum::extract::Request<hyper::body::Incoming>| {
                    let app = app.clone();
                    async move {
                        let host = req
                            .headers()
                            .get(header::HOST)
                            .and_then(|h| h.to_str().ok());
                        if !host_allowed(host, local) {
                            return Ok::<_, Infallible>(misdirected(host));
                        }
                        app.oneshot(req.map(axum::body::Body::new)).await
                    }
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Whether a request's Host names this server: a localhost name, a loopback address, or
/// the address the connection came in on (any port: tunnels and port forwards change
/// it). A DNS-rebinding page sends its own domain name, which is none of these.
pub fn host_allowed(host: Option<&str>, local: Option<SocketAddr>) -> bool {
    let Some(host) = host.map(str::trim) else {
        return false;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        // "[v6]" or "[v6]:port"
        match rest.split_once(']') {
            Some((ip, "")) => ip,
            Some((ip, tail)) if tail.strip_prefix(':').is_some_and(valid_port) => ip,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if valid_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || local.is_some_and(|l| l.ip() == ip),
        Err(_) => false,
    }
}

fn valid_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

fn misdirected(host: Option<&str>) -> axum::response::Response {
    let shown = host.map_or("(none)".to_string(), fragkit_core::units::printable);
    (
        axum::http::StatusCode::MISDIRECTED_REQUEST,
        format!(
            "fragkit: Host {shown} is not this server's address or a localhost name (refused against DNS rebinding)\n"
        ),
    )
        .into_response()
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn metrics(State(live): State<Arc<Live>>) -> impl IntoResponse {
    let body = live.state.read().unwrap().metrics.clone();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        (*body).clone(),
    )
}

async fn state(State(live): State<Arc<Live>>) -> impl IntoResponse {
    let body = live.state.read().unwrap().json.clone();
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        (*body).clone(),
    )
}

async fn events(
    State(live): State<Arc<Live>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let rx = live.tx.subscribe();
    let first = live.state.read().unwrap().json.clone();
    let stream = futures_util::stream::unfold((rx, Some(first)), |(mut rx, first)| async move {
        if let Some(f) = first {
            return Some((
                Ok(Event::default().event("tick").data(f.as_str())),
                (rx, None),
            ));
        }
        loop {
            match rx.recv().await {
                Ok(s) => {
                    return Some((
                        Ok(Event::default().event("tick").data(s.as_str())),
                        (rx, None),
                    ))
                }
                // A slow page skips ticks; the next one is complete on its own.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::host_allowed;
    use std::net::SocketAddr;

    #[test]
    fn hosts() {
        let lo: SocketAddr = "127.0.0.1:9477".parse().unwrap();
        let lan: SocketAddr = "192.168.1.5:9477".parse().unwrap();
        let v6: SocketAddr = "[::1]:9477".parse().unwrap();
        for ok in [
            "localhost",
            "LOCALHOST:9477",
            "localhost.",
            "127.0.0.1:9477",
            "127.0.0.1",
            "127.0.0.2:80",
            "[::1]:9477",
            "[::1]",
        ] {
            assert!(host_allowed(Some(ok), Some(lo)), "{ok}");
        }
        assert!(host_allowed(Some("192.168.1.5:9477"), Some(lan)));
        assert!(host_allowed(Some("[::1]:1"), Some(v6)));
        for bad in [
            "evil.example",
            "evil.example:9477",
            "192.168.1.5:9477",
            "localhost.evil.example",
            "127.0.0.1:x",
            "[::1",
            "[::1]x",
            "",
            ":9477",
            "127.0.0.1:123456",
        ] {
            assert!(!host_allowed(Some(bad), Some(lo)), "{bad}");
        }
        assert!(!host_allowed(None, Some(lo)));
    }
}
