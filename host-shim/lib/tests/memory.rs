//! Memory figures for sizing the scheduler's container (docs/dev/reliability.md, `## Memory`): the
//! linear memory of one policy instance holding a view of 1,008 and 5,004 trays (one bound
//! 4-GPU pod per tray and a pending ComputeDomain), and the process's resident memory as the view
//! and its instance are built (the component compiled first; one size per process, so freed
//! memory of a smaller run is not reused). A measurement, not a check: run with
//! `CDPLACE_MEMORY_CLIQUES=56 cargo test --release -p cdplace-host --test memory -- --ignored --nocapture`
//! (18 trays per clique: 56 → 1,008 trays, 278 → 5,004).

use cdplace_host::{Cluster, Code};
use cdplace_testkit::builders::*;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
#[ignore = "a measurement; prints figures"]
fn instance_memory_per_view_size() {
    let cliques: u32 = std::env::var("CDPLACE_MEMORY_CLIQUES").ok().and_then(|v| v.parse().ok()).unwrap_or(56);
    {
        let trays = cliques * 18;
        let rt = runtime();
        let rss_before = rss_kib();
        let c = Cluster::new(rt, "").unwrap();
        for id in 1..=cliques {
            for o in rack(&format!("r{id}"), id, 18) {
                c.apply(&o).unwrap();
            }
            for t in 0..18 {
                let name = format!("job-{id}-{t}");
                c.apply(&bound(pod("jobs", &name, None, 4), &format!("r{id}-{t:02}"))).unwrap();
            }
        }
        for o in domain("ns", "cd", "uid-cd") {
            c.apply(&o).unwrap();
        }
        c.apply(&annotate(compute_domain("ns", "cd", "uid-cd"), "cdplace.nvidia.com/size", "4")).unwrap();
        c.apply(&cd_pod("ns", "cd", "p0")).unwrap();
        let rss_view = rss_kib();
        let d = c.pre_filter("ns", "p0", &[]).unwrap();
        assert_eq!(d.status.code, Code::Unschedulable, "{}", d.status.reason);
        let rss_instance = rss_kib();
        let instance = c.stats().largest_instance_bytes;
        assert!(instance > 0);
        println!(
            "trays={trays} pods={} instance_linear_memory_mib={:.1} rss_view_delta_mib={:.1} rss_instance_delta_mib={:.1} rss_total_mib={:.1}",
            trays + 1,
            instance as f64 / 1048576.0,
            (rss_view.saturating_sub(rss_before)) as f64 / 1024.0,
            (rss_instance.saturating_sub(rss_view)) as f64 / 1024.0,
            rss_instance as f64 / 1024.0
        );
    }
}
