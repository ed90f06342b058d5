//! `zkd`: the command line. Parses flags, loads zoo.cfg, sets up tracing, runs.

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use zkd_server::config::Config;
use zkd_server::runtime::ServeError;
use zkd_storage::DiskStorage;

#[derive(Parser, Debug)]
#[command(
    name = "zkd",
    version,
    about = "A ZooKeeper-compatible coordination server"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand, Debug)]
enum Commands {
    /// Serve one node from a ZooKeeper zoo.cfg.
    Serve {
        /// Path to zoo.cfg.
        #[arg(long, default_value = "conf/zoo.cfg")]
        config: PathBuf,
        /// Overrides clientPort.
        #[arg(long)]
        client_port: Option<u16>,
        /// Overrides clientPortAddress.
        #[arg(long)]
        client_port_address: Option<String>,
        /// Overrides dataDir (and dataLogDir when it was not set separately).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Import Apache ZooKeeper's data directory (its `version-2/` snapshots,
    /// logs and epochs) into zkd's files under the zoo.cfg's dataDir and
    /// dataLogDir, without serving. ZooKeeper's files are only read.
    Import {
        /// ZooKeeper's dataDir (the one holding `version-2/`).
        #[arg(long)]
        from: PathBuf,
        /// ZooKeeper's dataLogDir, if it was not its dataDir.
        #[arg(long)]
        log_dir: Option<PathBuf>,
        /// The zoo.cfg whose dataDir and dataLogDir receive zkd's files.
        #[arg(long, default_value = "conf/zoo.cfg")]
        config: PathBuf,
    },
    /// Write zkd's state (the zoo.cfg's dataDir and dataLogDir; zkd must be
    /// stopped) as Apache ZooKeeper's data directory: `DIR/version-2/` with a
    /// snapshot and the epoch files, which ZooKeeper starts from.
    Export {
        /// The zoo.cfg whose dataDir and dataLogDir hold zkd's files.
        #[arg(long, default_value = "conf/zoo.cfg")]
        config: PathBuf,
        /// Where `version-2/` goes (ZooKeeper's dataDir).
        #[arg(long)]
        to: PathBuf,
    },
    /// Run a local ensemble of N members (N = 3 or 5), one `zkd serve` each, until Ctrl-C.
    Ensemble(zkd_server::launcher::EnsembleArgs),
    /// Inject a fault into (or heal, or ask the status of) a running `zkd ensemble`.
    Fault(zkd_server::launcher::fault_cli::FaultArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ZKD_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colour_wanted())
        .init();
    let cli = Cli::parse();
    match cli.command {
        Commands::Serve {
            config,
            client_port,
            client_port_address,
            data_dir,
        } => {
            // Before anything else: an unknown failpoint must stop the start.
            if let Err(e) = zkd_server::failpoints::init() {
                tracing::error!("{e}");
                return ExitCode::from(2);
            }
            let mut cfg = match Config::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!("{e}");
                    return ExitCode::from(2);
                }
            };
            if let Some(port) = client_port {
                cfg.client_port = Some(port);
            }
            if let Some(addr) = client_port_address {
                cfg.client_port_address = Some(addr);
            }
            if let Some(dir) = data_dir {
                if cfg.data_log_dir == cfg.data_dir {
                    cfg.data_log_dir = dir.clone();
                }
                cfg.data_dir = dir;
            }
            // Before anything binds: ZooKeeper's state, if the directories
            // hold it and no zkd state yet, is imported (its files only read).
            let (data, log) = (&cfg.data_dir, &cfg.data_log_dir);
            if let Err(e) = zkd_storage::disk::import::prepare(data, log) {
                tracing::error!("fatal: {e}");
                return ExitCode::FAILURE;
            }
            run(cfg)
        }
        Commands::Import {
            from,
            log_dir,
            config,
        } => import(&from, log_dir.as_deref(), &config),
        Commands::Export { config, to } => export(&config, &to),
        Commands::Ensemble(args) => zkd_server::launcher::run(&args),
        Commands::Fault(args) => zkd_server::launcher::fault_cli::run(&args),
    }
}

/// `zkd import`: ZooKeeper's data into the directories `config` names.
fn import(
    from: &std::path::Path,
    log_dir: Option<&std::path::Path>,
    config: &std::path::Path,
) -> ExitCode {
    let cfg = match Config::load(config) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let from_log = log_dir.unwrap_or(from);
    let (to_data, to_log) = (&cfg.data_dir, &cfg.data_log_dir);
    match zkd_storage::disk::import::import_from(from, from_log, to_data, to_log) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("fatal: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `zkd export`: the durable tree and epochs as ZooKeeper's files in `to`.
fn export(config: &std::path::Path, to: &std::path::Path) -> ExitCode {
    let written = Config::load(config)
        .map_err(|e| e.to_string())
        .and_then(|cfg| {
            use zkd_storage::EpochStore;
            if !cfg
                .data_dir
                .join(zkd_storage::disk::layout::ZKD_DIR)
                .exists()
            {
                return Err(format!(
                    "{} holds no zkd state to export",
                    cfg.data_dir.display()
                ));
            }
            let storage =
                DiskStorage::open(&cfg.data_dir, &cfg.data_log_dir).map_err(|e| e.to_string())?;
            let tree =
                zkd_server::driver::recovery::rebuild(&storage).map_err(|e| e.to_string())?;
            let accepted = storage.accepted_epoch().map_err(|e| e.to_string())?;
            let current = storage.current_epoch().map_err(|e| e.to_string())?;
            zkd_storage::zookeeper::export(&tree, accepted, current, to)
                .map(|path| (path, tree.last_zxid(), tree.node_count()))
                .map_err(|e| e.to_string())
        });
    match written {
        Ok((path, zxid, nodes)) => {
            tracing::info!(snapshot = %path.display(), %zxid, nodes, "exported as Apache ZooKeeper's data");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("fatal: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGINT or SIGTERM: stop taking requests; the storage thread finishes its batch.
async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = sigterm => {}
    }
    tracing::info!("shutting down");
}

/// The plaintext client port, if configured (logged: its address and the
/// server's mode, or why it cannot be bound).
async fn bind_plain(config: &Config) -> Result<Option<tokio::net::TcpListener>, ()> {
    let Some(port) = config.client_port else {
        return Ok(None);
    };
    let host = config.client_port_address.as_deref().unwrap_or("0.0.0.0");
    match tokio::net::TcpListener::bind((host, port)).await {
        Ok(listener) => {
            let mode = match config.is_quorum() {
                true => "ensemble member",
                false => "standalone",
            };
            tracing::info!(address = %host, port, mode, "client port open");
            Ok(Some(listener))
        }
        Err(e) => {
            tracing::error!("cannot listen on {host}:{port}: {e}");
            Err(())
        }
    }
}

/// TLS for clients, if configured. Its stores are read, and the secure
/// port bound, before anything else: a wrong password or a taken port
/// stops the server with its reason (logged).
async fn bind_secure(config: &Config) -> Result<Option<zkd_server::runtime::tls::ClientTls>, ()> {
    let Some(tls) = &config.tls else {
        return Ok(None);
    };
    match zkd_server::runtime::tls::ClientTls::load(tls).await {
        Ok(secure) => Ok(Some(secure)),
        Err(e) => {
            tracing::error!("cannot serve TLS: {e}");
            Err(())
        }
    }
}

fn run(config: Config) -> ExitCode {
    // One thread for the node loop, every client connection and every peer
    // link: each request crosses no thread but the storage thread's. With a
    // worker pool every hop between tasks was a wake-up on another thread,
    // and on 2 cores shared by 3 members those wake-ups were most of the CPU
    // (3 members, 64 sessions x 1 write: 60-67 us of server CPU per write
    // instead of 77-112, 1.2-1.7x the throughput; standalone no slower).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let Ok(listener) = bind_plain(&config).await else {
            return ExitCode::FAILURE;
        };
        let Ok(secure) = bind_secure(&config).await else {
            return ExitCode::FAILURE;
        };
        let storage = match DiskStorage::open(&config.data_dir, &config.data_log_dir) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("fatal: cannot open the data store: {e}");
                return ExitCode::FAILURE;
            }
        };
        match zkd_server::runtime::serve(config, storage, (listener, secure), shutdown()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(ServeError::Storage(e)) => {
                tracing::error!("fatal: {e}; stopping (a restart recovers from what is on disk)");
                ExitCode::FAILURE
            }
            Err(e) => {
                tracing::error!("stopping: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Colour escapes only for a person at a terminal, and never under `NO_COLOR`
/// (no-color.org: set and non-empty).
fn colour_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}
