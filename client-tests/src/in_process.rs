//! zkd's real runtime (node loop, connections, storage thread) in this
//! process, on storage the test hands it: `MemStorage`, whose power cut drops
//! exactly what was not synced, or a wrapper that stalls on purpose. Clients
//! still talk to it over loopback TCP.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;
use zkd_server::config::{parse_properties, Config};
use zkd_server::runtime::{self, ServeError};
use zkd_storage::Store;

/// A server running on a thread of its own; stopped (gracefully) on drop.
pub struct InProcessServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
}

impl InProcessServer {
    /// Serves `storage` on a free loopback port; `extra` is appended to zoo.cfg.
    pub fn start<S: Store>(storage: S, extra: &str) -> InProcessServer {
        let text = format!(
            "tickTime=2000\ndataDir=/nonexistent\nclientPort=0\n4lw.commands.whitelist=*\n{extra}"
        );
        let config = Config::from_properties(&parse_properties(&text)).expect("config");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                runtime::serve(config, storage, (Some(listener), None), async {
                    let _ = stopped.await;
                })
                .await
            })
        });
        InProcessServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// Stops the server and waits (bounded) for its thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !thread.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                thread.is_finished(),
                "in-process server did not stop within 10 s"
            );
            let _ = thread.join();
        }
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.shut_down();
        } else if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
