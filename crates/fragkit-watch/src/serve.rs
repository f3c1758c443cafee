//! HTTP for a running watch: the live page (/), its data (/api/state, /events as
//! server-sent events) and Prometheus text exposition (/metrics).
//!
//! The watch thread publishes a finished snapshot once per tick; handlers only clone it,
//! so a scrape never waits for a tick and never sees half of one.
//!
//! The pages list file paths, so the server defends itself as a local service must:
//! a request whose Host is not the address it came in on or a localhost name gets 421
//! (a DNS-rebinding page in a browser cannot read the data). Against clients that hold
//! connections (slowloris, idle sockets, event streams), connections are kept in three
//! pools with their own limits, so that no pool can take what another needs:
//!
//! - *pending*: accepted, request head not yet complete. At most
//!   [`MAX_PENDING_PER_IP`] per client address and [`MAX_PENDING`] in all; a new
//!   connection over a limit closes the *oldest* pending connection of the address with
//!   the most (a fresh request is never the one turned away), and a head must be complete
//!   within [`HEADER_READ_TIMEOUT`].
//! - *event streams* (`/events`): at most [`MAX_EVENT_STREAMS_PER_IP`] per address and
//!   [`MAX_EVENT_STREAMS`] in all; more get 503.
//! - *short requests* (everything else): at most [`MAX_SERVING`] at once, each answered
//!   within [`RESPONSE_TIMEOUT`]; per address a token bucket for `/metrics`
//!   ([`METRICS_RATE`]/s) and another for the rest ([`OTHER_RATE`]/s), 429 beyond.
//!
//! The data are the user's: `/`, `/api/state` and `/events` need the run's token (a
//! random 256-bit value in a file only the user who started the watch can read, see
//! [`write_token`]), given as `?token=` or `Authorization: Bearer`; without it they
//! answer 401, with a wrong one 403. `/metrics` without a token carries the aggregate
//! figures only (per extension, tick counters), with it also the most fragmented files'
//! paths.
//!
//! One request per connection (no keep-alive), so a connection is in one pool at a time
//! and an idle keep-alive socket never holds a slot.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use tokio::sync::{broadcast, Notify};
use tower::ServiceExt;

/// Time a client gets to send a request's head (line and headers), from the moment it is
/// accepted. Enough for any real client on a loopback or LAN link.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections still sending their request head, per client address.
pub(crate) const MAX_PENDING_PER_IP: usize = 64;

/// Connections still sending their request head, all addresses.
pub(crate) const MAX_PENDING: usize = 256;

/// Open `/events` streams per client address (each open page holds one).
pub(crate) const MAX_EVENT_STREAMS_PER_IP: usize = 16;

/// Open `/events` streams, all addresses.
pub(crate) const MAX_EVENT_STREAMS: usize = 32;

/// Short requests (all but `/events`) being answered at once.
pub(crate) const MAX_SERVING: usize = 64;

/// Time from accepting a short request's connection to the end of its answer.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// `/metrics` requests per second and address (token bucket, bursts of [`BURST`]).
pub(crate) const METRICS_RATE: f64 = 50.0;

/// Other requests per second and address (token bucket, bursts of [`BURST`]).
pub(crate) const OTHER_RATE: f64 = 20.0;

/// Requests an address may make at once before its rate applies.
pub(crate) const BURST: f64 = 100.0;

const PAGE: &str = include_str!("page.html");

/// The latest tick as the server hands it out.
#[derive(Default)]
pub(crate) struct Published {
    pub json: Arc<String>,
    /// With the most fragmented files' paths (token holders).
    pub metrics: Arc<String>,
    /// Aggregates only (anyone who can connect).
    pub metrics_public: Arc<String>,
}

/// The run's secret: what a request must show to see file names.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl Token {
    /// 32 random bytes from the kernel, as 64 hex digits.
    pub fn random() -> Result<Token> {
        use std::io::Read;
        let mut b = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut b))
            .context("/dev/urandom: cannot read a random token")?;
        Ok(Token(
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<String>()
                .into(),
        ))
    }

    /// Compare in time independent of where `given` first differs.
    fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
    }
}

/// Write `token` to `path`, readable by this user only (0600, created anew: a file or
/// symbolic link already there is removed first, never written through).
pub fn write_token(path: &std::path::Path, token: &Token) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("{}: cannot replace the token file", path.display()))
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("{}: cannot create the token file", path.display()))?;
    writeln!(f, "{}", token.0)
        .with_context(|| format!("{}: cannot write the token file", path.display()))
}

/// What a request showed: no token, the right one, or a wrong one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Anonymous,
    Granted,
    Denied,
}

fn access(req: &axum::http::request::Parts, token: &Token) -> Access {
    let from_query = req.uri.query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_string)
    });
    let from_header = req
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string());
    match from_header.or(from_query) {
        None => Access::Anonymous,
        Some(t) if token.matches(&t) => Access::Granted,
        Some(_) => Access::Denied,
    }
}

fn unauthorized(a: Access) -> axum::response::Response {
    use axum::http::StatusCode;
    if a == Access::Denied {
        return (
            StatusCode::FORBIDDEN,
            "fragkit: wrong token for this watch\n",
        )
            .into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "fragkit: this page lists file names: give the watch's token as ?token= or Authorization: Bearer (the watch printed the file that holds it)\n",
    )
        .into_response()
}

pub struct Live {
    state: RwLock<Published>,
    tx: broadcast::Sender<Arc<String>>,
}

impl Live {
    pub fn new() -> Arc<Live> {
        let (tx, _) = broadcast::channel(16);
        Arc::new(Live {
            state: RwLock::new(Published::default()),
            tx,
        })
    }

    /// Publish a tick: later requests see it, open event streams receive it.
    pub fn publish(&self, json: String, metrics: String, metrics_public: String) {
        let json = Arc::new(json);
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Published {
            json: json.clone(),
            metrics: Arc::new(metrics),
            metrics_public: Arc::new(metrics_public),
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
pub fn start(addr: SocketAddr, live: Arc<Live>, token: Token) -> Result<SocketAddr> {
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
                    Ok(l) => serve(l, app, token).await,
                    Err(e) => fragkit_sys::stderr_line!("fragkit: http server: {e}"),
                }
            })
        })?;
    Ok(bound)
}

/// What a connection is doing, for the pool it counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pending,
    Short,
    Events,
    /// Answered with an error at once (421, 429, 503): counts against nothing.
    Refused,
}

/// A token bucket: `rate` tokens a second, at most [`BURST`].
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(now: Instant) -> Bucket {
        Bucket {
            tokens: BURST,
            at: now,
        }
    }

    fn take(&mut self, rate: f64, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn full(&self, rate: f64, now: Instant) -> bool {
        self.tokens + now.saturating_duration_since(self.at).as_secs_f64() * rate >= BURST
    }
}

struct Client {
    pending: usize,
    events: usize,
    metrics: Bucket,
    other: Bucket,
}

/// The pools' counts, shared by the accept loop and the connections.
#[derive(Default)]
struct Pools {
    next_id: u64,
    /// Pending connections by age (ids grow): address and the way to close it.
    pending: BTreeMap<u64, (IpAddr, Arc<Notify>)>,
    clients: HashMap<IpAddr, Client>,
    events: usize,
    serving: usize,
}

/// Why a request was not admitted to its pool.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    TooManyStreams,
    TooManyRequests,
    Busy,
}

impl Pools {
    fn client(&mut self, ip: IpAddr, now: Instant) -> &mut Client {
        self.clients.entry(ip).or_insert_with(|| Client {
            pending: 0,
            events: 0,
            metrics: Bucket::new(now),
            other: Bucket::new(now),
        })
    }

    /// A new connection from `ip`: make room in the pending pool by closing the oldest
    /// pending connection of the busiest address, then count it. Returns its id and what
    /// closes it.
    fn admit(&mut self, ip: IpAddr, now: Instant) -> (u64, Arc<Notify>) {
        let mine = self.client(ip, now).pending;
        let victim = if mine >= MAX_PENDING_PER_IP {
            Some(ip)
        } else if self.pending.len() >= MAX_PENDING {
            self.clients
                .iter()
                .max_by_key(|(_, c)| c.pending)
                .map(|(ip, _)| *ip)
        } else {
            None
        };
        if let Some(v) = victim {
            let oldest = self
                .pending
                .iter()
                .find(|(_, (a, _))| *a == v)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                self.leave_pending(id);
            }
        }
        self.prune(now);
        let id = self.next_id;
        self.next_id += 1;
        let close = Arc::new(Notify::new());
        self.pending.insert(id, (ip, close.clone()));
        self.client(ip, now).pending += 1;
        (id, close)
    }

    /// Take `id` out of the pending pool (head complete, closed, or evicted: then it is
    /// told to close).
    fn leave_pending(&mut self, id: u64) {
        if let Some((ip, close)) = self.pending.remove(&id) {
            close.notify_one();
            if let Some(c) = self.clients.get_mut(&ip) {
                c.pending = c.pending.saturating_sub(1);
            }
        }
    }

    /// The head of `id` is complete, asking for `path`: admit it to its pool.
    fn enter(&mut self, id: u64, ip: IpAddr, path: &str, now: Instant) -> Result<Stage, Refusal> {
        if let Some((_, _)) = self.pending.remove(&id) {
            if let Some(c) = self.clients.get_mut(&ip) {
                c.pending = c.pending.saturating_sub(1);
            }
        }
        let events = self.events;
        let serving = self.serving;
        let c = self.client(ip, now);
        if path == "/events" {
            if c.events >= MAX_EVENT_STREAMS_PER_IP || events >= MAX_EVENT_STREAMS {
                return Err(Refusal::TooManyStreams);
            }
            if !c.other.take(OTHER_RATE, now) {
                return Err(Refusal::TooManyRequests);
            }
            c.events += 1;
            self.events += 1;
            return Ok(Stage::Events);
        }
        let allowed = if path == "/metrics" {
            c.metrics.take(METRICS_RATE, now)
        } else {
            c.other.take(OTHER_RATE, now)
        };
        if !allowed {
            return Err(Refusal::TooManyRequests);
        }
        if serving >= MAX_SERVING {
            return Err(Refusal::Busy);
        }
        self.serving += 1;
        Ok(Stage::Short)
    }

    /// Connection `id` is gone: give back what its stage held.
    fn close(&mut self, id: u64, ip: IpAddr, stage: Stage) {
        match stage {
            Stage::Pending => {
                if let Some((_, _)) = self.pending.remove(&id) {
                    if let Some(c) = self.clients.get_mut(&ip) {
                        c.pending = c.pending.saturating_sub(1);
                    }
                }
            }
            Stage::Events => {
                self.events = self.events.saturating_sub(1);
                if let Some(c) = self.clients.get_mut(&ip) {
                    c.events = c.events.saturating_sub(1);
                }
            }
            Stage::Short => self.serving = self.serving.saturating_sub(1),
            Stage::Refused => {}
        }
    }

    /// Forget addresses that hold nothing and whose buckets are full again, once there
    /// are many (a client's state never outgrows the connections it holds).
    fn prune(&mut self, now: Instant) {
        if self.clients.len() > 4 * MAX_PENDING {
            self.clients.retain(|_, c| {
                c.pending > 0
                    || c.events > 0
                    || !c.metrics.full(METRICS_RATE, now)
                    || !c.other.full(OTHER_RATE, now)
            });
        }
    }
}

fn lock(p: &Mutex<Pools>) -> std::sync::MutexGuard<'_, Pools> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// One connection's place in the pools; gives it back when the connection ends.
struct Slot {
    pools: Arc<Mutex<Pools>>,
    id: u64,
    ip: IpAddr,
    stage: Mutex<Stage>,
}

impl Slot {
    fn stage(&self) -> Stage {
        *self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let stage = self.stage();
        lock(&self.pools).close(self.id, self.ip, stage);
    }
}

fn refused(r: Refusal) -> axum::response::Response {
    use axum::http::StatusCode;
    let (code, retry, why) = match r {
        Refusal::TooManyStreams => (
            StatusCode::SERVICE_UNAVAILABLE,
            "10",
            "too many open event streams",
        ),
        Refusal::TooManyRequests => (
            StatusCode::TOO_MANY_REQUESTS,
            "1",
            "too many requests from this address",
        ),
        Refusal::Busy => (
            StatusCode::SERVICE_UNAVAILABLE,
            "1",
            "too many requests being answered",
        ),
    };
    (
        code,
        [(header::RETRY_AFTER, retry)],
        format!("fragkit: {why}; try again later\n"),
    )
        .into_response()
}

/// Accept loop: one task per connection; see the module's notes for the pools.
async fn serve(listener: tokio::net::TcpListener, app: Router, token: Token) {
    let pools = Arc::new(Mutex::new(Pools::default()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors or similar: let connections finish first.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ip = canonical(peer.ip());
        let accepted = Instant::now();
        let (id, close) = lock(&pools).admit(ip, accepted);
        let slot = Arc::new(Slot {
            pools: pools.clone(),
            id,
            ip,
            stage: Mutex::new(Stage::Pending),
        });
        let local = stream.local_addr().ok();
        let app = app.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let s = slot.clone();
            let service = hyper::service::service_fn(
                move |req: axum::extract::Request<hyper::body::Incoming>| {
                    let app = app.clone();
                    let s = s.clone();
                    let token = token.clone();
                    async move {
                        let host = req
                            .headers()
                            .get(header::HOST)
                            .and_then(|h| h.to_str().ok())
                            .map(str::to_string);
                        let host = host.as_deref();
                        let admitted = if host_allowed(host, local) {
                            lock(&s.pools).enter(s.id, s.ip, req.uri().path(), Instant::now())
                        } else {
                            Ok(Stage::Refused)
                        };
                        let stage = *admitted.as_ref().unwrap_or(&Stage::Refused);
                        *s.stage.lock().unwrap_or_else(|e| e.into_inner()) = stage;
                        let (mut parts, body) = req.into_parts();
                        let access = access(&parts, &token);
                        let mut answer = match admitted {
                            Ok(Stage::Refused) => misdirected(host),
                            Err(r) => refused(r),
                            Ok(_) if parts.uri.path() == "/metrics" && access != Access::Denied => {
                                parts.extensions.insert(access);
                                app.oneshot(axum::extract::Request::from_parts(
                                    parts,
                                    axum::body::Body::new(body),
                                ))
                                .await?
                            }
                            Ok(_) if access != Access::Granted => unauthorized(access),
                            Ok(_) => {
                                parts.extensions.insert(access);
                                app.oneshot(axum::extract::Request::from_parts(
                                    parts,
                                    axum::body::Body::new(body),
                                ))
                                .await?
                            }
                        };
                        // The page's address holds the token: never send it on.
                        answer.headers_mut().insert(
                            header::REFERRER_POLICY,
                            header::HeaderValue::from_static("no-referrer"),
                        );
                        Ok::<_, Infallible>(answer)
                    }
                },
            );
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // The pools' limits in time: a head within HEADER_READ_TIMEOUT, a short
            // answer within RESPONSE_TIMEOUT, an event stream until either side ends it.
            let watchdog = async {
                tokio::time::sleep_until((accepted + HEADER_READ_TIMEOUT).into()).await;
                match slot.stage() {
                    Stage::Pending => {}
                    Stage::Events => std::future::pending::<()>().await,
                    Stage::Short | Stage::Refused => {
                        tokio::time::sleep_until((accepted + RESPONSE_TIMEOUT).into()).await
                    }
                }
            };
            tokio::select! {
                _ = conn => {}
                _ = close.notified() => {}
                _ = watchdog => {}
            }
            drop(slot);
        });
    }
}

/// An IPv4 client reaching an IPv6 socket counts as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
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

async fn metrics(
    State(live): State<Arc<Live>>,
    axum::Extension(access): axum::Extension<Access>,
) -> impl IntoResponse {
    let granted = access == Access::Granted;
    let body = {
        let p = live.state.read().unwrap_or_else(|e| e.into_inner());
        if granted {
            p.metrics.clone()
        } else {
            p.metrics_public.clone()
        }
    };
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
    use super::*;

    #[test]
    fn pools_close_the_oldest_pending_of_the_busiest_address() {
        let now = Instant::now();
        let mut p = Pools::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first: Vec<_> = (0..MAX_PENDING_PER_IP).map(|_| p.admit(a, now)).collect();
        // One more from the same address closes its oldest, not the newcomer.
        let (new_id, new_close) = p.admit(a, now);
        assert_eq!(p.pending.len(), MAX_PENDING_PER_IP);
        assert!(!p.pending.contains_key(&first[0].0));
        assert!(p.pending.contains_key(&new_id));
        // The evicted one was told to close (a permit is stored), the others were not.
        let closed =
            |n: &Arc<Notify>| futures_util::FutureExt::now_or_never(n.notified()).is_some();
        assert!(closed(&first[0].1));
        assert!(!closed(&first[1].1));
        assert!(!closed(&new_close));
        // Another address is not touched by the first one's flood.
        let (b_id, _) = p.admit(b, now);
        assert!(p.pending.contains_key(&b_id));
        assert_eq!(p.clients[&a].pending, MAX_PENDING_PER_IP);
        // A completed head leaves the pending pool and cannot be evicted any more.
        assert_eq!(p.enter(new_id, a, "/metrics", now), Ok(Stage::Short));
        assert_eq!(p.clients[&a].pending, MAX_PENDING_PER_IP - 1);
        assert_eq!(p.serving, 1);
        p.close(new_id, a, Stage::Short);
        assert_eq!(p.serving, 0);
    }

    #[test]
    fn pools_cap_event_streams_and_rates() {
        let now = Instant::now();
        let mut p = Pools::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let mut streams = Vec::new();
        for _ in 0..MAX_EVENT_STREAMS_PER_IP {
            let (id, _) = p.admit(a, now);
            assert_eq!(p.enter(id, a, "/events", now), Ok(Stage::Events));
            streams.push(id);
        }
        let (id, _) = p.admit(a, now);
        assert_eq!(p.enter(id, a, "/events", now), Err(Refusal::TooManyStreams));
        // Streams do not take from the short requests' pool.
        let (id, _) = p.admit(a, now);
        assert_eq!(p.enter(id, a, "/metrics", now), Ok(Stage::Short));
        p.close(id, a, Stage::Short);
        p.close(streams[0], a, Stage::Events);
        let (id, _) = p.admit(a, now);
        assert_eq!(p.enter(id, a, "/events", now), Ok(Stage::Events));
        // /metrics has its own bucket: exhausting it leaves the others'.
        let mut ok = 0;
        for _ in 0..2 * BURST as usize {
            let (id, _) = p.admit(a, now);
            if p.enter(id, a, "/metrics", now) == Ok(Stage::Short) {
                ok += 1;
                p.close(id, a, Stage::Short);
            }
        }
        assert_eq!(ok, BURST as usize - 1, "one went to the request above");
        let (id, _) = p.admit(a, now);
        assert_eq!(p.enter(id, a, "/api/state", now), Ok(Stage::Short));
        // A second later the bucket has METRICS_RATE tokens again.
        let later = now + Duration::from_secs(1);
        let mut ok = 0;
        for _ in 0..2 * METRICS_RATE as usize {
            let (id, _) = p.admit(a, later);
            if p.enter(id, a, "/metrics", later).is_ok() {
                ok += 1;
                p.close(id, a, Stage::Short);
            }
        }
        assert_eq!(ok, METRICS_RATE as usize);
    }

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
