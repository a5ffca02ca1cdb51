//! `--keep`: after the walk-through, everything stays up to be looked at with the real `kubectl`
//! and the `kubectl groundskeeper` plugin, until Ctrl-C.
//!
//! A kubeconfig for the in-memory API is written to a temporary folder, with a folder holding
//! only the plugin (a link to the binary `cargo xtask demo` built, named in
//! `GROUNDSKEEPER_KUBECTL_PLUGIN`) for kubectl's plugin lookup on the PATH. Both go when the demo
//! stops.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::stage::Stage;

/// Prints how to look around, then waits for the signal that ends the demo.
pub async fn keep_running(stage: &Stage) -> Result<(), String> {
    let folder = tempfile::Builder::new()
        .prefix("groundskeeper-demo-")
        .tempdir()
        .map_err(|e| format!("cannot make a folder for the kubeconfig: {e}"))?;
    let kubeconfig = folder.path().join("kubeconfig");
    stage
        .server
        .write_kubeconfig(&kubeconfig, None, "etcd")
        .map_err(|e| format!("cannot write {}: {e}", kubeconfig.display()))?;
    let plugins = plugin_folder(folder.path());
    print_commands(&kubeconfig, plugins.as_deref());
    crate::KEEPING.store(true, Ordering::SeqCst);
    std::future::pending::<()>().await;
    drop(folder);
    Ok(())
}

/// A folder with only `kubectl-groundskeeper` in it, or `None` (after saying why) when the plugin
/// was not built.
fn plugin_folder(under: &Path) -> Option<PathBuf> {
    let why = match std::env::var_os("GROUNDSKEEPER_KUBECTL_PLUGIN").map(PathBuf::from) {
        Some(binary) if binary.is_file() => {
            let folder = under.join("plugins");
            let linked = std::fs::create_dir(&folder)
                .and_then(|()| std::os::unix::fs::symlink(&binary, folder.join("kubectl-groundskeeper")));
            match linked {
                Ok(()) => return Some(folder),
                Err(e) => format!("cannot link {}: {e}", binary.display()),
            }
        }
        Some(binary) => format!("{} is not a file", binary.display()),
        None => "GROUNDSKEEPER_KUBECTL_PLUGIN is not set (`cargo xtask demo` sets it)".into(),
    };
    println!("(the kubectl plugin is not at hand: {why}; `cargo build -p kubectl-groundskeeper` builds it)");
    None
}

fn print_commands(kubeconfig: &Path, plugins: Option<&Path>) {
    println!(
        "\nEverything keeps running: the in-memory Kubernetes API, etcd, the Scylla agent stand-ins, the Job simulator and the controllers."
    );
    println!("Look around with the real kubectl, in another terminal:\n");
    println!("  export KUBECONFIG={}", kubeconfig.display());
    if let Some(plugins) = plugins {
        println!(
            "  export PATH={}:$PATH    # kubectl-groundskeeper, for kubectl's plugin lookup",
            plugins.display()
        );
    }
    let commands = [
        ("kubectl get etcdc,mtask,msched -n etcd", "the EtcdCluster and its tasks, with their columns"),
        ("kubectl get mtask -n scylla -o wide", "the Scylla cleanup tasks"),
        ("kubectl get jobs -A", "the Jobs the controllers created"),
        ("kubectl describe etcdc main -n etcd", "members, conditions, last maintenance"),
        ("kubectl explain mtask.spec.config.compact", "what a task can be told"),
        (
            "kubectl apply -f manifests/examples/task-compact.yaml",
            "a task by hand (then `kubectl get mtask -n etcd -w`)",
        ),
        ("kubectl plugin list", "kubectl finds the plugin"),
        ("kubectl groundskeeper etcd status main -n etcd", "the plugin's view of the etcd cluster"),
        ("kubectl groundskeeper task list -n etcd", "the tasks, as the plugin lists them"),
    ];
    for (command, what) in commands {
        println!("  {command:<58} # {what}");
    }
    println!("\nCtrl-C stops everything and removes what the demo made.");
}
