use std::process::ExitCode;

use clap::Parser;

/// mimalloc returns freed pages to the OS within milliseconds; glibc's
/// malloc kept a large review's hundreds of MB resident for good
/// (docs/BENCHMARKS.md, "What was tried and not kept").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = winadmit::cli::Cli::parse();
    match winadmit::commands::run(cli) {
        Ok(code) => code,
        // `winadmit ... | head`: the reader has gone; exit quietly.
        Err(err) if winadmit::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("winadmit: {err:#}");
            ExitCode::from(2)
        }
    }
}
