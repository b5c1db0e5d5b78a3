//! The incremental aggregates stay exactly what a fresh rebuild from the same facts gives,
//! whatever order facts arrive in, and decisions agree with the rebuild.

use cdplace_policy::*;

/// A small deterministic generator (no dependency needed for a test).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

const NODES: u32 = 12;
const PODS: u32 = 16;
const DOMAINS: u32 = 3;

/// String ids: 0 "", 1 ns, 2..2+NODES node names, then labels, domains, templates, pods.
fn strings() -> Vec<(StrId, String)> {
    let mut s = vec![String::new(), "ns".into()];
    s.extend((0..NODES).map(|i| format!("n{i}")));
    s.extend(["c.1".into(), "c.2".into(), "bad".into(), "c.".into()]);
    s.extend((0..DOMAINS).map(|i| format!("uid-{i}")));
    s.extend((0..DOMAINS).map(|i| format!("tpl-{i}")));
    s.extend((0..PODS).map(|i| format!("ns/p{i}")));
    s.push("channel".into());
    s.extend(OWNERS.iter().map(|o| o.to_string()));
    s.extend(OWNERS.iter().map(|o| format!("{o} size")));
    s.into_iter().enumerate().map(|(i, s)| (i as StrId, s)).collect()
}

const fn node_id(i: u32) -> StrId {
    2 + i
}
const fn label_id(i: u32) -> StrId {
    2 + NODES + i
}
const fn domain_id(i: u32) -> StrId {
    2 + NODES + 4 + i
}
const fn template_id(i: u32) -> StrId {
    2 + NODES + 4 + DOMAINS + i
}
const fn pod_id(i: u32) -> StrId {
    2 + NODES + 4 + 2 * DOMAINS + i
}
const CHANNEL: StrId = 2 + NODES + 4 + 2 * DOMAINS + PODS;
/// Owner keys pods may name; the host sends sizes for some of them, at times.
const OWNERS: [&str; 4] = ["Job/ns/j0", "Job/ns/j1", "StatefulSet/ns/s0", "PodGroup/ns/g0"];
const fn owner_id(i: u32) -> StrId {
    CHANNEL + 1 + i
}
const fn owner_source_id(i: u32) -> StrId {
    CHANNEL + 1 + OWNERS.len() as u32 + i
}

fn random_delta(r: &mut Lcg) -> Delta {
    match r.below(12) {
        0..=2 => Delta::UpsertNode(NodeFact {
            name: node_id(r.below(NODES)),
            clique_label: match r.below(6) {
                0 => None,
                1 => Some(label_id(2 + r.below(2))),
                _ => Some(label_id(r.below(2))),
            },
            unschedulable: r.below(8) == 0,
            gpus: if r.below(6) == 0 { 8 } else { 4 },
            domain_label: (r.below(5) == 0).then(|| domain_id(r.below(DOMAINS))),
        }),
        3 => Delta::RemoveNode(node_id(r.below(NODES))),
        4..=6 => {
            let placement = match r.below(4) {
                0 => Placement::Pending,
                1 => Placement::Nominated,
                2 => Placement::Assumed,
                _ => Placement::Bound,
            };
            let cd = r.below(DOMAINS + 1);
            Delta::UpsertPod(PodFact {
                key: pod_id(r.below(PODS)),
                namespace: 1,
                placement,
                node: (placement != Placement::Pending).then(|| node_id(r.below(NODES))),
                claims: if cd < DOMAINS {
                    vec![ClaimRef { name: CHANNEL, template: Some(template_id(cd)), claim: None, generated: None }]
                } else {
                    vec![]
                },
                gpus: [0, 2, 4][r.below(3) as usize],
                size_hint: (r.below(6) == 0).then(|| 1 + r.below(6)),
                pod_group: (r.below(6) == 0).then(|| owner_id(3)),
                owner: (r.below(2) == 0).then(|| owner_id(r.below(3))),
                created_ms: [0, 1_000, 4_000, 9_000][r.below(4) as usize],
                priority: 0,
                runtime_limit_ms: [None, Some(60_000), Some(i64::MAX)][r.below(3) as usize],
                started_ms: [0, 2_000, 5_000][r.below(3) as usize],
            })
        }
        7 => Delta::RemovePod(pod_id(r.below(PODS))),
        8 => {
            let i = r.below(DOMAINS);
            if r.below(3) == 0 {
                Delta::RemoveTemplate(1, template_id(i))
            } else {
                Delta::UpsertTemplate(TemplateFact {
                    namespace: 1,
                    name: template_id(i),
                    domain: Some(domain_id(i)),
                    daemon: r.below(5) == 0,
                    gpus: GpuDemand::default(),
                })
            }
        }
        10 | 11 => {
            let i = r.below(OWNERS.len() as u32);
            if r.below(3) == 0 {
                Delta::RemoveOwner(owner_id(i))
            } else {
                Delta::UpsertOwner(OwnerFact {
                    key: owner_id(i),
                    size: 1 + r.below(8),
                    source: owner_source_id(i),
                    priority: None,
                })
            }
        }
        _ => {
            let i = r.below(DOMAINS);
            if r.below(4) == 0 {
                Delta::RemoveDomain(domain_id(i))
            } else {
                Delta::UpsertDomain(DomainFact {
                    uid: domain_id(i),
                    namespace: 1,
                    name: template_id(i),
                    size_hint: (r.below(3) == 0).then(|| 1 + r.below(8)),
                    num_nodes: (r.below(3) == 0).then(|| 1 + r.below(8)),
                })
            }
        }
    }
}

/// Checks one random history; returns the pod-level reasons seen along the way.
fn check_seed(seed: u64, args: Args) -> Vec<String> {
    let mut seen = Vec::new();
    let mut r = Lcg(seed);
    let mut view = View::new(args.clone());
    let mut log = vec![Delta::Strings(strings())];
    view.apply(log.clone()).unwrap();
    for step in 0..400 {
        let d = random_delta(&mut r);
        log.push(d.clone());
        view.apply([d]).unwrap();
        if step % 20 == 19 {
            view.assert_consistent();
            // A view built from the whole log in one go decides the same for every pod.
            let mut fresh = View::new(args.clone());
            fresh.apply(log.clone()).unwrap();
            // The clock moves across the settle window of pods created at 1s, 4s and 9s.
            let now = i64::from(step) * 40;
            for p in 0..PODS {
                let r = view.pre_filter(pod_id(p), &[], now);
                assert_eq!(r, fresh.pre_filter(pod_id(p), &[], now), "seed {seed} step {step}");
                seen.push(r.reason(r.status).to_string());
            }
        }
    }
    // Overlays leave no trace.
    view.assert_consistent();
    let before: Vec<_> = (0..PODS).map(|p| view.pre_filter(pod_id(p), &[], 0)).collect();
    for p in 0..PODS {
        let ops = [
            OverlayOp::RemovePod(pod_id((p + 1) % PODS)),
            OverlayOp::AddPod(pod_id((p + 2) % PODS), node_id(p % NODES)),
        ];
        view.pre_filter(pod_id(p), &ops, 0);
    }
    view.assert_consistent();
    let after: Vec<_> = (0..PODS).map(|p| view.pre_filter(pod_id(p), &[], 0)).collect();
    assert_eq!(before, after);
    seen
}

/// The random histories reach every size source and both reasons a domain waits for.
fn assert_sizes_covered(seen: &[String]) {
    for want in [
        "to tell the domain's size",
        "waiting 5s for its pods to stop arriving",
        "from Job/ns/j",
        "owners: ",
        "spec.numNodes",
        "on pod ns/",
        "the pods seen so far",
    ] {
        assert!(seen.iter().any(|s| s.contains(want)), "no reason contains {want:?}");
    }
}

#[test]
fn incremental_aggregates_match_a_rebuild_driver_managed() {
    let seen: Vec<String> = (1..=12).flat_map(|seed| check_seed(seed, Args::default())).collect();
    assert_sizes_covered(&seen);
}

#[test]
fn incremental_aggregates_match_a_rebuild_host_managed() {
    let args = Args::parse(r#"{"imexMode":"HostManaged","wholeTray":"Off","reserveTraysPerClique":1}"#).unwrap();
    let seen: Vec<String> = (100..=112).flat_map(|seed| check_seed(seed, args.clone())).collect();
    assert_sizes_covered(&seen);
}

#[test]
fn an_unknown_string_id_is_invalid_input() {
    let mut v = View::new(Args::default());
    let e = v.apply([
        Delta::RemovePod(3),
        Delta::UpsertNode(NodeFact { name: 7, clique_label: None, unschedulable: false, gpus: 4, domain_label: None }),
    ]);
    assert_eq!(e.unwrap_err().to_string(), "invalid input: string id 7 was never sent");
}
