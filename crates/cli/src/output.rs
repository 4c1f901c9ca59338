//! What a command writes for people: its report on stdout (a closed pipe, `tessera … | head`,
//! ends the output quietly instead of panicking as `print!` does), and progress of long runs on
//! stderr, only when stderr is a terminal (nothing extra in a log file or a pipe), and
//! kubectl's plain tables.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Writes `text` to stdout; a reader that went away is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(()),
    }
}

/// A `done/total` counter for a long command, redrawn in place on a terminal's stderr; silent
/// when stderr is not a terminal. Shared by worker threads.
pub struct Progress {
    what: String,
    total: usize,
    done: AtomicUsize,
    shown: bool,
}

impl Progress {
    /// Progress over `total` steps of `what` (`runs`).
    pub fn new(what: &str, total: usize) -> Progress {
        let progress = Progress {
            what: what.to_string(),
            total,
            done: AtomicUsize::new(0),
            shown: std::io::stderr().is_terminal(),
        };
        progress.draw(0);
        progress
    }

    /// One more step done.
    pub fn step(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.draw(done);
    }

    fn draw(&self, done: usize) {
        if self.shown {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r{}\x1b[K", line(&self.what, done, self.total));
            let _ = stderr.flush();
        }
    }
}

impl Drop for Progress {
    /// Clears the line, so what the command prints next starts clean.
    fn drop(&mut self) {
        if self.shown {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K");
            let _ = stderr.flush();
        }
    }
}

/// The progress line: `what 3/12 (25%)`.
fn line(what: &str, done: usize, total: usize) -> String {
    let percent = (done * 100).checked_div(total).unwrap_or(100);
    format!("{what} {done}/{total} ({percent}%)")
}

/// `kubectl`'s plain table: columns padded to their widest cell, three spaces apart.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (index, cell) in cells.into_iter().enumerate() {
            if index == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}   ", width = widths[index]));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut text = line(headers.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_counts_and_rounds_down() {
        let table = [
            (0, 12, "runs 0/12 (0%)"),
            (3, 12, "runs 3/12 (25%)"),
            (11, 12, "runs 11/12 (91%)"),
            (12, 12, "runs 12/12 (100%)"),
            (0, 0, "runs 0/0 (100%)"),
        ];
        for (done, total, want) in table {
            assert_eq!(line("runs", done, total), want);
        }
    }
}
