//! Pods come and go with new names; the interned strings must not grow without bound, and
//! decisions must not change when the table is rebuilt under running instances.

use cdplace_host::{Cluster, Code, Kind};
use cdplace_testkit::builders::*;

#[test]
fn churn_keeps_the_string_table_bounded_and_decisions_exact() {
    let mut objs = rack("a", 1, 6);
    objs.extend(domain("ns", "cd", "uid-cd"));
    objs.push(annotate(compute_domain("ns", "cd", "uid-cd"), "cdplace.nvidia.com/size", "2"));
    objs.push(cd_pod("ns", "cd", "p0"));
    let t = Twin::new(&objs);
    t.both(|c| c.compact_strings_above(500));
    let baseline = t.decide("ns", "p0");
    assert_eq!(baseline.status.code, Code::Success);

    let mut peak = 0;
    for round in 0..3_000 {
        let name = format!("batch-{round}");
        let node = format!("a-{:02}", round % 6);
        t.apply(&[bound(pod("jobs", &name, None, 4), &node)]);
        if round % 97 == 0 {
            // A busy tray and an instance that must stay in step with the journal.
            let d = t.decide("ns", "p0");
            assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
        }
        t.both(|c| c.delete(Kind::Pod, "jobs", &name));
        peak = peak.max(t.wasm.interned_strings());
    }
    assert!(peak <= 1_000, "the string table grew to {peak} entries");
    // Same cluster as at the start: the same decision, from both builds.
    assert_eq!(t.decide("ns", "p0"), baseline);

    // A fresh cluster fed the same objects agrees too.
    let fresh = Cluster::new(runtime(), "").unwrap();
    for o in &objs {
        fresh.apply(o).unwrap();
    }
    assert_eq!(fresh.pre_filter("ns", "p0", &[]).unwrap(), baseline);
}
