//! The little of a POSIX shell `sh -c` needs here: words with single and double quotes and
//! backslashes, and command lists joined by `;`, `&&` and `||`. No variables, pipes or
//! redirections.

/// How a command joins the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Join {
    /// The first command, or after `;`.
    Always,
    /// After `&&`.
    IfSucceeded,
    /// After `||`.
    IfFailed,
}

/// A script's commands, each with how it joins the previous one; `Err` names a syntax error.
pub(crate) fn parse(script: &str) -> Result<Vec<(Join, Vec<String>)>, String> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut join = Join::Always;
    let mut chars = script.chars().peekable();
    let end = |words: &mut Vec<String>,
               word: &mut Option<String>,
               next: Join,
               commands: &mut Vec<_>,
               join: &mut Join|
     -> Result<(), String> {
        words.extend(word.take());
        if words.is_empty() {
            if next != Join::Always || *join != Join::Always {
                return Err("syntax error: unexpected operator".to_string());
            }
            return Ok(());
        }
        commands.push((*join, std::mem::take(words)));
        *join = next;
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("syntax error: unterminated quoted string".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("syntax error: unterminated quoted string".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("syntax error: unterminated quoted string".into()),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    word.get_or_insert_with(String::new).push(c);
                }
            }
            ';' | '\n' => end(
                &mut words,
                &mut word,
                Join::Always,
                &mut commands,
                &mut join,
            )?,
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                end(
                    &mut words,
                    &mut word,
                    Join::IfSucceeded,
                    &mut commands,
                    &mut join,
                )?;
            }
            '|' if chars.peek() == Some(&'|') => {
                chars.next();
                end(
                    &mut words,
                    &mut word,
                    Join::IfFailed,
                    &mut commands,
                    &mut join,
                )?;
            }
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word.take());
    if !words.is_empty() {
        commands.push((join, words));
    } else if join != Join::Always {
        return Err("syntax error: unexpected end of file".into());
    }
    Ok(commands)
}
