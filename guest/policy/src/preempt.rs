//! Gang preemption: which whole lower-priority ComputeDomains (and plain GPU pods) to evict so
//! that a ComputeDomain that has not started fits one NVLink clique. A pure function of the
//! view; the host only carries the answer out.
//!
//! The rules:
//! - only for a workload pod of a domain that has not started (no pod placed or nominated),
//!   whose size is known (the same gates as PreFilter);
//! - only in a clique that could hold the whole domain when empty (its usable trays of the
//!   pod's size, less `reserveTraysPerClique` as PreFilter counts it): preemption never helps a
//!   domain that would not fit even an empty clique;
//! - the victims come in units that are evicted whole: a lower-priority domain homed in the
//!   clique (every placed or nominated workload pod of it, wherever it is, plus the plain GPU
//!   pods on its trays), and the lower-priority plain GPU pods of one tray. A tray that a
//!   higher-or-equal-priority pod or domain uses, or a domain homed in another clique, cannot
//!   be freed. Units that share a tray are merged (both must go for the tray to free);
//! - a domain's priority is the largest `spec.priority` of the PodGroups its pods name, when
//!   any says one, else the largest priority of its pods; the preemptor's likewise; only units
//!   of strictly lower priority are victims;
//! - a tray held only by the driver's node label for another domain (no workload pod of it
//!   there) frees itself when the driver unprepares that domain's claim: it counts as freed,
//!   and needs no victim. So does every tray of an evicted domain: its label goes with it;
//! - an evicted domain's promise in the clique (trays it waited for) is freed with it;
//! - the cheapest set that frees enough trays: lowest maximum victim priority first, then
//!   fewest GPUs evicted, then fewest domains, then youngest (least total age of the units:
//!   the least work lost), then the clique's label. An exact 0/1 knapsack over trays freed
//!   (capped at the trays needed, at most a clique's size) decides within a clique.
//!
//! Daemon (IMEX) pods are never victims: the driver removes them with the domain's label.
//! Pending pods of a victim domain are not evicted (they hold nothing).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::args::{ImexMode, WholeTray};
use crate::facts::{Placement, StrId};
use crate::size::SizeSource;
use crate::view::View;

/// What gang preemption decided for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// The pod's ComputeDomain UID, when it has one.
    pub domain: Option<StrId>,
    /// The victims, or none when preemption cannot help (`reason` says why).
    pub plan: Option<Plan>,
    /// Why no preemption helps, or what the plan does, in words.
    pub reason: String,
}

/// The victims of one gang preemption and where they make room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The clique label value the preemptor's domain gets.
    pub clique: StrId,
    /// A tray of it to nominate the preemptor to (free now, else freed by the victims).
    pub node: StrId,
    /// Keys (`namespace/name`) of every pod to evict, sorted.
    pub pods: Vec<StrId>,
    /// UIDs of the domains evicted whole, sorted.
    pub domains: Vec<StrId>,
    /// GPUs the victims use.
    pub gpus: u32,
    /// The highest priority among the victims.
    pub priority: i32,
    /// Trays of the clique the victims hold (or have promised to them).
    pub trays: u32,
}

/// What keeps a tray from the preemptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum UnitKey {
    Domain(StrId),
    /// The plain GPU pods of this tray.
    Tray(StrId),
}

/// A set of victims evicted together.
#[derive(Debug, Clone, Default)]
struct Unit {
    /// Trays of the clique it frees, plus the trays promised to its domains there.
    value: u32,
    trays: u32,
    pods: BTreeSet<StrId>,
    domains: BTreeSet<StrId>,
    gpus: u32,
    priority: i32,
    /// Total age of its parts at decision time (ms).
    age: i64,
    /// Its freed trays, for the nomination.
    nodes: Vec<StrId>,
}

/// Cost of a set of units, compared lexicographically.
type Cost = (i32, u64, u32, i64);

/// What one clique can do for the preemptor.
enum Outcome {
    /// The domain would not fit even the empty clique.
    TooSmall,
    /// It fits without victims (`releasing` trays still wait for the driver).
    Fits {
        releasing: u32,
    },
    /// Evicting every eligible unit frees this many of the `need` trays.
    Short {
        freeable: u32,
        need: u32,
    },
    Plan {
        cost: Cost,
        units: Vec<Unit>,
        free_node: Option<StrId>,
    },
}

impl View {
    /// Decides which whole lower-priority domains and plain pods to evict so the ComputeDomain
    /// of the pod with key `pod` fits one clique, at the host's time `now_ms` (Unix ms). Pure:
    /// the view is not changed (see the module doc for the rules).
    pub fn preempt(&mut self, pod: StrId, now_ms: i64) -> Preemption {
        self.now_ms = now_ms;
        self.plan_preemption(pod)
    }

    /// The priority that ranks a domain: its PodGroups' when any says one, else its pods' largest.
    pub(crate) fn domain_priority(&self, uid: StrId) -> i32 {
        self.domains.get(&uid).map_or(0, |d| d.priority(&self.owners))
    }

    fn domain_pods(&self, uid: StrId) -> impl Iterator<Item = &crate::view::PodEntry> {
        self.pods.values().filter(move |p| matches!(p.member, Ok(Some(m)) if m.domain == uid && !m.daemon))
    }

    fn plan_preemption(&self, key: StrId) -> Preemption {
        let no = |domain: Option<StrId>, reason: String| Preemption { domain, plan: None, reason };
        let Some(pod) = self.pods.get(&key) else {
            return no(None, format!("pod {} is not in the policy's view", self.str(key)));
        };
        let m = match &pod.member {
            Ok(Some(m)) if !m.daemon => *m,
            Err(e) => return no(None, e.clone()),
            _ => return no(None, String::from("not a ComputeDomain workload pod: gang preemption does not apply")),
        };
        let domain = Some(m.domain);
        let cd = self.domain_name(m.domain);
        match self.domain_facts.get(&m.domain) {
            Some(df) if df.namespace == pod.fact.namespace => {}
            _ => {
                return no(
                    domain,
                    format!("ComputeDomain {cd} does not exist in the pod's namespace: preemption cannot help"),
                );
            }
        }
        let agg = &self.domains[&m.domain];
        let own = pod.fact.node.filter(|_| pod.fact.placement == Placement::Nominated);
        if let Some(c) = agg.target().or_else(|| own.and_then(|n| self.nodes.get(&n)?.summary.clique)) {
            return no(
                domain,
                format!(
                    "ComputeDomain {cd} already has NVLink clique {}; gang preemption only makes room for a domain that has not started",
                    self.str(c)
                ),
            );
        }
        let size = self.size_of(m.domain);
        let settling =
            size.source == SizeSource::PodsSeen && self.settles_at_ms(m.domain).is_some_and(|t| t > self.now_ms);
        if size.missing.is_some() || settling {
            return no(domain, format!("ComputeDomain {cd} does not know its size yet: nothing is preempted for it"));
        }
        let tray_size = match self.args.whole_tray {
            WholeTray::Require if !pod.gpu_use.all => Some(pod.gpu_use.count),
            _ => None,
        };
        let remaining = size.size.saturating_sub(agg.placed_total()).max(1);
        let prio = self.domain_priority(m.domain);
        let sized = self.size_text(m.domain, &size);
        if self.spans(size.size, tray_size) && self.largest_for(tray_size) > 0 {
            return no(
                domain,
                format!(
                    "ComputeDomain {cd} ({sized}) is larger than one NVLink clique and placed as segments across cliques; gang preemption makes room in one clique only: preemption cannot help"
                ),
            );
        }

        let mut best: Option<(Cost, StrId, Vec<Unit>, Option<StrId>)> = None;
        let mut any_fits_empty = false;
        let mut most: Option<(u32, u32)> = None;
        let reservations = self.reservations();
        let mut held_back = false;
        for (&id, _) in self.cliques.iter().filter(|(_, c)| c.usable > 0) {
            // A clique held for a waiting domain of at least this priority is neither a fit nor
            // a clique to empty for this one (as PreFilter holds it back).
            if self.held_against(&reservations, id, m.domain, prio, remaining).is_some() {
                held_back = true;
                continue;
            }
            match self.clique_outcome(id, m.domain, prio, remaining, size.size, tray_size) {
                Outcome::TooSmall => {}
                Outcome::Fits { releasing } => {
                    // No count of the trays still labelled: it falls as the driver clears them,
                    // and this text is part of every retry's FailedScheduling message.
                    let wait = if releasing > 0 {
                        " once the driver clears the ComputeDomain labels it left on trays there"
                    } else {
                        ""
                    };
                    return no(domain, format!("ComputeDomain {cd} fits an NVLink clique without preemption{wait}"));
                }
                Outcome::Short { freeable, need } => {
                    any_fits_empty = true;
                    if most.is_none_or(|(f, _)| freeable > f) {
                        most = Some((freeable, need));
                    }
                }
                Outcome::Plan { cost, units, free_node } => {
                    any_fits_empty = true;
                    let better = match &best {
                        None => true,
                        Some((c, bid, ..)) => (cost, self.str(id)) < (*c, self.str(*bid)),
                    };
                    if better {
                        best = Some((cost, id, units, free_node));
                    }
                }
            }
        }
        let Some((cost, clique, units, free_node)) = best else {
            if !any_fits_empty && held_back {
                return no(
                    domain,
                    format!(
                        "the NVLink cliques that could hold ComputeDomain {cd} (priority {prio}, {sized}) are reserved for domains of at least its priority that waited longer: preemption does not take them"
                    ),
                );
            }
            if !any_fits_empty {
                return no(
                    domain,
                    format!(
                        "ComputeDomain {cd} needs {remaining} trays in one NVLink clique ({sized}) and would not fit even an empty clique ({}, reserveTraysPerClique {}): preemption cannot help",
                        self.largest_clique_text(tray_size),
                        self.args.reserve_trays_per_clique
                    ),
                );
            }
            return match most {
                Some((f, need)) if f > 0 => no(
                    domain,
                    format!(
                        "evicting every lower-priority domain and plain GPU pod would free at most {f} of the {need} trays ComputeDomain {cd} (priority {prio}) still needs in one NVLink clique: preemption cannot help"
                    ),
                ),
                _ => no(
                    domain,
                    format!(
                        "no lower-priority domains or plain GPU pods hold trays in an NVLink clique that could hold ComputeDomain {cd} (priority {prio}, {sized}): preemption cannot help"
                    ),
                ),
            };
        };
        let mut plan =
            Plan { clique, node: 0, pods: Vec::new(), domains: Vec::new(), gpus: 0, priority: cost.0, trays: 0 };
        let mut freed: Vec<StrId> = Vec::new();
        for u in &units {
            plan.pods.extend(&u.pods);
            plan.domains.extend(&u.domains);
            plan.gpus += u.gpus;
            plan.trays += u.value;
            freed.extend(&u.nodes);
        }
        plan.pods.sort_unstable_by(|a, b| self.str(*a).cmp(self.str(*b)));
        plan.pods.dedup();
        plan.domains.sort_unstable_by(|a, b| self.str(*a).cmp(self.str(*b)));
        plan.domains.dedup();
        freed.sort_unstable_by(|a, b| self.str(*a).cmp(self.str(*b)));
        plan.node = free_node.or_else(|| freed.first().copied()).unwrap_or(0);
        let names: Vec<String> = plan.domains.iter().map(|d| self.domain_name(*d)).collect();
        let plain =
            plan.pods.iter().filter(|k| self.pods.get(k).is_some_and(|p| !matches!(p.member, Ok(Some(_))))).count();
        let reason = format!(
            "preempting {} domain(s) [{}] and {plain} plain pod(s) ({} pods, {} GPUs, priority up to {}) in NVLink clique {} makes room for ComputeDomain {cd} (priority {prio}, {sized})",
            plan.domains.len(),
            names.join(", "),
            plan.pods.len(),
            plan.gpus,
            plan.priority,
            self.str(clique),
        );
        Preemption { domain, plan: Some(plan), reason }
    }

    /// GPUs a pod uses on a node of `gpus` GPUs.
    fn gpus_of(&self, p: &crate::view::PodEntry) -> u32 {
        if p.gpu_use.all {
            p.fact.node.and_then(|n| self.nodes.get(&n)).map_or(0, |n| n.summary.gpus)
        } else {
            p.gpu_use.count
        }
    }

    fn clique_outcome(
        &self,
        id: StrId,
        domain: StrId,
        prio: i32,
        remaining: u32,
        size: u32,
        tray_size: Option<u32>,
    ) -> Outcome {
        let c = &self.cliques[&id];
        let reserve = if size >= c.usable { 0 } else { self.args.reserve_trays_per_clique };
        if Self::usable_for(c, tray_size).saturating_sub(reserve) < remaining {
            return Outcome::TooSmall;
        }
        let host_managed = self.args.imex_mode == ImexMode::HostManaged;
        let candidate =
            |d: StrId| self.domains.get(&d).is_some_and(|a| a.home() == Some(id)) && self.domain_priority(d) < prio;
        let mut available = 0u32;
        let mut releasing = 0u32;
        let mut free_node = None;
        let mut needs: Vec<(StrId, Vec<UnitKey>)> = Vec::new();
        for &n in &c.nodes {
            let Some(e) = self.nodes.get(&n) else { continue };
            let s = &e.summary;
            if !s.usable || tray_size.is_some_and(|g| s.gpus != g) {
                continue;
            }
            let mut keys = Vec::new();
            let mut blocked = false;
            let mut label_only = false;
            if !host_managed {
                for &h in s.holders.iter().filter(|&&h| h != domain) {
                    if !s.workload.contains(&h) {
                        label_only = true; // the driver clears it at Unprepare
                    } else if candidate(h) {
                        keys.push(UnitKey::Domain(h));
                    } else {
                        blocked = true;
                    }
                }
            }
            for pk in &e.pods {
                let Some(p) = self.pods.get(pk) else { continue };
                match p.member {
                    Ok(Some(pm)) if pm.domain == domain => blocked = true,
                    // Under driver-managed IMEX the domain holds the tray (above).
                    Ok(Some(pm)) if !pm.daemon && host_managed && self.gpus_of(p) > 0 => {
                        if candidate(pm.domain) {
                            keys.push(UnitKey::Domain(pm.domain));
                        } else {
                            blocked = true;
                        }
                    }
                    Ok(Some(_)) => {}
                    _ if self.gpus_of(p) > 0 => {
                        if p.fact.priority < prio {
                            keys.push(UnitKey::Tray(n));
                        } else {
                            blocked = true;
                        }
                    }
                    _ => {}
                }
            }
            keys.sort_unstable();
            keys.dedup();
            if blocked {
                continue;
            }
            if keys.is_empty() {
                if label_only {
                    releasing += 1;
                } else {
                    available += 1;
                    free_node = Some(free_node.map_or(n, |f: StrId| if self.str(n) < self.str(f) { n } else { f }));
                }
                continue;
            }
            needs.push((n, keys));
        }
        // Promised to other domains: a victim's promise is freed with it.
        let promised = c.promised;
        let have = available + releasing;
        let want = remaining + promised + reserve;
        if have >= want {
            return Outcome::Fits { releasing };
        }
        let need = want - have;
        let units = self.merge_units(id, &needs);
        let freeable: u32 = units.iter().map(|u| u.value).sum();
        if freeable < need {
            return Outcome::Short { freeable, need };
        }
        // Lowest maximum priority first: the first threshold at which enough is freeable.
        let mut levels: Vec<i32> = units.iter().map(|u| u.priority).collect();
        levels.sort_unstable();
        levels.dedup();
        for level in levels {
            let eligible: Vec<&Unit> = units.iter().filter(|u| u.priority <= level).collect();
            if eligible.iter().map(|u| u.value).sum::<u32>() < need {
                continue;
            }
            if let Some((cost, chosen)) = knapsack(&eligible, need) {
                let chosen: Vec<Unit> = chosen.into_iter().map(|i| eligible[i].clone()).collect();
                let top = chosen.iter().map(|u| u.priority).max().unwrap_or(level);
                return Outcome::Plan { cost: (top, cost.0, cost.1, cost.2), units: chosen, free_node };
            }
        }
        Outcome::Short { freeable, need }
    }

    /// Merges the units that share a tray (all must go for it to free) and fills in what each
    /// evicts.
    fn merge_units(&self, clique: StrId, needs: &[(StrId, Vec<UnitKey>)]) -> Vec<Unit> {
        let mut keys: Vec<UnitKey> = needs.iter().flat_map(|(_, k)| k.iter().copied()).collect();
        keys.sort_unstable();
        keys.dedup();
        let index: BTreeMap<UnitKey, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let mut parent: Vec<usize> = (0..keys.len()).collect();
        fn find(p: &mut [usize], mut i: usize) -> usize {
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        for (_, ks) in needs {
            let first = index[&ks[0]];
            for k in &ks[1..] {
                let (a, b) = (find(&mut parent, first), find(&mut parent, index[k]));
                parent[a] = b;
            }
        }
        let mut groups: BTreeMap<usize, Unit> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            let root = find(&mut parent, i);
            let u = groups.entry(root).or_insert_with(|| Unit { priority: i32::MIN, ..Default::default() });
            match *k {
                UnitKey::Domain(d) => {
                    u.domains.insert(d);
                    u.priority = u.priority.max(self.domain_priority(d));
                    let agg = &self.domains[&d];
                    u.value += agg.promise().filter(|(c, _)| *c == clique).map_or(0, |(_, n)| n);
                    let created = agg.created.keys().next().copied().unwrap_or(0);
                    u.age = u.age.saturating_add(self.now_ms.saturating_sub(created).max(0));
                    for p in self.domain_pods(d).filter(|p| p.fact.placement != Placement::Pending) {
                        u.pods.insert(p.fact.key);
                        u.gpus += self.gpus_of(p);
                    }
                }
                UnitKey::Tray(n) => {
                    for pk in &self.nodes[&n].pods {
                        let p = &self.pods[pk];
                        let plain = !matches!(p.member, Ok(Some(_)));
                        if plain && self.gpus_of(p) > 0 && u.pods.insert(*pk) {
                            u.gpus += self.gpus_of(p);
                            u.priority = u.priority.max(p.fact.priority);
                            u.age = u.age.saturating_add(self.now_ms.saturating_sub(p.fact.created_ms).max(0));
                        }
                    }
                }
            }
        }
        for (n, ks) in needs {
            let root = find(&mut parent, index[&ks[0]]);
            let u = groups.get_mut(&root).expect("a group per key");
            u.value += 1;
            u.trays += 1;
            u.nodes.push(*n);
        }
        groups.into_values().collect()
    }
}

/// The cheapest subset of `units` whose values sum to at least `need`: fewest GPUs, then fewest
/// domains, then least age. Exact 0/1 knapsack over the value capped at `need`.
fn knapsack(units: &[&Unit], need: u32) -> Option<((u64, u32, i64), Vec<usize>)> {
    let need = need as usize;
    type Cell = Option<(u64, u32, i64)>;
    let mut table: Vec<Vec<(Cell, bool, usize)>> = vec![vec![(None, false, 0); need + 1]];
    table[0][0].0 = Some((0, 0, 0));
    for u in units {
        let prev = table.last().expect("row");
        let mut row: Vec<(Cell, bool, usize)> = prev.iter().enumerate().map(|(t, c)| (c.0, false, t)).collect();
        for (t, cell) in prev.iter().enumerate() {
            let Some((g, d, a)) = cell.0 else { continue };
            let to = (t + u.value as usize).min(need);
            let cand = (g + u64::from(u.gpus), d + u.domains.len() as u32, a.saturating_add(u.age));
            if row[to].0.is_none_or(|cur| cand < cur) {
                row[to] = (Some(cand), true, t);
            }
        }
        table.push(row);
    }
    let cost = table.last()?[need].0?;
    let mut chosen = Vec::new();
    let mut t = need;
    for i in (0..units.len()).rev() {
        let (_, took, from) = table[i + 1][t];
        if took {
            chosen.push(i);
        }
        t = from;
    }
    chosen.reverse();
    Some((cost, chosen))
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    use crate::facts::Placement;
    use crate::testutil::{Fx, clique};
    use crate::verdict::Code;

    /// A domain `name` of `pods` pods at `priority`, created at `created`, bound to trays
    /// `<rack>-<first>..` of its rack.
    fn running(f: &mut Fx, name: &str, rack: &str, first: u32, pods: u32, priority: i32, created: i64) {
        f.domain("ns", name, &format!("uid-{name}"));
        for i in 0..pods {
            let pod = format!("{name}-{i}");
            f.pod("ns", &pod, name, |p| {
                p.size_hint = Some(pods);
                p.priority = priority;
                p.created_ms = created;
            });
            f.bind("ns", &pod, &format!("{rack}-{:02}", first + i));
        }
    }

    /// A pending domain of `size` pods at `priority`; returns its first pod's key.
    fn pending(f: &mut Fx, name: &str, size: u32, priority: i32) -> u32 {
        f.domain("ns", name, &format!("uid-{name}"));
        for i in 0..size {
            f.pod("ns", &format!("{name}-{i}"), name, |p| {
                p.size_hint = Some(size);
                p.priority = priority;
            });
        }
        f.id(&format!("ns/{name}-0"))
    }

    fn names(f: &Fx, ids: &[u32]) -> Vec<String> {
        ids.iter().map(|&i| String::from(f.v.str(i))).collect()
    }

    /// The issue's scenario: four low 16-tray domains in four 18-tray cliques; the high 18-tray
    /// domain gets one clique, evicting exactly one domain whole: the youngest (all else equal).
    #[test]
    fn one_whole_domain_is_evicted_the_youngest() {
        let mut f = Fx::new("");
        for c in 1..=4u32 {
            f.rack(&format!("r{c}"), c, 18);
            running(&mut f, &format!("low{c}"), &format!("r{c}"), 0, 16, 0, 1000 * i64::from(c));
        }
        let key = pending(&mut f, "high", 18, 100);
        let r = f.v.preempt(key, 10_000);
        let plan = r.plan.expect(&r.reason);
        assert_eq!(names(&f, &plan.domains), ["uid-low4"], "the youngest of four equal domains");
        assert_eq!(f.v.str(plan.clique), clique(4));
        let want: Vec<String> = (0..16).map(|i| format!("ns/low4-{i}")).collect();
        let mut got = names(&f, &plan.pods);
        got.sort();
        let mut want = want;
        want.sort();
        assert_eq!(got, want, "every pod of the domain, nothing else");
        assert_eq!((plan.gpus, plan.trays, plan.priority), (64, 16, 0));
        assert_eq!(f.v.str(plan.node), "r4-16", "a tray free now in that clique");
        assert!(r.reason.contains("uid-low4") || r.reason.contains("ns/low4"), "{}", r.reason);
    }

    #[test]
    fn never_for_a_domain_that_would_not_fit_an_empty_clique() {
        let mut f = Fx::new("");
        f.rack("r1", 1, 18);
        running(&mut f, "low", "r1", 0, 16, 0, 1);
        let key = pending(&mut f, "big", 19, 100);
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none());
        assert!(r.reason.contains("larger than one NVLink clique and placed as segments"), "{}", r.reason);
        // Larger than one clique only after reserveTraysPerClique: still one clique's worth of
        // preemption would not do.
        let mut f = Fx::new(r#"{"reserveTraysPerClique": 2}"#);
        f.rack("r1", 1, 18);
        running(&mut f, "low", "r1", 0, 16, 0, 1);
        let key = pending(&mut f, "big", 17, 100);
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none());
        assert!(r.reason.contains("placed as segments across cliques"), "{}", r.reason);
    }

    /// A pod of 6 GPUs on trays of 4 needs trays of 6 under wholeTray: Require; the reason says
    /// that, not that the clique is too small.
    #[test]
    fn a_domain_whose_pods_match_no_tray_size_is_told_why() {
        let mut f = Fx::new("");
        f.rack("r1", 1, 18);
        running(&mut f, "low", "r1", 0, 16, 0, 1);
        f.domain("ns", "six", "uid-six");
        for i in 0..2 {
            f.pod("ns", &format!("six-{i}"), "six", |p| {
                p.size_hint = Some(2);
                p.priority = 100;
                p.gpus = 6;
            });
        }
        let key = f.id("ns/six-0");
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none());
        assert!(
            r.reason.contains(
                "would not fit even an empty clique (no clique has more than 0 usable trays of 6 GPUs (wholeTray: Require: a pod of 6 GPUs takes a whole tray of exactly 6)"
            ),
            "{}",
            r.reason
        );
        let (code, reason) = f.decide("ns", "six-0", 10);
        assert_eq!(code, Code::UnschedulableAndUnresolvable, "{reason}");
        assert!(reason.contains("requests 6 GPUs but trays have 4"), "PreFilter says it per pod: {reason}");
    }

    #[test]
    fn only_strictly_lower_priority_domains_are_victims() {
        let mut f = Fx::new("");
        f.rack("r1", 1, 18);
        running(&mut f, "peer", "r1", 0, 16, 100, 1);
        let key = pending(&mut f, "high", 18, 100);
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none());
        assert!(r.reason.contains("no lower-priority domains"), "{}", r.reason);
    }

    #[test]
    fn lowest_victim_priority_wins_over_fewer_gpus() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.rack("b", 2, 18);
        running(&mut f, "prio5", "a", 0, 16, 5, 1); // 64 GPUs
        running(&mut f, "prio10", "b", 0, 10, 10, 1); // 40 GPUs
        let key = pending(&mut f, "high", 18, 100);
        let plan = f.v.preempt(key, 10).plan.expect("a plan");
        assert_eq!(names(&f, &plan.domains), ["uid-prio5"]);
        assert_eq!(plan.priority, 5);
    }

    #[test]
    fn fewest_gpus_then_fewest_domains() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.rack("b", 2, 18);
        running(&mut f, "big", "a", 0, 16, 0, 1);
        running(&mut f, "small", "b", 0, 10, 0, 1);
        let key = pending(&mut f, "high", 18, 100);
        let plan = f.v.preempt(key, 10).plan.expect("a plan");
        assert_eq!(names(&f, &plan.domains), ["uid-small"], "40 GPUs rather than 64");

        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.rack("b", 2, 18);
        running(&mut f, "x", "a", 0, 8, 0, 1);
        running(&mut f, "y", "a", 8, 8, 0, 1);
        running(&mut f, "z", "b", 0, 16, 0, 1);
        let key = pending(&mut f, "high", 18, 100);
        let plan = f.v.preempt(key, 10).plan.expect("a plan");
        assert_eq!(names(&f, &plan.domains), ["uid-z"], "one domain rather than two of the same GPUs");
    }

    #[test]
    fn plain_gpu_pods_are_units_per_tray_and_cheaper_ones_win() {
        let mut f = Fx::new(r#"{"wholeTray":"Off"}"#);
        f.rack("a", 1, 18);
        running(&mut f, "dom", "a", 0, 8, 0, 1); // 32 GPUs on a-00..07
        for i in 8..16 {
            f.plain("ns", &format!("web-{i}"), &format!("a-{i:02}"), 2, 0); // 16 GPUs on a-08..15
        }
        let key = pending(&mut f, "high", 10, 100);
        let plan = f.v.preempt(key, 10).plan.expect("a plan");
        assert!(plan.domains.is_empty(), "plain pods cost fewer GPUs");
        assert_eq!((plan.pods.len(), plan.gpus), (8, 16));
    }

    #[test]
    fn a_tray_with_a_higher_priority_plain_pod_cannot_be_freed() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        for i in 0..17 {
            f.plain("ns", &format!("low-{i}"), &format!("a-{i:02}"), 4, 0);
        }
        f.plain("ns", "vip", "a-17", 4, 1000);
        let key = pending(&mut f, "high", 18, 100);
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none());
        assert!(r.reason.contains("free at most 17 of the 18 trays"), "{}", r.reason);
    }

    /// A clique reserved for a waiting domain of the same priority is not "a fit without
    /// preemption" for another (PreFilter holds it back), nor emptied for it.
    #[test]
    fn a_clique_reserved_for_an_equal_domain_is_neither_a_fit_nor_a_target() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 4);
        f.domain("ns", "run", "uid-run");
        for i in 0..2 {
            f.pod("ns", &format!("run-{i}"), "run", |p| p.size_hint = Some(2));
            f.bind("ns", &format!("run-{i}"), &format!("a-{i:02}"));
        }
        // big (7 trays) waited longest: a, with 6 trays free, is reserved for it, and it starts
        // there once run's trays free; `late` (6 trays, same priority) fits only a.
        f.domain("ns", "big", "uid-big");
        for i in 0..7 {
            f.pod("ns", &format!("big-{i}"), "big", |p| {
                p.size_hint = Some(7);
                p.created_ms = 1;
            });
        }
        let late = pending(&mut f, "late", 6, 0);
        let now = 10 * 60_000;
        f.v.now_ms = now;
        let r = f.v.reservations();
        assert_eq!(r.iter().map(|x| f.v.str(x.domain)).collect::<Vec<_>>(), ["uid-big"]);
        let (code, reason) = f.decide("ns", "late-0", now);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("a clique reserved for a domain waiting longer is not used"), "{reason}");
        let p = f.v.preempt(late, now);
        assert!(p.plan.is_none());
        assert!(!p.reason.contains("without preemption"), "{}", p.reason);
        assert!(p.reason.contains("are reserved for domains of at least its priority"), "{}", p.reason);
    }

    #[test]
    fn trays_held_only_by_a_label_free_themselves() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.domain("ns", "gone", "uid-gone");
        for i in 0..16 {
            f.label_node(&format!("a-{i:02}"), 1, "uid-gone");
        }
        let key = pending(&mut f, "high", 18, 100);
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none());
        assert!(
            r.reason
                .contains("without preemption once the driver clears the ComputeDomain labels it left on trays there"),
            "{}",
            r.reason
        );
        // The words do not move as the labels go (every retry's message carries them).
        for i in 0..6 {
            f.label_node(&format!("a-{i:02}"), 1, "");
        }
        assert_eq!(f.v.preempt(key, 10).reason, r.reason);
    }

    #[test]
    fn a_victims_labels_and_promise_are_freed_with_it() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        // Half-started: 8 of 16 placed, 8 more trays promised to it; two labels linger for it.
        f.domain("ns", "half", "uid-half");
        for i in 0..16 {
            f.pod("ns", &format!("half-{i}"), "half", |p| p.size_hint = Some(16));
        }
        for i in 0..8 {
            f.bind("ns", &format!("half-{i}"), &format!("a-{i:02}"));
        }
        let key = pending(&mut f, "high", 18, 100);
        let plan = f.v.preempt(key, 10).plan.expect("its 8 trays and its promise of 8 make 16");
        assert_eq!(names(&f, &plan.domains), ["uid-half"]);
        assert_eq!(plan.pods.len(), 8, "only its placed pods are evicted");
        assert_eq!(plan.trays, 16);
    }

    #[test]
    fn podgroup_priority_ranks_a_domain() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        running(&mut f, "guarded", "a", 0, 16, 0, 1);
        let pg = f.pod_group("PodGroup/ns/guarded", 16, 500);
        for i in 0..16 {
            f.update_pod("ns", &format!("guarded-{i}"), |p| p.pod_group = Some(pg));
        }
        let key = pending(&mut f, "high", 18, 100);
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none(), "its PodGroup says 500 > 100: {}", r.reason);

        // The preemptor's PodGroup priority counts for it too.
        let hpg = f.pod_group("PodGroup/ns/higher", 18, 1000);
        f.domain("ns", "higher", "uid-higher");
        for i in 0..18 {
            f.pod("ns", &format!("higher-{i}"), "higher", |p| p.pod_group = Some(hpg));
        }
        let key = f.id("ns/higher-0");
        let plan = f.v.preempt(key, 10).plan.expect("1000 > 500");
        assert_eq!(names(&f, &plan.domains), ["uid-guarded"]);
    }

    #[test]
    fn a_started_domain_or_unknown_size_gets_no_preemption() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        running(&mut f, "low", "a", 0, 16, 0, 1);
        running(&mut f, "mine", "a", 16, 1, 100, 1);
        f.pod("ns", "mine-extra", "mine", |p| p.priority = 100);
        let key = f.id("ns/mine-extra");
        let r = f.v.preempt(key, 10);
        assert!(r.plan.is_none() && r.reason.contains("already has NVLink clique"), "{}", r.reason);

        let mut f = Fx::new(r#"{"sizeSettleSeconds":30}"#);
        f.rack("a", 1, 18);
        running(&mut f, "low", "a", 0, 16, 0, 1);
        f.domain("ns", "new", "uid-new");
        f.pod("ns", "new-0", "new", |p| {
            p.priority = 100;
            p.created_ms = 1_000;
        });
        let key = f.id("ns/new-0");
        let r = f.v.preempt(key, 2_000);
        assert!(r.plan.is_none() && r.reason.contains("does not know its size"), "{}", r.reason);
    }

    /// preempt changes nothing, and after the victims go and the preemptor is nominated, its
    /// domain is held to that clique and the clique is promised to it.
    #[test]
    fn pure_and_the_nomination_holds_the_clique() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18);
        f.rack("b", 2, 18);
        running(&mut f, "low", "a", 0, 16, 0, 1);
        running(&mut f, "other", "b", 0, 17, 50, 1);
        let key = pending(&mut f, "high", 18, 100);
        let before = f.v.pre_filter(key, &[], 10);
        let plan = f.v.preempt(key, 10).plan.expect("a plan");
        f.v.assert_consistent();
        assert_eq!(f.v.pre_filter(key, &[], 10), before, "the view is unchanged");
        assert_eq!(names(&f, &plan.domains), ["uid-low"], "priority 0 rather than 50");

        for i in 0..16 {
            f.remove_pod("ns", &format!("low-{i}"));
        }
        let node = f.v.str(plan.node).to_string();
        let n = f.id(&node);
        f.update_pod("ns", "high-0", |p| {
            p.placement = Placement::Nominated;
            p.node = Some(n);
        });
        f.v.assert_consistent();
        // The nominated pod itself may take its own tray.
        let own = f.v.pre_filter(key, &[], 20);
        assert_eq!(own.status.code, Code::Success, "{}", own.reason(own.status));
        assert!(own.exclusive && own.nodes.iter().all(|v| f.v.str(v.node) != node));
        // Its siblings go only to that clique.
        let sib = f.id("ns/high-1");
        let r = f.v.pre_filter(sib, &[], 20);
        assert!(r.exclusive, "held to the nominated clique");
        assert_eq!(r.cliques.iter().map(|c| f.v.str(c.clique).to_string()).collect::<Vec<_>>(), [clique(1)]);
        // Another starting domain sees the clique promised (17 more trays).
        let c1 = f.id(&clique(1));
        assert_eq!(f.v.cliques[&c1].promised, 17);
        let key2 = pending(&mut f, "rival", 1, 100);
        let (code, reason) = f.decide("ns", "rival-0", 20);
        assert_eq!(code, Code::Success, "{reason}");
        let r = f.v.pre_filter(key2, &[], 20);
        let offered: Vec<_> = r.cliques.iter().filter(|c| c.verdict.code == Code::Success).map(|c| c.clique).collect();
        assert!(!offered.contains(&c1), "the promised clique is not offered to a rival");
        // And gang preemption does not run again for it.
        let again = f.v.preempt(sib, 20);
        assert!(again.plan.is_none() && again.reason.contains("already has NVLink clique"), "{}", again.reason);
    }
}
