//! The control socket: a Unix socket in the member's dataDir (mode 0600:
//! only its owner's processes can reach it), one command line per connection,
//! answered with `ok[ detail]` or `error: why`.

use super::{FaultCommand, Request};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

/// The socket's file name in the dataDir.
pub const SOCKET_NAME: &str = "zkd-faults.sock";

/// A command line longer than this is refused.
const MAX_LINE: u64 = 4096;
/// How long a client may take to send its line.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the socket (replacing one a killed member left) and serves it.
pub(super) fn listen(data_dir: &Path, requests: mpsc::Sender<Request>) -> std::io::Result<PathBuf> {
    let path = data_dir.join(SOCKET_NAME);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = bind_owner_only(data_dir, &path).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("fault control socket {}: {e}", path.display()),
        )
    })?;
    tracing::warn!(socket = %path.display(), "fault injection enabled (zkd.faults.enable): for test ensembles only");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, requests.clone()));
        }
    });
    Ok(path)
}

/// A socket at `path` that only this user may connect to, whatever the
/// umask: bound in a directory only this user can enter, made 0600 there,
/// then moved into place, so no other user can reach it at any moment.
fn bind_owner_only(data_dir: &Path, path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let private = data_dir.join(format!(".{SOCKET_NAME}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let inside = private.join(SOCKET_NAME);
    let bound = UnixListener::bind(&inside).and_then(|listener| {
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&inside, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// Reads one command, has the node loop carry it out, writes its answer.
async fn answer(stream: UnixStream, requests: mpsc::Sender<Request>) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_LINE));
    let answer = match tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line)).await {
        Ok(Ok(_)) => match FaultCommand::parse(line.trim()) {
            Ok(command) => carry_out(command, &requests).await,
            Err(e) => Err(e),
        },
        Ok(Err(e)) => Err(format!("cannot read the command: {e}")),
        Err(_) => Err("no command line within 5 s".into()),
    };
    let reply = match answer {
        Ok(detail) if detail.is_empty() => "ok\n".to_owned(),
        Ok(detail) => format!("ok {detail}\n"),
        Err(why) => format!("error: {why}\n"),
    };
    let _ = write.write_all(reply.as_bytes()).await;
    let _ = write.shutdown().await;
}

async fn carry_out(
    command: FaultCommand,
    requests: &mpsc::Sender<Request>,
) -> Result<String, String> {
    let (tx, rx) = oneshot::channel();
    let stopped = || "the member is stopping".to_owned();
    requests.send((command, tx)).await.map_err(|_| stopped())?;
    rx.await.map_err(|_| stopped())?
}
