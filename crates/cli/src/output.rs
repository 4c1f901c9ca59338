//! Writing a command's report to stdout: a closed pipe (`tessera … | head`) ends the output
//! quietly instead of panicking as `print!` does.

use std::io::Write;

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
