//! The commands and flags of `acts`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// acts — run durable workflows from YAML.
/// How `acts` logs (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object per line, for a log pipeline.
    Json,
}

#[derive(Debug, Parser)]
#[command(name = "acts", version, about, long_about = None)]
pub struct Cli {
    /// The store: memory:, redb:PATH (options ?fsync=false, ?cache_mb=N),
    /// rocksdb:PATH (?sync=false), redis://HOST:PORT/NAMESPACE,
    /// redis+sentinel://HOST:PORT,HOST:PORT/MASTER/NAMESPACE,
    /// redis+cluster://HOST:PORT,HOST:PORT/NAMESPACE (the three need the
    /// `redis` feature; ?wait_replicas=N acknowledges a write once N
    /// replicas have it) or postgres://USER@HOST:PORT/DB?namespace=NAME (several
    /// hosts: HOST:PORT,HOST:PORT and &target_session_attrs=read-write).
    #[arg(
        long,
        global = true,
        env = "ACTS_STORE",
        default_value = "redb:acts.db"
    )]
    pub store: String,
    /// Refuse a model that deploys with warnings (a key the model language
    /// does not have, e.g. `iff:` for `if:`; an interrupt without a key).
    #[arg(long, global = true)]
    pub strict: bool,
    /// Say more on stderr: -v the engine's progress, -vv its details
    /// (RUST_LOG, e.g. RUST_LOG=acts_core=debug, takes precedence). By
    /// default warnings and scripts' console output are shown.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to log, as an env-filter directive (e.g. `info`,
    /// `acts_core=debug`); overrides -v; RUST_LOG overrides both.
    #[arg(long, global = true, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// How to log: `text` (default) or `json` (one JSON object per line,
    /// with the fields of the spans it happened in: `pid` and `model` of
    /// the process, `tid` and `nid` of the task).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Talk to a running `acts serve` at this URL (e.g.
    /// http://127.0.0.1:7878) instead of opening the store: `deploy`,
    /// `start`, `ps`, `tasks`, `deliveries`, `show`, `act`, `control`,
    /// `models` and `versions` work this way, and `cluster status` asks
    /// a cluster node.
    #[arg(long, global = true, env = "ACTS_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// The bearer token to send to the server (`--server`), when it has
    /// access control; better given as ACTS_TOKEN than on the command line.
    #[arg(
        long,
        global = true,
        env = "ACTS_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// A YAML config file: for `serve`, `listen`, `grpc`, `tokens` and
    /// `streams`; for every command that opens the store, `http:` and
    /// `shell:` (how `acts.core.http` and `acts.app.shell` may reach
    /// outside; see docs/MODEL.md).
    #[arg(long, global = true, env = "ACTS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How interrupt requests are answered.
#[derive(Debug, Args, Default)]
pub struct AnswerMode {
    /// Complete every interrupt request with no vars.
    #[arg(long, conflicts_with = "answers")]
    pub auto: bool,
    /// A JSON file mapping an act's key (or node id) to its answer,
    /// {"action": "complete|submit|back|cancel|abort|skip|error|push|remove|set_vars|ignore",
    /// "vars": {...}, "target": "KEY_OR_ID", "delay_ms": N}, or to a list of
    /// answers used in turn (the last one repeats). Scripted runs (this and
    /// --auto) use a virtual clock: timers fire when the run is idle.
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// Print one JSON report at the end instead of progress.
    #[arg(long)]
    pub json: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Deploy a model, start one process and drive it to its end.
    Run {
        /// The model file (YAML or JSON).
        model: PathBuf,
        /// Deploy another model first (e.g. a subflow's child); repeatable.
        #[arg(long = "deploy", value_name = "FILE")]
        deploy: Vec<PathBuf>,
        /// A start variable, KEY=JSON (e.g. amount=10, name='"ada"');
        /// repeatable.
        #[arg(long = "var", value_name = "KEY=JSON")]
        vars: Vec<String>,
        /// How to answer interrupt requests (default: ask on the terminal).
        #[command(flatten)]
        mode: AnswerMode,
    },
    /// Serve the HTTP API (JSON under /api/v1, a live message stream,
    /// /healthz, /readyz, /metrics) over the store until Ctrl-C or SIGTERM.
    /// Requests carry bearer tokens configured in --config or ACTS_TOKENS
    /// (see `acts token new`); without any token every request is the local
    /// admin, so it listens on loopback only.
    Serve {
        /// The address to listen on (host:port; port 0 picks a free one);
        /// default: the config's `listen`, else 127.0.0.1:7878.
        #[arg(long, env = "ACTS_LISTEN")]
        listen: Option<String>,
        /// Also serve the gRPC protocol of acts-server 0.25 (what its
        /// client `acts-channel` speaks) on HOST:PORT (the reference's
        /// port is 10080; off unless given here or as `grpc:` in
        /// --config). Same tokens and loopback rule as the HTTP API.
        #[arg(long, value_name = "HOST:PORT", env = "ACTS_GRPC")]
        grpc: Option<String>,
        /// Own the store as node ID, by lease and fenced (for a store
        /// several `acts serve` may open, e.g. one Redis namespace): while
        /// this node's lease runs no other node or command writes there,
        /// and once another node takes the store over this one can apply
        /// nothing and stops. See docs/CLUSTER.md.
        #[arg(long, value_name = "ID", env = "ACTS_NODE")]
        node: Option<String>,
        /// With --node: how long the lease lasts unless renewed (it is
        /// renewed every third of it; a node that dies holds the store
        /// this long).
        #[arg(long, value_name = "SECONDS", default_value_t = 5, requires = "node")]
        lease_ttl: u64,
        /// Join a cluster of engine nodes on this shared store instead of
        /// serving --store: redis://HOST:PORT/NAME,
        /// redis+sentinel://HOST:PORT,.../MASTER/NAME,
        /// redis+cluster://HOST:PORT,.../NAME or
        /// postgres://USER@HOST:PORT/DB?namespace=NAME (memory: for a
        /// one-process trial). Needs --node; every node accepts every call and routes
        /// it to the node owning the process's partition. See
        /// docs/CLUSTER.md.
        #[arg(long, value_name = "URL", env = "ACTS_CLUSTER", requires = "node")]
        cluster: Option<String>,
        /// With --cluster: how many partitions the processes are split
        /// into (fixed when the cluster is created; every node must give
        /// the same).
        #[arg(long, default_value_t = 64, requires = "cluster")]
        partitions: u32,
        /// With --cluster: the URL the other nodes reach this one at
        /// (default: http:// and the address it listens on).
        #[arg(long, value_name = "URL", requires = "cluster")]
        advertise: Option<String>,
        /// Export OpenTelemetry traces over OTLP to this collector
        /// (http://HOST:PORT; default: OTEL_EXPORTER_OTLP_ENDPOINT; off
        /// without either): a trace per process (a span per workflow,
        /// step, branch and act) continuing the caller's `traceparent`,
        /// a span per HTTP and gRPC request and per group commit. Port
        /// 4318 means OTLP/HTTP, any other OTLP/gRPC, unless
        /// OTEL_EXPORTER_OTLP_PROTOCOL says (grpc, http/protobuf). See
        /// docs/SERVER.md.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
        /// Let admins back up the store while it serves (`acts backup
        /// --server URL --to NAME`, POST /api/v1/backups) into this
        /// folder (it must exist; each copy takes a new name in it). redb
        /// and RocksDB stores; see docs/OPERATIONS.md.
        #[arg(
            long,
            value_name = "DIR",
            env = "ACTS_BACKUP_DIR",
            conflicts_with = "cluster"
        )]
        backup_dir: Option<PathBuf>,
    },
    /// Copy the store while it is in use: a redb store's snapshot or a
    /// RocksDB checkpoint, taken while commits go on, then opened and
    /// counted. On the store (when no server holds it), or with --server
    /// by a running `acts serve` into its --backup-dir. Redis and
    /// PostgreSQL keep their own backups (see docs/OPERATIONS.md).
    Backup {
        /// Where the copy goes (a path that does not exist yet); with
        /// --server, a name in the server's --backup-dir.
        #[arg(long, value_name = "PATH")]
        to: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Put a backup (from `acts backup`) where --store lives, after
    /// opening and counting it; the store must not exist (stop acts and
    /// move it away first).
    Restore {
        /// The backup.
        #[arg(long, value_name = "PATH")]
        from: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write everything the store holds (models and versions, processes,
    /// deliveries, channels, triggers, indexes) to a file another store
    /// can import: how a store moves to another backend (redb to
    /// PostgreSQL, say). The store must not be served meanwhile.
    Export {
        /// The file to write (it must not exist).
        #[arg(long, value_name = "PATH")]
        to: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Fill an empty store (--store) from a file `acts export` wrote, then
    /// open and count it. Cut short, the same command goes on where it
    /// stopped.
    Import {
        /// The export.
        #[arg(long, value_name = "PATH")]
        from: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Look at a cluster of `acts serve --cluster` nodes (through any
    /// node: --server URL).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Make and check access tokens for `acts serve`.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print a completion script for a shell (bash, zsh, fish, elvish,
    /// powershell), e.g. `acts completions bash > ~/.local/share/bash-completion/completions/acts`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the OpenAPI 3.1 document of `acts serve`'s HTTP API (what it
    /// serves at /api/v1/openapi.json), e.g. to generate a client.
    Openapi,
    /// The commands that work on a store and through a server alike.
    #[command(flatten)]
    Call(CallCommand),
    /// Resume every unfinished process of the store and drive them to
    /// their end, answering interrupt requests as `run` does.
    Resume {
        /// How to answer interrupt requests (default: ask on the terminal).
        #[command(flatten)]
        mode: AnswerMode,
    },
    /// Run the tests of models: every MODEL.yml with a MODEL.test.yml (or
    /// .json) beside it, in the given folders or files, and the examples
    /// of Markdown documents (```yaml model=NAME blocks, each with an
    /// optional ```yaml test=NAME block).
    Test {
        /// Folders or files (models, their test files, Markdown documents).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// One JSON object per test and a summary, instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// The commands that work on a store and through a server (`--server`)
/// alike, each written once (`calls.rs`).
#[derive(Debug, Subcommand)]
pub enum CallCommand {
    /// Deploy models.
    Deploy {
        /// Model files.
        #[arg(required = true)]
        models: Vec<PathBuf>,
    },
    /// Start a process of a deployed model (prints its id and state).
    Start {
        /// The model id.
        model_id: String,
        /// A start variable, KEY=JSON; repeatable.
        #[arg(long = "var", value_name = "KEY=JSON")]
        vars: Vec<String>,
        /// Print just the process id (for scripts).
        #[arg(long, short)]
        quiet: bool,
        /// Run this version of the model (its revision, as `acts versions`
        /// lists them) instead of the latest.
        #[arg(long, value_name = "REVISION")]
        rev: Option<u32>,
    },
    /// Operator controls of a process: `pause` (its timers and automatic
    /// steps hold, client actions are refused), `resume` (what fell due
    /// runs), `terminate` (it ends aborted, the reason as its error),
    /// `rewind --to STEP [--var K=JSON]` (the step runs again; what ran
    /// after it is marked backed), `retry [--task STEP] [--var K=JSON]` (a
    /// process that ended in an error: the step where it began runs again,
    /// and the process is in flight again). Each is recorded in the
    /// process's history (`acts show`).
    Control {
        /// pause, resume, terminate, rewind or retry.
        #[arg(value_parser = ["pause", "resume", "terminate", "rewind", "retry"])]
        control: String,
        /// The process id.
        pid: String,
        /// Why (kept in the history; for pause and terminate).
        #[arg(long, default_value = "")]
        reason: String,
        /// For rewind: the earlier step to run again.
        #[arg(long, value_name = "STEP")]
        to: Option<String>,
        /// For retry: the errored step (or act) to run again, by task or
        /// node id (default: the step where the error began).
        #[arg(long, value_name = "TASK")]
        task: Option<String>,
        /// For rewind and retry: a process variable to set first,
        /// KEY=JSON; repeatable.
        #[arg(long = "var", value_name = "KEY=JSON")]
        vars: Vec<String>,
    },
    /// One operator action on every process a query matches, as a durable
    /// job: `acts bulk retry --ecode timeout --started-after
    /// 2026-12-04T00:00:00Z` retries each once (also across restarts), at
    /// its own pace, with a progress bar; `--dry-run` counts and shows the
    /// first 20; `status`, `ls`, `wait`, `report` and `cancel` follow a
    /// job.
    Bulk {
        /// The action (or the job command).
        #[command(subcommand)]
        command: crate::cli_bulk::BulkCommand,
    },
    /// Move the running processes of a model from one version to another:
    /// each in one atomic batch or not at all, nodes mapped by id (or by
    /// --map), the move recorded in its history. --dry-run reports what
    /// would happen to each process and changes nothing.
    Migrate {
        /// The model id.
        model_id: String,
        /// The version its processes run now.
        #[arg(long, value_name = "REVISION")]
        from: u32,
        /// The version to move them to.
        #[arg(long, value_name = "REVISION")]
        to: u32,
        /// A YAML or JSON file mapping old node ids to new ones
        /// (`old_step: new_step`), for nodes renamed or removed.
        #[arg(long, value_name = "FILE")]
        map: Option<std::path::PathBuf>,
        /// A process variable to set as each process moves, KEY=JSON;
        /// repeatable.
        #[arg(long = "var", value_name = "KEY=JSON")]
        vars: Vec<String>,
        /// Report what would happen; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the versions of a model (every deploy that changed it), with
    /// how many processes run on each; or remove one no process uses.
    Versions {
        /// The model id.
        model_id: String,
        /// Remove this version (refused while it is the latest or any
        /// stored process runs on it).
        #[arg(long, value_name = "REVISION")]
        remove: Option<u32>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List processes.
    Ps {
        /// Only processes in this state (running, completed, error, ...).
        #[arg(long)]
        state: Option<String>,
        /// Only processes of this model.
        #[arg(long)]
        model: Option<String>,
        /// Only stuck processes: in flight, not paused, with no interrupt,
        /// timer, package or subflow to wait for, for longer than SECONDS
        /// (default 600). Ignores --state and --model.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
        stuck: Option<u64>,
        /// Only processes whose variable (one the model declares in its
        /// `index:`) matches: VAR=VALUE, VAR>=VALUE, VAR<=VALUE (VALUE as
        /// JSON, else text); repeatable on one variable; needs --model.
        #[arg(long = "where", value_name = "CONDITION")]
        wheres: Vec<String>,
        /// Only processes waiting for this: `concurrency` (parked, for a
        /// free slot of their concurrency key), `admission` (parked, for a
        /// place under the engine's cap) or `gate` (running, a task waiting
        /// at a step's or act's concurrency or rate key).
        #[arg(long, value_name = "WHAT")]
        waiting_for: Option<String>,
        /// Only processes of this concurrency key (the model's
        /// `concurrency:`, as evaluated at their start).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// Only processes that ended with this error code.
        #[arg(long, value_name = "CODE")]
        ecode: Option<String>,
        /// Print how many processes match instead of listing them.
        #[arg(long)]
        count: bool,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List tasks across processes (`--inbox`: the open interrupts you
    /// may answer), in process order, then creation order.
    Tasks {
        /// What tasks to list.
        #[command(flatten)]
        filter: TaskFilter,
        /// Print how many tasks match instead of listing them.
        #[arg(long)]
        count: bool,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the deliveries of durable channels (`--state failed`: the dead
    /// letters), oldest first; or redeliver or discard a dead letter.
    Deliveries {
        /// What deliveries to list.
        #[command(flatten)]
        filter: DeliveryFilter,
        /// Give dead letter MSG_ID of CHANNEL another round.
        #[arg(long, num_args = 2, value_names = ["CHANNEL", "MSG_ID"], conflicts_with = "discard")]
        redeliver: Option<Vec<String>>,
        /// Discard dead letter MSG_ID of CHANNEL.
        #[arg(long, num_args = 2, value_names = ["CHANNEL", "MSG_ID"])]
        discard: Option<Vec<String>>,
        /// Print how many deliveries match instead of listing them.
        #[arg(long)]
        count: bool,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a process: its task tree with states, times and data.
    Show {
        /// The process id.
        pid: String,
        /// Print `{"process": ..., "tasks": [...]}` as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Apply an action to an act: complete, submit, back, cancel, abort,
    /// skip, error, remove, set_vars; or push a new act under a running
    /// step (`push PID STEP --var uses='"acts.core.irq"' --var params=...`).
    Act {
        /// The action.
        action: String,
        /// The process id.
        pid: String,
        /// The act's task id.
        tid: String,
        /// An option, KEY=JSON (e.g. ecode='"E1"', to='"step1"');
        /// repeatable.
        #[arg(long = "var", value_name = "KEY=JSON")]
        vars: Vec<String>,
    },
    /// List deployed models.
    Models {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// What `acts cluster` does.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The nodes, the partitions, their owners and epochs, and the lag of
    /// the model catalog, as the node at --server sees them.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// What `acts token` does.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a new random token for a principal: prints the token (give it
    /// to the principal; it is not stored anywhere) and the config entry
    /// holding its hash (add it under `tokens:` in the serve config).
    New {
        /// The principal's id (what interrupts address as user:ID).
        #[arg(long)]
        principal: String,
        /// A role (admin, operator, or one interrupts address as
        /// role:NAME); repeatable.
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
    },
    /// Print the SHA-256 of the token read from stdin (for a config entry).
    Hash,
}

/// The filters of `acts tasks`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TaskFilter {
    /// Only the open interrupts of running processes this caller may
    /// answer (the inbox); other filters narrow it.
    #[arg(long)]
    pub inbox: bool,
    /// Only tasks in this state (interrupt, running, completed, ...).
    #[arg(long)]
    pub state: Option<String>,
    /// Only tasks of this kind: workflow, step, branch or act.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only tasks of this node (a step's id).
    #[arg(long)]
    pub node: Option<String>,
    /// Only acts with this `params.key`.
    #[arg(long)]
    pub key: Option<String>,
    /// Only acts of this package (e.g. acts.core.irq).
    #[arg(long)]
    pub uses: Option<String>,
    /// Only in processes of this model.
    #[arg(long)]
    pub model: Option<String>,
    /// Only in processes in this state.
    #[arg(long, value_name = "STATE")]
    pub process_state: Option<String>,
    /// Only in processes whose indexed variable matches (as `acts ps
    /// --where`; needs --model).
    #[arg(long = "where", value_name = "CONDITION")]
    pub wheres: Vec<String>,
}

/// The filters of `acts deliveries`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DeliveryFilter {
    /// Only deliveries of this durable channel.
    #[arg(long)]
    pub channel: Option<String>,
    /// Only deliveries in this state: pending, acked, failed or closed.
    #[arg(long)]
    pub state: Option<String>,
    /// Only deliveries of this process's messages.
    #[arg(long)]
    pub pid: Option<String>,
    /// Also read each delivery's message (shown with --json), while it is
    /// stored: until every durable channel's delivery of it is settled.
    #[arg(long)]
    pub messages: bool,
}
