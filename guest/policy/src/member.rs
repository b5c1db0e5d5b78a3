//! A pod's ComputeDomain membership (`view::Member`), resolved from its claims and the claims'
//! templates.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::*;
use crate::view::{Member, ObjKey, View};

impl View {
    /// Works out a pod's ComputeDomain and GPU use from its claims.
    #[allow(clippy::type_complexity)]
    pub(crate) fn resolve(
        &self,
        pod: &PodFact,
    ) -> (core::result::Result<Option<Member>, String>, GpuDemand, Vec<ObjKey>, Vec<ObjKey>) {
        let ns = pod.namespace;
        let mut claim_refs = Vec::new();
        let mut template_refs = Vec::new();
        let mut gpus = GpuDemand { count: pod.gpus, all: false };
        let mut member: Option<Member> = None;
        let mut error: Option<String> = None;
        for r in &pod.claims {
            let found = if let Some(name) = r.generated.or(r.claim) {
                claim_refs.push((ns, name));
                match self.claims.get(&(ns, name)) {
                    Some(c) => Some((
                        c.domain,
                        c.daemon,
                        c.allocated_gpus.map_or(c.gpus, |n| GpuDemand { count: n, all: false }),
                        (ns, name),
                        false,
                    )),
                    None if r.claim.is_some() && r.generated.is_none() => {
                        error.get_or_insert_with(|| {
                            format!(
                                "pod {} uses ResourceClaim {}/{}, which does not exist",
                                self.str(pod.key),
                                self.str(ns),
                                self.str(name)
                            )
                        });
                        None
                    }
                    // A generated claim not seen yet: fall back to its template.
                    None => None,
                }
            } else {
                None
            };
            let found = match (found, r.template) {
                (Some(f), _) => Some(f),
                (None, Some(t)) => {
                    template_refs.push((ns, t));
                    match self.templates.get(&(ns, t)) {
                        Some(t) => Some((t.domain, t.daemon, t.gpus, (ns, t.name), true)),
                        None => {
                            error.get_or_insert_with(|| {
                                format!(
                                    "pod {} claim {:?} uses ResourceClaimTemplate {}/{}, which does not exist",
                                    self.str(pod.key),
                                    self.str(r.name),
                                    self.str(ns),
                                    self.str(t)
                                )
                            });
                            None
                        }
                    }
                }
                (None, None) => None,
            };
            let Some((domain, daemon, demand, via, via_template)) = found else { continue };
            gpus.add(demand);
            if let Some(domain) = domain {
                match member {
                    Some(m) if m.domain != domain => {
                        error.get_or_insert_with(|| {
                            format!(
                                "pod {} has channels of two ComputeDomains ({} and {}); a pod belongs to at most one",
                                self.str(pod.key),
                                self.str(m.domain),
                                self.str(domain)
                            )
                        });
                    }
                    Some(_) => {}
                    None => member = Some(Member { domain, daemon, via, via_template }),
                }
            }
        }
        let member = match error {
            Some(e) => Err(e),
            None => Ok(member),
        };
        (member, gpus, claim_refs, template_refs)
    }
}
