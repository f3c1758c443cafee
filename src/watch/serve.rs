//! HTTP for a running watch: the live page (/), its data (/api/state, /events as
//! server-sent events) and Prometheus text exposition (/metrics).
//!
//! The watch thread publishes a finished snapshot once per tick; handlers only clone it,
//! so a scrape never waits for a tick and never sees half of one.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use tokio::sync::broadcast;

const PAGE: &str = include_str!("page.html");

/// The latest tick as the server hands it out.
#[derive(Default)]
pub struct Published {
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
                    Ok(l) => {
                        if let Err(e) = axum::serve(l, app).await {
                            eprintln!("fragkit: http server stopped: {e}");
                        }
                    }
                    Err(e) => eprintln!("fragkit: http server: {e}"),
                }
            })
        })?;
    Ok(bound)
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
