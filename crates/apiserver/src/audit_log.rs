//! Where audit lines go: kube-apiserver's log backend (`--audit-log-path`, `-` for standard
//! output) with lumberjack's size-based rotation (`--audit-log-maxsize` megabytes, then the
//! file is renamed `<name>-<UTC timestamp>.<ext>`; `--audit-log-maxbackup` old files kept,
//! those older than `--audit-log-maxage` days removed).
//!
//! The request path never touches the disk: [`AuditSink::send`] puts a finished line on a
//! bounded queue ([`QUEUE_LINES`], upstream's batch buffer size) that one writer thread
//! drains, flushing whenever the queue runs empty. When the queue is full the line is
//! dropped, counted and warned about, and `send` says so — for a `RequestReceived` event
//! the request then fails with 500 "failed to store audit event", as upstream's buffered
//! backend answers when its buffer is full. A line is written whole into one file: rotation
//! happens between lines, and a line longer than the limit gets a file of its own.
//!
//! Knows nothing of events or policies: it moves lines.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, SystemTime};

use tessera_model::clock::Clock;

/// Lines queued for the writer before new ones are dropped.
pub const QUEUE_LINES: usize = 10_000;
/// lumberjack's size limit when `--audit-log-maxsize` is 0.
pub const DEFAULT_MAX_SIZE_MB: u64 = 100;
const MEGABYTE: u64 = 1024 * 1024;
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The log backend's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLogOptions {
    /// The file, or `-` for standard output.
    pub path: PathBuf,
    /// Megabytes before rotation; 0 is lumberjack's default of 100.
    pub max_size_mb: u64,
    /// Old files kept; 0 keeps all.
    pub max_backups: usize,
    /// Days old files are kept; 0 keeps them whatever their age.
    pub max_age_days: u64,
}

/// The request path's end of the queue.
pub struct AuditSink {
    sender: SyncSender<String>,
    dropped: AtomicU64,
}

impl AuditSink {
    /// Queues a line; `false` when it was dropped (queue full or writer gone).
    pub fn send(&self, line: String) -> bool {
        match self.sender.try_send(line) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped == 1 || dropped.is_multiple_of(1000) {
                    tracing::warn!(
                        dropped,
                        "audit log queue full: events dropped (the writer cannot keep up)"
                    );
                }
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// A sink whose lines go to the returned receiver (tests, other writers).
    pub fn channel(capacity: usize) -> (AuditSink, Receiver<String>) {
        let (sender, receiver) = sync_channel(capacity);
        (
            AuditSink {
                sender,
                dropped: AtomicU64::new(0),
            },
            receiver,
        )
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Opens the log (creating its directory, as upstream's `ensureLogFile` does) and starts the
/// writer thread; the thread ends once every sink is dropped and the queue is drained.
pub fn start(
    options: &AuditLogOptions,
    clock: Clock,
) -> io::Result<(AuditSink, std::thread::JoinHandle<()>)> {
    let mut output: Box<dyn LineWriter> = if options.path.as_os_str() == "-" {
        Box::new(io::stdout())
    } else {
        let max_mb = if options.max_size_mb == 0 {
            DEFAULT_MAX_SIZE_MB
        } else {
            options.max_size_mb
        };
        let mut file = RotatingFile::new(
            &options.path,
            max_mb.saturating_mul(MEGABYTE),
            options.max_backups,
            (options.max_age_days > 0).then(|| DAY * options.max_age_days as u32),
            clock,
        );
        file.open()?;
        Box::new(file)
    };
    let (sink, receiver) = AuditSink::channel(QUEUE_LINES);
    let thread = std::thread::Builder::new()
        .name("audit-log".into())
        .spawn(move || drain(&receiver, output.as_mut()))?;
    Ok((sink, thread))
}

/// Something lines are written to.
trait LineWriter: Send {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()>;
    fn flush_lines(&mut self) -> io::Result<()>;
}

impl LineWriter for io::Stdout {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        self.lock().write_all(line)
    }

    fn flush_lines(&mut self) -> io::Result<()> {
        self.flush()
    }
}

fn drain(receiver: &Receiver<String>, output: &mut dyn LineWriter) {
    let report = |result: io::Result<()>| {
        if let Err(error) = result {
            tracing::error!(%error, "writing the audit log");
        }
    };
    while let Ok(line) = receiver.recv() {
        report(output.write_line(line.as_bytes()));
        while let Ok(line) = receiver.try_recv() {
            report(output.write_line(line.as_bytes()));
        }
        report(output.flush_lines());
    }
}

/// A file rotated by size as lumberjack rotates it.
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    max_backups: usize,
    max_age: Option<Duration>,
    clock: Clock,
    file: Option<BufWriter<File>>,
    size: u64,
}

impl RotatingFile {
    /// A file at `path` rotated past `max_bytes`, keeping `max_backups` old files (0: all)
    /// no older than `max_age`.
    pub fn new(
        path: &Path,
        max_bytes: u64,
        max_backups: usize,
        max_age: Option<Duration>,
        clock: Clock,
    ) -> RotatingFile {
        RotatingFile {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(1),
            max_backups,
            max_age,
            clock,
            file: None,
            size: 0,
        }
    }

    /// Opens (or creates) the file to append to.
    pub fn open(&mut self) -> io::Result<()> {
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(BufWriter::new(file));
        Ok(())
    }

    /// Writes one whole line, rotating first when it would pass the limit.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        if self.file.is_none() {
            self.open()?;
        }
        let length = line.len() as u64;
        if self.size > 0 && self.size + length > self.max_bytes {
            self.rotate()?;
        }
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("the audit log is not open"));
        };
        file.write_all(line)?;
        self.size += length;
        Ok(())
    }

    /// Flushes what was written.
    pub fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }

    /// Renames the file to its backup name, starts a new one and removes old backups.
    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut file) = self.file.take() {
            file.flush()?;
        }
        let (prefix, extension) = self.name_parts();
        let backup = self.path.with_file_name(format!(
            "{prefix}-{}{extension}",
            backup_timestamp((self.clock)())
        ));
        std::fs::rename(&self.path, backup)?;
        self.open()?;
        self.remove_old()
    }

    /// The file name without and with its extension (`audit`, `.log`).
    fn name_parts(&self) -> (String, String) {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.rfind('.').filter(|&i| i > 0) {
            Some(i) => (name[..i].to_string(), name[i..].to_string()),
            None => (name, String::new()),
        }
    }

    /// The backups, newest first.
    pub fn backups(&self) -> io::Result<Vec<(SystemTime, PathBuf)>> {
        let (prefix, extension) = self.name_parts();
        let directory = match self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => parent.to_path_buf(),
            None => PathBuf::from("."),
        };
        let mut backups = Vec::new();
        for entry in std::fs::read_dir(directory)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let stamp = name
                .strip_prefix(&format!("{prefix}-"))
                .and_then(|rest| rest.strip_suffix(extension.as_str()));
            if let Some(time) = stamp.and_then(parse_backup_timestamp) {
                backups.push((time, entry.path()));
            }
        }
        backups.sort_by(|a, b| b.cmp(a));
        Ok(backups)
    }

    fn remove_old(&self) -> io::Result<()> {
        let backups = self.backups()?;
        let cutoff = self.max_age.and_then(|age| (self.clock)().checked_sub(age));
        for (index, (time, path)) in backups.iter().enumerate() {
            let too_many = self.max_backups > 0 && index >= self.max_backups;
            let too_old = cutoff.is_some_and(|cutoff| *time < cutoff);
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

impl LineWriter for RotatingFile {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        RotatingFile::write_line(self, line)
    }

    fn flush_lines(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// lumberjack's backup time format, `2006-01-02T15-04-05.000`, in UTC.
fn backup_timestamp(time: SystemTime) -> String {
    let seconds = tessera_model::time::timestamp(time);
    let millis = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    format!(
        "{}.{millis:03}",
        seconds.trim_end_matches('Z').replace(':', "-")
    )
}

fn parse_backup_timestamp(text: &str) -> Option<SystemTime> {
    let (date, time) = text.split_once('T')?;
    let (clock, fraction) = time.split_once('.')?;
    if clock.len() != 8
        || clock.contains(':')
        || fraction.len() != 3
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let millis: u64 = fraction.parse().ok()?;
    let seconds =
        tessera_model::time::parse_timestamp(&format!("{date}T{}Z", clock.replace('-', ":")))?;
    Some(seconds + Duration::from_millis(millis))
}

#[cfg(test)]
#[path = "audit_log_tests.rs"]
mod tests;
