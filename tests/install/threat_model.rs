//! docs/threat-model.md: every way around winadmit it lists names the test
//! that proves its control, and that test exists. A row whose test is
//! missing, renamed or deleted fails here, so the page cannot drift from
//! the suite.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One row of a table on the page: its line and its cells.
struct Row {
    line: usize,
    cells: Vec<String>,
}

/// The body rows of every Markdown table on the page (the header row and
/// the `|---|` line of each table left out).
fn table_rows(page: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_table = false;
    let mut header_seen = false;
    for (i, line) in page.lines().enumerate() {
        let t = line.trim();
        if !t.starts_with('|') {
            in_table = false;
            header_seen = false;
            continue;
        }
        let cells: Vec<String> = t
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_owned())
            .collect();
        if !in_table {
            in_table = true;
            continue; // the header row
        }
        if !header_seen && t.chars().all(|ch| "|-: ".contains(ch)) {
            header_seen = true;
            continue;
        }
        rows.push(Row { line: i + 1, cells });
    }
    rows
}

/// The tests a cell names: each `` `path/to/file.rs::function` ``.
fn named_tests(cell: &str) -> Vec<(String, String)> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| {
            let (path, function) = code.rsplit_once("::")?;
            Path::new(path)
                .extension()
                .is_some_and(|e| e == "rs")
                .then(|| (path.to_owned(), function.to_owned()))
        })
        .collect()
}

/// Does `source` define a function `name` (a test, or the unit test in a
/// module)?
fn defines(source: &str, name: &str) -> bool {
    source.match_indices(&format!("fn {name}")).any(|(at, m)| {
        source[at + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c == '(' || c == '<')
    })
}

#[test]
fn every_row_names_a_test_that_exists() {
    let page_path = root().join("docs/threat-model.md");
    let page = std::fs::read_to_string(&page_path).expect("docs/threat-model.md");
    let rows = table_rows(&page);
    assert!(rows.len() >= 20, "only {} rows found", rows.len());
    let mut problems = Vec::new();
    for row in &rows {
        let Some(last) = row.cells.last() else {
            continue;
        };
        let tests = named_tests(last);
        if tests.is_empty() {
            problems.push(format!(
                "docs/threat-model.md:{}: no test named in the last column (`tests/FILE.rs::function`)",
                row.line
            ));
        }
        for (path, function) in tests {
            match std::fs::read_to_string(root().join(&path)) {
                Ok(source) if defines(&source, &function) => {}
                Ok(_) => problems.push(format!(
                    "docs/threat-model.md:{}: {path} has no fn {function}",
                    row.line
                )),
                Err(e) => problems.push(format!(
                    "docs/threat-model.md:{}: cannot read {path}: {e}",
                    row.line
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checker itself: a row naming a function that does not exist, or
/// no test at all, is caught.
#[test]
fn a_row_with_a_missing_test_is_caught() {
    let page = "| Way around | Control | Test |\n|---|---|---|\n| a | b | `tests/install/threat_model.rs::no_such_function` |\n| c | d | none |\n";
    let rows = table_rows(page);
    assert_eq!(rows.len(), 2);
    let named = named_tests(rows[0].cells.last().unwrap());
    assert_eq!(
        named,
        [(
            "tests/install/threat_model.rs".to_owned(),
            "no_such_function".to_owned()
        )]
    );
    let source = std::fs::read_to_string(root().join("tests/install/threat_model.rs")).unwrap();
    assert!(!defines(&source, "no_such_function"));
    assert!(defines(&source, "a_row_with_a_missing_test_is_caught"));
    assert!(named_tests(rows[1].cells.last().unwrap()).is_empty());
}

#[test]
fn the_hardening_page_points_to_it() {
    let hardening = std::fs::read_to_string(root().join("docs/hardening.md")).unwrap();
    assert!(hardening.contains("(threat-model.md)"), "docs/hardening.md");
}
