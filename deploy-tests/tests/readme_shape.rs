//! The repository's front door stays what it promises: README.md at most 10 KB, every
//! relative link in it and in `docs/` names a file that exists, and the licence the
//! manifests name is there.

use std::path::Path;

use deploy_tests::root;

/// The README's size limit.
const README_LIMIT: usize = 10 * 1024;

/// The relative link targets of a Markdown text: `](target)` without a scheme or an
/// in-page anchor, the `#fragment` cut off.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        rest = &rest[end..];
        if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
            continue;
        }
        let path = target.split('#').next().unwrap_or_default().trim();
        if !path.is_empty() {
            out.push(path.to_owned());
        }
    }
    out
}

fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("a Markdown file");
    let dir = file.parent().expect("a directory");
    relative_links(&text)
        .into_iter()
        .filter(|l| !dir.join(l).exists())
        .map(|l| format!("{}: {l}", file.display()))
        .collect()
}

#[test]
fn the_readme_is_short_and_its_links_hold() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(
        readme.len() <= README_LIMIT,
        "README.md is {} bytes; keep it under {README_LIMIT} and move detail to docs/",
        readme.len()
    );
    let mut broken = broken_links(&root.join("README.md"));
    let mut pages = vec![root.join("docs")];
    while let Some(dir) = pages.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pages.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                broken.extend(broken_links(&path));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to missing files:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_licence_the_manifests_name_is_there() {
    let root = root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(manifest.contains("license = \"Apache-2.0\""));
    let licence = std::fs::read_to_string(root.join("LICENSE")).expect("LICENSE");
    assert!(licence.contains("Apache License") && licence.contains("Version 2.0"));
}

#[test]
fn links_are_found() {
    let links = relative_links("see [a](docs/a.md#x), [b](https://x.y/z), [c](#top), [d](../d.md)");
    assert_eq!(links, ["docs/a.md", "../d.md"]);
}
