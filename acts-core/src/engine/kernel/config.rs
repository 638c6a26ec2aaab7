//! [`EngineConfig`]: the engine's settings, each with its default.

use std::time::Duration;

use crate::durable::WriterConfig;
use crate::model::ModelLimits;
use crate::scheduler::RunLimits;

/// The engine's settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Most processes in flight at once (the admission cap, the reference's
    /// cache limit); starts beyond it are parked until a place frees.
    /// Admitted processes need no memory while they wait, so the default
    /// is large: 10,000,000.
    pub cache_cap: usize,
    /// Most processes held in memory while they wait (the memory limit);
    /// idle ones beyond it (waiting for a client, a timer or a subflow
    /// child) are unloaded, least recently idle first, and loaded again
    /// when something happens to them. A small process takes about 12 KB.
    /// Default 4096.
    pub max_resident: usize,
    /// The store writer's settings.
    pub writer: WriterConfig,
    /// How often the housekeeping timer runs (re-sending due deliveries,
    /// dropping expired sealed-data entries, sweeping settled processes).
    pub tick: Duration,
    /// How long an unacknowledged delivery waits before it is re-sent.
    pub delivery_retry: Duration,
    /// How many times a delivery is sent before it is marked failed.
    pub delivery_max_tries: u32,
    /// How long a finished process's rows are kept once all its deliveries
    /// settled (`None`: kept until removed). Default: 7 days. A process
    /// with a dead-lettered delivery is kept until that delivery is settled
    /// (acked); a delivery closed because its task ended is settled.
    pub retention: Option<Duration>,
    /// How often (engine clock) the housekeeping timer sweeps finished
    /// processes; a sweep reads every finished process row, so it runs less
    /// often than `tick`. Default: 10 minutes.
    /// [`RuntimeOps::housekeeping`](crate::engine::RuntimeOps::housekeeping) always
    /// sweeps.
    pub sweep_interval: Duration,
    /// The per-node run limit and the work one transition may do
    /// ([`RunLimits`]; defaults: 1000 runs per node, 10,000 jobs per
    /// transition).
    pub run_limits: RunLimits,
    /// How large and deeply nested a model text may be (defaults: 1 MiB,
    /// 64 levels of flow collections).
    pub model_limits: ModelLimits,
    /// Most bytes (as JSON) of the vars a start, a trigger's payload or a
    /// client action carries. Default 1 MiB.
    pub max_vars_bytes: usize,
    /// How long a call on an in-flight process that did not fit at boot
    /// (more were in flight than the cap) waits for a place (it is first in
    /// line);
    /// then it fails with [`EngineError::Busy`](crate::engine::EngineError::Busy). Default 30 s.
    pub admission_wait: Duration,
    /// How long a process may stay *quiet* — in flight, not paused, with
    /// no interrupt, timer, package or subflow to wait for — before the
    /// stuck detector reports it (a warning, a `workflow`/`stuck` message
    /// on the channels, `acts_processes_stuck`, `acts ps --stuck`).
    /// Checked on each housekeeping tick. Default: 10 minutes.
    pub stuck_after: Duration,
    /// Own the store by lease, fenced (see `docs/CLUSTER.md`): the engine
    /// takes the store's lease at start (refused while another node's has
    /// not expired), renews it, and every commit is conditional on the
    /// epoch it took — once another node takes the store over, nothing
    /// this one writes is applied and it steps down. `None` (the default):
    /// the store is not shared.
    pub lease: Option<LeaseConfig>,
    /// Fire the cron triggers (`on: - cron:`) of the deployed models
    /// (default true). A cluster runs them on one partition only, so a
    /// schedule fires once per cluster, not once per partition.
    pub run_schedules: bool,
    /// Which generated process ids this engine may use (default: any). A
    /// new pid is drawn until it passes: a cluster partition accepts only
    /// the pids that hash to it, so a process a trigger or a hook starts
    /// lives where the cluster routes its pid. Pids a caller names are not
    /// checked here (the cluster routes those to their partition).
    pub pid_filter: Option<PidFilter>,
    /// Which concurrency keys this engine keeps the slots of (`None`, the
    /// default: all). A cluster partition keeps the keys that hash to it,
    /// so two partitions never admit processes of one key each; a start
    /// (or a subflow child) whose key is kept elsewhere is refused.
    pub key_home: Option<PidFilter>,
    /// How the gates of steps and acts (`concurrency:` and `rate:`) hold
    /// across the engines of one store (`None`, the default: this engine
    /// keeps every key). A cluster gives each partition's engine one:
    /// each key's slots and bucket are kept by its home engine, asked
    /// through the courier (see [`GateCourier`]).
    pub gate_courier: Option<super::gates::courier::GateCourier>,
    /// Where the spans of ended tasks go (see
    /// [`trace`](crate::scheduler::trace)); `None` (the default): no
    /// span is built.
    pub spans: Option<SpanExport>,
}

/// The destination of task spans ([`EngineConfig::spans`]).
#[derive(Clone)]
pub struct SpanExport(std::sync::Arc<dyn crate::scheduler::trace::SpanSink>);

impl SpanExport {
    /// Spans go to `sink`.
    pub fn new(sink: std::sync::Arc<dyn crate::scheduler::trace::SpanSink>) -> Self {
        Self(sink)
    }

    pub(crate) fn export(&self, spans: Vec<crate::scheduler::trace::TaskSpan>) {
        if !spans.is_empty() {
            self.0.export(spans);
        }
    }
}

impl std::fmt::Debug for SpanExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpanExport(..)")
    }
}

/// A test on generated process ids ([`EngineConfig::pid_filter`]), or on
/// concurrency keys ([`EngineConfig::key_home`]).
#[derive(Clone)]
pub struct PidFilter(std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl PidFilter {
    /// A filter passing the ids `accept` returns true for. It must accept
    /// a fair share of random ids (a pid is drawn until one passes).
    pub fn new(accept: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(accept))
    }

    /// Whether `s` passes.
    pub fn accepts(&self, s: &str) -> bool {
        (self.0)(s)
    }

    /// A new random process id that passes the filter (after 100,000
    /// refused draws, a filter that accepts almost nothing, any id).
    pub fn draw(&self) -> String {
        for _ in 0..100_000 {
            let pid = crate::tree::long_id();
            if (self.0)(&pid) {
                return pid;
            }
        }
        crate::tree::long_id()
    }
}

impl std::fmt::Debug for PidFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PidFilter(..)")
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            cache_cap: 10_000_000,
            max_resident: 4096,
            writer: WriterConfig::default(),
            tick: Duration::from_secs(15),
            delivery_retry: Duration::from_secs(30),
            delivery_max_tries: 5,
            retention: Some(Duration::from_secs(7 * 86_400)),
            sweep_interval: Duration::from_secs(600),
            run_limits: RunLimits::default(),
            model_limits: ModelLimits::default(),
            max_vars_bytes: 1024 * 1024,
            admission_wait: Duration::from_secs(30),
            stuck_after: Duration::from_secs(600),
            lease: None,
            run_schedules: true,
            pid_filter: None,
            key_home: None,
            gate_courier: None,
            spans: None,
        }
    }
}

/// How a node owns its store (see `engine::services::lease`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseConfig {
    /// This node's id (kept in the lease; named in errors).
    pub node: String,
    /// How long the lease lasts unless renewed (default 5 s): how long a
    /// dead node keeps others from taking over.
    pub ttl: Duration,
    /// Renew in the background every third of the TTL (default true). Off,
    /// only housekeeping ticks and [`StorageOps::renew_lease`](crate::engine::StorageOps::renew_lease)
    /// renew it (tests that freeze a node use this).
    pub background_renewal: bool,
}

impl LeaseConfig {
    /// Node `node` with the default TTL (5 s), renewed in the background.
    pub fn new(node: &str) -> Self {
        Self {
            node: node.to_owned(),
            ttl: Duration::from_secs(5),
            background_renewal: true,
        }
    }
}

/// The lease this node holds.
#[derive(Debug, Clone)]
pub(crate) struct HeldLease {
    pub(crate) config: LeaseConfig,
    pub(crate) epoch: u64,
}
