//! Writes that go on in the background while a test does something else to an etcd cluster (a
//! snapshot under writes, a member falling behind), and that always end.
//!
//! A loop that writes until told to stop has two ways to outlive its test: the test fails before
//! it says stop, or the cluster goes away and every write fails at once, so the loop never waits
//! and its task never yields. Tokio cannot end a runtime while one of its tasks never yields: the
//! failed test then hangs until the runner kills it, instead of failing with its message. So
//! [`Writes`] stops when dropped (a panicking test drops it), bounds every write, and waits a
//! little after each failed one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::Client;
use tokio::task::JoinHandle;

/// How long one write may take before it counts as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause after a failed write, so a loop whose writes all fail still yields.
const AFTER_A_FAILURE: Duration = Duration::from_millis(50);

/// What to write.
#[derive(Debug, Clone)]
pub struct WritePlan {
    /// Keys are `{prefix}{n:06}`, `n` counting writes, modulo `distinct_keys` when set (the same
    /// keys written again and again).
    pub prefix: String,
    pub distinct_keys: Option<u64>,
    /// The value: the key itself, or this many bytes.
    pub value: WriteValue,
    /// Whether a failed write ends the writes with an error ([`Writes::stop`] then panics), or is
    /// counted and the writes go on (writes through a member the test disturbs).
    pub failures: OnFailure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteValue {
    TheKey,
    Bytes(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    Stop,
    GoOn,
}

impl WritePlan {
    /// `w/000000`, `w/000001`, … each with its own key as value; a failed write is a failure.
    pub fn distinct_keys() -> Self {
        Self {
            prefix: "w/".into(),
            distinct_keys: None,
            value: WriteValue::TheKey,
            failures: OnFailure::Stop,
        }
    }
}

/// What the writes did, once stopped.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Each key written with the revision its put made, in order.
    pub puts: Vec<(String, i64)>,
    /// Writes that failed or timed out (only with [`OnFailure::GoOn`]).
    pub failed: u64,
}

/// Writes going on in the background; they stop at [`Writes::stop`] or when this is dropped.
pub struct Writes {
    stop: Arc<AtomicBool>,
    task: Option<JoinHandle<Result<Written, String>>>,
}

impl Writes {
    /// Starts writing through `client` as `plan` says.
    pub fn start(client: Client, plan: WritePlan) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(write_until(client, plan, stop.clone()));
        Self { stop, task: Some(task) }
    }

    /// Stops the writes and says what they did; panics when a write failed and the plan says
    /// that is a failure.
    pub async fn stop(mut self) -> Written {
        self.stop.store(true, Ordering::SeqCst);
        let task = self.task.take().expect("stopped once");
        match task.await {
            Ok(Ok(written)) => written,
            Ok(Err(err)) => panic!("a background write failed: {err}"),
            Err(err) => panic!("the background writes ended abnormally: {err}"),
        }
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn write_until(mut client: Client, plan: WritePlan, stop: Arc<AtomicBool>) -> Result<Written, String> {
    let mut written = Written::default();
    let mut n: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("{}{:06}", plan.prefix, plan.distinct_keys.map_or(n, |d| n % d));
        let value = match plan.value {
            WriteValue::TheKey => key.clone().into_bytes(),
            WriteValue::Bytes(size) => vec![b'w'; size],
        };
        n += 1;
        let failure = match tokio::time::timeout(WRITE_TIMEOUT, client.put(key.as_str(), value, None)).await {
            Ok(Ok(put)) => {
                let revision = put.header().map(|h| h.revision()).unwrap_or_default();
                written.puts.push((key, revision));
                continue;
            }
            Ok(Err(err)) => format!("put {key}: {err}"),
            Err(_) => format!("put {key}: no answer in {WRITE_TIMEOUT:?}"),
        };
        match plan.failures {
            OnFailure::Stop => return Err(failure),
            OnFailure::GoOn => {
                written.failed += 1;
                tokio::time::sleep(AFTER_A_FAILURE).await;
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd_cluster::{CLUSTER_TURNS, ClusterOptions, EtcdCluster, EtcdVersion, etcd_or_skip};

    /// The way a failed test leaves its writes: the cluster gone while they go on, never told to
    /// stop. Ending the runtime must still end them (it hung forever when failed writes did not
    /// yield and nothing stopped the loop).
    #[test]
    fn writes_left_running_against_a_dead_cluster_let_the_runtime_end() {
        let _turn = CLUSTER_TURNS.blocking_lock();
        let (ended, end) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            runtime.block_on(async {
                let Some(binary) = etcd_or_skip(EtcdVersion::V3_5) else { return };
                let cluster =
                    EtcdCluster::start(&binary, ClusterOptions { members: 1, ..Default::default() })
                        .await
                        .expect("etcd starts");
                let client = cluster.client(None).await.unwrap();
                let plan = WritePlan { failures: OnFailure::GoOn, ..WritePlan::distinct_keys() };
                let writes = Writes::start(client, plan);
                tokio::time::sleep(Duration::from_millis(200)).await;
                drop(cluster);
                tokio::time::sleep(Duration::from_millis(300)).await;
                // As a panic would: dropped, never stopped.
                drop(writes);
            });
            drop(runtime);
            let _ = ended.send(());
        });
        end.recv_timeout(Duration::from_secs(30)).expect("the runtime ends within 30 s of the writes' drop");
    }

    /// A failure is a failure when the plan says so: the writes end at the first, and say which.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_write_ends_the_writes_when_failures_count() {
        let _turn = CLUSTER_TURNS.lock().await;
        let Some(binary) = etcd_or_skip(EtcdVersion::V3_5) else { return };
        let cluster = EtcdCluster::start(&binary, ClusterOptions { members: 1, ..Default::default() })
            .await
            .expect("etcd starts");
        let writes = Writes::start(cluster.client(None).await.unwrap(), WritePlan::distinct_keys());
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(cluster);
        let stopped = tokio::spawn(writes.stop()).await;
        let panic = stopped.expect_err("stop panics").into_panic();
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("a background write failed: put w/"), "{message}");
    }
}
