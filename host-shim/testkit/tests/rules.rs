//! Every policy rule, evaluated on the same cluster by the native policy and by the wasm
//! component through the host (the [`Twin`] asserts they agree on every decision).

use cdplace_host::{Code, Kind, Overlay};
use cdplace_testkit::builders::*;
use serde_json::json;

const NS: &str = "team-a";

fn c(id: u32) -> String {
    clique(id)
}

// ---------------------------------------------------------------- ComputeDomain membership

#[test]
fn non_compute_domain_pods_are_skipped() {
    let mut objs = rack("a", 1, 4);
    objs.push(pod(NS, "plain", None, 4));
    objs.push(gpu_template(NS, "gpus", json!({"deviceClassName": "gpu.nvidia.com", "count": 2})));
    objs.push(pod(NS, "dra-gpu", Some("gpus"), 0));
    let t = Twin::new(&objs);
    for p in ["plain", "dra-gpu"] {
        let d = t.decide(NS, p);
        assert_eq!(d.status.code, Code::Skip, "{p}");
        assert_eq!(d.domain, None);
    }
}

#[test]
fn membership_through_template_generated_claim_and_shared_claim() {
    let mut objs = rack("a", 1, 4);
    objs.extend(domain(NS, "cd", "uid-cd"));
    // Template only (claim not generated yet).
    objs.push(cd_pod(NS, "cd", "via-template"));
    // Generated claim named in the pod status; the claim carries no label, only the config.
    let mut generated = cd_pod(NS, "cd", "via-generated");
    generated["status"]["resourceClaimStatuses"] =
        json!([{"name": "channel", "resourceClaimName": "via-generated-channel-x7k2p"}]);
    objs.push(channel_claim(NS, "via-generated-channel-x7k2p", "uid-cd"));
    objs.push(generated);
    // A shared claim named directly.
    let mut shared = pod(NS, "via-claim", None, 4);
    shared["spec"]["resourceClaims"] = json!([{"name": "channel", "resourceClaimName": "shared-channel"}]);
    objs.push(channel_claim(NS, "shared-channel", "uid-cd"));
    objs.push(shared);
    let t = Twin::new(&objs);
    for p in ["via-template", "via-generated", "via-claim"] {
        let d = t.decide(NS, p);
        assert_eq!(d.status.code, Code::Success, "{p}: {}", d.status.reason);
        assert_eq!(d.domain.as_deref(), Some("uid-cd"), "{p}");
    }
}

#[test]
fn missing_template_is_an_exact_error() {
    let mut objs = rack("a", 1, 2);
    objs.push(compute_domain(NS, "cd", "uid-cd"));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(
        d.status.reason,
        "pod team-a/p claim \"channel\" uses ResourceClaimTemplate team-a/cd-channel, which does not exist"
    );
    // The template appears (the driver created it): the pod becomes schedulable.
    t.apply(&[channel_template(NS, "cd", "uid-cd")]);
    assert_eq!(t.decide(NS, "p").status.code, Code::Success);
}

#[test]
fn missing_shared_claim_and_missing_domain_are_exact_errors() {
    let mut objs = rack("a", 1, 2);
    let mut shared = pod(NS, "p", None, 4);
    shared["spec"]["resourceClaims"] = json!([{"name": "channel", "resourceClaimName": "gone"}]);
    objs.push(shared);
    objs.push(channel_template(NS, "orphan", "uid-deleted"));
    objs.push(cd_pod(NS, "orphan", "q"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(d.status.reason, "pod team-a/p uses ResourceClaim team-a/gone, which does not exist");
    let d = t.decide(NS, "q");
    assert_eq!(
        d.status.reason,
        "ComputeDomain with UID uid-deleted (named by ResourceClaimTemplate team-a/orphan-channel) does not exist; the pod waits until it does"
    );
}

#[test]
fn claim_in_another_namespace_than_its_domain_is_rejected() {
    let mut objs = rack("a", 1, 2);
    objs.push(compute_domain("team-b", "cd", "uid-cd"));
    objs.push(channel_template(NS, "cd", "uid-cd"));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(
        d.status.reason,
        "ResourceClaimTemplate team-a/cd-channel is in namespace team-a but its ComputeDomain team-b/cd is in namespace team-b; the driver refuses to prepare a channel outside its domain's namespace"
    );
}

#[test]
fn a_pod_with_channels_of_two_domains_is_rejected() {
    let mut objs = rack("a", 1, 2);
    objs.extend(domain(NS, "x", "uid-x"));
    objs.extend(domain(NS, "y", "uid-y"));
    let mut p = cd_pod(NS, "x", "p");
    p["spec"]["resourceClaims"] = json!([
        {"name": "a", "resourceClaimTemplateName": "x-channel"},
        {"name": "b", "resourceClaimTemplateName": "y-channel"}]);
    objs.push(p);
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert!(d.status.reason.contains("has channels of two ComputeDomains (uid-x and uid-y)"), "{}", d.status.reason);
}

// ---------------------------------------------------------------- rule 1: eligible trays

#[test]
fn only_schedulable_nvlink_trays_are_eligible() {
    let mut objs = rack("a", 1, 3);
    objs.push(node("plain-0", None, 4));
    objs.push(node("nofabric-0", Some(&format!("{CLUSTER}.")), 4));
    objs[0] = cordon(objs[0].clone());
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    let no_clique = "node is not an NVLink tray: label nvidia.com/gpu.clique is absent or has an empty clique ID";
    assert_eq!(verdict(&d, "plain-0", None), (Code::UnschedulableAndUnresolvable, no_clique, None));
    let empty = format!("{CLUSTER}.");
    assert_eq!(verdict(&d, "nofabric-0", Some(&empty)), (Code::UnschedulableAndUnresolvable, no_clique, None));
    assert_eq!(
        verdict(&d, "a-00", Some(&c(1))),
        (Code::UnschedulableAndUnresolvable, "node is cordoned (spec.unschedulable)", None)
    );
    assert_eq!(verdict(&d, "a-01", Some(&c(1))).0, Code::Success);
}

#[test]
fn malformed_clique_label_gets_an_exact_reason() {
    let mut objs = rack("a", 1, 2);
    objs.push(node("bad-0", Some("no-dot-here"), 4));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(
        verdict(&d, "bad-0", Some("no-dot-here")),
        (
            Code::UnschedulableAndUnresolvable,
            "node label nvidia.com/gpu.clique=\"no-dot-here\" is malformed: expected <clusterUUID>.<cliqueID>",
            None
        )
    );
}

#[test]
fn no_trays_at_all() {
    let mut objs = vec![node("plain-0", None, 4)];
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(cd_pod(NS, "cd", "p"));
    let d = Twin::new(&objs).decide(NS, "p");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert!(d.status.reason.starts_with("no schedulable node has an NVLink clique"), "{}", d.status.reason);
}

// ---------------------------------------------------------------- rule 2: one domain per node

#[test]
fn a_node_held_by_another_domain_is_rejected_bound_assumed_nominated_or_labelled() {
    let mut objs = rack("a", 1, 6);
    objs.extend(domain(NS, "mine", "uid-mine"));
    objs.extend(domain(NS, "other", "uid-other"));
    objs.push(bound(cd_pod(NS, "other", "o-bound"), "a-00"));
    objs.push(nominated(cd_pod(NS, "other", "o-nominated"), "a-01"));
    objs.push(cd_pod(NS, "other", "o-assumed"));
    // The driver's label outlives a deleted claim until Unprepare.
    objs[3] = label(objs[3].clone(), "resource.nvidia.com/computeDomain", "uid-gone");
    objs.push(cd_pod(NS, "mine", "p"));
    // 4 pods of "other": it is "started" in clique 1; "mine" must fit beside it. Size mine to 1.
    objs.push(annotate(compute_domain(NS, "mine", "uid-mine"), "cdplace.nvidia.com/size", "1"));
    let t = Twin::new(&objs);
    t.both(|c| c.assume(NS, "o-assumed", "a-02").unwrap());
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    let cl = c(1);
    assert_eq!(
        verdict(&d, "a-00", Some(&cl)),
        (
            Code::Unschedulable,
            "node is held by ComputeDomain team-a/other, which has a pod placed here; one ComputeDomain per node (driver-managed IMEX)",
            None
        )
    );
    // Nominated and assumed pods hold their node too.
    assert_eq!(verdict(&d, "a-01", Some(&cl)), verdict(&d, "a-00", Some(&cl)));
    assert_eq!(verdict(&d, "a-02", Some(&cl)), verdict(&d, "a-00", Some(&cl)));
    assert_eq!(
        verdict(&d, "a-03", Some(&cl)).1,
        "node still carries resource.nvidia.com/computeDomain=uid-gone (ComputeDomain uid-gone) until the driver unprepares its claim; one ComputeDomain per node (driver-managed IMEX)"
    );
    assert_eq!(verdict(&d, "a-04", Some(&cl)).0, Code::Success);

    // Unreserve gives the node back.
    t.both(|c| c.forget(NS, "o-assumed"));
    let d = t.decide(NS, "p");
    assert_eq!(verdict(&d, "a-02", Some(&cl)).0, Code::Success);
}

#[test]
fn own_stale_label_and_own_daemon_do_not_block_the_same_domain() {
    let mut objs = rack("a", 1, 2);
    objs[0] = label(objs[0].clone(), "resource.nvidia.com/computeDomain", "uid-cd");
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(verdict(&d, "a-00", Some(&c(1))).0, Code::Success);
}

#[test]
fn imex_daemon_pods_hold_their_node_and_are_skipped() {
    let mut objs = rack("a", 1, 3);
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.extend(domain(NS, "other", "uid-other"));
    // The driver's daemon claim template lives in the driver namespace.
    let mut daemon_tpl = channel_template("nvidia-dra-driver", "computedomain-daemon-uid-other", "uid-other");
    daemon_tpl["metadata"]["labels"]["resource.nvidia.com/computeDomainTarget"] = json!("Daemon");
    daemon_tpl["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]["kind"] =
        json!("ComputeDomainDaemonConfig");
    objs.push(daemon_tpl);
    objs.push(bound(
        pod("nvidia-dra-driver", "imex-daemon-x", Some("computedomain-daemon-uid-other-channel"), 0),
        "a-00",
    ));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide("nvidia-dra-driver", "imex-daemon-x");
    assert_eq!(d.status.code, Code::Skip);
    let d = t.decide(NS, "p");
    let (code, reason, _) = verdict(&d, "a-00", Some(&c(1)));
    assert_eq!(code, Code::Unschedulable);
    assert!(reason.starts_with("node is held by ComputeDomain team-a/other, which has a pod placed here"), "{reason}");
}

#[test]
fn host_managed_mode_ignores_other_domains_but_not_gpus() {
    let mut objs = rack("a", 1, 3);
    objs[2] = label(objs[2].clone(), "resource.nvidia.com/computeDomain", "uid-gone");
    objs.extend(domain(NS, "mine", "uid-mine"));
    objs.extend(domain(NS, "other", "uid-other"));
    // A zero-GPU pod of "other" (e.g. a coordinator) on a-00, a whole-tray pod on a-01.
    objs.push(bound(pod(NS, "o-0", Some("other-channel"), 0), "a-00"));
    objs.push(bound(cd_pod(NS, "other", "o-1"), "a-01"));
    objs.push(annotate(compute_domain(NS, "mine", "uid-mine"), "cdplace.nvidia.com/size", "1"));
    objs.push(cd_pod(NS, "mine", "p"));
    let t = Twin::with_args(r#"{"imexMode":"HostManaged"}"#, &objs);
    let d = t.decide(NS, "p");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    let cl = c(1);
    assert_eq!(verdict(&d, "a-00", Some(&cl)).0, Code::Success, "domains share nodes in host-managed mode");
    assert_eq!(verdict(&d, "a-02", Some(&cl)).0, Code::Success, "no node label in host-managed mode");
    let (code, reason, _) = verdict(&d, "a-01", Some(&cl));
    assert_eq!(code, Code::Unschedulable);
    assert!(reason.starts_with("node has GPUs in use by other pods"), "{reason}");

    // Driver-managed: the same cluster rejects both.
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(verdict(&d, "a-00", Some(&cl)).0, Code::Unschedulable);
    assert_eq!(verdict(&d, "a-02", Some(&cl)).0, Code::Unschedulable);
}

// ---------------------------------------------------------------- rule 3: one workload pod per domain per node

#[test]
fn one_workload_pod_per_domain_per_node_even_in_host_managed_mode() {
    let mut objs = rack("a", 1, 2);
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(bound(pod(NS, "p0", Some("cd-channel"), 0), "a-00"));
    objs.push(pod(NS, "p1", Some("cd-channel"), 0));
    for args in [r#"{"wholeTray":"Off"}"#, r#"{"wholeTray":"Off","imexMode":"HostManaged"}"#] {
        let t = Twin::with_args(args, &objs);
        let d = t.decide(NS, "p1");
        assert_eq!(d.status.code, Code::Success, "{args}: {}", d.status.reason);
        assert_eq!(
            verdict(&d, "a-00", Some(&c(1))),
            (
                Code::Unschedulable,
                "node already runs a pod of ComputeDomain team-a/cd; a domain has one workload pod per node (channel 0 is exclusive)",
                None
            ),
            "{args}"
        );
        assert_eq!(verdict(&d, "a-01", Some(&c(1))).0, Code::Success, "{args}");
    }
}

// ---------------------------------------------------------------- rule 4: whole trays

fn six_gpu_domain() -> Vec<serde_json::Value> {
    // The article's case: a 6-GPU ComputeDomain as three pods of 2 GPUs.
    let mut objs = rack("a", 1, 4);
    objs.extend(domain(NS, "six", "uid-six"));
    for i in 0..3 {
        objs.push(pod(NS, &format!("six-{i}"), Some("six-channel"), 2));
    }
    objs
}

#[test]
fn a_six_gpu_domain_is_rejected_under_whole_tray_require() {
    let t = Twin::new(&six_gpu_domain());
    let d = t.decide(NS, "six-0");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(
        d.status.reason,
        "requests 2 of 4 GPUs per tray; would strand 2 (wholeTray: Require: a ComputeDomain pod takes all GPUs of its tray)"
    );
}

#[test]
fn whole_tray_prefer_scores_partial_pods_down_and_off_ignores_them() {
    let objs = six_gpu_domain();
    let prefer = Twin::with_args(r#"{"wholeTray":"Prefer"}"#, &objs).decide(NS, "six-0");
    let off = Twin::with_args(r#"{"wholeTray":"Off"}"#, &objs).decide(NS, "six-0");
    assert_eq!(prefer.status.code, Code::Success);
    assert_eq!(off.status.code, Code::Success);
    let cl = c(1);
    let (_, _, p) = verdict(&prefer, "a-00", Some(&cl));
    let (_, _, o) = verdict(&off, "a-00", Some(&cl));
    assert_eq!(o, Some(100));
    assert_eq!(p, Some(50), "2 of 4 GPUs: half the score");
}

#[test]
fn gpus_through_dra_claims_count_for_whole_trays() {
    // Nodes publish GPUs only in ResourceSlices (no extended resource).
    let mut objs: Vec<_> = (0..3).map(|i| node(&format!("a-{i:02}"), Some(&c(1)), 0)).collect();
    objs.extend((0..3).map(|i| gpu_slice(&format!("a-{i:02}"), 4)));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(gpu_template(NS, "all-gpus", json!({"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"})));
    objs.push(gpu_template(NS, "two-gpus", json!({"deviceClassName": "gpu.nvidia.com", "count": 2})));
    objs.push(gpu_template(NS, "four-gpus", json!({"deviceClassName": "gpu.nvidia.com", "count": 4})));
    for (name, tpl) in [("all", "all-gpus"), ("two", "two-gpus"), ("four", "four-gpus")] {
        let mut p = pod(NS, name, None, 0);
        p["spec"]["resourceClaims"] = json!([
            {"name": "channel", "resourceClaimTemplateName": "cd-channel"},
            {"name": "gpus", "resourceClaimTemplateName": tpl}]);
        objs.push(p);
    }
    let t = Twin::new(&objs);
    let d = t.decide(NS, "all");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    assert_eq!(t.decide(NS, "four").status.code, Code::Success);
    let d = t.decide(NS, "two");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert!(d.status.reason.starts_with("requests 2 of 4 GPUs per tray; would strand 2"), "{}", d.status.reason);
}

#[test]
fn a_tray_with_any_gpu_in_use_is_not_free() {
    let mut objs = rack("a", 1, 2);
    objs.push(bound(pod("default", "inference", None, 1), "a-00"));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(annotate(compute_domain(NS, "cd", "uid-cd"), "cdplace.nvidia.com/size", "1"));
    objs.push(cd_pod(NS, "cd", "p"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p");
    assert_eq!(
        verdict(&d, "a-00", Some(&c(1))),
        (
            Code::Unschedulable,
            "node has GPUs in use by other pods; a ComputeDomain pod needs a tray with no GPU in use",
            None
        )
    );
    assert_eq!(verdict(&d, "a-01", Some(&c(1))).0, Code::Success);
}

// ---------------------------------------------------------------- rule 5: same clique

#[test]
fn a_started_domain_only_goes_to_its_clique() {
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(bound(cd_pod(NS, "cd", "p0"), "a-00"));
    objs.push(cd_pod(NS, "cd", "p1"));
    objs.push(cd_pod(NS, "cd", "p2"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p1");
    assert_eq!(d.status.code, Code::Success);
    assert!(d.exclusive);
    assert_eq!(d.node_set.as_deref(), Some(&["a-00".to_string(), "a-01".into(), "a-02".into(), "a-03".into()][..]));
    assert_eq!(
        verdict(&d, "b-00", Some(&c(2))),
        (
            Code::UnschedulableAndUnresolvable,
            format!("ComputeDomain team-a/cd already runs in NVLink clique {}; all its pods stay in that clique", c(1))
                .as_str(),
            None
        )
    );
    assert_eq!(verdict(&d, "a-00", Some(&c(1))).0, Code::Unschedulable, "rule 3 still applies");
    assert_eq!(verdict(&d, "a-01", Some(&c(1))).0, Code::Success);
}

#[test]
fn a_started_domain_whose_clique_is_full_waits_instead_of_spreading() {
    let mut objs = rack("a", 1, 2);
    objs.extend(rack("b", 2, 4));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(bound(cd_pod(NS, "cd", "p0"), "a-00"));
    objs.push(bound(cd_pod(NS, "cd", "p1"), "a-01"));
    objs.push(cd_pod(NS, "cd", "p2"));
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p2");
    assert_eq!(d.status.code, Code::Unschedulable);
    assert_eq!(
        d.status.reason,
        format!(
            "ComputeDomain team-a/cd runs in NVLink clique {} and needs 1 more tray(s) there (size 3 from the pods seen so far), but none is free; its pods never leave that clique",
            c(1)
        )
    );
}

// ---------------------------------------------------------------- rule 6: gang-aware capacity

#[test]
fn a_24_tray_domain_on_18_tray_cliques_spans_two_whole_cliques_or_none() {
    let mut objs = Vec::new();
    for r in 0..4 {
        objs.extend(rack(&format!("r{r}"), r + 1, 18));
    }
    objs.extend(domain(NS, "big", "uid-big"));
    for i in 0..24 {
        objs.push(cd_pod(NS, "big", &format!("big-{i:02}")));
    }
    let t = Twin::new(&objs);
    let d = t.decide(NS, "big-00");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    // Segments in the fewest cliques (two), the first two by label on an empty fleet.
    assert_eq!(verdict(&d, "r0-00", Some(&c(1))).0, Code::Success);
    assert_eq!(verdict(&d, "r1-00", Some(&c(2))).0, Code::Success);
    let (code, why, _) = verdict(&d, "r2-00", Some(&c(3)));
    assert_eq!(code, Code::Unschedulable);
    assert!(why.contains("placed as segments, each whole in one clique, in the fewest cliques"), "{why}");
    // Three cliques full: 18 trays free, no pod starts.
    let mut busy = Vec::new();
    for r in 1..4 {
        busy.extend(domain(NS, &format!("old{r}"), &format!("uid-old{r}")));
        for i in 0..18 {
            busy.push(bound(cd_pod(NS, &format!("old{r}"), &format!("old{r}-{i:02}")), &format!("r{r}-{i:02}")));
        }
    }
    t.apply(&busy);
    let d = t.decide(NS, "big-00");
    assert_eq!(d.status.code, Code::Unschedulable);
    assert_eq!(
        d.status.reason,
        "ComputeDomain team-a/big needs 24 trays (size 24 from the pods seen so far), more than one NVLink clique holds (the largest clique has 18 usable trays), so it is placed as segments, each whole in one clique, in the fewest cliques; all segments or none: it needs 24 trays and the NVLink cliques do not have room for all of them now; no pod starts until every segment fits"
    );
}

#[test]
fn a_domain_starts_only_where_all_its_pods_fit() {
    let mut objs = rack("a", 1, 8);
    objs.extend(rack("b", 2, 6));
    objs.extend(domain(NS, "other", "uid-other"));
    // Clique 1 has 3 free trays, clique 2 has 6.
    for i in 0..5 {
        objs.push(bound(cd_pod(NS, "other", &format!("o-{i}")), &format!("a-{i:02}")));
    }
    objs.extend(domain(NS, "cd", "uid-cd"));
    for i in 0..4 {
        objs.push(cd_pod(NS, "cd", &format!("p{i}")));
    }
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p0");
    assert_eq!(d.status.code, Code::Success);
    assert!(!d.exclusive);
    assert_eq!(verdict(&d, "a-06", Some(&c(1))).0, Code::Unschedulable, "3 free trays cannot hold 4 pods");
    assert_eq!(verdict(&d, "b-00", Some(&c(2))).0, Code::Success);

    // Declared size beats the pending count: 7 pods will come, no clique has 7 free.
    t.apply(&[annotate(compute_domain(NS, "cd", "uid-cd"), "cdplace.nvidia.com/size", "7")]);
    let d = t.decide(NS, "p0");
    assert_eq!(d.status.code, Code::Unschedulable);
    assert_eq!(
        d.status.reason,
        String::from(
            "ComputeDomain team-a/cd needs 7 free trays in one NVLink clique (size 7 from annotation cdplace.nvidia.com/size on ComputeDomain team-a/cd); no clique has that many free now"
        )
    );
}

#[test]
fn pod_group_min_count_sets_the_gang_size() {
    let mut objs = rack("a", 1, 4);
    objs.extend(domain(NS, "cd", "uid-cd"));
    let mut p = cd_pod(NS, "cd", "p0");
    p["spec"]["schedulingGroup"] = json!({"podGroupName": "trainer"});
    objs.push(p);
    let t = Twin::new(&objs);
    // The pod names a PodGroup not seen yet: the domain waits rather than guess its size.
    let d = t.decide(NS, "p0");
    assert_eq!(d.status.code, Code::Unschedulable);
    assert_eq!(
        d.status.reason,
        "ComputeDomain team-a/cd is waiting for PodGroup team-a/trainer (the pods' PodGroup) to tell the domain's size"
    );
    t.apply(&[json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "trainer", "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}})]);
    let d = t.decide(NS, "p0");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(
        d.status.reason,
        "ComputeDomain team-a/cd needs 6 trays (size 6 from PodGroup team-a/trainer spec.schedulingPolicy.gang.minCount), more than one NVLink clique holds (the largest clique has 4 usable trays), so it is placed as segments, each whole in one clique, in the fewest cliques; all segments or none: it needs 6 trays and all NVLink cliques together have 4 usable"
    );
}

#[test]
fn trays_promised_to_a_starting_domain_are_not_free_for_another() {
    // Two domains that both fit only clique 1: the first one to start keeps its trays.
    let mut objs = rack("a", 1, 10);
    objs.extend(rack("b", 2, 4));
    objs.extend(domain(NS, "x", "uid-x"));
    objs.extend(domain(NS, "y", "uid-y"));
    for i in 0..8 {
        objs.push(cd_pod(NS, "x", &format!("x-{i}")));
    }
    for i in 0..6 {
        objs.push(cd_pod(NS, "y", &format!("y-{i}")));
    }
    objs[0] = objs[0].clone();
    let t = Twin::new(&objs);
    // x starts: one pod assumed in clique 1; 7 of its trays are promised.
    t.both(|c| c.assume(NS, "x-0", "a-00").unwrap());
    let d = t.decide(NS, "y-0");
    assert_eq!(d.status.code, Code::Unschedulable, "clique 1 has 9 free trays but 7 are promised to x");
    assert!(d.status.reason.contains("needs 6 free trays"), "{}", d.status.reason);
    // x keeps placing in clique 1.
    let d = t.decide(NS, "x-1");
    assert!(d.exclusive);
    assert_eq!(verdict(&d, "a-01", Some(&c(1))).0, Code::Success);
    // When x is deleted, y can start.
    t.both(|c| {
        for i in 0..8 {
            c.delete(Kind::Pod, NS, &format!("x-{i}"));
        }
    });
    assert_eq!(t.decide(NS, "y-0").status.code, Code::Success);
}

// ---------------------------------------------------------------- rule 7: best fit

#[test]
fn best_fit_prefers_the_clique_left_with_fewest_free_trays() {
    let mut objs = rack("a", 1, 10);
    objs.extend(rack("b", 2, 5));
    objs.extend(rack("c", 3, 5));
    objs.extend(domain(NS, "cd", "uid-cd"));
    for i in 0..4 {
        objs.push(cd_pod(NS, "cd", &format!("p{i}")));
    }
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p0");
    let a = verdict(&d, "a-00", Some(&c(1))).2.unwrap();
    let b = verdict(&d, "b-00", Some(&c(2))).2.unwrap();
    let cc = verdict(&d, "c-00", Some(&c(3))).2.unwrap();
    assert!(b > cc, "equal fit: ties broken by clique name ({b} vs {cc})");
    assert!(cc > a, "5 free trays fit 4 better than 10 ({cc} vs {a})");
    assert_eq!(b, 100);
}

#[test]
fn spare_trays_only_for_a_domain_sized_to_the_whole_clique() {
    let objs_for = |size: u32| {
        let mut objs = rack("a", 1, 18);
        objs.extend(domain(NS, "cd", "uid-cd"));
        objs.push(annotate(compute_domain(NS, "cd", "uid-cd"), "cdplace.nvidia.com/size", &size.to_string()));
        objs.push(cd_pod(NS, "cd", "p0"));
        objs
    };
    let args = r#"{"reserveTraysPerClique":2}"#;
    // The article: 16-tray jobs with 2 spare trays per 18-tray clique.
    assert_eq!(Twin::with_args(args, &objs_for(16)).decide(NS, "p0").status.code, Code::Success);
    let d = Twin::with_args(args, &objs_for(17)).decide(NS, "p0");
    assert_eq!(d.status.code, Code::UnschedulableAndUnresolvable);
    assert!(d.status.reason.contains("(reserveTraysPerClique keeps 2 spare in every clique)"), "{}", d.status.reason);
    assert_eq!(Twin::with_args(args, &objs_for(18)).decide(NS, "p0").status.code, Code::Success);
}

#[test]
fn a_started_domain_may_use_spare_trays_for_replacements() {
    let mut objs = rack("a", 1, 18);
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(annotate(compute_domain(NS, "cd", "uid-cd"), "cdplace.nvidia.com/size", "16"));
    for i in 0..15 {
        objs.push(bound(cd_pod(NS, "cd", &format!("p{i}")), &format!("a-{i:02}")));
    }
    // A failed tray was replaced: pod 15 needs a new home; only spare trays are left after it.
    objs.push(cd_pod(NS, "cd", "p15"));
    let t = Twin::with_args(r#"{"reserveTraysPerClique":2}"#, &objs);
    let d = t.decide(NS, "p15");
    assert_eq!(d.status.code, Code::Success);
    assert_eq!(verdict(&d, "a-17", Some(&c(1))).0, Code::Success);
}

// ---------------------------------------------------------------- preemption and reservation

#[test]
fn overlay_remove_and_add_pod_change_the_answer() {
    let mut objs = rack("a", 1, 3);
    objs.push(bound(pod("default", "batch", None, 4), "a-00"));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.extend(domain(NS, "other", "uid-other"));
    objs.push(annotate(compute_domain(NS, "cd", "uid-cd"), "cdplace.nvidia.com/size", "1"));
    objs.push(cd_pod(NS, "cd", "p"));
    objs.push(cd_pod(NS, "other", "o"));
    let t = Twin::new(&objs);
    let cl = c(1);
    assert_eq!(verdict(&t.decide(NS, "p"), "a-00", Some(&cl)).0, Code::Unschedulable);
    // RemovePod (preemption dry run): the batch pod's tray becomes free.
    let rm = [Overlay::RemovePod { namespace: "default".into(), name: "batch".into() }];
    assert_eq!(verdict(&t.decide_with(NS, "p", &rm), "a-00", Some(&cl)).0, Code::Success);
    // AddPod: a nominated pod of another domain takes a-01.
    let add = [Overlay::AddPod { namespace: NS.into(), name: "o".into(), node: "a-01".into() }];
    let d = t.decide_with(NS, "p", &add);
    assert!(verdict(&d, "a-01", Some(&cl)).1.starts_with("node is held by ComputeDomain team-a/other"));
    // The overlay was temporary.
    let d = t.decide(NS, "p");
    assert_eq!(verdict(&d, "a-00", Some(&cl)).0, Code::Unschedulable);
    assert_eq!(verdict(&d, "a-01", Some(&cl)).0, Code::Success);
}

#[test]
fn reserve_counts_at_once_and_unreserve_restores_capacity() {
    let mut objs = rack("a", 1, 2);
    objs.extend(domain(NS, "x", "uid-x"));
    objs.extend(domain(NS, "y", "uid-y"));
    objs.push(annotate(compute_domain(NS, "x", "uid-x"), "cdplace.nvidia.com/size", "1"));
    objs.push(annotate(compute_domain(NS, "y", "uid-y"), "cdplace.nvidia.com/size", "2"));
    objs.push(cd_pod(NS, "x", "x0"));
    objs.push(cd_pod(NS, "y", "y0"));
    let t = Twin::new(&objs);
    assert_eq!(t.decide(NS, "y0").status.code, Code::Success);
    t.both(|c| c.assume(NS, "x0", "a-00").unwrap());
    assert_eq!(t.decide(NS, "y0").status.code, Code::Unschedulable, "one tray left for a 2-pod domain");
    t.both(|c| c.forget(NS, "x0"));
    assert_eq!(t.decide(NS, "y0").status.code, Code::Success);
}

// ---------------------------------------------------------------- arguments and bad input

#[test]
fn unknown_or_bad_args_fail_with_exact_errors() {
    use cdplace_host::Cluster;
    for backend in backends() {
        let e = Cluster::new(backend.clone(), r#"{"wholeTrays":"Off"}"#).unwrap_err();
        assert!(
            e.to_string().starts_with("invalid plugin args: unknown field `wholeTrays`, expected one of `apiVersion`, `kind`, `imexMode`, `wholeTray`"),
            "{e}"
        );
        let e = Cluster::new(backend.clone(), r#"{"wholeTray":"Sometimes"}"#).unwrap_err();
        assert!(
            e.to_string().contains("unknown variant `Sometimes`, expected one of `Require`, `Prefer`, `Off`"),
            "{e}"
        );
        let e = Cluster::new(backend, r#"{"gpuDriver":"GPU.NVIDIA.COM"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: gpuDriver: Invalid value: \"GPU.NVIDIA.COM\": must be a lowercase DNS subdomain"
        );
    }
}

#[test]
fn a_custom_clique_label_is_honoured() {
    let objs = vec![
        label(node("n0", None, 4), "example.com/nvlink-partition", &c(7)),
        compute_domain(NS, "cd", "uid-cd"),
        channel_template(NS, "cd", "uid-cd"),
        cd_pod(NS, "cd", "p"),
    ];
    let t = Twin::with_args(r#"{"cliqueLabel":"example.com/nvlink-partition"}"#, &objs);
    let d = t.decide(NS, "p");
    assert_eq!(verdict(&d, "n0", Some(&c(7))).0, Code::Success);
}

#[test]
fn invalid_objects_are_named() {
    let t = Twin::new(&[]);
    let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "ns"}, "spec": 5});
    let e = t.native.apply(&bad).unwrap_err().to_string();
    assert!(e.starts_with("Pod ns/x: invalid type: integer `5`"), "{e}");
    let bad = annotate(cd_pod(NS, "cd", "p"), "cdplace.nvidia.com/size", "lots");
    let e = t.wasm.apply(&bad).unwrap_err().to_string();
    assert_eq!(e, "Pod team-a/p: annotation cdplace.nvidia.com/size=\"lots\" must be a positive integer");
    // Kinds cdplace does not read are ignored, not errors.
    assert!(!t.native.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})).unwrap());
}

#[test]
fn unknown_pod_is_an_error_not_a_verdict() {
    let t = Twin::new(&rack("a", 1, 1));
    let e = t.wasm.pre_filter(NS, "ghost", &[]).unwrap_err();
    assert_eq!(e.to_string(), "pod team-a/ghost is not in the cluster view");
}

#[test]
fn terminal_pods_release_their_trays() {
    let mut objs = rack("a", 1, 1);
    objs.extend(domain(NS, "x", "uid-x"));
    objs.extend(domain(NS, "y", "uid-y"));
    objs.push(bound(cd_pod(NS, "x", "x0"), "a-00"));
    objs.push(cd_pod(NS, "y", "y0"));
    let t = Twin::new(&objs);
    assert_eq!(t.decide(NS, "y0").status.code, Code::Unschedulable);
    let mut done = bound(cd_pod(NS, "x", "x0"), "a-00");
    done["status"]["phase"] = json!("Succeeded");
    t.apply(&[done]);
    assert_eq!(t.decide(NS, "y0").status.code, Code::Success);
}

// ---------------------------------------------------------------- rule 6: the domain's size and its source

#[test]
fn num_nodes_sizes_a_domain_of_bare_pods() {
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 6));
    objs.extend(domain(NS, "cd", "uid-cd"));
    let mut cd = compute_domain(NS, "cd", "uid-cd");
    cd["spec"]["numNodes"] = json!(6);
    objs.push(cd);
    // Created "now": without numNodes they would wait for the settle window.
    for i in 0..2 {
        let mut p = cd_pod(NS, "cd", &format!("p{i}"));
        p["metadata"]["creationTimestamp"] = json!("2999-01-01T00:00:00Z");
        objs.push(p);
    }
    let t = Twin::new(&objs);
    let d = t.decide(NS, "p0");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    assert_eq!(verdict(&d, "b-00", Some(&c(2))).0, Code::Success);
    assert_eq!(
        verdict(&d, "a-00", Some(&c(1))),
        (
            Code::Unschedulable,
            "NVLink clique has fewer than 6 trays free for ComputeDomain team-a/cd (size 6 from ComputeDomain team-a/cd spec.numNodes), after trays promised to starting domains and reserveTraysPerClique",
            None
        )
    );
    // A pod's own size annotation comes before numNodes.
    t.apply(&[annotate(cd_pod(NS, "cd", "p1"), "cdplace.nvidia.com/size", "7")]);
    // 7 is more than either clique holds: it spans both (segments, whole in each clique).
    let d = t.decide(NS, "p0");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    assert_eq!(verdict(&d, "a-00", Some(&c(1))).0, Code::Success);
    assert_eq!(verdict(&d, "b-00", Some(&c(2))).0, Code::Success);
}

#[test]
fn bare_pods_wait_for_the_settle_window() {
    let objs_created = |at: &str| {
        let mut objs = rack("a", 1, 4);
        objs.extend(domain(NS, "cd", "uid-cd"));
        for i in 0..3 {
            let mut p = cd_pod(NS, "cd", &format!("p{i}"));
            p["metadata"]["creationTimestamp"] = json!(at);
            objs.push(p);
        }
        objs
    };
    // Pods created after the host's clock (as good as just now): the set may still grow.
    let young = objs_created("2999-01-01T00:00:00Z");
    let d = Twin::new(&young).decide(NS, "p0");
    assert_eq!(d.status.code, Code::Unschedulable);
    assert_eq!(
        d.status.reason,
        "ComputeDomain team-a/cd has no declared size (no annotation, PodGroup, known owner or spec.numNodes): waiting 5s for its pods to stop arriving (3 seen so far)"
    );
    let d = Twin::with_args(r#"{"sizeSettleSeconds":30}"#, &young).decide(NS, "p0");
    assert!(d.status.reason.contains("waiting 30s for its pods to stop arriving"), "{}", d.status.reason);
    // Disabled, or pods long since created: the pods seen are the size.
    assert_eq!(Twin::with_args(r#"{"sizeSettleSeconds":0}"#, &young).decide(NS, "p0").status.code, Code::Success);
    assert_eq!(Twin::new(&objs_created("2020-01-01T00:00:00Z")).decide(NS, "p0").status.code, Code::Success);
}

#[test]
fn size_settle_seconds_is_validated_by_both_builds() {
    use cdplace_host::Cluster;
    for backend in backends() {
        let e = Cluster::new(backend, r#"{"sizeSettleSeconds":3600}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: sizeSettleSeconds: Invalid value: \"3600\": must be at most 600 (0 disables the settle window)"
        );
    }
}

/// The policy fed facts directly, natively and as the component, insisting they agree: pods'
/// owner keys and owners' sizes come from the scheduler's informers, not from objects the
/// host's `Cluster` reads.
struct Facts {
    native: cdplace_policy::View,
    wasm: cdplace_host::GuestInstance,
    ids: std::collections::BTreeMap<String, cdplace_policy::StrId>,
    pods: std::collections::BTreeMap<String, cdplace_policy::PodFact>,
}

impl Facts {
    fn new() -> Self {
        let mut wasm = runtime().instantiate(cdplace_host::Limits::default()).expect("instantiate");
        wasm.configure("").expect("configure");
        let mut f = Facts {
            native: cdplace_policy::View::new(cdplace_policy::Args::default()),
            wasm,
            ids: Default::default(),
            pods: Default::default(),
        };
        f.id("");
        f
    }

    fn apply(&mut self, d: cdplace_policy::Delta) {
        self.native.apply([d.clone()]).expect("native apply");
        self.wasm.apply(&[cdplace_host::wit::from_policy(&d)]).expect("wasm apply");
    }

    fn id(&mut self, s: &str) -> cdplace_policy::StrId {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.ids.len() as cdplace_policy::StrId;
        self.ids.insert(s.to_string(), id);
        self.apply(cdplace_policy::Delta::Strings(vec![(id, s.to_string())]));
        id
    }

    /// `trays` 4-GPU trays `<prefix>-00..` in clique `clique`, the first `held` bound to pods
    /// of ComputeDomain `<prefix>-holder`.
    fn rack(&mut self, prefix: &str, clique: u32, trays: u32, held: u32) {
        let label = self.id(&c(clique));
        for i in 0..trays {
            let name = self.id(&format!("{prefix}-{i:02}"));
            self.apply(cdplace_policy::Delta::UpsertNode(cdplace_policy::NodeFact {
                name,
                clique_label: Some(label),
                unschedulable: false,
                gpus: 4,
                domain_label: None,
            }));
        }
        let holder = format!("{prefix}-holder");
        self.domain(&holder);
        for i in 0..held {
            let node = self.id(&format!("{prefix}-{i:02}"));
            self.pod(&format!("{holder}-{i}"), &holder, |p| {
                p.placement = cdplace_policy::Placement::Bound;
                p.node = Some(node);
            });
        }
    }

    /// ComputeDomain `NS/name` (UID `uid-<name>`) with its channel template.
    fn domain(&mut self, name: &str) {
        let (ns, uid, tpl) = (self.id(NS), self.id(&format!("uid-{name}")), self.id(&format!("{name}-channel")));
        let name = self.id(name);
        self.apply(cdplace_policy::Delta::UpsertDomain(cdplace_policy::DomainFact {
            uid,
            namespace: ns,
            name,
            size_hint: None,
            num_nodes: None,
        }));
        self.apply(cdplace_policy::Delta::UpsertTemplate(cdplace_policy::TemplateFact {
            namespace: ns,
            name: tpl,
            domain: Some(uid),
            daemon: false,
            gpus: Default::default(),
        }));
    }

    /// A pending whole-tray pod `NS/name` of ComputeDomain `cd`, changed by `edit`.
    fn pod(&mut self, name: &str, cd: &str, edit: impl FnOnce(&mut cdplace_policy::PodFact)) {
        let key = format!("{NS}/{name}");
        let mut p = cdplace_policy::PodFact {
            key: self.id(&key),
            namespace: self.id(NS),
            placement: cdplace_policy::Placement::Pending,
            node: None,
            claims: vec![cdplace_policy::ClaimRef {
                name: self.id("channel"),
                template: Some(self.id(&format!("{cd}-channel"))),
                claim: None,
                generated: None,
            }],
            gpus: 4,
            size_hint: None,
            pod_group: None,
            owner: None,
            // Just created: only a declared size lets the domain start at once.
            created_ms: i64::MAX / 2,
            priority: 0,
            runtime_limit_ms: None,
            started_ms: 0,
        };
        edit(&mut p);
        self.pods.insert(key, p.clone());
        self.apply(cdplace_policy::Delta::UpsertPod(p));
    }

    /// Pods `<prefix>-0..n` of ComputeDomain `cd` owned by `owner`.
    fn owned_pods(&mut self, prefix: &str, n: u32, cd: &str, owner: &str) {
        let o = self.id(owner);
        for i in 0..n {
            self.pod(&format!("{prefix}-{i}"), cd, |p| p.owner = Some(o));
        }
    }

    fn bind(&mut self, pod: &str, node: &str) {
        let node = self.id(node);
        let mut p = self.pods[&format!("{NS}/{pod}")].clone();
        p.placement = cdplace_policy::Placement::Bound;
        p.node = Some(node);
        self.pods.insert(format!("{NS}/{pod}"), p.clone());
        self.apply(cdplace_policy::Delta::UpsertPod(p));
    }

    /// An owner's size as the informers read it (`Job/<ns>/<name>`, `Job <ns>/<name> spec.parallelism`).
    fn owner(&mut self, key: &str, size: u32, source: &str) {
        let (key, source) = (self.id(key), self.id(source));
        self.apply(cdplace_policy::Delta::UpsertOwner(cdplace_policy::OwnerFact { key, size, source, priority: None }));
    }

    /// PreFilter for `NS/pod` on both builds; they must agree exactly.
    fn decide(&mut self, pod: &str) -> cdplace_policy::PreFilterResult {
        let key = self.id(&format!("{NS}/{pod}"));
        let now = 1_700_000_000_000;
        let n = self.native.pre_filter(key, &[], now);
        let w = self.wasm.pre_filter(key, &[], now).expect("wasm pre_filter");
        assert_eq!(n, w, "native and wasm policies disagree for {pod}");
        self.native.assert_consistent();
        n
    }

    /// The pod-level code and reason.
    fn status(&mut self, pod: &str) -> (Code, String) {
        let r = self.decide(pod);
        (r.status.code, r.reason(r.status).to_string())
    }

    /// The cliques the pod may start in.
    fn allowed(&mut self, pod: &str) -> Vec<String> {
        let r = self.decide(pod);
        r.cliques
            .iter()
            .filter(|v| v.verdict.code == Code::Success)
            .map(|v| self.native.str(v.clique).to_string())
            .collect()
    }
}

#[test]
fn a_job_behind_a_ten_tray_domain_waits_for_its_size_then_starts_where_it_fits_whole() {
    // The issue's case: a Job with parallelism 12 after a 10-tray domain took most of clique 1;
    // the Job controller's slow start has created 4 pods so far.
    let mut f = Facts::new();
    f.rack("a", 1, 18, 10);
    f.rack("b", 2, 12, 0);
    f.domain("trainer");
    f.owned_pods("t", 4, "trainer", "Job/team-a/trainer");
    assert_eq!(
        f.status("t-0"),
        (
            Code::Unschedulable,
            "ComputeDomain team-a/trainer is waiting for Job team-a/trainer (the pods' owner) to tell the domain's size"
                .into()
        )
    );
    f.owner("Job/team-a/trainer", 12, "Job team-a/trainer spec.parallelism");
    assert_eq!(f.allowed("t-0"), [c(2)], "clique 1's 8 free trays cannot hold 12");
    // Scaled beyond any clique: the reason names the size and the Job.
    f.owner("Job/team-a/trainer", 13, "Job team-a/trainer spec.parallelism");
    assert_eq!(
        f.status("t-0"),
        (
            Code::Unschedulable,
            String::from(
                "ComputeDomain team-a/trainer needs 13 free trays in one NVLink clique (size 13 from Job team-a/trainer spec.parallelism); no clique has that many free now"
            )
        )
    );
}

#[test]
fn a_job_scaled_down_while_pending_starts_with_the_new_size() {
    let mut f = Facts::new();
    f.rack("a", 1, 18, 10);
    f.domain("trainer");
    f.owned_pods("t", 12, "trainer", "Job/team-a/trainer");
    f.owner("Job/team-a/trainer", 12, "Job team-a/trainer spec.parallelism");
    let (code, reason) = f.status("t-0");
    assert_eq!(code, Code::Unschedulable);
    assert!(reason.contains("(size 12 from Job team-a/trainer spec.parallelism)"), "{reason}");
    // `kubectl scale`: parallelism 8; the 4 pods beyond it are still being deleted.
    f.owner("Job/team-a/trainer", 8, "Job team-a/trainer spec.parallelism");
    assert_eq!(f.allowed("t-0"), [c(1)]);
    let uid = f.id("uid-trainer");
    let size = f.native.domain_size_source(uid).expect("known domain");
    assert_eq!((size.size, size.text.as_str()), (8, "size 8 from Job team-a/trainer spec.parallelism"));
}

#[test]
fn a_jobset_pair_of_jobs_counts_both_owners_and_later_pods_never_leave_the_clique() {
    let mut f = Facts::new();
    f.rack("a", 1, 18, 3);
    f.rack("b", 2, 18, 1);
    f.domain("js");
    f.owned_pods("leader", 1, "js", "Job/team-a/js-leader-0");
    f.owned_pods("worker", 3, "js", "Job/team-a/js-workers-0");
    f.owner("Job/team-a/js-leader-0", 1, "Job team-a/js-leader-0 spec.parallelism");
    f.owner("Job/team-a/js-workers-0", 16, "Job team-a/js-workers-0 spec.parallelism");
    // 17 pods: only clique 2 (17 free) holds them.
    assert_eq!(f.allowed("worker-0"), [c(2)]);
    f.bind("leader-0", "b-01");
    // The domain started; clique 2 loses its other trays: later pods wait there, never elsewhere.
    for i in 2..18 {
        let n = f.id(&format!("b-{i:02}"));
        f.apply(cdplace_policy::Delta::RemoveNode(n));
    }
    let (code, reason) = f.status("worker-0");
    assert_eq!(code, Code::Unschedulable);
    assert_eq!(
        reason,
        format!(
            "ComputeDomain team-a/js runs in NVLink clique {} and needs 16 more tray(s) there (size 17 from 2 owners: Job team-a/js-leader-0 spec.parallelism (1), Job team-a/js-workers-0 spec.parallelism (16)), but none is free; its pods never leave that clique",
            c(2)
        )
    );
}

// ---------------------------------------------------------------- plain-pod steering

/// A plain GPU pod is scored toward unlabelled nodes, then the broken clique, then the intact
/// one; it may not take the last free tray promised to a starting domain, but may share a tray
/// already in use there.
#[test]
fn plain_pods_are_steered_off_intact_cliques_and_promised_trays() {
    let mut objs = rack("a", 1, 4); // intact
    objs.extend(rack("b", 2, 4)); // a domain of 3 started here: 2 bound
    objs.push(node("cpu-0", None, 0));
    objs.extend(domain(NS, "cd", "uid-cd"));
    for i in 0..3 {
        let p = annotate(cd_pod(NS, "cd", &format!("w{i}")), "cdplace.nvidia.com/size", "3");
        objs.push(if i < 2 { bound(p, &format!("b-{i:02}")) } else { p });
    }
    objs.push(bound(pod(NS, "half", None, 2), "b-02"));
    objs.extend(rack("c", 3, 4)); // broken by a plain pod, nothing promised
    objs.push(bound(pod(NS, "plain-c", None, 4), "c-00"));
    let t = Twin::new(&objs);
    let d = t.steer(true);
    assert_eq!(d.status.code, Code::Success);
    // Only where one more plain pod changes nothing but that clique's score: not the intact
    // clique (it would break), not the one with promised trays (it may close).
    assert_eq!(d.stable, std::collections::BTreeSet::from([c(3)]), "stable cliques, packed included");
    assert_eq!(d.node_set, None, "steering never restricts the node set");
    let (code, _, unlabelled) = verdict(&d, "cpu-0", None);
    assert_eq!((code, unlabelled), (Code::Success, Some(100)));
    let (code, _, intact) = verdict(&d, "a-00", Some(&c(1)));
    assert_eq!((code, intact), (Code::Success, Some(10)));
    // b-03, the only free tray of clique 2, is promised to cd's last pod.
    let (code, reason, _) = verdict(&d, "b-03", Some(&c(2)));
    assert_eq!(code, Code::Unschedulable);
    assert_eq!(
        reason,
        format!(
            "the 1 free tray(s) of NVLink clique {} are promised to ComputeDomain {NS}/cd (1 more pod(s)) starting there; a pod without a ComputeDomain may use a tray already in use there, or another clique",
            c(2)
        )
    );
    let (code, _, shared) = verdict(&d, "b-02", Some(&c(2)));
    assert_eq!(code, Code::Success, "the tray a plain pod already uses stays open");
    assert!(shared > intact && unlabelled > shared, "{unlabelled:?} > {shared:?} > {intact:?}");
    // A CPU pod is scored the same way, never rejected.
    let cpu = t.steer(false);
    assert_eq!(verdict(&cpu, "b-03", Some(&c(2))).0, Code::Success);
    // Off: skipped.
    let off = Twin::with_args(r#"{"plainPodSteering": false}"#, &objs);
    assert_eq!(off.steer(true).status.code, Code::Skip);
}

// ---------------------------------------------------------------- gang preemption

/// The issue's scenario on two cliques: a high-priority domain of 4 gets clique 1 by evicting
/// the whole lower-priority domain there (the youngest-equal rules are native tests); wasm and
/// native agree, and preemption changes neither view.
#[test]
fn gang_preemption_evicts_a_whole_lower_priority_domain_on_both_builds() {
    let prio = |mut p: serde_json::Value, v: i64| {
        p["spec"]["priority"] = json!(v);
        p
    };
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    for (cd, size, priority, rk) in [("low", 3, 1, Some("a")), ("mid", 3, 5, Some("b")), ("high", 4, 100, None)] {
        let mut d = domain(NS, cd, &format!("uid-{cd}"));
        d[0] = annotate(d[0].clone(), "cdplace.nvidia.com/size", &size.to_string());
        objs.extend(d);
        for i in 0..size {
            let p = prio(cd_pod(NS, cd, &format!("{cd}-{i}")), priority);
            objs.push(match rk {
                Some(r) => bound(p, &format!("{r}-{i:02}")),
                None => p,
            });
        }
    }
    let t = Twin::new(&objs);
    let before = t.decide(NS, "high-0");
    let pr = t.preempt(NS, "high-0");
    let plan = pr.plan.as_ref().unwrap_or_else(|| panic!("a plan: {}", pr.reason));
    assert_eq!(plan.clique, c(1), "priority 1 rather than 5");
    assert_eq!(plan.domains, ["uid-low"]);
    assert_eq!(plan.pods, [format!("{NS}/low-0"), format!("{NS}/low-1"), format!("{NS}/low-2")]);
    assert_eq!((plan.gpus, plan.priority, plan.node.as_str()), (12, 1, "a-03"));
    assert_eq!(t.decide(NS, "high-0"), before, "preempt changes nothing");
    let huge = t.preempt(NS, "mid-0");
    assert!(huge.plan.is_none() && huge.reason.contains("already has NVLink clique"), "{}", huge.reason);
}
