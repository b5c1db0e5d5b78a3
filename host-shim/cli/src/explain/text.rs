//! The report of `cdplace explain` as text (and JSON).

use std::fmt::Write as _;

use cdplace_host::Code;

use super::{Format, Report};

impl Report {
    /// The report in `format`, ending with a newline.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(self).expect("a report serializes");
                s.push('\n');
                s
            }
            Format::Text => self.text(),
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Pod:            {}", self.pod);
        let domain = match (&self.compute_domain, &self.compute_domain_name) {
            (Some(uid), Some(name)) => format!("{name} (UID {uid})"),
            (Some(uid), None) => format!("UID {uid} (the ComputeDomain object is not in the snapshot)"),
            (None, _) => "none".to_string(),
        };
        let _ = writeln!(out, "ComputeDomain:  {domain}");
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
            let rows: Vec<[String; 5]> = self
                .nodes
                .iter()
                .map(|n| {
                    [
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
                    ]
                })
                .collect();
            let header = ["NODE", "CLIQUE", "FILTER", "SCORE", "REASON"].map(String::from);
            let mut widths = [0usize; 4];
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
                line.push_str(&r[4]);
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
