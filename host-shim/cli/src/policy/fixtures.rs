//! The conformance fixtures: small clusters of Kubernetes objects (built with the SDK's
//! fixtures, the test kit's builders) and the pending pods to ask about. Whether an answer keeps
//! the safety rules is the host's check (`host-shim/lib/src/safety.rs`), the one kube-scheduler
//! applies: these fixtures only set up the trays that could tempt a policy to break one.

use cdplace_policy_sdk::harness::fixtures as k8s;
use serde_json::Value;

/// One fixture: objects to feed and pods to decide.
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    pub name: &'static str,
    pub objects: Vec<Value>,
    /// `(namespace, name, domain UID)` of the pending pods to ask PreFilter and preemption for.
    pub decide: Vec<(String, String, String)>,
    /// `(namespace, name, node)` of the placed ComputeDomain pods: preemption's what-ifs take
    /// them away and put them back (PreFilterExtensions RemovePod/AddPod overlays).
    pub placed: Vec<(String, String, String)>,
}

impl Fixture {
    fn new(name: &'static str) -> Self {
        Fixture { name, ..Default::default() }
    }

    /// A rack: `trays` 4-GPU trays `<prefix>-NN` in clique `id`.
    fn rack(&mut self, prefix: &str, id: u32, trays: u32) -> &mut Self {
        self.objects.extend(k8s::rack(prefix, id, trays));
        self
    }

    fn node_object(&mut self, name: &str) -> &mut Value {
        self.objects.iter_mut().find(|o| o["kind"] == "Node" && o["metadata"]["name"] == name).expect("node in fixture")
    }

    /// Cordons a tray (a failed one: the operator drained it).
    fn fail(&mut self, node: &str) -> &mut Self {
        let n = self.node_object(node);
        *n = k8s::cordon(n.clone());
        self
    }

    /// The driver's label naming `uid` on a tray (it lingers until Unprepare).
    fn linger(&mut self, node: &str, uid: &str) -> &mut Self {
        let n = self.node_object(node);
        *n = k8s::label(n.clone(), "resource.nvidia.com/computeDomain", uid);
        self
    }

    /// A ComputeDomain `name` (UID `uid-<ns>-<name>`) in `ns`, with its channel template.
    fn domain(&mut self, ns: &str, name: &str) -> &mut Self {
        self.objects.extend(k8s::domain(ns, name, &uid(ns, name)));
        self
    }

    /// A pending pod of domain `cd`, asked for.
    fn pending(&mut self, ns: &str, cd: &str, pod: &str) -> &mut Self {
        self.objects.push(k8s::cd_pod(ns, cd, pod));
        self.decide.push((ns.into(), pod.into(), uid(ns, cd)));
        self
    }

    /// A ComputeDomain of `size` trays (its size annotation) with one pending pod, asked for: a
    /// new domain of that size that could start now where a clique has `size` free trays.
    fn sized_domain(&mut self, ns: &str, name: &str, size: u32) -> &mut Self {
        for mut o in k8s::domain(ns, name, &uid(ns, name)) {
            if o["kind"] == "ComputeDomain" {
                // The shipped default of the plugin argument sizeAnnotation (the policy owns it).
                let key = cdplace_policy::Args::parse("{}").expect("the default arguments parse").size_annotation;
                o = k8s::annotate(o, &key, &size.to_string());
            }
            self.objects.push(o);
        }
        self.pending(ns, name, &format!("{name}-0"))
    }

    /// A pod of domain `cd` bound (or only nominated) to `node`.
    fn placed(&mut self, ns: &str, cd: &str, pod: &str, node: &str, bound: bool) -> &mut Self {
        self.placed.push((ns.into(), pod.into(), node.into()));
        let p = k8s::cd_pod(ns, cd, pod);
        self.objects.push(if bound { k8s::bound(p, node) } else { k8s::nominated(p, node) });
        self
    }

    /// A plain 4-GPU pod bound to `node`.
    fn plain(&mut self, ns: &str, pod: &str, node: &str) -> &mut Self {
        self.objects.push(k8s::bound(k8s::pod(ns, pod, None, 4), node));
        self
    }
}

/// The largest clique of [`every_size`]: its new domains are of every size up to it.
pub const LARGEST_CLIQUE: u32 = 18;

/// The UID the fixtures give domain `name` of `ns`.
pub fn uid(ns: &str, name: &str) -> String {
    format!("uid-{ns}-{name}")
}

/// Every fixture: the shapes the shipped policy's rules are about (empty and full fleets, failed
/// trays, the driver's lingering labels, started and nominated domains, many pending domains).
pub fn all() -> Vec<Fixture> {
    let mut v = Vec::new();

    let mut f = Fixture::new("empty-fleet");
    f.domain("ml", "cd").pending("ml", "cd", "p0").pending("ml", "cd", "p1");
    v.push(f);

    let mut f = Fixture::new("one-rack");
    f.rack("a", 1, 18).domain("ml", "cd");
    (0..4).for_each(|i| {
        f.pending("ml", "cd", &format!("p{i}"));
    });
    v.push(f);

    // Every tray held: two running domains, one per rack; a third waits.
    let mut f = Fixture::new("full-fleet");
    f.rack("a", 1, 4).rack("b", 2, 4).domain("ml", "x").domain("ml", "y").domain("ml", "z");
    for i in 0..4 {
        f.placed("ml", "x", &format!("x{i}"), &format!("a-{i:02}"), true);
        f.placed("ml", "y", &format!("y{i}"), &format!("b-{i:02}"), true);
    }
    f.pending("ml", "z", "z0").pending("ml", "z", "z1");
    v.push(f);

    // Failed (cordoned) trays in a rack where a domain already runs.
    let mut f = Fixture::new("failing-trays");
    f.rack("a", 1, 6).rack("b", 2, 6).fail("a-00").fail("a-01").fail("b-05").domain("ml", "x").domain("ml", "y");
    f.placed("ml", "x", "x0", "a-02", true).placed("ml", "x", "x1", "a-03", true);
    f.pending("ml", "x", "x2").pending("ml", "x", "x3");
    (0..4).for_each(|i| {
        f.pending("ml", "y", &format!("y{i}"));
    });
    v.push(f);

    // The driver's label lingers on trays a gone domain used, and on trays of a running one.
    let mut f = Fixture::new("lingering-labels");
    f.rack("a", 1, 6).rack("b", 2, 3).domain("ml", "run").domain("ml", "new");
    f.linger("a-00", "uid-gone").linger("a-01", "uid-gone").linger("b-00", "uid-gone");
    f.placed("ml", "run", "r0", "a-02", true).linger("a-02", &uid("ml", "run"));
    f.linger("a-03", &uid("ml", "run"));
    f.pending("ml", "run", "r1").pending("ml", "new", "n0").pending("ml", "new", "n1");
    v.push(f);

    // A domain started in rack b: its other pods must follow it there, one per tray.
    let mut f = Fixture::new("started-domain");
    f.rack("a", 1, 8).rack("b", 2, 8).domain("ml", "x");
    f.placed("ml", "x", "x0", "b-00", true).placed("ml", "x", "x1", "b-01", true);
    (2..6).for_each(|i| {
        f.pending("ml", "x", &format!("x{i}"));
    });
    v.push(f);

    // Preemption nominated a domain's pods; plain GPU pods hold trays.
    let mut f = Fixture::new("nominated-and-plain");
    f.rack("a", 1, 6).rack("b", 2, 6).domain("ml", "x").domain("ml", "y");
    f.placed("ml", "x", "x0", "a-00", false).placed("ml", "x", "x1", "a-01", false);
    f.plain("ml", "plain-0", "b-00").plain("ml", "plain-1", "a-05");
    f.pending("ml", "x", "x2").pending("ml", "y", "y0").pending("ml", "y", "y1");
    v.push(f);

    // Many domains of mixed sizes waiting on four racks, some running.
    let mut f = Fixture::new("many-pending-domains");
    for (i, p) in ["a", "b", "c", "d"].iter().enumerate() {
        f.rack(p, i as u32 + 1, 18);
    }
    for d in 0..6 {
        let cd = format!("run{d}");
        f.domain("batch", &cd);
        let rack = ["a", "b", "c", "d"][d % 4];
        for t in 0..3 {
            f.placed("batch", &cd, &format!("{cd}-{t}"), &format!("{rack}-{:02}", (d / 4) * 3 + t), true);
        }
    }
    for d in 0..30 {
        let cd = format!("cd{d:02}");
        f.domain("batch", &cd);
        for p in 0..(d % 8 + 1) {
            f.pending("batch", &cd, &format!("{cd}-{p}"));
        }
    }
    v.push(f);

    v.push(every_size());
    v
}

/// New domains of every size from 1 to the largest clique, each of which could start now: the
/// questions a policy is asked once such a domain arrives, whatever is pending when it is
/// checked. Clique b is empty (every size fits); clique a runs a domain on 3 of its 18 trays,
/// so an answer that lets a new domain onto them breaks `one-domain-per-node`.
pub fn every_size() -> Fixture {
    let mut f = Fixture::new("new-domain-of-every-size");
    f.rack("a", 1, LARGEST_CLIQUE).rack("b", 2, LARGEST_CLIQUE).domain("ml", "run");
    for t in 0..3 {
        f.placed("ml", "run", &format!("run-{t}"), &format!("a-{t:02}"), true);
    }
    for size in 1..=LARGEST_CLIQUE {
        f.sized_domain("new", &format!("size{size:02}"), size);
    }
    f
}
