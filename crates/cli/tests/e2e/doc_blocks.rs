//! The documentation's executable parts: a Markdown page read into the steps the doc-test
//! harness (`docs.rs`) runs, in page order.
//!
//! The conventions, stated for page writers in `docs/README.md`:
//! - a fenced block tagged `sh` (or `bash`) is run, as one bash script with `set -e`;
//! - a plain fenced block (no tag, or `text`) right after it is output the page promises: each
//!   of its non-blank lines must appear in the run's output, in order (runs of spaces compare
//!   equal; `…` stands for any text);
//! - a `# → text` comment in a command block promises `text` the same way;
//! - an HTML comment `<!-- doc-test: … -->` right before a block changes how it is taken:
//!   `skip <why>`, `instead <command>` (run this in its place: the page's command cannot run
//!   inside a test, such as `cargo test` itself), `fails` (the block must exit non-zero), or
//!   `file <path>` (the block shows a shipped file, and must equal it).
//!
//! Knows nothing of processes or platforms: text in, steps out.

/// One thing the harness does for a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run `script`; its output must hold `expected` in order.
    Run {
        line: usize,
        script: String,
        expected: Vec<String>,
        must_fail: bool,
    },
    /// A command block not run, and why.
    Skip { line: usize, why: String },
    /// A block that shows the repository file `path`.
    ShowsFile {
        line: usize,
        path: String,
        content: String,
    },
}

/// A problem in a page's use of the conventions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub line: usize,
    pub message: String,
}

#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    tag: String,
    body: String,
    directive: Option<(String, String)>,
    /// Only blank lines separate it from the previous block.
    follows_previous: bool,
}

fn fence(line: &str) -> Option<(&'static str, &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    ["```", "~~~"]
        .into_iter()
        .find(|f| trimmed.starts_with(f))
        .map(|f| {
            (
                f,
                trimmed
                    .trim_start_matches(f.chars().next().unwrap_or('`'))
                    .trim(),
            )
        })
}

fn directive(line: &str) -> Option<Result<(String, String), String>> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim()
        .strip_prefix("doc-test:")?
        .trim();
    let (kind, argument) = inner.split_once(' ').unwrap_or((inner, ""));
    let argument = argument.trim().to_string();
    Some(match kind {
        "skip" | "instead" | "file" if argument.is_empty() => {
            Err(format!("`doc-test: {kind}` needs an argument"))
        }
        "skip" | "instead" | "file" | "fails" => Ok((kind.to_string(), argument)),
        other => Err(format!(
            "unknown doc-test directive {other:?} (skip, instead, fails, file)"
        )),
    })
}

fn blocks(page: &str) -> Result<Vec<Block>, Malformed> {
    let mut blocks = Vec::new();
    let mut lines = page.lines().enumerate();
    let mut pending: Option<(usize, (String, String))> = None;
    let mut only_blank_since_block = false;
    while let Some((index, line)) = lines.next() {
        if let Some(found) = directive(line) {
            let found = found.map_err(|message| Malformed {
                line: index + 1,
                message,
            })?;
            pending = Some((index + 1, found));
            continue;
        }
        let Some((marker, tag)) = fence(line) else {
            if !line.trim().is_empty() {
                only_blank_since_block = false;
                if let Some((at, _)) = pending {
                    return Err(Malformed {
                        line: at,
                        message: "a doc-test directive must come right before a fenced block"
                            .into(),
                    });
                }
            }
            continue;
        };
        let mut body = String::new();
        let mut closed = false;
        for (_, inner) in lines.by_ref() {
            if inner.trim_start().starts_with(marker) && inner.trim() == marker {
                closed = true;
                break;
            }
            body.push_str(inner);
            body.push('\n');
        }
        if !closed {
            return Err(Malformed {
                line: index + 1,
                message: "the fenced block is never closed".into(),
            });
        }
        blocks.push(Block {
            line: index + 1,
            tag: tag.split_whitespace().next().unwrap_or("").to_string(),
            body,
            directive: pending.take().map(|(_, d)| d),
            follows_previous: only_blank_since_block,
        });
        only_blank_since_block = true;
    }
    if let Some((at, _)) = pending {
        return Err(Malformed {
            line: at,
            message: "a doc-test directive must come right before a fenced block".into(),
        });
    }
    Ok(blocks)
}

fn is_command(tag: &str) -> bool {
    matches!(tag, "sh" | "bash")
}

fn is_output(tag: &str) -> bool {
    matches!(tag, "" | "text")
}

/// The text a `# → text` comment promises, if `line` has one.
fn promised(line: &str) -> Option<String> {
    let (_, after) = line.split_once("# → ")?;
    let text = after.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The steps of `page`, in order.
pub fn steps(page: &str) -> Result<Vec<Step>, Malformed> {
    let blocks = blocks(page)?;
    let mut steps = Vec::new();
    let mut index = 0;
    while index < blocks.len() {
        let block = &blocks[index];
        index += 1;
        let directive = block.directive.clone();
        match directive.as_ref().map(|(k, a)| (k.as_str(), a.clone())) {
            Some(("file", path)) => {
                steps.push(Step::ShowsFile {
                    line: block.line,
                    path,
                    content: block.body.clone(),
                });
                continue;
            }
            Some(("skip", why)) => {
                if !is_command(&block.tag) {
                    return Err(Malformed {
                        line: block.line,
                        message: "`doc-test: skip` on a block that would not run anyway".into(),
                    });
                }
                steps.push(Step::Skip {
                    line: block.line,
                    why,
                });
                // Its output block is not checked either.
                if blocks
                    .get(index)
                    .is_some_and(|next| next.follows_previous && is_output(&next.tag))
                {
                    index += 1;
                }
                continue;
            }
            _ => {}
        }
        if !is_command(&block.tag) {
            if directive.is_some() {
                return Err(Malformed {
                    line: block.line,
                    message: format!(
                        "a doc-test directive on a block tagged {:?}, which is not run",
                        block.tag
                    ),
                });
            }
            continue;
        }
        let script = match &directive {
            Some((kind, command)) if kind == "instead" => command.clone(),
            _ => block.body.clone(),
        };
        let mut expected: Vec<String> = block.body.lines().filter_map(promised).collect();
        if let Some(next) = blocks.get(index).filter(|next| {
            next.follows_previous && is_output(&next.tag) && next.directive.is_none()
        }) {
            expected.extend(
                next.body
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            );
            index += 1;
        }
        steps.push(Step::Run {
            line: block.line,
            script,
            expected,
            must_fail: matches!(&directive, Some((kind, _)) if kind == "fails"),
        });
    }
    Ok(steps)
}

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `line` matches `pattern`: spaces squeezed, `…` standing for any text.
pub fn matches(pattern: &str, line: &str) -> bool {
    let pattern = squeeze(pattern);
    let line = squeeze(line);
    let mut parts = pattern.split('…');
    let Some(first) = parts.next() else {
        return true;
    };
    let Some(mut rest) = line.find(first).map(|at| &line[at + first.len()..]) else {
        return false;
    };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The first expected line missing from `output` (matched in order), if any.
pub fn missing<'e>(expected: &'e [String], output: &str) -> Option<&'e str> {
    let mut lines = output.lines();
    expected
        .iter()
        .find(|pattern| !lines.any(|line| matches(pattern, line)))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: usize, script: &str, expected: &[&str]) -> Step {
        Step::Run {
            line,
            script: script.into(),
            expected: expected.iter().map(|e| e.to_string()).collect(),
            must_fail: false,
        }
    }

    /// (case, page, the steps or the problem).
    type Case = (&'static str, &'static str, Result<Vec<Step>, Malformed>);

    #[test]
    fn pages_become_steps() {
        let cases: Vec<Case> = vec![
            ("prose only", "# Title\n\ntext\n", Ok(vec![])),
            (
                "a command and its output",
                "```sh\nkubectl get nodes\n```\n\n```\nNAME  STATUS\ncpu-1 Ready\n```\n",
                Ok(vec![run(
                    1,
                    "kubectl get nodes\n",
                    &["NAME  STATUS", "cpu-1 Ready"],
                )]),
            ),
            (
                "output separated by prose is not the block's output",
                "```sh\ntrue\n```\nsome prose\n```\nNAME\n```\n",
                Ok(vec![run(1, "true\n", &[])]),
            ),
            (
                "yaml blocks are not run",
                "```yaml\na: 1\n```\n",
                Ok(vec![]),
            ),
            (
                "arrow comments promise output",
                "```sh\nkubectl get node x   # → 8 7\n```\n",
                Ok(vec![run(1, "kubectl get node x   # → 8 7\n", &["8 7"])]),
            ),
            (
                "instead replaces the script, keeps the output",
                "<!-- doc-test: instead tessera up --detach -->\n```sh\ncargo run --release -- up\n```\n",
                Ok(vec![run(2, "tessera up --detach", &[])]),
            ),
            (
                "skip takes its output block with it",
                "<!-- doc-test: skip needs a kubelet -->\n```sh\ntessera agent serve\n```\n\n```\nserving\n```\n",
                Ok(vec![Step::Skip {
                    line: 2,
                    why: "needs a kubelet".into(),
                }]),
            ),
            (
                "fails",
                "<!-- doc-test: fails -->\n```bash\nfalse\n```\n",
                Ok(vec![Step::Run {
                    line: 2,
                    script: "false\n".into(),
                    expected: vec![],
                    must_fail: true,
                }]),
            ),
            (
                "file",
                "<!-- doc-test: file examples/a.yaml -->\n```yaml\na: 1\n```\n",
                Ok(vec![Step::ShowsFile {
                    line: 2,
                    path: "examples/a.yaml".into(),
                    content: "a: 1\n".into(),
                }]),
            ),
            (
                "a directive must touch its block",
                "<!-- doc-test: fails -->\nprose\n```sh\nfalse\n```\n",
                Err(Malformed {
                    line: 1,
                    message: "a doc-test directive must come right before a fenced block".into(),
                }),
            ),
            (
                "unknown directive",
                "<!-- doc-test: maybe -->\n```sh\nfalse\n```\n",
                Err(Malformed {
                    line: 1,
                    message: "unknown doc-test directive \"maybe\" (skip, instead, fails, file)"
                        .into(),
                }),
            ),
            (
                "skip needs a reason",
                "<!-- doc-test: skip -->\n```sh\nfalse\n```\n",
                Err(Malformed {
                    line: 1,
                    message: "`doc-test: skip` needs an argument".into(),
                }),
            ),
            (
                "an unclosed block",
                "```sh\ntrue\n",
                Err(Malformed {
                    line: 1,
                    message: "the fenced block is never closed".into(),
                }),
            ),
            (
                "a directive on a block that never runs",
                "<!-- doc-test: fails -->\n```yaml\na: 1\n```\n",
                Err(Malformed {
                    line: 2,
                    message: "a doc-test directive on a block tagged \"yaml\", which is not run"
                        .into(),
                }),
            ),
            (
                "a fence inside a block of the other kind is text",
                "~~~sh\necho '```'\n~~~\n",
                Ok(vec![run(1, "echo '```'\n", &[])]),
            ),
        ];
        for (name, page, want) in cases {
            assert_eq!(steps(page), want, "{name}");
        }
    }

    #[test]
    fn promised_lines_match_in_order_with_wildcards() {
        let output =
            "NAME    GPUS\ndp-1    8\ndra-1   <none>\nNVIDIA_VISIBLE_DEVICES=GPU-12,GPU-34\n";
        let cases: Vec<(&[&str], Option<&str>)> = vec![
            (&["NAME GPUS", "dp-1 8", "dra-1 <none>"], None),
            (&["dra-1 <none>", "dp-1 8"], Some("dp-1 8")),
            (&["NVIDIA_VISIBLE_DEVICES=GPU-…,GPU-…"], None),
            (&["GPU-9…"], Some("GPU-9…")),
            (&["dp-1"], None),
        ];
        for (expected, want) in cases {
            let expected: Vec<String> = expected.iter().map(|e| e.to_string()).collect();
            assert_eq!(missing(&expected, output), want, "{expected:?}");
        }
    }
}
