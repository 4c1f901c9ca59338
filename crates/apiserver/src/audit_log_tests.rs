//! Rotation: whole lines, sizes, backup counts and ages, against a ticking clock.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::*;

const START: u64 = 1_764_680_000_000; // milliseconds since the epoch

/// A clock that moves one millisecond forward each time it is read.
fn ticking() -> Clock {
    let now = Arc::new(AtomicU64::new(START));
    Arc::new(move || {
        SystemTime::UNIX_EPOCH + Duration::from_millis(now.fetch_add(1, Ordering::Relaxed))
    })
}

fn line(i: usize) -> String {
    format!(
        "{{\"kind\":\"Event\",\"n\":{i},\"pad\":\"{}\"}}\n",
        "x".repeat(i % 37)
    )
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn rotates_by_size_keeping_whole_lines_and_max_backups() {
    // (max bytes, max backups, lines written)
    let cases = [(1000u64, 3usize, 200usize), (300, 1, 50), (5000, 0, 300)];
    for (max_bytes, max_backups, count) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let mut file = RotatingFile::new(&path, max_bytes, max_backups, None, ticking());
        for i in 0..count {
            file.write_line(line(i).as_bytes()).unwrap();
        }
        file.flush().unwrap();
        let backups = file.backups().unwrap();
        if max_backups > 0 {
            assert_eq!(backups.len(), max_backups, "{max_bytes} {max_backups}");
        } else {
            assert!(backups.len() >= 3, "every backup kept: {}", backups.len());
        }
        // Oldest first: the backups, then the live file.
        let mut files: Vec<PathBuf> = backups.iter().rev().map(|(_, p)| p.clone()).collect();
        files.push(path.clone());
        let mut numbers = Vec::new();
        for file in &files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name == "audit.log"
                    || (name.starts_with("audit-2025-12-02T") && name.ends_with(".log")),
                "{name}"
            );
            assert!(
                std::fs::metadata(file).unwrap().len() <= max_bytes,
                "{name} too big"
            );
            for text in read_lines(file) {
                let value: serde_json::Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
                numbers.push(value["n"].as_u64().unwrap() as usize);
            }
        }
        // The kept files hold the newest lines, consecutive and in order.
        let last = *numbers.last().unwrap();
        assert_eq!(last, count - 1);
        let first = numbers[0];
        assert_eq!(
            numbers,
            (first..count).collect::<Vec<_>>(),
            "{max_bytes} {max_backups}"
        );
        if max_backups == 0 {
            assert_eq!(first, 0, "nothing dropped without a backup limit");
        }
    }
}

#[test]
fn reopening_appends_and_rotates_when_full() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    std::fs::write(&path, "{\"old\":1}\n").unwrap();
    let mut file = RotatingFile::new(&path, 25, 0, None, ticking());
    file.write_line(b"{\"new\":1}\n").unwrap();
    file.flush().unwrap();
    assert_eq!(read_lines(&path), vec!["{\"old\":1}", "{\"new\":1}"]);
    file.write_line(b"{\"new\":2}\n").unwrap();
    file.flush().unwrap();
    assert_eq!(read_lines(&path), vec!["{\"new\":2}"]);
    assert_eq!(file.backups().unwrap().len(), 1);
}

#[test]
fn a_line_longer_than_the_limit_gets_its_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit");
    let mut file = RotatingFile::new(&path, 10, 0, None, ticking());
    let long = format!("{{\"x\":\"{}\"}}\n", "y".repeat(40));
    for text in ["{\"a\":1}\n", long.as_str(), "{\"b\":2}\n"] {
        file.write_line(text.as_bytes()).unwrap();
    }
    file.flush().unwrap();
    let backups = file.backups().unwrap();
    assert_eq!(backups.len(), 2);
    // Without an extension the backup is `<name>-<timestamp>`.
    assert!(
        backups[0]
            .1
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("audit-")
    );
    assert_eq!(read_lines(&backups[0].1), vec![long.trim_end().to_string()]);
    assert_eq!(read_lines(&path), vec!["{\"b\":2}"]);
}

#[test]
fn old_backups_leave_after_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let now = SystemTime::UNIX_EPOCH + Duration::from_millis(START);
    // (age of a backup in days, kept with max age 2 days)
    let cases = [(1u64, true), (3, false), (10, false)];
    for (days, _) in cases {
        let name = format!("audit-{}.log", backup_timestamp(now - DAY * days as u32));
        std::fs::write(dir.path().join(name), "{}\n").unwrap();
    }
    std::fs::write(dir.path().join("audit-notatime.log"), "{}\n").unwrap();
    let mut file = RotatingFile::new(&path, 5, 0, Some(DAY * 2), tessera_model::clock::fixed(now));
    file.write_line(b"{\"a\":1}\n").unwrap();
    file.write_line(b"{\"b\":2}\n").unwrap();
    let kept: Vec<SystemTime> = file
        .backups()
        .unwrap()
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(kept, vec![now, now - DAY]);
    assert!(
        dir.path().join("audit-notatime.log").exists(),
        "unrelated files stay"
    );
}

#[test]
fn backup_timestamps_round_trip() {
    let time = SystemTime::UNIX_EPOCH + Duration::from_millis(START + 123);
    assert_eq!(backup_timestamp(time), "2025-12-02T12-53-20.123");
    assert_eq!(parse_backup_timestamp(&backup_timestamp(time)), Some(time));
    assert_eq!(parse_backup_timestamp("2025-12-02T12:53:20.123"), None);
}

#[test]
fn the_writer_thread_drains_the_queue_and_a_full_queue_drops() {
    let dir = tempfile::tempdir().unwrap();
    let options = AuditLogOptions {
        path: dir.path().join("audit.log"),
        max_size_mb: 1,
        max_backups: 1,
        max_age_days: 0,
    };
    let (sink, thread) = start(&options, ticking()).unwrap();
    for i in 0..100 {
        assert!(sink.send(line(i)));
    }
    drop(sink);
    thread.join().unwrap();
    assert_eq!(read_lines(&options.path).len(), 100);

    // A queue of one with the writer stalled on nothing to write into: a full queue drops.
    let (sink, _receiver) = AuditSink::channel(1);
    assert!(sink.send(line(0)));
    assert!(!sink.send(line(1)));
    assert_eq!(sink.dropped(), 1);
}
