//! The Alibaba openb traces (`cluster-trace-gpu-v2023`) as the FGD artifact reads them: node
//! lists (`sn,cpu_milli,memory_mib,gpu,model`) and pod lists
//! (`name,cpu_milli,memory_mib,num_gpu,gpu_milli` plus the optional `gpu_spec`, `qos`,
//! `pod_phase`, `creation_time`, `deletion_time`, `scheduled_time`). Columns are found by
//! header name; a missing required column, an unknown column, a malformed or out-of-range value
//! is an error naming the file, the line and the column. Nothing is half-read: a trace parses
//! whole or not at all.
//!
//! Pure: text in, records out (the shell reads the files).

use std::collections::BTreeSet;

/// The most GPUs one node or pod may have.
pub const MAX_GPUS: u32 = 64;
/// The most CPU (milli-cores) one node or pod may have: 100,000 cores.
pub const MAX_CPU_MILLI: i64 = 100_000_000;
/// The most memory (MiB) one node or pod may have: 1 PiB.
pub const MAX_MEMORY_MIB: i64 = 1 << 30;

/// A node of a node list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNode {
    /// `sn`.
    pub name: String,
    /// `cpu_milli`.
    pub cpu_milli: i64,
    /// `memory_mib`.
    pub memory_mib: i64,
    /// `gpu`: how many GPUs.
    pub gpus: u32,
    /// `model`: the GPU model (empty for CPU-only nodes).
    pub model: String,
}

/// A pod of a pod list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePod {
    /// `name`.
    pub name: String,
    /// `cpu_milli`.
    pub cpu_milli: i64,
    /// `memory_mib`.
    pub memory_mib: i64,
    /// `num_gpu`.
    pub num_gpu: u32,
    /// `gpu_milli`: thousandths of each GPU (0–1000).
    pub gpu_milli: i64,
    /// `gpu_spec`: allowed GPU models separated by `|` (empty: any).
    pub gpu_spec: String,
    /// `creation_time` (seconds), when given.
    pub creation_time: Option<i64>,
    /// `deletion_time` (seconds), when given.
    pub deletion_time: Option<i64>,
}

/// A trace that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// A problem with one line.
    #[error("{file}:{line}: {message}")]
    Line {
        /// The file.
        file: String,
        /// The 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A problem with the whole file.
    #[error("{file}: {message}")]
    File {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

const NODE_COLUMNS: [&str; 5] = ["sn", "cpu_milli", "memory_mib", "gpu", "model"];
const POD_REQUIRED: [&str; 5] = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"];
const POD_OPTIONAL: [&str; 6] = [
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// One CSV file being read: its name, column positions and the current line.
struct Table<'a> {
    file: &'a str,
    headers: Vec<String>,
    line: u64,
}

impl Table<'_> {
    fn file_error(&self, message: String) -> TraceError {
        TraceError::File {
            file: self.file.to_string(),
            message,
        }
    }

    fn error(&self, message: String) -> TraceError {
        TraceError::Line {
            file: self.file.to_string(),
            line: self.line,
            message,
        }
    }

    fn check_columns(&self, required: &[&str], optional: &[&str]) -> Result<(), TraceError> {
        let mut seen = BTreeSet::new();
        for header in &self.headers {
            if !required.contains(&header.as_str()) && !optional.contains(&header.as_str()) {
                return Err(self.file_error(format!(
                    "unknown column {header:?} (expected {})",
                    required
                        .iter()
                        .chain(optional)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
            if !seen.insert(header.as_str()) {
                return Err(self.file_error(format!("column {header:?} appears twice")));
            }
        }
        if let Some(missing) = required.iter().find(|c| !seen.contains(**c)) {
            return Err(self.file_error(format!("missing column {missing:?}")));
        }
        Ok(())
    }

    fn text<'r>(&self, record: &'r csv::StringRecord, column: &str) -> Option<&'r str> {
        let i = self.headers.iter().position(|h| h == column)?;
        record.get(i).map(str::trim)
    }

    fn number(
        &self,
        record: &csv::StringRecord,
        column: &str,
        max: i64,
    ) -> Result<i64, TraceError> {
        let text = self.text(record, column).unwrap_or_default();
        let value: i64 = text
            .parse()
            .map_err(|_| self.error(format!("{column}: {text:?} is not a whole number")))?;
        if !(0..=max).contains(&value) {
            return Err(self.error(format!("{column}: {value} is out of range (0 to {max})")));
        }
        Ok(value)
    }

    fn optional_time(
        &self,
        record: &csv::StringRecord,
        column: &str,
    ) -> Result<Option<i64>, TraceError> {
        match self.text(record, column) {
            None | Some("") => Ok(None),
            Some(_) => self.number(record, column, i64::MAX).map(Some),
        }
    }
}

fn read<T>(
    file: &str,
    text: &str,
    columns: (&[&str], &[&str]),
    mut row: impl FnMut(&Table<'_>, &csv::StringRecord) -> Result<T, TraceError>,
) -> Result<Vec<T>, TraceError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| TraceError::File {
            file: file.to_string(),
            message: format!("cannot read the header: {e}"),
        })?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let mut table = Table {
        file,
        headers,
        line: 1,
    };
    table.check_columns(columns.0, columns.1)?;
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(table.line + 1, |p| p.line());
            let message = match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!("found {len} fields, the header has {expected_len}"),
                _ => e.to_string(),
            };
            TraceError::Line {
                file: file.to_string(),
                line,
                message,
            }
        })?;
        table.line = record.position().map_or(table.line + 1, |p| p.line());
        out.push(row(&table, &record)?);
    }
    Ok(out)
}

/// Reads a node list.
pub fn parse_nodes(file: &str, text: &str) -> Result<Vec<TraceNode>, TraceError> {
    let mut names = BTreeSet::new();
    let nodes = read(file, text, (&NODE_COLUMNS, &[]), |table, record| {
        let name = table.text(record, "sn").unwrap_or_default().to_string();
        if name.is_empty() {
            return Err(table.error("sn: empty node name".into()));
        }
        if !names.insert(name.clone()) {
            return Err(table.error(format!("sn: node {name:?} appears twice")));
        }
        let gpus = table.number(record, "gpu", i64::from(MAX_GPUS))?;
        let model = table.text(record, "model").unwrap_or_default().to_string();
        if gpus > 0 && model.is_empty() {
            return Err(table.error(format!("model: node {name:?} has {gpus} GPUs but no model")));
        }
        Ok(TraceNode {
            cpu_milli: table.number(record, "cpu_milli", MAX_CPU_MILLI)?,
            memory_mib: table.number(record, "memory_mib", MAX_MEMORY_MIB)?,
            gpus: u32::try_from(gpus).unwrap_or(MAX_GPUS),
            model,
            name,
        })
    })?;
    if nodes.is_empty() {
        return Err(TraceError::File {
            file: file.to_string(),
            message: "no nodes: the cluster is empty".into(),
        });
    }
    Ok(nodes)
}

/// Reads a pod list.
pub fn parse_pods(file: &str, text: &str) -> Result<Vec<TracePod>, TraceError> {
    let mut names = BTreeSet::new();
    read(
        file,
        text,
        (&POD_REQUIRED, &POD_OPTIONAL),
        |table, record| {
            let name = table.text(record, "name").unwrap_or_default().to_string();
            if name.is_empty() {
                return Err(table.error("name: empty pod name".into()));
            }
            if !names.insert(name.clone()) {
                return Err(table.error(format!("name: pod {name:?} appears twice")));
            }
            let num_gpu = table.number(record, "num_gpu", i64::from(MAX_GPUS))?;
            let gpu_milli = table.number(record, "gpu_milli", 1000)?;
            if num_gpu > 1 && gpu_milli != 1000 {
                return Err(table.error(format!(
                    "gpu_milli: a pod with {num_gpu} GPUs takes them whole (1000), not {gpu_milli}"
                )));
            }
            Ok(TracePod {
                cpu_milli: table.number(record, "cpu_milli", MAX_CPU_MILLI)?,
                memory_mib: table.number(record, "memory_mib", MAX_MEMORY_MIB)?,
                num_gpu: u32::try_from(num_gpu).unwrap_or(MAX_GPUS),
                gpu_milli,
                gpu_spec: table
                    .text(record, "gpu_spec")
                    .unwrap_or_default()
                    .to_string(),
                creation_time: table.optional_time(record, "creation_time")?,
                deletion_time: table.optional_time(record, "deletion_time")?,
                name,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_pod_layouts_and_nodes() {
        let nodes = parse_nodes(
            "nodes.csv",
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nc0,32000,65536,0,\n",
        )
        .expect("nodes");
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[0].gpus, nodes[0].model.as_str()), (2, "P100"));
        let full = parse_pods(
            "pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
             p0,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427061\n\
             p1,4000,1024,0,0,,BE,Pending,5,,\n",
        )
        .expect("pods");
        assert_eq!(full[0].gpu_spec, "V100M16|V100M32");
        assert_eq!(full[0].creation_time, Some(427_061));
        assert_eq!(full[1].deletion_time, None);
        let reduced = parse_pods(
            "multigpu.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8000,1024,8,1000\n",
        )
        .expect("reduced columns");
        assert_eq!(reduced[0].num_gpu, 8);
    }

    proptest::proptest! {
        /// Any text is read or refused with a message; nothing panics.
        #[test]
        fn arbitrary_text_never_panics(body in "[a-z0-9,|\n\"-]{0,200}") {
            let _ = parse_pods("p.csv", &format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n{body}"));
            let _ = parse_nodes("n.csv", &body);
        }

        /// Well-formed rows come back as written.
        #[test]
        fn rows_round_trip(rows in proptest::collection::vec((0i64..100_000, 0i64..1_000_000, 0u32..=8, 1i64..=1000), 1..20)) {
            let mut text = String::from("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
            for (i, (cpu, memory, gpus, milli)) in rows.iter().enumerate() {
                let milli = if *gpus > 1 { 1000 } else { *milli };
                text.push_str(&format!("p{i},{cpu},{memory},{gpus},{milli}\n"));
            }
            let pods = parse_pods("p.csv", &text).expect("valid rows");
            proptest::prop_assert_eq!(pods.len(), rows.len());
            for (pod, (cpu, memory, gpus, _)) in pods.iter().zip(&rows) {
                proptest::prop_assert_eq!((pod.cpu_milli, pod.memory_mib, pod.num_gpu), (*cpu, *memory, *gpus));
            }
        }
    }

    #[test]
    fn bad_input_names_file_line_and_column() {
        let header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
        let cases = [
            (
                format!("{header}p0,1000,10,1,500\np1,-5,10,0,0\n"),
                "pods.csv:3: cpu_milli: -5 is out of range (0 to 100000000)",
            ),
            (
                format!("{header}p0,abc,10,0,0\n"),
                "pods.csv:2: cpu_milli: \"abc\" is not a whole number",
            ),
            (
                format!("{header}p0,1000,10,1,1500\n"),
                "pods.csv:2: gpu_milli: 1500 is out of range (0 to 1000)",
            ),
            (
                format!("{header}p0,1000,10,2,500\n"),
                "pods.csv:2: gpu_milli: a pod with 2 GPUs takes them whole (1000), not 500",
            ),
            (
                format!("{header}p0,1000,10,1,500\np0,1000,10,1,500\n"),
                "pods.csv:3: name: pod \"p0\" appears twice",
            ),
            (
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli,colour\np0,1,1,0,0,red\n".into(),
                "pods.csv: unknown column \"colour\"",
            ),
            (
                "name,cpu_milli,memory_mib,num_gpu\np0,1,1,0\n".into(),
                "pods.csv: missing column \"gpu_milli\"",
            ),
            (
                format!("{header}p0,1000,10\n"),
                "pods.csv:2: found 3 fields, the header has 5",
            ),
        ];
        for (text, want) in cases {
            let got = parse_pods("pods.csv", &text).expect_err(want).to_string();
            assert!(got.starts_with(want), "got {got:?}, want {want:?}");
        }
        let empty = parse_nodes("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n");
        assert_eq!(
            empty.map_err(|e| e.to_string()),
            Err("nodes.csv: no nodes: the cluster is empty".into())
        );
        let modelless = parse_nodes("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,4,\n");
        assert_eq!(
            modelless.map_err(|e| e.to_string()),
            Err("nodes.csv:2: model: node \"n\" has 4 GPUs but no model".into())
        );
    }
}
