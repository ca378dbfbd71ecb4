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
/// eagerly, and with THP the kernel backs it with 2 MiB pages, so the
/// webhook held 28.6 MiB after the latency benchmark, 20.6 MiB with THP
/// off (17.4 MiB when mimalloc turns it off before the first allocation,
/// `MIMALLOC_ALLOW_THP=0`), at the same latency (docs/BENCHMARKS.md, "Pod
/// creates through the API server"). This is the `prctl` mimalloc makes
/// itself with that setting; made here, the few allocations before `main`
/// may keep their huge pages.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // The flag belongs to the process's memory: every thread started after
    // this one gets it. A kernel without it leaves THP as it was.
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
