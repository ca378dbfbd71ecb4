use std::process::ExitCode;

use clap::Parser;

/// mimalloc returns freed pages to the OS within milliseconds; glibc's
/// malloc kept a large review's hundreds of MB resident for good
/// (docs/BENCHMARKS.md, "What was tried and not kept").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    no_transparent_huge_pages();
    let cli = winadmit::entry::cli::Cli::parse();
    match winadmit::entry::commands::run(cli) {
        Ok(code) => code,
        // `winadmit ... | head`: the reader has gone; exit quietly.
        Err(err) if winadmit::entry::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("winadmit: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Transparent huge pages off for this process: mimalloc commits its arena
/// eagerly, and with THP the kernel backs it with huge pages, so the
/// webhook holds more memory at the same latency (docs/BENCHMARKS.md,
/// "What was tried and not kept"). This is the `prctl` mimalloc makes
/// itself with that setting; made here, the few allocations before `main`
/// may keep their huge pages.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // The flag belongs to the process's memory: every thread started after
    // this one gets it. A kernel without it leaves THP as it was.
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
