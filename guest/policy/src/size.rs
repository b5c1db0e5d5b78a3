//! How many pods a ComputeDomain will have, and where that number comes from.
//!
//! The first source found wins:
//! 1. the size annotation on the ComputeDomain, else the largest on its pods (an explicit
//!    override);
//! 2. the PodGroups and controllers its pods name, summed over distinct ones (a pod's PodGroup
//!    replaces its controller): PodGroup `minCount`, Job parallelism, StatefulSet replicas, ...
//!    as the host reads them. While a pod names one whose size the host has not sent, the domain
//!    waits for it instead of starting with a guess;
//! 3. the ComputeDomain's `spec.numNodes` when positive;
//! 4. nothing declared: the pods seen so far, and the domain starts only once none of them is
//!    younger than `sizeSettleSeconds`.
//!
//! The size is never fewer than the pods already placed.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::StrId;
use crate::view::View;

/// Where a ComputeDomain's size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeSource {
    /// The size annotation on the ComputeDomain.
    DomainAnnotation,
    /// The largest size annotation on its pods; the key of the pod carrying it.
    PodAnnotation(StrId),
    /// The sum over the PodGroups and controllers its pods name.
    Owners,
    /// The ComputeDomain's `spec.numNodes`.
    NumNodes,
    /// Nothing declared: the pods seen so far.
    PodsSeen,
}

/// A domain's size as the decisions use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Size {
    /// The size the domain is placed for: `declared`, or more when more pods are placed.
    pub size: u32,
    /// What the source says.
    pub declared: u32,
    pub source: SizeSource,
    /// An owner key a pod names whose size the host has not sent: the domain must not start.
    /// `declared` is then the larger of the known owners' sum and the pods seen.
    pub missing: Option<StrId>,
}

/// A ComputeDomain's size and its source in words, for `cdplace explain` and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSize {
    pub size: u32,
    pub source: SizeSource,
    /// `size 12 from Job training/trainer spec.parallelism`.
    pub text: String,
    /// The owner the domain waits for before it may start (`Job training/trainer`).
    pub waiting_for: Option<String>,
    /// With no declared size and a settle window: when the newest pod is old enough for the
    /// domain to start (Unix ms), unless another pod arrives first.
    pub settles_at_ms: Option<i64>,
}

/// Owners listed by name in a size text; the rest are counted.
const OWNERS_LISTED: usize = 3;

/// `Job/ns/name` as `Job ns/name`.
pub(crate) fn owner_display(key: &str) -> String {
    match key.split_once('/') {
        Some((kind, rest)) => format!("{kind} {rest}"),
        None => String::from(key),
    }
}

impl View {
    /// The size of a domain (see the module doc).
    pub(crate) fn size_of(&self, uid: StrId) -> Size {
        let agg = self.domains.get(&uid);
        let placed = agg.map_or(0, |a| a.placed_total());
        let seen = agg.map_or(0, |a| a.pods);
        let fact = self.domain_facts.get(&uid);
        let sized = |declared: u32, source: SizeSource, missing: Option<StrId>| Size {
            size: declared.max(placed),
            declared,
            source,
            missing,
        };
        if let Some(n) = fact.and_then(|d| d.size_hint) {
            return sized(n, SizeSource::DomainAnnotation, None);
        }
        if let Some(&(n, pod)) = agg.and_then(|a| a.pod_hints.last()) {
            return sized(n, SizeSource::PodAnnotation(pod), None);
        }
        if let Some(a) = agg.filter(|a| !a.owners.is_empty()) {
            let mut sum = 0u32;
            let mut missing = None;
            for k in a.owners.keys() {
                match self.owners.get(k) {
                    Some(o) => sum = sum.saturating_add(o.size),
                    None => {
                        missing.get_or_insert(*k);
                    }
                }
            }
            return match missing {
                None => sized(sum, SizeSource::Owners, None),
                Some(_) => sized(sum.max(seen), SizeSource::Owners, missing),
            };
        }
        if let Some(n) = fact.and_then(|d| d.num_nodes) {
            return sized(n, SizeSource::NumNodes, None);
        }
        sized(seen, SizeSource::PodsSeen, None)
    }

    /// When a domain with no declared size may start: its newest pod's creation plus the
    /// settle window (None: no window, or no pod with a known creation time).
    pub(crate) fn settles_at_ms(&self, uid: StrId) -> Option<i64> {
        let window = i64::from(self.args.size_settle_seconds) * 1000;
        let newest = *self.domains.get(&uid)?.created.keys().next_back()?;
        (window > 0 && newest > 0).then(|| newest.saturating_add(window))
    }

    /// Where a size comes from, in words (after "size N from").
    fn source_text(&self, uid: StrId, s: &Size) -> String {
        let annotation = &self.args.size_annotation;
        match s.source {
            SizeSource::DomainAnnotation => {
                format!("annotation {annotation} on ComputeDomain {}", self.domain_name(uid))
            }
            SizeSource::PodAnnotation(pod) => format!("annotation {annotation} on pod {}", self.str(pod)),
            SizeSource::Owners if s.missing.is_some() => String::from("the pods seen so far"),
            SizeSource::Owners => {
                let owners: Vec<_> = self
                    .domains
                    .get(&uid)
                    .map(|a| a.owners.keys().filter_map(|k| self.owners.get(k)).collect())
                    .unwrap_or_default();
                match owners[..] {
                    [o] => String::from(self.str(o.source)),
                    _ => {
                        let mut t = format!("{} owners: ", owners.len());
                        for (i, o) in owners.iter().take(OWNERS_LISTED).enumerate() {
                            if i > 0 {
                                t.push_str(", ");
                            }
                            t.push_str(&format!("{} ({})", self.str(o.source), o.size));
                        }
                        if owners.len() > OWNERS_LISTED {
                            t.push_str(&format!(" and {} more", owners.len() - OWNERS_LISTED));
                        }
                        t
                    }
                }
            }
            SizeSource::NumNodes => format!("ComputeDomain {} spec.numNodes", self.domain_name(uid)),
            SizeSource::PodsSeen => String::from("the pods seen so far"),
        }
    }

    /// `size 12 from Job training/trainer spec.parallelism`, as reasons say it.
    pub(crate) fn size_text(&self, uid: StrId, s: &Size) -> String {
        let mut t = if s.size > s.declared {
            format!("size {} from the pods already placed ({} from {})", s.size, s.declared, self.source_text(uid, s))
        } else {
            format!("size {} from {}", s.size, self.source_text(uid, s))
        };
        if let Some(k) = s.missing {
            t.push_str(&format!("; {} has not told its size yet", owner_display(self.str(k))));
        }
        t
    }

    /// `namespace/name` of a domain, or its UID when the object is unknown.
    pub(crate) fn domain_name(&self, uid: StrId) -> String {
        match self.domain_facts.get(&uid) {
            Some(d) => format!("{}/{}", self.str(d.namespace), self.str(d.name)),
            None => String::from(self.str(uid)),
        }
    }

    /// The size of the ComputeDomain with this UID and where it comes from; None when the view
    /// knows no workload pod of it.
    pub fn domain_size_source(&self, uid: StrId) -> Option<DomainSize> {
        self.domains.get(&uid)?;
        let s = self.size_of(uid);
        Some(DomainSize {
            size: s.size,
            source: s.source,
            text: self.size_text(uid, &s),
            waiting_for: s.missing.map(|k| owner_display(self.str(k))),
            settles_at_ms: if s.source == SizeSource::PodsSeen { self.settles_at_ms(uid) } else { None },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use crate::testutil::Fx;

    #[test]
    fn owner_keys_read_as_kind_and_name() {
        assert_eq!(owner_display("Job/training/trainer"), "Job training/trainer");
        assert_eq!(owner_display("PodGroup/a/g"), "PodGroup a/g");
        assert_eq!(owner_display("odd"), "odd");
    }

    /// One domain `team/cd` with `n` pending pods named `p0..`.
    fn domain_with_pods(n: u32) -> Fx {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.domain("team", "cd", "uid-cd");
        for i in 0..n {
            f.pod("team", &format!("p{i}"), "cd", |_| {});
        }
        f
    }

    fn size(f: &mut Fx) -> DomainSize {
        let uid = f.id("uid-cd");
        f.v.domain_size_source(uid).expect("domain known")
    }

    #[test]
    fn the_domain_annotation_wins_over_everything() {
        let mut f = domain_with_pods(2);
        let job = f.owner("Job/team/j", 9, "Job team/j spec.parallelism");
        f.update_pod("team", "p0", |p| {
            p.owner = Some(job);
            p.size_hint = Some(4);
        });
        f.domain_with("team", "cd", "uid-cd", Some(7), Some(3));
        let s = size(&mut f);
        assert_eq!((s.size, s.source), (7, SizeSource::DomainAnnotation));
        assert_eq!(s.text, "size 7 from annotation cdplace.nvidia.com/size on ComputeDomain team/cd");
        f.v.assert_consistent();
    }

    #[test]
    fn the_largest_pod_annotation_is_next() {
        let mut f = domain_with_pods(3);
        f.update_pod("team", "p0", |p| p.size_hint = Some(4));
        f.update_pod("team", "p2", |p| p.size_hint = Some(6));
        let s = size(&mut f);
        assert_eq!(s.size, 6);
        assert_eq!(s.text, "size 6 from annotation cdplace.nvidia.com/size on pod team/p2");
        // Removing the pod carrying the largest one falls back to the next.
        f.remove_pod("team", "p2");
        assert_eq!(size(&mut f).text, "size 4 from annotation cdplace.nvidia.com/size on pod team/p0");
        f.v.assert_consistent();
    }

    #[test]
    fn owners_are_summed_over_distinct_owners_and_a_pod_group_replaces_the_controller() {
        let mut f = domain_with_pods(3);
        let leader = f.owner("Job/a/leader", 1, "Job a/leader spec.parallelism");
        let workers = f.owner("Job/a/workers", 15, "Job a/workers spec.parallelism");
        f.update_pod("team", "p0", |p| p.owner = Some(leader));
        f.update_pod("team", "p1", |p| p.owner = Some(workers));
        f.update_pod("team", "p2", |p| p.owner = Some(workers));
        let s = size(&mut f);
        assert_eq!((s.size, s.source), (16, SizeSource::Owners));
        assert_eq!(
            s.text,
            "size 16 from 2 owners: Job a/leader spec.parallelism (1), Job a/workers spec.parallelism (15)"
        );
        // A PodGroup the pods name counts instead of their controller.
        let group = f.owner("PodGroup/team/g", 4, "PodGroup team/g spec.schedulingPolicy.gang.minCount");
        for p in ["p0", "p1", "p2"] {
            f.update_pod("team", p, |p| p.pod_group = Some(group));
        }
        assert_eq!(size(&mut f).text, "size 4 from PodGroup team/g spec.schedulingPolicy.gang.minCount");
        f.v.assert_consistent();
    }

    #[test]
    fn many_owners_are_listed_briefly() {
        let mut f = domain_with_pods(5);
        for i in 0..5 {
            let o = f.owner(&format!("LeaderWorkerSet/a/g{i}"), 2, &format!("LeaderWorkerSet a/g{i} spec.size"));
            f.update_pod("team", &format!("p{i}"), |p| p.owner = Some(o));
        }
        assert_eq!(
            size(&mut f).text,
            "size 10 from 5 owners: LeaderWorkerSet a/g0 spec.size (2), LeaderWorkerSet a/g1 spec.size (2), LeaderWorkerSet a/g2 spec.size (2) and 2 more"
        );
    }

    #[test]
    fn an_owner_not_yet_known_is_waited_for() {
        let mut f = domain_with_pods(2);
        let job = f.id("Job/team/j");
        f.update_pod("team", "p0", |p| p.owner = Some(job));
        let s = size(&mut f);
        assert_eq!(s.waiting_for.as_deref(), Some("Job team/j"));
        assert_eq!(s.size, 2, "the pods seen stand in while waiting");
        assert_eq!(s.text, "size 2 from the pods seen so far; Job team/j has not told its size yet");
        f.owner("Job/team/j", 12, "Job team/j spec.parallelism");
        let s = size(&mut f);
        assert_eq!((s.size, s.waiting_for), (12, None));
        assert_eq!(s.text, "size 12 from Job team/j spec.parallelism");
        f.v.assert_consistent();
    }

    #[test]
    fn num_nodes_then_the_pods_seen_with_the_settle_window() {
        let mut f = domain_with_pods(3);
        f.update_pod("team", "p1", |p| p.created_ms = 50_000);
        let s = size(&mut f);
        assert_eq!((s.size, s.source), (3, SizeSource::PodsSeen));
        assert_eq!(s.text, "size 3 from the pods seen so far");
        assert_eq!(s.settles_at_ms, Some(55_000), "newest pod + 5s");
        f.domain_with("team", "cd", "uid-cd", None, Some(6));
        let s = size(&mut f);
        assert_eq!((s.size, s.settles_at_ms), (6, None));
        assert_eq!(s.text, "size 6 from ComputeDomain team/cd spec.numNodes");
    }

    #[test]
    fn never_fewer_than_the_pods_placed() {
        let mut f = domain_with_pods(0);
        for i in 0..3 {
            f.pod("team", &format!("p{i}"), "cd", |p| {
                p.placement = crate::Placement::Bound;
                p.node = None;
            });
        }
        let nodes: Vec<StrId> = (0..3).map(|i| f.id(&format!("a-{i:02}"))).collect();
        for (i, n) in nodes.into_iter().enumerate() {
            f.update_pod("team", &format!("p{i}"), |p| p.node = Some(n));
        }
        f.domain_with("team", "cd", "uid-cd", Some(2), None);
        let s = size(&mut f);
        assert_eq!((s.size, s.source), (3, SizeSource::DomainAnnotation));
        assert_eq!(
            s.text,
            "size 3 from the pods already placed (2 from annotation cdplace.nvidia.com/size on ComputeDomain team/cd)"
        );
        f.v.assert_consistent();
    }

    // ------------------------------------------------------------ decisions that name the size

    fn c(id: u32) -> String {
        crate::testutil::clique(id)
    }

    /// Clique 1: 18 trays, 10 held by domain `other`; clique 2: `b` empty trays. ComputeDomain
    /// `training/cd` with `pods` pending pods of Job `training/trainer`.
    fn behind_a_ten_tray_domain(b: u32, pods: u32) -> Fx {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.rack("b", 2, b);
        f.domain("training", "other", "uid-other");
        f.domain_with("training", "other", "uid-other", Some(10), None);
        for i in 0..10 {
            f.pod("training", &format!("o{i}"), "other", |_| {});
            f.bind("training", &format!("o{i}"), &format!("a-{i:02}"));
        }
        f.domain("training", "cd", "uid-cd");
        let job = f.id("Job/training/trainer");
        for i in 0..pods {
            f.pod("training", &format!("t{i}"), "cd", |p| p.owner = Some(job));
        }
        f
    }

    #[test]
    fn a_job_sized_domain_waits_for_its_owner_then_starts_only_where_it_fits() {
        // The issue's case: the Job controller's slow start shows 4 of 12 pods.
        let mut f = behind_a_ten_tray_domain(12, 4);
        assert_eq!(
            f.decide("training", "t0", 0),
            (
                Code::Unschedulable,
                "ComputeDomain training/cd is waiting for Job training/trainer (the pods' owner) to tell the domain's size"
                    .into()
            )
        );
        f.owner("Job/training/trainer", 12, "Job training/trainer spec.parallelism");
        let key = f.id("training/t0");
        let r = f.v.pre_filter(key, &[], 0);
        assert_eq!(r.status.code, Code::Success);
        let allowed: Vec<_> =
            r.cliques.iter().filter(|v| v.verdict.code == Code::Success).map(|v| f.v.str(v.clique)).collect();
        assert_eq!(allowed, [c(2)], "8 free trays in clique 1 cannot hold 12");
        let small = r.cliques.iter().find(|v| f.v.str(v.clique) == c(1)).expect("clique 1 listed");
        assert_eq!(
            r.reason(small.verdict),
            "NVLink clique has fewer than 12 trays free for ComputeDomain training/cd (size 12 from Job training/trainer spec.parallelism), after trays promised to starting domains and reserveTraysPerClique"
        );
        // Scaled up past any clique's free trays: it waits, saying why.
        f.owner("Job/training/trainer", 13, "Job training/trainer spec.parallelism");
        assert_eq!(
            f.decide("training", "t0", 0),
            (
                Code::Unschedulable,
                String::from(
                    "ComputeDomain training/cd needs 13 free trays in one NVLink clique (size 13 from Job training/trainer spec.parallelism); no clique has that many free now"
                )
            )
        );
        f.v.assert_consistent();
    }

    #[test]
    fn a_job_scaled_down_while_pending_starts_with_the_new_size() {
        let mut f = behind_a_ten_tray_domain(0, 12);
        f.owner("Job/training/trainer", 12, "Job training/trainer spec.parallelism");
        let (code, reason) = f.decide("training", "t0", 0);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("needs 12 free trays in one NVLink clique (size 12 from Job"), "{reason}");
        // `kubectl scale job trainer --replicas 8`: the pods beyond 8 are not gone yet.
        f.owner("Job/training/trainer", 8, "Job training/trainer spec.parallelism");
        assert_eq!(f.decide("training", "t0", 0).0, Code::Success);
        let uid = f.id("uid-cd");
        assert_eq!(f.v.domain_size_source(uid).map(|s| s.size), Some(8));
        // Started with 8: the promise is 7 more trays in clique 1, not 11.
        f.bind("training", "t0", "a-10");
        let a = f.id(&c(1));
        assert_eq!(f.v.cliques[&a].promised, 7);
        f.v.assert_consistent();
    }

    #[test]
    fn a_pod_group_not_yet_seen_is_waited_for() {
        let mut f = Fx::new("");
        f.rack("a", 1, 4);
        f.domain("team", "cd", "uid-cd");
        let g = f.id("PodGroup/team/trainer");
        f.pod("team", "p0", "cd", |p| p.pod_group = Some(g));
        assert_eq!(
            f.decide("team", "p0", 0).1,
            "ComputeDomain team/cd is waiting for PodGroup team/trainer (the pods' PodGroup) to tell the domain's size"
        );
        f.owner("PodGroup/team/trainer", 6, "PodGroup team/trainer spec.schedulingPolicy.gang.minCount");
        assert_eq!(
            f.decide("team", "p0", 0),
            (
                Code::UnschedulableAndUnresolvable,
                "ComputeDomain team/cd needs 6 trays (size 6 from PodGroup team/trainer spec.schedulingPolicy.gang.minCount), more than one NVLink clique holds (the largest clique has 4 usable trays), so it is placed as segments, each whole in one clique, in the fewest cliques; all segments or none: it needs 6 trays and all NVLink cliques together have 4 usable".into()
            )
        );
    }

    #[test]
    fn bare_pods_start_once_none_arrived_for_the_settle_window() {
        let mut f = Fx::new("");
        f.rack("a", 1, 4);
        f.domain("team", "cd", "uid-cd");
        for i in 0..3 {
            f.pod("team", &format!("p{i}"), "cd", |p| p.created_ms = 100_000 + i64::from(i) * 100);
        }
        let waiting = "ComputeDomain team/cd has no declared size (no annotation, PodGroup, known owner or spec.numNodes): waiting 5s for its pods to stop arriving (3 seen so far)";
        assert_eq!(f.decide("team", "p0", 103_000), (Code::Unschedulable, waiting.into()));
        assert_eq!(f.decide("team", "p0", 105_199).0, Code::Unschedulable);
        assert_eq!(f.decide("team", "p0", 105_200).0, Code::Success, "5s after the newest pod");
        // Another pod arrives: the window starts again.
        f.pod("team", "p3", "cd", |p| p.created_ms = 105_000);
        assert_eq!(f.decide("team", "p0", 105_200).1, waiting.replace("(3 seen", "(4 seen"));
        assert_eq!(f.decide("team", "p0", 110_000).0, Code::Success);
        // A pod with no creation time counts as long ago; a declared size needs no window.
        f.update_pod("team", "p3", |p| p.created_ms = 0);
        assert_eq!(f.decide("team", "p0", 105_200).0, Code::Success);
        f.domain_with("team", "cd", "uid-cd", None, Some(4));
        assert_eq!(f.decide("team", "p0", 100_000).0, Code::Success);
        // Disabled: the pods seen start at once.
        let mut f = Fx::new(r#"{"sizeSettleSeconds":0}"#);
        f.rack("a", 1, 4);
        f.domain("team", "cd", "uid-cd");
        f.pod("team", "p0", "cd", |p| p.created_ms = 100_000);
        assert_eq!(f.decide("team", "p0", 100_000).0, Code::Success);
    }

    #[test]
    fn a_started_domain_takes_later_pods_home_and_names_its_size_when_full() {
        let mut f = Fx::new("");
        f.rack("a", 1, 2);
        f.rack("b", 2, 4);
        f.domain("team", "cd", "uid-cd");
        let job = f.id("Job/team/j");
        for i in 0..3 {
            f.pod("team", &format!("p{i}"), "cd", |p| p.owner = Some(job));
        }
        f.bind("team", "p0", "a-00");
        // Started before its owner is known: no waiting, the pods go home.
        let key = f.id("team/p1");
        let r = f.v.pre_filter(key, &[], 0);
        assert!(r.exclusive && r.status.code == Code::Success, "{}", r.reason(r.status));
        assert_eq!(f.v.str(r.cliques[0].clique), c(1));
        f.bind("team", "p1", "a-01");
        assert_eq!(
            f.decide("team", "p2", 0).1,
            format!(
                "ComputeDomain team/cd runs in NVLink clique {} and needs 1 more tray(s) there (size 3 from the pods seen so far; Job team/j has not told its size yet), but none is free; its pods never leave that clique",
                c(1)
            )
        );
        // The Job says 2: the third pod is one too many, and still never leaves the clique.
        f.owner("Job/team/j", 2, "Job team/j spec.parallelism");
        assert_eq!(
            f.decide("team", "p2", 0),
            (
                Code::Unschedulable,
                format!(
                    "ComputeDomain team/cd runs in NVLink clique {} with 2 pods placed (size 2 from Job team/j spec.parallelism); this extra pod needs a free tray there too, but none is free; its pods never leave that clique",
                    c(1)
                )
            )
        );
        f.v.assert_consistent();
    }
}
