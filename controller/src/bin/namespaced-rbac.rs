//! Prints the manifests of the namespaced mode for the namespaces given as arguments: a Role and
//! a RoleBinding in each (the cluster-wide ClusterRole's rules) and the ConfigMap that tells the
//! controller which namespaces it looks after. Exit code 2 on a mistake in the arguments.
//!
//! `cargo run -p groundskeeper-controller --bin namespaced-rbac -- scylla etcd > rbac.yaml`

use std::process::ExitCode;

fn main() -> ExitCode {
    let namespaces: Vec<String> = std::env::args().skip(1).collect();
    if namespaces.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: namespaced-rbac NAMESPACE...  (prints the namespaced-mode manifests)");
        return ExitCode::SUCCESS;
    }
    match groundskeeper_controller::runtime::deploy::namespaced_rbac(&namespaces) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("namespaced-rbac: {err}");
            ExitCode::from(2)
        }
    }
}
