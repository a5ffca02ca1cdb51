//! `kubectl-groundskeeper`: on PATH, kubectl runs it as `kubectl groundskeeper …`.

use clap::Parser;

use kubectl_groundskeeper::cli::Cli;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    let code = match kubectl_groundskeeper::commands::run(cli).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            1
        }
    };
    std::process::exit(code);
}
