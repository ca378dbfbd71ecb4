//! The server's log writer: the threads that log append each formatted
//! line to a shared buffer; a background thread writes the buffer out in
//! one `write` a few milliseconds after the first line of a batch. No
//! per-line system call and no per-line wake-up of another thread (which,
//! on a busy core, cost more than formatting the line: docs/BENCHMARKS.md,
//! "What was tried and not kept"). Lines are never dropped: past [`HIGH_WATER`] bytes
//! the logging thread writes the buffer itself (back-pressure).

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long a batch gathers lines before it is written.
pub const BATCH_DELAY: Duration = Duration::from_millis(20);
/// Buffered bytes beyond which the logging thread writes them itself.
pub const HIGH_WATER: usize = 1024 * 1024;

struct Shared {
    /// Lines not written yet, and whether the writer thread must stop.
    pending: Mutex<(Vec<u8>, bool)>,
    /// Signalled when the first line of a batch arrives, and at stop.
    wake: Condvar,
    /// The output; held while writing, so batches stay in order.
    out: Mutex<Box<dyn Write + Send>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned buffer is still a buffer: keep logging.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Writes what is pending. The output lock is taken first, so a batch
    /// taken later is never written before one taken earlier.
    fn write_pending(&self) {
        let mut out = lock(&self.out);
        let batch = std::mem::take(&mut lock(&self.pending).0);
        if !batch.is_empty() {
            // Nowhere to report a failing log output: the batch is dropped.
            let _ = out.write_all(&batch);
            let _ = out.flush();
        }
    }
}

/// The `MakeWriter` for `tracing_subscriber` (cheap to clone).
#[derive(Clone)]
pub struct BatchWriter(Arc<Shared>);

/// Keep it alive while logging: dropping it writes the last lines and
/// stops the writer thread.
pub struct BatchGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for BatchGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchGuard").finish_non_exhaustive()
    }
}

/// A batching writer over `out` and its guard.
///
/// # Errors
/// The writer thread cannot be started.
pub fn batch_writer(
    out: impl Write + Send + 'static,
) -> std::io::Result<(BatchWriter, BatchGuard)> {
    let shared = Arc::new(Shared {
        pending: Mutex::new((Vec::with_capacity(64 * 1024), false)),
        wake: Condvar::new(),
        out: Mutex::new(Box::new(out)),
    });
    let worker = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("log-writer".into())
        .spawn(move || {
            loop {
                {
                    let mut pending = lock(&worker.pending);
                    while pending.0.is_empty() && !pending.1 {
                        pending = worker
                            .wake
                            .wait(pending)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                    if pending.1 {
                        break;
                    }
                }
                // Let the batch gather.
                std::thread::sleep(BATCH_DELAY);
                worker.write_pending();
            }
            worker.write_pending();
        })?;
    Ok((
        BatchWriter(Arc::clone(&shared)),
        BatchGuard {
            shared,
            thread: Some(thread),
        },
    ))
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        lock(&self.shared.pending).1 = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Lines logged after the thread stopped.
        self.shared.write_pending();
    }
}

impl Write for BatchWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut pending = lock(&self.0.pending);
        let first = pending.0.is_empty();
        pending.0.extend_from_slice(buf);
        let full = pending.0.len() >= HIGH_WATER;
        let stopped = pending.1;
        drop(pending);
        if full || stopped {
            self.0.write_pending();
        } else if first {
            self.0.wake.notify_one();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // Flushed by the writer thread within BATCH_DELAY.
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchWriter {
    type Writer = BatchWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_is_written_in_order_by_the_time_the_guard_drops() {
        let sink = Sink::default();
        let (writer, guard) = batch_writer(sink.clone()).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..5000 {
                        let mut w = w.make_writer();
                        w.write_all(format!("{t} {i:05} {}\n", "x".repeat(300)).as_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(guard);
        let out = String::from_utf8(lock(&sink.0).clone()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4 * 5000, "no line lost");
        for t in 0..4 {
            let mine: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.starts_with(&format!("{t} ")))
                .collect();
            assert_eq!(mine.len(), 5000);
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "thread {t}'s lines in order"
            );
        }
    }

    #[test]
    fn a_single_line_is_written_without_more_logging() {
        let sink = Sink::default();
        let (mut writer, _guard) = batch_writer(sink.clone()).unwrap();
        writer.write_all(b"one line\n").unwrap();
        for _ in 0..500 {
            if !lock(&sink.0).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(lock(&sink.0).as_slice(), b"one line\n");
    }
}
