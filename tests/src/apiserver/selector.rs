//! Label and field selectors, in the syntax of `?labelSelector=` and `?fieldSelector=`.

use serde_json::{Map, Value};

use super::resources::ResourceType;

#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: LabelOp,
}

/// A parsed label selector: every requirement must hold (`,` is AND).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k` (`==` is the same as `=`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let requirements = split_top_level(text)
            .into_iter()
            .map(str::trim)
            .filter(|term| !term.is_empty())
            .map(parse_requirement)
            .collect::<Result<_, _>>()?;
        Ok(LabelSelector { requirements })
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches(&self, object: &Value) -> bool {
        let empty = Map::new();
        let labels = object.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
        self.requirements.iter().all(|r| {
            let value = labels.get(&r.key).and_then(Value::as_str);
            match (&r.op, value) {
                (LabelOp::Equals(want), Some(v)) => v == want,
                (LabelOp::Equals(_), None) => false,
                (LabelOp::NotEquals(want), v) => v != Some(want.as_str()),
                (LabelOp::In(set), Some(v)) => set.iter().any(|s| s == v),
                (LabelOp::In(_), None) => false,
                (LabelOp::NotIn(set), v) => v.is_none_or(|v| !set.iter().any(|s| s == v)),
                (LabelOp::Exists, v) => v.is_some(),
                (LabelOp::NotExists, v) => v.is_none(),
            }
        })
    }
}

/// Splits at commas that are not inside `( … )`.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement { key: checked_key(key.trim(), term)?, op: LabelOp::NotExists });
    }
    if let Some(open) = term.find('(') {
        let close = term
            .rfind(')')
            .filter(|&close| close > open && term[close + 1..].trim().is_empty())
            .ok_or_else(|| format!("unable to parse requirement: missing ')' in {term:?}"))?;
        let mut head = term[..open].split_whitespace();
        let (key, operator) = (head.next().unwrap_or(""), head.next().unwrap_or(""));
        let values: Vec<String> = term[open + 1..close]
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(format!("unable to parse requirement: empty value set in {term:?}"));
        }
        let op = match operator {
            "in" => LabelOp::In(values),
            "notin" => LabelOp::NotIn(values),
            other => {
                return Err(format!("unable to parse requirement: unknown operator {other:?} in {term:?}"));
            }
        };
        return Ok(Requirement { key: checked_key(key, term)?, op });
    }
    for (symbol, make) in
        [("!=", LabelOp::NotEquals as fn(String) -> LabelOp), ("==", LabelOp::Equals), ("=", LabelOp::Equals)]
    {
        if let Some((key, value)) = term.split_once(symbol) {
            return Ok(Requirement {
                key: checked_key(key.trim(), term)?,
                op: make(value.trim().to_string()),
            });
        }
    }
    Ok(Requirement { key: checked_key(term, term)?, op: LabelOp::Exists })
}

fn checked_key(key: &str, term: &str) -> Result<String, String> {
    let valid = !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_string())
    } else {
        Err(format!("unable to parse requirement: invalid label key {key:?} in {term:?}"))
    }
}

/// A parsed field selector over the few fields the real API indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// Fields every type can be selected by.
const COMMON_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Extra fields the real API supports for some kinds (a subset: the ones worth having here).
fn kind_fields(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.id.group.as_str(), rt.id.plural.as_str()) {
        ("", "pods") => &["spec.nodeName", "status.phase", "spec.restartPolicy"],
        ("", "secrets") => &["type"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "reason",
            "type",
        ],
        ("events.k8s.io", "events") => {
            &["regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid", "reason", "type"]
        }
        ("batch", "jobs") => &["status.successful"],
        _ => &[],
    }
}

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`, refusing fields the type is not indexed by.
    pub fn parse(text: &str, rt: &ResourceType) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!("invalid selector: '{term}'; can't understand '{term}'"));
            };
            let field = field.trim();
            if !COMMON_FIELDS.contains(&field) && !kind_fields(rt).contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, want)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apiserver::resources::builtin_types;

    fn labelled(labels: Value) -> Value {
        json!({ "metadata": { "name": "x", "namespace": "ns", "labels": labels } })
    }

    #[test]
    fn label_selector_table() {
        let object = labelled(json!({ "app": "scylla", "rack": "a", "tier": "db" }));
        let cases = [
            ("", true),
            ("app=scylla", true),
            ("app==scylla", true),
            ("app=etcd", false),
            ("app!=etcd", true),
            ("missing!=x", true),
            ("app in (etcd, scylla)", true),
            ("app in (etcd)", false),
            ("app notin (etcd)", true),
            ("missing notin (etcd)", true),
            ("app notin (scylla,etcd)", false),
            ("rack", true),
            ("missing", false),
            ("!missing", true),
            ("!rack", false),
            ("app=scylla,rack in (a,b),!missing,tier", true),
            ("app=scylla,rack=b", false),
        ];
        for (text, want) in cases {
            let selector = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&object), want, "selector {text:?}");
        }
    }

    #[test]
    fn label_selector_rejects_malformed_terms() {
        for text in ["app in (a", "app in ()", "app within (a)", "a b", "=x"] {
            assert!(LabelSelector::parse(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn field_selector_by_name_namespace_and_kind_fields() {
        let types = builtin_types();
        let pods = types.iter().find(|t| t.id.plural == "pods").unwrap();
        let configmaps = types.iter().find(|t| t.id.plural == "configmaps").unwrap();
        let pod = json!({ "metadata": { "name": "p", "namespace": "ns" }, "status": { "phase": "Running" } });
        let cases = [
            ("metadata.name=p", true),
            ("metadata.name==p", true),
            ("metadata.name!=p", false),
            ("metadata.namespace=ns,metadata.name=p", true),
            ("status.phase=Running", true),
            ("status.phase!=Running", false),
        ];
        for (text, want) in cases {
            assert_eq!(FieldSelector::parse(text, pods).unwrap().matches(&pod), want, "{text}");
        }
        assert!(FieldSelector::parse("status.phase=Running", configmaps).is_err());
        assert!(FieldSelector::parse("metadata.name", configmaps).is_err());
    }
}
