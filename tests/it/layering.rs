//! The data flow of `src/lib.rs`'s module list, held: each top-level module imports only the
//! modules listed above it there, and the helpers listed after `logging`.

use std::path::Path;

/// `src/lib.rs`'s list, in its order; the helpers import nothing of the crate.
const FLOW: [&str; 8] = ["api", "snapshot", "poller", "exposition", "web", "config", "app", "logging"];
const HELPERS: [&str; 3] = ["duration", "files", "version"];

/// Every `crate::<module>` named in the files of `module` (a folder, or one file).
fn imports_of(module: &str) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let folder = src.join(module);
    let files = if folder.is_dir() { files_under(&folder) } else { vec![src.join(format!("{module}.rs"))] };
    let mut imports: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            text.split("crate::")
                .skip(1)
                .map(|rest| rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect::<String>())
                .collect::<Vec<_>>()
        })
        .filter(|name| name != module)
        .collect();
    imports.sort();
    imports.dedup();
    imports
}

fn files_under(folder: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn each_module_imports_only_those_before_it_in_the_flow() {
    for (position, module) in FLOW.iter().enumerate() {
        let allowed: Vec<&str> = FLOW[..position].iter().chain(&HELPERS).copied().collect();
        let wrong: Vec<String> =
            imports_of(module).into_iter().filter(|name| !allowed.contains(&name.as_str())).collect();
        assert!(wrong.is_empty(), "src/{module} imports {wrong:?}, which come after it in src/lib.rs's list");
    }
    for helper in HELPERS {
        assert_eq!(imports_of(helper), Vec::<String>::new(), "the helper src/{helper} imports the crate");
    }
}

#[test]
fn the_list_names_every_module_of_the_crate() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let declared: Vec<&str> = lib.lines().filter_map(|line| line.strip_prefix("pub mod ")?.strip_suffix(';')).collect();
    let mut listed: Vec<&str> = FLOW.iter().chain(&HELPERS).copied().collect();
    listed.sort_unstable();
    assert_eq!(declared, listed);
    for module in listed {
        assert!(lib.contains(&format!("//! - [`{module}`]: ")), "src/lib.rs's list leaves out {module}");
    }
}
