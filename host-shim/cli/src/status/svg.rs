//! The fleet map as SVG: a cell per tray coloured by its holder, a legend of the domains and
//! why the pending ones wait.

use std::fmt::Write as _;

use super::{ADMITTED, DomainEntry, Fleet, Hold, Holder, clique_names};
use cdplace_host::Code;

impl Fleet {
    pub(super) fn svg(&self) -> String {
        const CELL: usize = 26;
        const GAP: usize = 4;
        const LEFT: usize = 150;
        const TOP: usize = 40;
        const LINE: usize = 18;
        let names = clique_names(&self.cliques);
        let widest = self.cliques.iter().map(|c| c.trays.len()).max().unwrap_or(0);
        let mut y = TOP;
        let mut body = String::new();
        let _ = writeln!(body, r#"<text x="10" y="24" class="title">{}</text>"#, esc(&self.summary().join("; ")));
        for (row, name) in self.cliques.iter().zip(&names) {
            let full = row.clique.as_deref().unwrap_or("(no clique)");
            let _ = writeln!(
                body,
                r#"<text x="10" y="{}" class="clique"><title>{}</title>{}</text>"#,
                y + CELL / 2 + 5,
                esc(full),
                esc(name)
            );
            for (i, t) in row.trays.iter().enumerate() {
                let x = LEFT + i * (CELL + GAP);
                let (h, m) = self.cell(t);
                let (fill, holder) = match &t.holder {
                    Holder::Free => ("#f4f4f4".to_string(), "free".to_string()),
                    Holder::Domain(d) if !self.domains[*d].listed => {
                        ("#d9d9d9".to_string(), format!("{} (another namespace)", self.domains[*d].name))
                    }
                    Holder::Domain(d) => (colour(*d), self.domains[*d].name.clone()),
                    Holder::Unknown(u) => {
                        ("#777777".to_string(), format!("ComputeDomain UID {u} (not in the cluster)"))
                    }
                    Holder::Plain => ("#bbbbbb".to_string(), "a pod without a ComputeDomain".to_string()),
                };
                let mut what = holder;
                match (t.cordoned, t.hold) {
                    (true, _) => what.push_str(", cordoned"),
                    (false, Hold::Nominated) => what.push_str(", nominated by preemption"),
                    (false, Hold::Label) if t.holder != Holder::Free => what.push_str(", domain label only"),
                    _ => {}
                }
                let stroke = if t.cordoned {
                    r##"stroke="#cc0000" stroke-width="2""##
                } else {
                    r##"stroke="#444444" stroke-width="1""##
                };
                let dash =
                    if t.hold == Hold::Label && t.holder != Holder::Free { r#" stroke-dasharray="3 2""# } else { "" };
                let _ = writeln!(
                    body,
                    r#"<rect class="tray" x="{x}" y="{y}" width="{CELL}" height="{CELL}" rx="3" fill="{fill}" {stroke}{dash}><title>{}: {}</title></rect>"#,
                    esc(&t.node),
                    esc(&what)
                );
                let label: String = [h, m].iter().filter(|c| **c != ' ' && **c != '.').collect();
                if !label.is_empty() {
                    let _ = writeln!(
                        body,
                        r#"<text x="{}" y="{}" class="cell">{}</text>"#,
                        x + CELL / 2,
                        y + CELL / 2 + 5,
                        esc(&label)
                    );
                }
            }
            y += CELL + GAP;
        }
        y += LINE;
        let _ = writeln!(body, r#"<g class="legend">"#);
        for (i, d) in self.domains.iter().enumerate().filter(|(_, d)| d.listed) {
            let _ = writeln!(
                body,
                r##"<rect x="10" y="{}" width="14" height="14" fill="{}" stroke="#444444"/><text x="32" y="{}">{} {}: {} tray(s), {} of {} pod(s) placed{}</text>"##,
                y - 11,
                colour(i),
                y,
                d.letter,
                esc(&d.name),
                d.trays,
                d.placed,
                d.pods,
                if d.pending > 0 { ", pending" } else { "" }
            );
            y += LINE;
        }
        for (fill, text) in [
            ("#f4f4f4", "free"),
            ("#bbbbbb", "a pod without a ComputeDomain that requests GPUs"),
            ("#777777", "held by the label of a ComputeDomain the cluster does not have"),
        ] {
            let _ = writeln!(
                body,
                r##"<rect x="10" y="{}" width="14" height="14" fill="{fill}" stroke="#444444"/><text x="32" y="{y}">{text}</text>"##,
                y - 11
            );
            y += LINE;
        }
        let _ = writeln!(
            body,
            r#"<text x="10" y="{y}">red border: cordoned; x cordoned, * nominated by preemption, ' (dashed) domain label only</text>"#
        );
        y += LINE;
        let _ = writeln!(body, "</g>");
        let pending: Vec<&DomainEntry> = self.listed().filter(|d| d.pending > 0).collect();
        if !pending.is_empty() {
            y += LINE;
            let _ = writeln!(
                body,
                r#"<g class="pending"><text x="10" y="{y}" class="title">Pending ComputeDomains</text>"#
            );
            y += LINE;
            for d in pending {
                let size = match d.wait.as_ref().and_then(|w| w.size.as_ref()) {
                    Some((n, source)) => format!(", size {n} from {source}"),
                    None => String::new(),
                };
                let _ = writeln!(
                    body,
                    r#"<text x="10" y="{y}">{} {}: {} of {} pod(s) pending{}</text>"#,
                    d.letter,
                    esc(&d.name),
                    d.pending,
                    d.pods,
                    esc(&size)
                );
                y += LINE;
                if let Some(w) = &d.wait {
                    let why = match w.code {
                        Code::Success => ADMITTED.to_string(),
                        c => format!("{}: {}", c.as_str(), w.reason),
                    };
                    let _ = writeln!(body, r#"<text x="30" y="{y}" class="reason">{}</text>"#, esc(&why));
                    y += LINE;
                }
            }
            let _ = writeln!(body, "</g>");
        }
        let width = (LEFT + widest * (CELL + GAP) + 20).max(900);
        let height = y + 10;
        format!(
            concat!(
                r#"<?xml version="1.0" encoding="UTF-8"?>"#,
                "\n",
                r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
                "\n<style>text {{ font-family: monospace; font-size: 12px; fill: #222222; }} .title {{ font-size: 14px; font-weight: bold; }} .cell {{ text-anchor: middle; font-weight: bold; }}</style>\n",
                r##"<rect width="100%" height="100%" fill="#ffffff"/>"##,
                "\n{body}</svg>\n"
            ),
            w = width,
            h = height,
            body = body
        )
    }
}

/// A distinct fill per domain index.
fn colour(i: usize) -> String {
    const PALETTE: [&str; 12] = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
        "#d37295", "#a0cbe8",
    ];
    PALETTE[i % PALETTE.len()].to_string()
}

/// Escapes text for XML.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fleet_objects, map};
    use crate::status::Format;

    #[test]
    fn svg_is_well_formed_with_one_rect_per_tray() {
        let fleet = map(fleet_objects());
        let svg = fleet.render(Format::Svg);
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
        let trays: Vec<_> =
            root.children().filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("tray")).collect();
        assert_eq!(trays.len(), 144);
        let title = |n: &roxmltree::Node| {
            n.children().find(|c| c.has_tag_name("title")).and_then(|t| t.text()).unwrap_or("").to_string()
        };
        let alpha: Vec<String> = trays.iter().map(title).filter(|t| t.contains("team/alpha")).collect();
        assert_eq!(alpha.len(), 11, "{alpha:?}");
        assert!(alpha.contains(&"r3-06: team/alpha, domain label only".to_string()), "{alpha:?}");
        assert!(trays.iter().map(title).any(|t| t == "r3-05: free, cordoned"));
        assert!(
            trays
                .iter()
                .map(title)
                .any(|t| t == "r4-00: ComputeDomain UID uid-gone (not in the cluster), domain label only")
        );
        // Same domain, same colour; the cordoned tray has a red border.
        let fill = |node: &str| {
            trays
                .iter()
                .find(|n| title(n).starts_with(&format!("{node}: ")))
                .and_then(|n| n.attribute("fill"))
                .unwrap()
                .to_string()
        };
        assert_eq!(fill("r1-00"), fill("r1-09"));
        assert_ne!(fill("r1-00"), fill("r2-00"));
        let cordoned = trays.iter().find(|n| title(n).starts_with("r3-05: ")).unwrap();
        assert_eq!(cordoned.attribute("stroke"), Some("#cc0000"));
        let legend = root.children().find(|n| n.attribute("class") == Some("legend")).expect("a legend");
        let texts: Vec<&str> =
            legend.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
        assert!(texts.contains(&"A team/alpha: 11 tray(s), 10 of 10 pod(s) placed"), "{texts:?}");
        let pending = root.children().find(|n| n.attribute("class") == Some("pending")).expect("pending domains");
        let texts: Vec<&str> =
            pending.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect();
        assert!(
            texts.contains(&"D team/gamma: 3 of 3 pod(s) pending, size 200 from Job team/big spec.parallelism"),
            "{texts:?}"
        );
    }
}
