//! docs/configuration.md against the parser: every key `Config` accepts is documented, nothing
//! documented is unknown to it, every documented key has a default cell, and every default given
//! as a TOML literal is what the parser takes when the key is absent.
//!
//! The accepted keys come from the config types themselves: a serde `Deserializer` that answers
//! every request with a placeholder value and records the field names each struct declares
//! (`deserialize_struct`'s `fields`), recursing into each field under its dotted path. A field whose
//! placeholder value is refused (a model table with every kind's keys at once, say) is skipped on
//! the next walk, so one refusal does not hide its siblings.

use seismic_run::config::Config;
use serde::de::value::{Error, StrDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, Visitor};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Default)]
struct Walk {
    /// Every dotted key a struct declared.
    keys: BTreeSet<String>,
    /// Keys whose value is itself a table (or a list of tables).
    tables: BTreeSet<String>,
    /// Keys whose placeholder value was refused: not offered again.
    refused: BTreeSet<String>,
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_string() } else { format!("{path}.{field}") }
}

struct Probe<'w> {
    walk: &'w RefCell<Walk>,
    path: String,
}

/// Placeholder elements of a list: three, so that fixed-size `[x, y, z]` arrays are accepted.
struct Elements<'w> {
    walk: &'w RefCell<Walk>,
    path: String,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Elements<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(Probe { walk: self.walk, path: self.path.clone() }).map(Some)
    }
}

/// A table offering each declared field that has not been refused.
struct Fields<'w> {
    walk: &'w RefCell<Walk>,
    path: String,
    fields: Vec<&'static str>,
    next: usize,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        match self.fields.get(self.next) {
            None => Ok(None),
            Some(field) => {
                let key: StrDeserializer<'_, Error> = field.into_deserializer();
                seed.deserialize(key).map(Some)
            }
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let path = join(&self.path, self.fields[self.next]);
        self.next += 1;
        let value = seed.deserialize(Probe { walk: self.walk, path: path.clone() });
        if value.is_err() {
            self.walk.borrow_mut().refused.insert(path);
        }
        value
    }
}

/// An enum: its first variant, as a unit or holding a placeholder.
struct FirstVariant<'w> {
    probe: Probe<'w>,
    name: &'static str,
}

impl<'de, 'w> de::EnumAccess<'de> for FirstVariant<'w> {
    type Error = Error;
    type Variant = Probe<'w>;
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Probe<'w>), Error> {
        let name: StrDeserializer<'_, Error> = self.name.into_deserializer();
        Ok((seed.deserialize(name)?, self.probe))
    }
}

impl<'de> de::VariantAccess<'de> for Probe<'_> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }
    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }
    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Result<V::Value, Error> {
        self.deserialize_struct("", fields, visitor)
    }
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(true)
    }
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(false)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(1)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(1)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(1)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(1)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(1)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(1.0)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(1.0)
    }
    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_char('x')
    }
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("x")
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("x")
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bytes(b"x")
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bytes(b"x")
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { walk: self.walk, path: self.path, left: 3 })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { walk: self.walk, path: self.path, left: len })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(Fields { walk: self.walk, path: self.path, fields: Vec::new(), next: 0 })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let offered = {
            let mut walk = self.walk.borrow_mut();
            for field in fields {
                walk.keys.insert(join(&self.path, field));
            }
            if !self.path.is_empty() {
                walk.tables.insert(self.path.clone());
            }
            fields.iter().copied().filter(|f| !walk.refused.contains(&join(&self.path, f))).collect()
        };
        visitor.visit_map(Fields { walk: self.walk, path: self.path, fields: offered, next: 0 })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let name = variants.first().copied().unwrap_or("");
        visitor.visit_enum(FirstVariant { probe: self, name })
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str("x")
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// Every key `T` accepts (dotted, lists of tables by their own name), and those that are tables.
fn accepted_keys<T: for<'de> serde::Deserialize<'de>>() -> (BTreeSet<String>, BTreeSet<String>) {
    let walk = RefCell::new(Walk::default());
    loop {
        let refused = walk.borrow().refused.len();
        let _ = T::deserialize(Probe { walk: &walk, path: String::new() });
        if walk.borrow().refused.len() == refused {
            break;
        }
    }
    let walk = walk.into_inner();
    (walk.keys, walk.tables)
}

/// One documented key: its dotted name, its default cell and its line in the page.
struct Row {
    key: String,
    default: String,
    line: usize,
}

const PAGE: &str = "docs/configuration.md";

/// The rows of every `key | default | meaning` table under a `` ## `[section]` `` heading.
fn documented(page: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut section: Option<String> = None;
    let mut in_key_table = false;
    for (i, line) in page.lines().enumerate() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading
                .strip_prefix('`')
                .and_then(|h| h.strip_suffix('`'))
                .map(|h| h.trim_matches(['[', ']']).to_string());
            in_key_table = false;
            continue;
        }
        if !line.starts_with('|') {
            in_key_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if cells.first() == Some(&"key") {
            in_key_table = cells.get(1) == Some(&"default");
            assert!(in_key_table || section.is_none(), "{PAGE}:{}: a key table needs a default column", i + 1);
            continue;
        }
        let (Some(section), true) = (&section, in_key_table) else { continue };
        if cells[0].starts_with("---") {
            continue;
        }
        let key = cells[0].strip_prefix('`').and_then(|k| k.strip_suffix('`'));
        let key = key.unwrap_or_else(|| panic!("{PAGE}:{}: the key cell `{}` is not in backticks", i + 1, cells[0]));
        rows.push(Row { key: join(section, key), default: cells.get(1).unwrap_or(&"").to_string(), line: i + 1 });
    }
    rows
}

fn page() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(PAGE);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_accepted_key_is_documented_and_every_documented_key_accepted() {
    let (keys, tables) = accepted_keys::<Config>();
    let rows = documented(&page());
    let documented: BTreeSet<String> = rows.iter().map(|r| r.key.clone()).collect();
    let undocumented: Vec<&String> = keys.iter().filter(|k| !tables.contains(*k) && !documented.contains(*k)).collect();
    let unknown: Vec<String> =
        rows.iter().filter(|r| !keys.contains(&r.key)).map(|r| format!("{} (line {})", r.key, r.line)).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "{PAGE} is out of step with the config types.\n  accepted by the parser, not documented: {undocumented:?}\n  \
         documented, unknown to the parser: {unknown:?}"
    );
    let mut seen = BTreeSet::new();
    for r in &rows {
        assert!(seen.insert(&r.key), "{PAGE}:{}: `{}` documented twice", r.line, r.key);
        assert!(!r.default.is_empty(), "{PAGE}:{}: `{}` has an empty default cell", r.line, r.key);
    }
}

/// Minimal inputs that together give every optional key a place: one for each model kind that has
/// optional keys, and one with receivers and shots laid out as grids.
const INPUTS: &[&str] = &[
    r#"
[grid]
shape = [10, 10, 10]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "constant"
vp = 2000.0
[time]
steps = 10
[source]
position = [50.0, 50.0, 50.0]
frequency = 10.0
[[receivers]]
position = [40.0, 40.0, 40.0]
"#,
    r#"
[grid]
shape = [10, 10, 10]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "constant"
vp = 2000.0
[time]
steps = 10
[source]
position = [50.0, 50.0, 50.0]
frequency = 10.0
[[receivers]]
grid = { origin = [20.0, 20.0, 20.0], step_a = [10.0, 0.0, 0.0], count_a = 2, step_b = [0.0, 10.0, 0.0], count_b = 2 }
[survey]
grid = { origin = [30.0, 30.0, 30.0], step_a = [10.0, 0.0, 0.0], count_a = 2, step_b = [0.0, 10.0, 0.0], count_b = 2 }
"#,
    r#"
[grid]
shape = [10, 10, 10]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "file"
path = "vp.bin"
shape = [10, 10, 10]
spacing = [10.0, 10.0, 10.0]
[time]
steps = 10
[source]
position = [50.0, 50.0, 50.0]
frequency = 10.0
"#,
    r#"
[grid]
shape = [10, 10, 10]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "marmousi"
[time]
steps = 10
[source]
position = [50.0, 50.0, 50.0]
frequency = 10.0
"#,
    r#"
[grid]
shape = [10, 10, 10]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "constant"
vp = 2000.0
[time]
steps = 10
[source]
position = [50.0, 50.0, 50.0]
frequency = 10.0
[[receivers]]
position = [40.0, 40.0, 40.0]
[imaging]
true_model = { kind = "constant", vp = 2500.0 }
"#,
];

/// `doc` with `value` set at the dotted `key` (in every entry of a list of tables); None where the
/// input has no table to hold it. A missing section is created only with `create_section`; inline
/// tables never are.
fn with_key(doc: &toml::Table, key: &str, value: &toml::Value, create_section: bool) -> Option<toml::Table> {
    fn set(v: &mut toml::Value, path: &[&str], value: &toml::Value) -> bool {
        match v {
            toml::Value::Array(items) if !items.is_empty() => items.iter_mut().all(|item| set(item, path, value)),
            toml::Value::Table(t) if path.len() == 1 => {
                t.insert(path[0].to_string(), value.clone());
                true
            }
            toml::Value::Table(t) => t.get_mut(path[0]).is_some_and(|next| set(next, &path[1..], value)),
            _ => false,
        }
    }
    let path: Vec<&str> = key.split('.').collect();
    let mut doc = toml::Value::Table(doc.clone());
    if let (toml::Value::Table(t), true) = (&mut doc, create_section) {
        t.entry(path[0].to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    }
    let toml::Value::Table(out) = &doc else { unreachable!() };
    let mut out = toml::Value::Table(out.clone());
    set(&mut out, &path, value).then(|| match out {
        toml::Value::Table(t) => t,
        _ => unreachable!(),
    })
}

#[test]
fn every_literal_default_is_what_the_parser_takes() {
    let inputs: Vec<toml::Table> = INPUTS.iter().map(|s| s.parse().expect("a minimal input")).collect();
    let mut checked = 0;
    for row in documented(&page()) {
        // A default given as a TOML literal in backticks, first in its cell: checked. Others
        // ("required", "none", a rule in words) are not values the parser fills in.
        let Some(literal) = row.default.strip_prefix('`').and_then(|d| d.split('`').next()) else { continue };
        let value: toml::Value = format!("v = {literal}").parse::<toml::Table>().unwrap_or_else(|e| {
            panic!("{PAGE}:{}: the default `{literal}` of `{}` is not a TOML value: {e}", row.line, row.key)
        })["v"]
            .clone();
        // Inputs that have the key's section first: creating a section that is an Option (`[survey]`)
        // would change the parsed input by itself.
        let mut tries = [false, true].into_iter().flat_map(|create| inputs.iter().map(move |input| (input, create)));
        let outcome = tries.find_map(|(input, create)| {
            let given = with_key(input, &row.key, &value, create)?;
            let given = Config::from_toml(&toml::to_string(&given).ok()?).ok()?;
            let absent =
                Config::from_toml(&toml::to_string(input).expect("serialisable")).expect("a minimal input parses");
            Some(format!("{given:?}") == format!("{absent:?}"))
        });
        match outcome {
            Some(true) => checked += 1,
            Some(false) => panic!(
                "{PAGE}:{}: `{}` documented with default `{literal}`, but giving it changes the parsed input",
                row.line, row.key
            ),
            None => panic!("{PAGE}:{}: no minimal input accepts `{} = {literal}`", row.line, row.key),
        }
    }
    assert!(checked >= 20, "only {checked} defaults checked");
}

#[test]
fn the_walk_finds_nested_tables_lists_and_refused_values() {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        x: f64,
        y: Option<[f64; 3]>,
    }
    #[derive(serde::Deserialize)]
    #[serde(try_from = "Inner")]
    #[allow(dead_code)]
    struct Refused(f64);
    impl TryFrom<Inner> for Refused {
        type Error = String;
        fn try_from(_: Inner) -> Result<Refused, String> {
            Err("always".into())
        }
    }
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        a: u32,
        refused: Refused,
        list: Vec<Inner>,
        maybe: Option<Inner>,
        last: bool,
    }
    let (keys, tables) = accepted_keys::<Outer>();
    let want =
        ["a", "last", "list", "list.x", "list.y", "maybe", "maybe.x", "maybe.y", "refused", "refused.x", "refused.y"];
    assert_eq!(keys, want.iter().map(|k| k.to_string()).collect());
    assert_eq!(tables, ["list", "maybe", "refused"].iter().map(|k| k.to_string()).collect());

    // The real types: the model table (one struct behind an enum), lists of tables, inline tables.
    let (keys, _) = accepted_keys::<Config>();
    for key in [
        "model.kind",
        "model.x_offset",
        "receivers.line.start",
        "output.snapshot.at",
        "survey.grid.count_c",
        "run.halo_overlap",
    ] {
        assert!(keys.contains(key), "{key} not found among {keys:?}");
    }
}
