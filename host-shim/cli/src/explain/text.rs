//! The report of `cdplace explain` as text (`-o text|wide`), JSON or YAML.

use std::fmt::Write as _;

use cdplace_host::Code;

use super::{Format, Report};

/// The `kind` of the JSON and YAML report.
pub const KIND: &str = "Explanation";

impl Report {
    /// The report in `format`, ending with a newline.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => crate::output::json(KIND, self),
            Format::Yaml => crate::output::yaml(KIND, self),
            Format::Text => self.text(false),
            Format::Wide => self.text(true),
        }
    }

    fn text(&self, wide: bool) -> String {
        let mut out = String::new();
        let domain = self.compute_domain.as_ref();
        let chosen = match domain.and_then(|d| d.pods.as_ref()) {
            Some(pods) if pods.iter().any(|p| p.state == "Pending") => " (the ComputeDomain's first pending pod)",
            Some(_) => " (the ComputeDomain's first pod; none is pending)",
            None => "",
        };
        let _ = writeln!(out, "Pod:            {}/{}{chosen}", self.pod.namespace, self.pod.name);
        let line = match domain {
            Some(d) => match (&d.namespace, &d.name) {
                (Some(ns), Some(name)) => format!("{ns}/{name} (UID {})", d.uid),
                _ => format!("UID {} (the ComputeDomain object is not in the cluster)", d.uid),
            },
            None => "none".to_string(),
        };
        let _ = writeln!(out, "ComputeDomain:  {line}");
        if let Some(pods) = domain.and_then(|d| d.pods.as_ref()) {
            let list: Vec<String> = pods
                .iter()
                .map(|p| match &p.node {
                    Some(n) => format!("{} ({} on {n})", p.name, p.state.to_ascii_lowercase()),
                    None => format!("{} ({})", p.name, p.state.to_ascii_lowercase()),
                })
                .collect();
            let _ = writeln!(out, "Domain pods:    {}", list.join(", "));
        }
        let pf = &self.pre_filter;
        let verdict = match pf.code {
            Code::Skip => "Skip (cdplace does not filter or score this pod)".to_string(),
            c if pf.reason.is_empty() => c.as_str().to_string(),
            c => format!("{}: {}", c.as_str(), pf.reason),
        };
        let _ = writeln!(out, "PreFilter:      {verdict}");
        if let Some(nodes) = &pf.nodes {
            let _ = writeln!(
                out,
                "Only nodes:     {}",
                if nodes.is_empty() { "(none)".to_string() } else { nodes.join(", ") }
            );
        }
        let _ = writeln!(out);
        if self.nodes.is_empty() {
            let _ = writeln!(out, "(no nodes in the snapshot)");
        } else {
            let in_set = |name: &str| match &pf.nodes {
                Some(set) => (if set.iter().any(|n| n == name) { "yes" } else { "no" }).to_string(),
                None => "-".to_string(),
            };
            let rows: Vec<Vec<String>> = self
                .nodes
                .iter()
                .map(|n| {
                    let mut row = vec![
                        n.name.clone(),
                        n.clique.clone().unwrap_or_else(|| "-".into()),
                        n.filter.code.as_str().to_string(),
                        n.score.map_or_else(|| "-".into(), |s| s.to_string()),
                        // A failed PreFilter is every node's verdict: its reason is printed once, above.
                        if pf.code != Code::Success && n.filter.code == pf.code && n.filter.reason == pf.reason {
                            "(PreFilter)".to_string()
                        } else {
                            n.filter.reason.clone()
                        },
                    ];
                    if wide {
                        row.insert(4, in_set(&n.name));
                    }
                    row
                })
                .collect();
            let mut header: Vec<String> = ["NODE", "CLIQUE", "FILTER", "SCORE", "REASON"].map(String::from).into();
            if wide {
                header.insert(4, "NODE SET".into());
            }
            // Every column but the last (the reason) padded to its widest cell.
            let columns = header.len() - 1;
            let mut widths = vec![0usize; columns];
            for r in std::iter::once(&header).chain(&rows) {
                for (w, cell) in widths.iter_mut().zip(r) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            for r in std::iter::once(&header).chain(&rows) {
                let mut line = String::new();
                for (w, cell) in widths.iter().zip(r) {
                    let _ = write!(line, "{cell:<w$}  ");
                }
                line.push_str(&r[columns]);
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
        let _ = writeln!(out);
        let selected = match &self.selected {
            Some(name) => {
                let score = self.nodes.iter().find(|n| &n.name == name).and_then(|n| n.score);
                match score {
                    Some(s) => format!("{name} (score {s})"),
                    None => name.clone(),
                }
            }
            None if pf.code == Code::Skip => "none (cdplace skips this pod; other plugins decide)".to_string(),
            None if pf.code != Code::Success => format!("none (PreFilter: {})", pf.code.as_str()),
            None => "none (no node passes Filter)".to_string(),
        };
        let _ = writeln!(out, "Selected:       {selected}");
        out
    }
}
