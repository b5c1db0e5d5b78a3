//! Modules in layers: in the host library and in the policy crate no module imports (`crate::x`,
//! outside comments and test modules) one that imports it, directly or through others.
//! docs/dev/internals.md says so; this keeps it true.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module of the crate at `src` (a `x.rs` file or an `x/` directory) and the
/// crate's modules it names as `crate::y`.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            let inner = std::fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"));
            files.entry(name).or_default().extend(inner);
        } else if p.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main" {
            files.entry(name).or_default().push(p);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut deps = BTreeMap::new();
    for (m, paths) in &files {
        let mut d = BTreeSet::new();
        for p in paths {
            let text = std::fs::read_to_string(p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                    if name != *m && modules.contains(&name) {
                        d.insert(name);
                    }
                }
            }
        }
        deps.insert(m.clone(), d);
    }
    deps
}

/// A cycle among the modules, if there is one.
fn cycle(deps: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit<'a>(
        m: &'a str,
        deps: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == m) {
            return Some(path[at..].iter().map(|s| s.to_string()).chain([m.to_string()]).collect());
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for d in &deps[m] {
            if let Some(c) = visit(d, deps, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    deps.keys().find_map(|m| visit(m, deps, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in [root.join("src"), root.join("../../guest/policy/src")] {
        let deps = imports(&src);
        assert!(deps.len() > 10, "{}: read {} modules", src.display(), deps.len());
        if let Some(c) = cycle(&deps) {
            panic!("{}: modules import each other: {}", src.display(), c.join(" -> "));
        }
    }
}

#[test]
fn a_cycle_is_found() {
    let deps: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec![])]
            .into_iter()
            .map(|(m, d)| (m.to_string(), d.into_iter().map(str::to_string).collect()))
            .collect();
    assert_eq!(cycle(&deps).unwrap(), ["a", "b", "c", "a"]);
    let acyclic: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec![])]
        .into_iter()
        .map(|(m, d)| (m.to_string(), d.into_iter().map(str::to_string).collect()))
        .collect();
    assert_eq!(cycle(&acyclic), None);
}
