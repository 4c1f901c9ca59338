//! The command interpreter: which program an argument vector names (by its base name, so
//! `/agnhost` and `agnhost` are one), what it prints and how it exits, as the real tools do.
//! A program the container does not have fails as the container runtime fails it (exit 126,
//! runc's message); inside `sh -c` as the shell does (exit 127, `sh: X: not found`).

use std::fmt::Write as _;

use tessera_dns::Answer;
use tessera_model::json::text;

use crate::network::Outcome;
use crate::shell::{self, Join};
use crate::{Output, Protocol, Session, env, gpus};

/// Runs `argv` in the session's container with `stdin` as its whole input.
pub fn run(session: &Session<'_>, argv: &[String], stdin: &[u8]) -> Output {
    match dispatch(session, argv, stdin) {
        Some(output) => output,
        None => Output::fail(
            126,
            format!(
                "OCI runtime exec failed: exec failed: unable to start container process: exec: \
                 \"{}\": executable file not found in $PATH: unknown\r\n",
                argv.first().map(String::as_str).unwrap_or_default()
            ),
        ),
    }
}

/// Whether running `argv` reads standard input (so the caller waits for all of it).
pub fn reads_stdin(argv: &[String]) -> bool {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    match words.as_slice() {
        [program, rest @ ..] if base(program) == "cat" => rest.is_empty() || rest == ["-"],
        [program, flag, script, ..] if is_shell(program) && *flag == "-c" => shell::parse(script)
            .map(|commands| commands.iter().any(|(_, argv)| reads_stdin(argv)))
            .unwrap_or(false),
        [program] if is_shell(program) => true,
        _ => false,
    }
}

fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

fn is_shell(program: &str) -> bool {
    matches!(base(program), "sh" | "bash" | "ash")
}

/// The program's output, or `None` when the container has no such program.
fn dispatch(session: &Session<'_>, argv: &[String], stdin: &[u8]) -> Option<Output> {
    let (program, args) = argv.split_first()?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Some(match base(program) {
        "agnhost" => match args.split_first() {
            Some((&"connect", rest)) => connect(session, rest),
            _ => Output::fail(1, "Error: unknown command for \"agnhost\"\n"),
        },
        "sh" | "bash" | "ash" => match args.as_slice() {
            ["-c", script, ..] => script_output(session, script, stdin),
            [] => script_output(session, &String::from_utf8_lossy(stdin), &[]),
            [file, ..] => Output::fail(
                127,
                format!("sh: can't open '{file}': No such file or directory\n"),
            ),
        },
        "true" => Output::ok(""),
        "false" => Output::fail(1, ""),
        "echo" => Output::ok(format!("{}\n", args.join(" "))),
        "hostname" => Output::ok(format!("{}\n", env::hostname(session.pod))),
        "env" | "printenv" => {
            let vars = env::environment(session);
            match args.as_slice() {
                [] => Output::ok(vars.iter().fold(String::new(), |mut out, (n, v)| {
                    let _ = writeln!(out, "{n}={v}");
                    out
                })),
                names => {
                    let found: Vec<&String> = names
                        .iter()
                        .filter_map(|name| vars.iter().find(|(n, _)| n == name).map(|(_, v)| v))
                        .collect();
                    let out = found.iter().fold(String::new(), |mut out, v| {
                        let _ = writeln!(out, "{v}");
                        out
                    });
                    Output {
                        stdout: out.into_bytes(),
                        stderr: Vec::new(),
                        code: i32::from(found.len() != names.len()),
                    }
                }
            }
        }
        "cat" => cat(session, &args, stdin),
        "sleep" => Output::ok(""),
        "nslookup" => nslookup(session, &args),
        "curl" => crate::curl::curl(session, &args),
        "getent" => getent(session, &args),
        "nvidia-smi" if !session.gpus.is_empty() => match args.as_slice() {
            ["-L"] | ["--list-gpus"] => Output::ok(gpus::list(session.gpus)),
            _ => Output::ok(gpus::table(session.gpus)),
        },
        _ => return None,
    })
}

/// `sh -c SCRIPT`: the commands in order, `&&`/`||` on the last exit code, `exit N`.
fn script_output(session: &Session<'_>, script: &str, stdin: &[u8]) -> Output {
    let commands = match shell::parse(script) {
        Ok(commands) => commands,
        Err(message) => return Output::fail(2, format!("sh: {message}\n")),
    };
    let mut output = Output::default();
    for (join, argv) in commands {
        let skip = match join {
            Join::Always => false,
            Join::IfSucceeded => output.code != 0,
            Join::IfFailed => output.code == 0,
        };
        if skip {
            continue;
        }
        if argv[0] == "exit" {
            let code = match argv.get(1) {
                None => output.code,
                Some(n) => match n.parse::<i64>() {
                    Ok(n) => (n & 0xff) as i32,
                    Err(_) => {
                        output.then(Output::fail(2, format!("sh: exit: Illegal number: {n}\n")));
                        return output;
                    }
                },
            };
            output.code = code;
            return output;
        }
        let next = dispatch(session, &argv, stdin)
            .unwrap_or_else(|| Output::fail(127, format!("sh: {}: not found\n", argv[0])));
        output.then(next);
    }
    output
}

/// `cat FILE…`: the files the kubelet writes into a container, or standard input.
fn cat(session: &Session<'_>, files: &[&str], stdin: &[u8]) -> Output {
    if files.is_empty() || files == ["-"] {
        return Output::ok(stdin.to_vec());
    }
    let mut output = Output::default();
    for file in files {
        match file_contents(session, file) {
            Some(contents) => output.stdout.extend(contents.into_bytes()),
            None => {
                output
                    .stderr
                    .extend(format!("cat: {file}: No such file or directory\n").into_bytes());
                output.code = 1;
            }
        }
    }
    output
}

fn file_contents(session: &Session<'_>, file: &str) -> Option<String> {
    let pod = session.pod;
    let namespace = text(pod, "/metadata/namespace");
    match file {
        "/etc/resolv.conf" => Some(format!(
            "search {}\nnameserver {}\noptions ndots:{}\n",
            session.cluster.resolver.search_domains(namespace).join(" "),
            session.cluster.nameserver,
            tessera_dns::NDOTS
        )),
        "/etc/hostname" => Some(format!("{}\n", env::hostname(pod))),
        "/etc/hosts" => {
            let ip = text(pod, "/status/podIP");
            let subdomain = text(pod, "/spec/subdomain");
            let host = env::hostname(pod);
            let names = if subdomain.is_empty() {
                host
            } else {
                format!(
                    "{host}.{subdomain}.{namespace}.svc.{} {host}",
                    session.cluster.resolver.domain()
                )
            };
            Some(format!(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
                 fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n{ip}\t{names}\n"
            ))
        }
        _ => None,
    }
}

/// `nslookup NAME`, as bind's nslookup prints it.
fn nslookup(session: &Session<'_>, args: &[&str]) -> Output {
    let Some(name) = args.iter().find(|a| !a.starts_with('-')) else {
        return Output::fail(1, "Usage: nslookup NAME\n");
    };
    let server = session.cluster.nameserver;
    let mut out = format!("Server:\t\t{server}\nAddress:\t{server}#53\n\n");
    let Some(answer) = session.lookup(name) else {
        // bind's nslookup, when no server answers.
        return Output {
            stdout: ";; connection timed out; no servers could be reached\n\n"
                .to_string()
                .into_bytes(),
            stderr: Vec::new(),
            code: 1,
        };
    };
    match answer {
        Answer::Addresses { name, addresses } => {
            for address in addresses {
                let _ = writeln!(out, "Name:\t{name}\nAddress: {address}");
            }
            out.push('\n');
            Output::ok(out)
        }
        Answer::Alias { name, target } => {
            let _ = writeln!(out, "{name}\tcanonical name = {target}.\n");
            let _ = writeln!(out, "** server can't find {target}: NXDOMAIN\n");
            Output {
                stdout: out.into_bytes(),
                stderr: Vec::new(),
                code: 1,
            }
        }
        Answer::NoData { .. } => {
            let _ = writeln!(out, "*** Can't find {name}: No answer\n");
            Output {
                stdout: out.into_bytes(),
                stderr: Vec::new(),
                code: 1,
            }
        }
        Answer::NxDomain => {
            let _ = writeln!(out, "** server can't find {name}: NXDOMAIN\n");
            Output {
                stdout: out.into_bytes(),
                stderr: Vec::new(),
                code: 1,
            }
        }
    }
}

/// `getent hosts NAME…`: one line per address; exit 2 when a name is unknown.
fn getent(session: &Session<'_>, args: &[&str]) -> Output {
    let [database, names @ ..] = args else {
        return Output::fail(1, "Usage: getent [OPTION...] database [key ...]\n");
    };
    if *database != "hosts" && *database != "ahosts" {
        return Output::fail(1, format!("Unknown database: {database}\n"));
    }
    let mut output = Output::default();
    for name in names {
        match session.lookup(name) {
            Some(Answer::Addresses { name, addresses }) => {
                for address in addresses {
                    let line = format!("{:<15} {name}\n", address.to_string());
                    output.stdout.extend(line.into_bytes());
                }
            }
            _ => output.code = 2,
        }
    }
    output
}

/// agnhost's `connect HOST:PORT [--timeout=D] [--protocol=tcp|udp|sctp]`.
fn connect(session: &Session<'_>, args: &[&str]) -> Output {
    let mut protocol = "tcp".to_string();
    let mut positional = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if word.starts_with("--") => (flag, Some(value.to_string())),
            _ => (*word, None),
        };
        match flag {
            "--timeout" | "--protocol" | "--udp-data" | "--sctp-data" => {
                let value = inline.or_else(|| words.next().map(|w| w.to_string()));
                let Some(value) = value else {
                    return Output::fail(1, format!("Error: flag needs an argument: {flag}\n"));
                };
                if flag == "--protocol" {
                    protocol = value;
                }
            }
            _ if flag.starts_with("--") => {
                return Output::fail(1, format!("Error: unknown flag: {flag}\n"));
            }
            _ => positional.push(*word),
        }
    }
    let [destination] = positional.as_slice() else {
        return Output::fail(
            1,
            format!("Error: accepts 1 arg(s), received {}\n", positional.len()),
        );
    };
    let protocol = match protocol.as_str() {
        "" | "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        "sctp" => Protocol::Sctp,
        other => return Output::fail(1, format!("Unsupported protocol\n{other}")),
    };
    let Some((host, port)) = destination.rsplit_once(':') else {
        return Output::fail(
            1,
            format!("UNKNOWN: address {destination}: missing port in address\n"),
        );
    };
    let Ok(port) = port.parse::<u16>() else {
        let what = if protocol == Protocol::Tcp {
            "tcp"
        } else {
            "udp"
        };
        return Output::fail(1, format!("DNS: lookup {what}/{port}: unknown port\n"));
    };
    let cluster = session.cluster;
    let attempt = cluster.connect(
        session.pod,
        host,
        port,
        protocol,
        session.policy,
        session.seed,
    );
    let source = text(session.pod, "/status/podIP");
    let local = 32768 + (session.seed % 28232);
    let target = attempt.address.map(|a| a.to_string()).unwrap_or_default();
    let message = match (attempt.outcome, protocol) {
        (Outcome::Connected, _) => return Output::ok(""),
        (Outcome::DnsTimeout, _) => {
            let server = cluster.nameserver;
            format!(
                "DNS: lookup {host} on {server}:53: read udp {source}:{local}->{server}:53: i/o timeout\n"
            )
        }
        (Outcome::NoSuchHost, _) => {
            format!(
                "DNS: lookup {host} on {}:53: no such host\n",
                cluster.nameserver
            )
        }
        (Outcome::Timeout, Protocol::Udp) => {
            format!("TIMEOUT: read udp {source}:{local}->{target}:{port}: i/o timeout\n")
        }
        (Outcome::Refused, Protocol::Udp) => {
            format!("REFUSED: read udp {source}:{local}->{target}:{port}: connection refused\n")
        }
        (Outcome::Timeout, _) => "TIMEOUT\n".to_string(),
        (Outcome::Refused, Protocol::Tcp) => "REFUSED\n".to_string(),
        (Outcome::Refused, Protocol::Sctp) => "OTHER: connection refused\n".to_string(),
    };
    Output::fail(1, message)
}
