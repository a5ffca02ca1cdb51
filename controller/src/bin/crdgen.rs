//! Writes groundskeeper's CRDs to `manifests/crds/` (or the directory given as the only argument).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/crds")));
    std::fs::create_dir_all(&dir)?;
    for (file, crd) in groundskeeper_api::crds::all() {
        let path = dir.join(file);
        std::fs::write(&path, groundskeeper_api::crds::to_yaml(&crd))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
