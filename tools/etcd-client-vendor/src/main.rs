//! Copies the etcd-client release named in `VERSION` from cargo's registry cache into
//! `third_party/etcd-client`, generates its gRPC code with a vendored protoc, and replaces the
//! crate's build script (which needs protoc) with checked-in generated code.

use std::fs;
use std::path::{Path, PathBuf};

const VERSION: &str = "0.21.1";
const PROTOS: &[&str] = &[
    "proto/etcd/api/authpb/auth.proto",
    "proto/etcd/api/etcdserverpb/rpc.proto",
    "proto/etcd/api/mvccpb/kv.proto",
    "proto/etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
    "proto/etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
];
const PACKAGES: &[&str] = &["authpb", "etcdserverpb", "mvccpb", "v3electionpb", "v3lockpb"];

fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = registry_source();
    let target = repo.join("third_party/etcd-client");
    if target.exists() {
        fs::remove_dir_all(&target).expect("remove the old copy");
    }
    for entry in ["src", "proto", "LICENSE-APACHE", "LICENSE-MIT", "README.md"] {
        copy_tree(&source.join(entry), &target.join(entry));
    }
    generate(&target);
    fs::write(target.join("Cargo.toml"), manifest(&source)).expect("write Cargo.toml");
    println!("third_party/etcd-client now holds etcd-client {VERSION} with generated gRPC code");
}

/// The unpacked crate in cargo's registry; `cargo fetch` in the main workspace puts it there.
fn registry_source() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let name = format!("etcd-client-{VERSION}");
    for index in fs::read_dir(home.join("registry/src")).expect("cargo registry") {
        let candidate = index.expect("registry entry").path().join(&name);
        if candidate.join("Cargo.toml.orig").exists() {
            return candidate;
        }
    }
    panic!("{name} is not in the cargo registry: run `cargo fetch` in the workspace first");
}

fn generate(target: &Path) {
    let out = target.join("src/generated");
    fs::create_dir_all(&out).expect("create src/generated");
    // SAFETY: single-threaded; prost-build reads PROTOC to find the compiler.
    unsafe {
        std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path().expect("protoc"));
        std::env::set_var(
            "PROTOC_INCLUDE",
            protoc_bin_vendored::include_path().expect("protoc includes"),
        );
    }
    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| target.join(p)).collect();
    tonic_prost_build::configure()
        .build_server(false)
        .out_dir(&out)
        .compile_protos(&protos, &[target.join("proto")])
        .expect("compile etcd's protos");
    // Only the packages the crate includes; the annotation protos' code is not used.
    for entry in fs::read_dir(&out).expect("read src/generated") {
        let path = entry.expect("generated entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if !PACKAGES.contains(&stem.as_str()) {
            fs::remove_file(&path).expect("remove unused generated file");
        }
    }
    let pb = target.join("src/rpc/pb.rs");
    let mut text = fs::read_to_string(&pb).expect("read pb.rs");
    for package in PACKAGES {
        text = text.replace(
            &format!("tonic::include_proto!(\"{package}\");"),
            &format!("include!(\"../generated/{package}.rs\");"),
        );
        assert!(out.join(format!("{package}.rs")).exists(), "{package}.rs generated");
    }
    fs::write(&pb, text).expect("write pb.rs");
}

/// The release's own manifest less its build script, build-dependencies, examples and tests.
fn manifest(source: &Path) -> String {
    let original = fs::read_to_string(source.join("Cargo.toml.orig")).expect("Cargo.toml.orig");
    let mut kept = String::from(
        "# etcd-client from crates.io with its gRPC code pre-generated (src/generated).\n\
         # Regenerate: cargo run --manifest-path tools/etcd-client-vendor/Cargo.toml\n",
    );
    let mut section = String::new();
    for line in original.lines() {
        if line.starts_with('[') {
            section = line.to_string();
        }
        let dropped = matches!(
            section.as_str(),
            "[build-dependencies]" | "[dev-dependencies]" | "[[example]]" | "[[test]]"
        );
        if !dropped {
            kept.push_str(line);
            kept.push('\n');
        }
        if line == "[package]" {
            kept.push_str("build = false\nautoexamples = false\nautotests = false\n");
        }
    }
    kept
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).expect("create dir");
        for entry in fs::read_dir(from).expect("read dir") {
            let entry = entry.expect("dir entry");
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        fs::copy(from, to).expect("copy file");
    }
}
