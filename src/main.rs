use std::process::ExitCode;

use clap::Parser;

/// mimalloc returns freed pages to the OS within milliseconds; glibc's
/// malloc kept a large review's hundreds of MB resident for good
/// (docs/hardening.md, "Memory after a large review").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = winadmit::cli::Cli::parse();
    match winadmit::commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("winadmit: {err:#}");
            ExitCode::from(2)
        }
    }
}
