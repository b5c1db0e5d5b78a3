//! The fleet map as text: the summary, one row of cells per clique (wrapped at [`COLUMNS`]),
//! the domains and why the pending ones wait.

use std::fmt::Write as _;

use super::{ADMITTED, COLUMNS, DomainEntry, Fleet, Holder, clique_names};
use cdplace_host::Code;

impl Fleet {
    /// The map as text; `wide` gives full clique labels (rows may pass [`COLUMNS`]) and each
    /// domain's UID and trays.
    pub(super) fn text(&self, wide: bool) -> String {
        let mut out = String::new();
        for line in self.summary() {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
        let names = if wide {
            self.cliques.iter().map(|r| r.clique.clone().unwrap_or_else(|| "(no clique)".to_string())).collect()
        } else {
            clique_names(&self.cliques)
        };
        let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0).max("CLIQUE".len());
        // Each cell is two characters and a space; the free count takes 12 columns.
        let per_line = ((COLUMNS.saturating_sub(width + 2 + 12) + 1) / 3).max(1);
        let widest = self.cliques.iter().map(|c| c.trays.len()).max().unwrap_or(0).min(per_line);
        let pad = (widest * 3).saturating_sub(1);
        let _ = writeln!(out, "{:<width$}  TRAYS", "CLIQUE");
        for (row, name) in self.cliques.iter().zip(&names) {
            let cells: Vec<String> = row
                .trays
                .iter()
                .map(|t| {
                    let (h, m) = self.cell(t);
                    format!("{h}{m}")
                })
                .collect();
            let free = row.trays.iter().filter(|t| t.holder == Holder::Free && !t.cordoned).count();
            for (i, chunk) in cells.chunks(per_line).enumerate() {
                let label = if i == 0 { name.as_str() } else { "" };
                let mut line = format!("{label:<width$}  {}", chunk.join(" "));
                if i == 0 {
                    line = format!("{label:<width$}  {:<pad$}  {free:>2}/{} free", chunk.join(" "), row.trays.len());
                }
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
        let _ = writeln!(out);
        let name_width = self.listed().map(|d| d.name.chars().count()).max().unwrap_or(0);
        for (i, d) in self.domains.iter().enumerate().filter(|(_, d)| d.listed) {
            let state = match () {
                _ if d.pending > 0 => "pending",
                _ if d.placed < d.pods => "nominated",
                _ => "placed",
            };
            let line = format!(
                "  {}  {:<name_width$}  {} tray(s), {} of {} pod(s) placed, {state}",
                d.letter, d.name, d.trays, d.placed, d.pods
            );
            let _ = writeln!(out, "{}", line.trim_end());
            if wide {
                let trays: Vec<&str> =
                    self.trays().filter(|t| t.holder == Holder::Domain(i)).map(|t| t.node.as_str()).collect();
                let trays = if trays.is_empty() { "-".to_string() } else { trays.join(" ") };
                wrap(&mut out, &format!("UID {}; trays: {trays}", d.uid), 5, 5);
            }
        }
        if self.domains.iter().any(|d| !d.listed) {
            let _ = writeln!(out, "  o  held by a ComputeDomain in another namespace (-A lists every namespace)");
        }
        let mut unknown: Vec<&str> = self
            .trays()
            .filter_map(|t| if let Holder::Unknown(u) = &t.holder { Some(u.as_str()) } else { None })
            .collect();
        unknown.sort_unstable();
        unknown.dedup();
        for u in unknown {
            let _ = writeln!(
                out,
                "  ?  held by the domain label of ComputeDomain UID {u}, which the cluster does not have"
            );
        }
        let _ = writeln!(out, "  .  free    +  a pod without a ComputeDomain that requests GPUs");
        let _ =
            writeln!(out, "  a mark after the holder:  x cordoned   * nominated by preemption   ' held by the node's");
        let _ = writeln!(out, "  domain label only (no pod of the domain there)");
        let pending: Vec<&DomainEntry> = self.listed().filter(|d| d.pending > 0).collect();
        if !pending.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(out, "Pending ComputeDomains:");
            for d in pending {
                let size = match d.wait.as_ref().and_then(|w| w.size.as_ref()) {
                    Some((n, source)) => format!(", size {n} from {source}"),
                    None => String::new(),
                };
                wrap(
                    &mut out,
                    &format!("{}  {}: {} of {} pod(s) pending{size}", d.letter, d.name, d.pending, d.pods),
                    2,
                    5,
                );
                if let Some(w) = &d.wait {
                    let why = match w.code {
                        Code::Success => ADMITTED.to_string(),
                        c => format!("{}: {}", c.as_str(), w.reason),
                    };
                    wrap(&mut out, &format!("{why} [pod {}]", w.pod), 5, 5);
                }
            }
        }
        out
    }
}

/// Writes `text` wrapped at [`COLUMNS`]: the first line indented by `first`, the rest by `rest`.
pub(super) fn wrap(out: &mut String, text: &str, first: usize, rest: usize) {
    let mut line = " ".repeat(first);
    let mut empty = true;
    for word in text.split(' ') {
        if !empty && line.chars().count() + 1 + word.chars().count() > COLUMNS {
            let _ = writeln!(out, "{line}");
            line = " ".repeat(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    let _ = writeln!(out, "{line}");
}

#[cfg(test)]
mod tests {
    use cdplace_testkit::builders as b;

    use super::super::tests::{fleet_objects, map};
    use super::*;
    use crate::status::Format;

    #[test]
    fn eight_racks_of_eighteen_as_text() {
        let text = map(fleet_objects()).render(Format::Text);
        for line in text.lines() {
            assert!(line.chars().count() <= COLUMNS, "wider than {COLUMNS}: {line:?}\n{text}");
        }
        let c = |id: u32| format!("0f8e7d6c….{id}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..2],
            [
                "144 trays in 8 NVLink clique(s): 111 free, 1 cordoned",
                "4 ComputeDomain(s), 1 pending; 1 node(s) without GPUs or clique label not shown"
            ]
        );
        let expected_rows = [
            "CLIQUE       TRAYS".to_string(),
            format!("{}  A  A  A  A  A  A  A  A  A  A  .  .  .  .  .  .  .  .    8/18 free", c(1)),
            format!("{}  B  B  B  B  B  B  B  B  B  B  B  B  B  B  B  B  B  B    0/18 free", c(2)),
            format!("{}  .  .  .  .  .  .x A' .  .  .  .  .  .  .  .  .  .  .   16/18 free", c(3)),
            format!("{}  ?' .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .   17/18 free", c(4)),
            format!("{}  +  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .   17/18 free", c(5)),
            format!("{}  C* .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .   17/18 free", c(6)),
            format!("{}  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .   18/18 free", c(7)),
            format!("{}  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .  .   18/18 free", c(8)),
        ];
        assert_eq!(lines[3..12], expected_rows.iter().map(String::as_str).collect::<Vec<_>>()[..], "\n{text}");
        assert_eq!(
            lines[13..17],
            [
                "  A  team/alpha  11 tray(s), 10 of 10 pod(s) placed, placed",
                "  B  team/beta   18 tray(s), 18 of 18 pod(s) placed, placed",
                "  C  team/delta  1 tray(s), 0 of 1 pod(s) placed, nominated",
                "  D  team/gamma  0 tray(s), 0 of 3 pod(s) placed, pending",
            ],
            "\n{text}"
        );
        assert!(
            text.contains(
                "  ?  held by the domain label of ComputeDomain UID uid-gone, which the cluster does not have"
            )
        );
        let pending = &text[text.find("Pending ComputeDomains:").expect("a pending section")..];
        assert!(
            pending.contains("  D  team/gamma: 3 of 3 pod(s) pending, size 200 from Job team/big spec.parallelism"),
            "{pending}"
        );
        assert!(!pending.contains("team/delta"), "delta is nominated, not pending: {pending}");
        assert!(
            pending.contains("UnschedulableAndUnresolvable: ComputeDomain team/gamma needs 200 trays (size 200"),
            "{pending}"
        );
        // The pod that was asked ends the (wrapped) reason.
        assert!(pending.contains("[pod") && pending.contains("team/gamma-0]"), "{pending}");
    }

    #[test]
    fn long_rows_wrap_within_the_width() {
        let mut o = b::rack("big", 1, 40);
        o.extend(b::domain("team", "alpha", "uid-alpha"));
        o.push(b::bound(b::cd_pod("team", "alpha", "alpha-0"), "big-39"));
        let text = map(o).render(Format::Text);
        let rows: Vec<&str> = text.lines().skip(4).take_while(|l| !l.is_empty()).collect();
        assert!(rows.len() > 1, "{text}");
        assert!(rows.iter().all(|l| l.chars().count() <= COLUMNS), "{text}");
        assert!(rows[0].ends_with("39/40 free"), "{text}");
        let cells = rows.iter().flat_map(|l| l.split_whitespace()).filter(|c| *c == "." || *c == "A").count();
        assert_eq!(cells, 40, "{text}");
    }
}
