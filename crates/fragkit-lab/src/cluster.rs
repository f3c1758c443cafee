//! The ranks of an MPI job, wrapped once (rsmpi over the system's OpenMPI).
//!
//! A [`Cluster`] is either one process on its own (no MPI at all: `fragkit` run without
//! mpirun or srun never initialises MPI, so OpenMPI's singleton start, which forks a
//! helper daemon and refuses root without its environment variables, never happens) or
//! the world communicator of an MPI job started by a launcher. Commands that run as ranks
//! (`age paf`, `bench ior`, `bench paf --mpi`) call its collectives; with one process
//! they cost nothing.
//!
//! Errors: a rank's failure must never leave the others waiting in a collective. Every
//! step that can fail on some ranks ends with [`Cluster::agree`], which tells every rank
//! which ranks failed; each failing rank prints its own error (prefixed with its rank) and
//! rank 0 the list, before a barrier, and every rank gets a quiet [`PeerFailed`]. An error that escapes without `agree` ends the whole job
//! through MPI_Abort in [`Cluster::finish`].

use std::cell::Cell;
use std::fmt;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Environment variables that a launcher sets in every rank: OpenMPI's mpirun, PMIx (srun
/// --mpi=pmix, prterun), PMI-1/PMI-2 (MPICH's hydra, srun --mpi=pmi2).
const LAUNCHER_VARS: [&str; 4] = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_FD"];

/// Whether this process was started by an MPI launcher.
pub fn launched() -> bool {
    LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

/// This process's rank as the launcher numbered it (OpenMPI, PMIx, PMI), read before (or
/// without) starting MPI; None when no launcher says.
pub fn launcher_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// An error every rank of a launched job hits alike before MPI starts (a refusal of the
/// arguments): only rank 0 prints it, so the job shows it once.
#[derive(Debug)]
pub struct EveryRank(pub String);

impl EveryRank {
    /// Whether this process stays quiet (a launched rank other than 0).
    pub fn quiet(&self) -> bool {
        launcher_rank().is_some_and(|r| r != 0)
    }
}

impl fmt::Display for EveryRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EveryRank {}

/// Another rank failed; its own error was printed by that rank.
#[derive(Debug)]
pub struct PeerFailed {
    pub ranks: Vec<usize>,
    /// Not rank 0: print nothing (rank 0 says it once for the job).
    pub quiet: bool,
}

impl fmt::Display for PeerFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.ranks.iter().map(|r| r.to_string()).collect();
        write!(
            f,
            "stopped because rank{} {} failed (see {} error above)",
            if self.ranks.len() == 1 { "" } else { "s" },
            list.join(", "),
            if self.ranks.len() == 1 {
                "its"
            } else {
                "their"
            }
        )
    }
}

impl std::error::Error for PeerFailed {}

enum Inner {
    Solo,
    #[cfg(feature = "mpi")]
    Mpi {
        world: mpi::topology::SimpleCommunicator,
        // Dropped last: MPI_Finalize.
        _universe: mpi::environment::Universe,
    },
}

/// This process's place in the job.
pub struct Cluster {
    rank: usize,
    size: usize,
    /// Ranks on this host (from a shared-memory split of the world).
    local_size: usize,
    inner: Inner,
    /// Set when `agree` returned an error: every rank knows, no abort needed.
    agreed_failure: Cell<bool>,
}

impl Cluster {
    /// One process, no MPI.
    pub(crate) fn solo() -> Cluster {
        Cluster {
            rank: 0,
            size: 1,
            local_size: 1,
            inner: Inner::Solo,
            agreed_failure: Cell::new(false),
        }
    }

    /// The MPI world when a launcher started this process; otherwise [`Cluster::solo`].
    pub fn init() -> Result<Cluster> {
        if !launched() {
            return Ok(Cluster::solo());
        }
        Self::init_mpi()
    }

    #[cfg(feature = "mpi")]
    fn init_mpi() -> Result<Cluster> {
        use mpi::topology::Communicator;
        let universe = mpi::initialize()
            .ok_or_else(|| anyhow::anyhow!("MPI is already initialised in this process"))?;
        let world = universe.world();
        let local_size = world.split_shared(world.rank()).size() as usize;
        Ok(Cluster {
            rank: world.rank() as usize,
            size: world.size() as usize,
            local_size,
            inner: Inner::Mpi {
                world,
                _universe: universe,
            },
            agreed_failure: Cell::new(false),
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn init_mpi() -> Result<Cluster> {
        anyhow::bail!(
            "started by an MPI launcher but this fragkit was built without the `mpi` feature; rebuild with it: cargo install --locked --path . --features mpi"
        )
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
    /// Ranks sharing this host.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    pub fn barrier(&self) {
        match &self.inner {
            Inner::Solo => {}
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::collective::CommunicatorCollectives;
                world.barrier();
            }
        }
    }

    /// Every rank's `xs` (the same length on every rank), rank after rank, on every rank:
    /// several values in one collective.
    pub(crate) fn all_gather_f64s(&self, xs: &[f64]) -> Vec<f64> {
        match &self.inner {
            Inner::Solo => xs.to_vec(),
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::collective::CommunicatorCollectives;
                let mut out = vec![0f64; self.size * xs.len()];
                world.all_gather_into(xs, &mut out[..]);
                out
            }
        }
    }

    /// Every rank's `x`, in rank order, on every rank.
    pub(crate) fn all_gather_u64(&self, x: u64) -> Vec<u64> {
        match &self.inner {
            Inner::Solo => vec![x],
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::collective::CommunicatorCollectives;
                let mut out = vec![0u64; self.size];
                world.all_gather_into(&x, &mut out[..]);
                out
            }
        }
    }

    /// Rank 0's `x` on every rank.
    pub(crate) fn broadcast_u64(&self, x: u64) -> u64 {
        match &self.inner {
            Inner::Solo => x,
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::collective::Root;
                use mpi::topology::Communicator;
                let mut v = x;
                world.process_at_rank(0).broadcast_into(&mut v);
                v
            }
        }
    }

    /// Every rank's host name in rank order, on every rank: which ranks share a node, as
    /// IOR's QueryNodeMapping learns it (the launcher's mapping is not assumed).
    pub fn host_names(&self) -> Result<Vec<String>> {
        let me = nix::sys::utsname::uname()
            .map(|u| u.nodename().to_string_lossy().into_owned())
            .context("uname")?;
        let all = self.gather(&me)?;
        self.broadcast(all.as_ref())
    }

    /// Rank 0's `v` on every rank (the others pass None). Travels as JSON.
    pub fn broadcast<T: Serialize + DeserializeOwned>(&self, v: Option<&T>) -> Result<T> {
        #[cfg_attr(not(feature = "mpi"), allow(unused_mut))]
        let mut bytes = match (self.is_root(), v) {
            (true, Some(v)) => serde_json::to_vec(v).context("broadcasting: encoding")?,
            (true, None) => anyhow::bail!("broadcasting: rank 0 has nothing to send"),
            (false, _) => Vec::new(),
        };
        #[cfg_attr(not(feature = "mpi"), allow(unused_variables))]
        let n = self.broadcast_u64(bytes.len() as u64);
        match &self.inner {
            Inner::Solo => {}
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::collective::Root;
                use mpi::topology::Communicator;
                bytes.resize(n as usize, 0);
                world.process_at_rank(0).broadcast_into(&mut bytes[..]);
            }
        }
        serde_json::from_slice(&bytes).context("broadcasting: decoding rank 0's value")
    }

    /// Every rank's value, in rank order, on rank 0 (None on the others). Values travel
    /// as JSON, so any serialisable report can be gathered.
    pub fn gather<T: Serialize + DeserializeOwned>(&self, v: &T) -> Result<Option<Vec<T>>> {
        let bytes = serde_json::to_vec(v).context("gathering ranks' results: encoding")?;
        let all: Option<Vec<Vec<u8>>> = match &self.inner {
            Inner::Solo => Some(vec![bytes]),
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::collective::Root;
                use mpi::datatype::PartitionMut;
                use mpi::topology::Communicator;
                let root = world.process_at_rank(0);
                let n = i32::try_from(bytes.len())
                    .map_err(|_| anyhow::anyhow!("a rank's result is larger than 2 GiB"))?;
                if self.is_root() {
                    let mut counts = vec![0i32; self.size];
                    root.gather_into_root(&n, &mut counts[..]);
                    let displs: Vec<i32> = counts
                        .iter()
                        .scan(0i32, |acc, &c| {
                            let d = *acc;
                            *acc += c;
                            Some(d)
                        })
                        .collect();
                    let total: usize = counts.iter().map(|&c| c as usize).sum();
                    let mut buf = vec![0u8; total];
                    {
                        let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
                        root.gather_varcount_into_root(&bytes[..], &mut part);
                    }
                    Some(
                        counts
                            .iter()
                            .zip(&displs)
                            .map(|(&c, &d)| buf[d as usize..(d + c) as usize].to_vec())
                            .collect(),
                    )
                } else {
                    root.gather_into(&n);
                    root.gather_varcount_into(&bytes[..]);
                    None
                }
            }
        };
        match all {
            None => Ok(None),
            Some(all) => all
                .iter()
                .enumerate()
                .map(|(r, b)| {
                    serde_json::from_slice(b)
                        .with_context(|| format!("gathering ranks' results: rank {r}'s"))
                })
                .collect::<Result<Vec<T>>>()
                .map(Some),
        }
    }

    /// The collective error check: every rank calls it with its own outcome of a step.
    /// Ok on every rank only if every rank succeeded; otherwise each failing rank prints
    /// its error prefixed with its rank, rank 0 which ranks failed (once, when all did),
    /// and every rank gets a [`PeerFailed`] that is already said.
    pub fn agree<T>(&self, r: Result<T>) -> Result<T> {
        if self.size == 1 {
            return r;
        }
        let failed: Vec<usize> = self
            .all_gather_u64(r.is_err() as u64)
            .iter()
            .enumerate()
            .filter(|(_, &f)| f != 0)
            .map(|(i, _)| i)
            .collect();
        if failed.is_empty() {
            return r;
        }
        self.agreed_failure.set(true);
        let said: Option<String> = match &r {
            // Every rank failed (a bad argument, most likely the same error everywhere):
            // rank 0 says it once.
            Err(_) if failed.len() == self.size && !self.is_root() => None,
            Err(e) => Some(format!("rank {}: {e:#}", self.rank)),
            Ok(_) if self.is_root() => Some(
                PeerFailed {
                    ranks: failed.clone(),
                    quiet: false,
                }
                .to_string(),
            ),
            Ok(_) => None,
        };
        // Say it now and wait for every rank before any exits: mpirun ends the whole job
        // as soon as one rank exits non-zero, which could be before a failing rank's own
        // line was written.
        if let Some(line) = &said {
            fragkit_sys::stderr_line!("fragkit: {line}");
        }
        self.barrier();
        Err(PeerFailed {
            ranks: failed,
            quiet: true,
        }
        .into())
    }

    /// End a command run as ranks: an error every rank agreed on is returned (each rank
    /// exits with it); any other error on one rank of several is printed with the rank
    /// and ends the whole job through MPI_Abort, so no rank waits for it forever.
    pub fn finish<T>(self, r: Result<T>) -> Result<T> {
        match r {
            Err(e) if self.size > 1 && !self.agreed_failure.get() => {
                fragkit_sys::stderr_line!("fragkit: rank {}: {e:#}", self.rank);
                self.abort(2)
            }
            r => r,
        }
    }

    /// End every rank of the job now with `code`.
    pub(crate) fn abort(&self, code: i32) -> ! {
        match &self.inner {
            Inner::Solo => std::process::exit(code),
            #[cfg(feature = "mpi")]
            Inner::Mpi { world, .. } => {
                use mpi::topology::Communicator;
                world.abort(code)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solo_collectives_are_the_identity() {
        let c = Cluster::solo();
        assert_eq!((c.rank(), c.size(), c.is_root()), (0, 1, true));
        c.barrier();
        assert_eq!(c.all_gather_f64s(&[2.5, 1.0]), vec![2.5, 1.0]);
        assert_eq!(c.broadcast_u64(7), 7);
        assert_eq!(c.broadcast(Some(&vec![1u8, 2])).unwrap(), vec![1u8, 2]);
        assert_eq!(c.gather(&"x".to_string()).unwrap(), Some(vec!["x".into()]));
        let e = c.agree::<()>(Err(anyhow::anyhow!("boom"))).unwrap_err();
        assert_eq!(e.to_string(), "boom");
    }

    #[test]
    fn peer_failure_names_the_ranks() {
        let p = PeerFailed {
            ranks: vec![2],
            quiet: false,
        };
        assert_eq!(
            p.to_string(),
            "stopped because rank 2 failed (see its error above)"
        );
    }
}
