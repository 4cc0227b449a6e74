//! docs/performance.md and README.md's headline table are rendered from the results kept in
//! bench/results/: one folder per card (`seismic-bench`'s `results.json` as written, and the run's
//! `run.json`: card, setting, command, end-to-end runs, comparisons with other codes) and
//! `tables.json` (the other measured tables). This test renders every block between
//! `<!-- generated:NAME -->` and `<!-- end generated:NAME -->` and fails when a page differs from
//! its results; `SEISMIC_BLESS=1` rewrites the blocks instead.

use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The card folders under bench/results, in the order the pages list them.
const CARDS: &[&str] = &["h200", "h100"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(v: &Value, key: &str) -> String {
    match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => panic!("missing key `{key}` in {v}"),
        other => other.to_string(),
    }
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("`{key}` is not a number in {v}"))
}

fn shape(v: &Value) -> String {
    let dims: Vec<String> = v.as_array().expect("a shape").iter().map(|d| d.to_string()).collect();
    dims.join(" x ")
}

fn operator(name: &str) -> &str {
    match name {
        "fused-step" => "fused step (interior only)",
        "real-step" => "real step",
        "laplacian-only" => "Laplacian-only",
        "three-pass" => "three-pass step (interior only)",
        "fused-f16" => "f16 fused step (interior only)",
        "real-step-f16" => "f16 real step",
        other => other,
    }
}

fn ceiling(name: &str) -> &str {
    match name {
        "three-read-one-write" => "3R1W",
        other => other,
    }
}

struct Card {
    folder: &'static str,
    bench: Value,
    run: Value,
}

fn cards() -> Vec<Card> {
    CARDS
        .iter()
        .map(|folder| {
            let dir = root().join("bench/results").join(folder);
            Card { folder, bench: read_json(&dir.join("results.json")), run: read_json(&dir.join("run.json")) }
        })
        .collect()
}

fn table(out: &mut String, columns: &[String], rows: &[Vec<String>]) {
    writeln!(out, "| {} |", columns.join(" | ")).unwrap();
    writeln!(out, "|{}", "---|".repeat(columns.len())).unwrap();
    for row in rows {
        assert_eq!(row.len(), columns.len(), "a row of {} cells under {} columns: {row:?}", row.len(), columns.len());
        writeln!(out, "| {} |", row.join(" | ")).unwrap();
    }
}

fn render_card(out: &mut String, card: &Card) {
    let (b, r) = (&card.bench, &card.run);
    let c = &b["ceilings"];
    writeln!(out, "### {}\n", text(r, "card")).unwrap();
    writeln!(
        out,
        "Measured {} ({}). Same-run ceilings ({} MiB arrays, median of {}): copy **{:.0} GB/s**, \
         3-read-1-write **{:.0} GB/s**. Command:\n",
        text(b, "date"),
        text(r, "setting"),
        num(c, "array_bytes") / 1048576.0,
        c["repetitions"],
        num(c, "copy_gbs"),
        num(c, "three_read_one_write_gbs"),
    )
    .unwrap();
    writeln!(out, "    {}\n", text(r, "command")).unwrap();
    let columns = ["grid", "R", "operator", "ms a step", "GB/s", "GPts/s", "of the ceiling"].map(String::from);
    let rows: Vec<Vec<String>> = b["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            vec![
                shape(&row["shape"]),
                row["radius"].to_string(),
                operator(&text(row, "operator")).to_string(),
                format!("{:.3}", num(row, "seconds") * 1e3),
                format!("{:.0}", num(row, "gbs")),
                format!("{:.1}", num(row, "gpts")),
                format!("{:.1}% of {}", num(row, "percent"), ceiling(&text(row, "ceiling"))),
            ]
        })
        .collect();
    table(out, &columns, &rows);
    let dir = format!("../bench/results/{}", card.folder);
    writeln!(
        out,
        "\nPlots: [against grid size]({dir}/vs-size.png), [against radius]({dir}/vs-radius.png); \
         raw results: [results.json]({dir}/results.json).\n"
    )
    .unwrap();
    let e2e = &r["end_to_end"];
    writeln!(out, "End to end (`{}`):\n", text(e2e, "command")).unwrap();
    let columns = ["input", "problem", "in steps", "whole process"].map(String::from);
    let rows: Vec<Vec<String>> = e2e["runs"]
        .as_array()
        .expect("end_to_end.runs")
        .iter()
        .map(|run| {
            vec![
                format!("`{}`", text(run, "input")),
                text(run, "problem"),
                format!("{} s", text(run, "steps_s")),
                format!("{} s", text(run, "process_s")),
            ]
        })
        .collect();
    table(out, &columns, &rows);
    let note = text(e2e, "note");
    if !note.is_empty() {
        writeln!(out, "\n{note}").unwrap();
    }
    let peers = r["peers"].as_array().expect("peers");
    if !peers.is_empty() {
        writeln!(out, "\nAgainst other codes, on the same card in the same call:\n").unwrap();
        let columns = ["code", "problem", "theirs", "seismic-run", "ratio"].map(String::from);
        let rows: Vec<Vec<String>> = peers
            .iter()
            .map(|p| {
                vec![
                    text(p, "name"),
                    format!("{} (`{}`)", text(p, "problem"), text(p, "input")),
                    format!("{} GPts/s ({} s)", text(p, "peer_gpts"), text(p, "peer_s")),
                    format!("{} GPts/s ({} s)", text(p, "ours_gpts"), text(p, "ours_s")),
                    format!("**{:.2}x**", num(p, "ratio")),
                ]
            })
            .collect();
        table(out, &columns, &rows);
    }
    writeln!(out).unwrap();
}

fn render_cards() -> String {
    let mut out = String::new();
    for card in cards() {
        render_card(&mut out, &card);
    }
    out
}

fn render_tables() -> String {
    let tables = read_json(&root().join("bench/results/tables.json"));
    let mut out = String::new();
    let mut section = String::new();
    for t in tables.as_array().expect("a list of tables") {
        let s = text(t, "section");
        if s != section {
            writeln!(out, "## {s}\n").unwrap();
            section = s;
        }
        writeln!(out, "### {}\n", text(t, "title")).unwrap();
        writeln!(out, "Measured {} ({}). Command: `{}`\n", text(t, "date"), text(t, "setting"), text(t, "command"))
            .unwrap();
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().expect("a list").iter().map(|c| c.as_str().expect("a string").to_string()).collect()
        };
        let columns = strings(&t["columns"]);
        let rows: Vec<Vec<String>> = t["rows"].as_array().expect("rows").iter().map(strings).collect();
        table(&mut out, &columns, &rows);
        let note = text(t, "note");
        if !note.is_empty() {
            writeln!(out, "\n{note}").unwrap();
        }
        writeln!(out).unwrap();
    }
    out
}

/// README's table: per card, marmousi.toml end to end, the real step at 1024^3, R = 4, and the
/// comparisons with other codes.
fn render_headline() -> String {
    let cards = cards();
    let short = |p: &Value| text(p, "name").split(" (").next().unwrap_or_default().to_string();
    let mut peers: Vec<String> =
        cards.iter().flat_map(|c| c.run["peers"].as_array().expect("peers").iter().map(short)).collect();
    peers.dedup();
    let against =
        if peers.is_empty() { "against other codes".to_string() } else { format!("against {}", peers.join(", ")) };
    let columns = ["card", "problem", "time", "of the bound", against.as_str()].map(String::from);
    let mut rows = Vec::new();
    for card in cards {
        let name = text(&card.run, "card");
        for run in card.run["end_to_end"]["runs"].as_array().expect("runs") {
            if text(run, "input") == "inputs/marmousi.toml" {
                rows.push(vec![
                    name.clone(),
                    format!("`inputs/marmousi.toml`: {}", text(run, "problem")),
                    format!("{} s in steps", text(run, "steps_s")),
                    String::new(),
                    String::new(),
                ]);
            }
        }
        let real = card.bench["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| {
                text(r, "operator") == "real-step" && r["radius"] == 4 && shape(&r["shape"]) == "1024 x 1024 x 1024"
            })
            .unwrap_or_else(|| panic!("{}: no real step at 1024^3, R = 4", card.folder));
        rows.push(vec![
            name.clone(),
            "real step, 1024^3, R = 4, CPML 20 on every face".to_string(),
            format!("{:.3} ms a step", num(real, "seconds") * 1e3),
            format!("{:.1}%", num(real, "percent")),
            String::new(),
        ]);
        for p in card.run["peers"].as_array().expect("peers") {
            rows.push(vec![
                name.clone(),
                text(p, "problem"),
                format!("{} GPts/s", text(p, "ours_gpts")),
                String::new(),
                format!("{:.2}x ({} GPts/s)", num(p, "ratio"), text(p, "peer_gpts")),
            ]);
        }
    }
    let mut out = String::new();
    table(&mut out, &columns, &rows);
    out
}

/// `page` with the block NAME replaced by `body`; Err names what is missing.
fn with_block(page: &str, name: &str, body: &str) -> Result<String, String> {
    let open = format!("<!-- generated:{name}");
    let close = format!("<!-- end generated:{name} -->");
    let start = page.find(&open).ok_or(format!("no `{open}` marker"))?;
    let start = start + page[start..].find("-->\n").ok_or(format!("`{open}` marker not closed"))? + 4;
    let end = page[start..].find(&close).ok_or(format!("no `{close}` marker"))? + start;
    Ok(format!("{}{}{}", &page[..start], body, &page[end..]))
}

fn check(path: &str, blocks: &[(&str, String)]) {
    let file = root().join(path);
    let page = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut want = page.clone();
    for (name, body) in blocks {
        want = with_block(&want, name, body).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    if want == page {
        return;
    }
    if std::env::var_os("SEISMIC_BLESS").is_some() {
        std::fs::write(&file, want).unwrap_or_else(|e| panic!("{path}: {e}"));
        return;
    }
    let diff = page.lines().zip(want.lines()).position(|(a, b)| a != b).map_or_else(
        || "lengths differ".to_string(),
        |i| {
            format!(
                "first difference at line {}:\n  page:   {}\n  wanted: {}",
                i + 1,
                page.lines().nth(i).unwrap_or(""),
                want.lines().nth(i).unwrap_or("")
            )
        },
    );
    panic!(
        "{path} is stale against bench/results ({diff}); run `SEISMIC_BLESS=1 cargo test --release --test performance_page`"
    );
}

#[test]
fn performance_page_matches_bench_results() {
    check("docs/performance.md", &[("cards", render_cards()), ("tables", render_tables())]);
}

#[test]
fn readme_headline_matches_bench_results() {
    check("README.md", &[("headline", render_headline())]);
}

#[test]
fn a_stale_block_is_found() {
    let page = "a\n<!-- generated:x -->\nold\n<!-- end generated:x -->\nb\n";
    assert_eq!(with_block(page, "x", "new\n").unwrap(), "a\n<!-- generated:x -->\nnew\n<!-- end generated:x -->\nb\n");
    assert!(with_block(page, "y", "new\n").is_err());
}
