//! The OpenAPI checks of a value against a schema node, as kube-openapi's `SchemaValidator`
//! makes them for kube-apiserver, with its messages (`spec.x in body must be of type integer:
//! "string"`) turned into field errors as `kubeOpenAPIResultToFieldErrors` does; and the
//! `x-kubernetes-list-type` checks (`listtype.ValidateListSetsAndMaps`).
//!
//! The order of checks per node is kube-openapi's: type, string (length, pattern), format,
//! number (multipleOf, minimum, maximum), array (items, then counts), enum, object (property
//! counts, map values, properties, required). kube-openapi walks properties in Go's random map
//! order; here they go in name order.

use base64::Engine;
use serde_json::{Map, Number, Value};

use super::go_format::{bad_value, float, go_syntax, quote};
use super::{ByNode, each_node};
use crate::apiserver::error::{ErrorType, FieldError};

/// The schema's `pattern`s, compiled once (Go's RE2 and the regex crate agree on the syntax
/// CRDs use); a pattern that does not compile is reported as kube-openapi reports it.
#[derive(Debug, Default)]
pub(crate) struct Patterns(ByNode<Result<regex::Regex, String>>);

impl Patterns {
    pub fn compile(schema: &Value) -> Self {
        let mut patterns = ByNode::new();
        each_node(schema, "", &mut |node, _| {
            if let Some(pattern) = node.get("pattern").and_then(Value::as_str) {
                let compiled = regex::Regex::new(pattern).map_err(|e| e.to_string());
                patterns.insert(pattern.to_string(), compiled);
            }
        });
        Patterns(patterns)
    }
}

/// The field errors of `value` against `schema`; field paths start at `prefix` (`""` for a whole
/// object, `status` for a `/status` write), while messages name fields from the node checked.
pub(crate) fn validate(schema: &Value, value: &Value, prefix: &str, patterns: &Patterns) -> Vec<FieldError> {
    let mut walk = Walk { prefix, patterns, errors: Vec::new() };
    walk.node(schema, value, "");
    walk.errors
}

struct Walk<'a> {
    prefix: &'a str,
    patterns: &'a Patterns,
    errors: Vec<FieldError>,
}

impl Walk<'_> {
    fn node(&mut self, schema: &Value, value: &Value, name: &str) {
        self.check_type(schema, value, name);
        match value {
            Value::Null => {}
            Value::String(text) => {
                self.check_string(schema, text, name);
                self.check_format(schema, text, name);
            }
            Value::Number(n) => self.check_number(schema, n, name),
            Value::Array(items) => self.check_array(schema, items, name),
            Value::Bool(_) | Value::Object(_) => {}
        }
        self.check_enum(schema, value, name);
        if let Value::Object(map) = value {
            self.check_object(schema, map, name);
        }
    }

    /// The field path of a node named `name` (kube-openapi's name, `.spec` for required errors).
    fn field(&self, name: &str) -> String {
        let name = name.trim_start_matches('.');
        match (self.prefix, name) {
            ("", "") => "<nil>".into(),
            (prefix, "") => prefix.into(),
            ("", name) => name.into(),
            (prefix, name) if name.starts_with('[') => format!("{prefix}{name}"),
            (prefix, name) => format!("{prefix}.{name}"),
        }
    }

    fn push(&mut self, kind: ErrorType, name: &str, value: Option<String>, detail: String) {
        let field = self.field(name);
        self.errors.push(FieldError { kind, field, value, detail });
    }

    /// An `errors.Validation` of the default kind: `Invalid value: VALUE: MESSAGE`.
    fn invalid(&mut self, name: &str, value: &Value, message: String) {
        self.push(ErrorType::Invalid, name, Some(bad_value(value)), message);
    }

    /// `errors.InvalidType` with a string value: `NAME in body must be of type T: "V"`.
    fn invalid_type(&mut self, name: &str, type_name: &str, value: &str) {
        let message = format!("{name} in body must be of type {type_name}: {}", quote(value));
        self.push(ErrorType::TypeInvalid, name, Some(quote(value)), message);
    }

    /// kube-openapi's `typeValidator`, quirks included: a list where a formatted string is
    /// expected passes, a format mismatch is reported by format name.
    fn check_type(&mut self, schema: &Value, value: &Value, name: &str) {
        let types = types_of(schema);
        let format = effective_format(schema);
        if types.is_empty() {
            return;
        }
        if value.is_null() {
            if !types.contains(&"null") && !super::nullable(schema) {
                self.invalid_type(name, &types.join(","), "null");
            }
            return;
        }
        let (data_type, data_format) = json_type(value);
        let float_int = data_type == "number" && is_integral(value) && types.contains(&"integer");
        let int_float = data_type == "integer" && types.contains(&"number");
        let textual = value.is_string() || value.is_array();
        let matches = types.contains(&data_type) || float_int || int_float;
        if !textual && !format.is_empty() && !matches && data_format != format {
            return self.invalid_type(name, format, data_format);
        }
        let numeric = types.contains(&"number") || types.contains(&"integer");
        if !numeric && !format.is_empty() && textual {
            return;
        }
        if !matches {
            self.invalid_type(name, &types.join(","), data_type);
        }
    }

    fn check_string(&mut self, schema: &Value, text: &str, name: &str) {
        let value = Value::String(text.to_string());
        let length = text.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            return self.push(ErrorType::TooLong, name, None, format!("may not be more than {max} bytes"));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            return self.invalid(name, &value, format!("{name} in body should be at least {min} chars long"));
        }
        let Some(pattern) = schema.get("pattern").and_then(Value::as_str) else { return };
        match self.patterns.0.get(pattern) {
            Some(Ok(regex)) if regex.is_match(text) => {}
            Some(Err(why)) => self.invalid(
                name,
                &value,
                format!("{name} in body should match '{pattern}, but pattern is invalid: {why}'"),
            ),
            _ => self.invalid(name, &value, format!("{name} in body should match '{pattern}'")),
        }
    }

    fn check_format(&mut self, schema: &Value, text: &str, name: &str) {
        let format = effective_format(schema);
        if !format.is_empty() && !format_holds(format, text) {
            let message = format!("{name} in body must be of type {format}: {}", quote(text));
            self.push(ErrorType::TypeInvalid, name, Some(quote(text)), message);
        }
    }

    /// multipleOf, then minimum, then maximum, compared as integers for integer data (the
    /// bound truncated) and as floats otherwise.
    fn check_number(&mut self, schema: &Value, n: &Number, name: &str) {
        let value = Value::Number(n.clone());
        let data = n.as_f64().unwrap_or_default();
        let integer = n.is_i64() || n.is_u64();
        let bound = |b: f64| if integer { (b.trunc() as i64).to_string() } else { float(b) };
        if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64)
            && factor > 0.0
            && !is_multiple(data, factor, integer)
        {
            self.invalid(name, &value, format!("{name} in body should be a multiple of {}", bound(factor)));
        }
        let exclusive = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
        let limit = |b: f64| if integer { b.trunc() } else { b };
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let (fails, words) = match exclusive("exclusiveMinimum") {
                true => (data <= limit(min), "greater than"),
                false => (data < limit(min), "greater than or equal to"),
            };
            if fails {
                self.invalid(name, &value, format!("{name} in body should be {words} {}", bound(min)));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let (fails, words) = match exclusive("exclusiveMaximum") {
                true => (data >= limit(max), "less than"),
                false => (data > limit(max), "less than or equal to"),
            };
            if fails {
                self.invalid(name, &value, format!("{name} in body should be {words} {}", bound(max)));
            }
        }
    }

    fn check_array(&mut self, schema: &Value, items: &[Value], name: &str) {
        if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
            for (i, item) in items.iter().enumerate() {
                self.node(item_schema, item, &format!("{name}[{i}]"));
            }
        }
        let size = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && size < min
        {
            self.invalid(name, &size.into(), format!("{name} in body should have at least {min} items"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && size > max
        {
            self.push(
                ErrorType::TooMany,
                name,
                Some(size.to_string()),
                format!("must have at most {max} items"),
            );
        }
    }

    /// A null never matches (kube-openapi skips null enum members), even with `null` listed.
    fn check_enum(&mut self, schema: &Value, value: &Value, name: &str) {
        let Some(members) = schema.get("enum").and_then(Value::as_array).filter(|m| !m.is_empty()) else {
            return;
        };
        if members.iter().any(|member| enum_matches(member, value)) {
            return;
        }
        let supported: Vec<String> = members
            .iter()
            .map(|m| quote(&m.as_str().map_or_else(|| m.to_string(), str::to_string)))
            .collect();
        let detail = format!("supported values: {}", supported.join(", "));
        self.push(ErrorType::NotSupported, name, Some(bad_value(value)), detail);
    }

    fn check_object(&mut self, schema: &Value, map: &Map<String, Value>, name: &str) {
        let count = map.len() as u64;
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            self.invalid(
                name,
                &count.into(),
                format!("{name} in body should have at least {min} properties"),
            );
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            self.push(
                ErrorType::TooMany,
                name,
                Some(count.to_string()),
                format!("must have at most {max} items"),
            );
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let declared = |key: &str| properties.is_some_and(|p| p.contains_key(key));
        if let Some(values) = schema.get("additionalProperties").filter(|s| s.is_object()) {
            for (key, child) in map.iter().filter(|(k, _)| !declared(k)) {
                self.node(values, child, &format!("{name}.{key}"));
            }
        }
        for (key, property) in properties.into_iter().flatten() {
            if let Some(child) = map.get(key) {
                let child_name = if name.is_empty() { key.clone() } else { format!("{name}.{key}") };
                self.node(property, child, &child_name);
            }
        }
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let Some(key) = required.as_str() else { continue };
            if !map.contains_key(key) {
                self.push(ErrorType::Required, &format!("{name}.{key}"), None, String::new());
            }
        }
    }
}

/// The node's types: `x-kubernetes-int-or-string` is integer or string.
fn types_of(schema: &Value) -> Vec<&str> {
    if super::is_true(schema, "x-kubernetes-int-or-string") {
        return vec!["integer", "string"];
    }
    schema.get("type").and_then(Value::as_str).filter(|t| !t.is_empty()).into_iter().collect()
}

/// The formats CRDs may use for strings (`StripUnsupportedFormatsPostProcessor`, Kubernetes
/// 1.33), without dashes as go-openapi compares them.
const STRING_FORMATS: [&str; 25] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "",
];

/// The node's format as the API keeps it: formats CRDs may not use are ignored.
fn effective_format(schema: &Value) -> &str {
    let format = schema.get("format").and_then(Value::as_str).unwrap_or_default();
    let kept = match types_of(schema).as_slice() {
        ["integer"] => matches!(format, "int32" | "int64"),
        ["number"] => matches!(format, "float" | "double"),
        [] | ["string"] | [_, _] => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        _ => false,
    };
    if kept { format } else { "" }
}

/// kube-openapi's JSON type and Go format of unstructured data.
fn json_type(value: &Value) -> (&'static str, &'static str) {
    match value {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

fn is_integral(value: &Value) -> bool {
    value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn is_multiple(data: f64, factor: f64, integer: bool) -> bool {
    if integer && factor.fract() == 0.0 {
        return (data as i64) % (factor as i64) == 0;
    }
    let ratio = if factor < 1.0 { 1.0 / factor * data } else { data / factor };
    ratio.fract() == 0.0
}

/// Go's enum check: the data converted to the member's type, then compared.
fn enum_matches(member: &Value, value: &Value) -> bool {
    match (member, value) {
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Number(m), Value::Number(v)) if m.is_i64() => {
            v.as_f64().map(|f| f.trunc() as i64) == m.as_i64()
        }
        (Value::Number(m), Value::Number(v)) => m.as_f64() == v.as_f64(),
        (member, value) => member == value,
    }
}

/// Whether a string holds the format (go-openapi's strfmt); formats not listed here pass.
fn format_holds(format: &str, text: &str) -> bool {
    match format.replace('-', "").as_str() {
        "datetime" => text.parse::<jiff::Timestamp>().is_ok(),
        "date" => text.len() == 10 && text.parse::<jiff::civil::Date>().is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD.decode(text).is_ok(),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => text.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
        }),
        "uuid" => is_uuid(text),
        _ => true,
    }
}

fn is_uuid(text: &str) -> bool {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()) && text.len() <= 36
}

/// `x-kubernetes-list-type` `set` and `map` invariants of a whole object: duplicates, by value
/// or by key fields. Paths index maps as `labels[key]`.
pub(crate) fn list_types(schema: &Value, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    lists_in(schema, object, "", &mut errors);
    errors
}

fn lists_in(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let declared = schema.get("properties").and_then(|p| p.get(key));
                if let Some(child_schema) = declared {
                    lists_in(child_schema, child, &super::child_path(path, key), errors);
                } else if let Some(values) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                    lists_in(values, child, &format!("{path}[{key}]"), errors);
                }
            }
        }
        Value::Array(items) => {
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => duplicates(items, path, errors, |item| item.clone()),
                Some("map") => list_map(schema, items, path, errors),
                _ => {}
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    lists_in(item_schema, item, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

/// A `Duplicate value` at the second occurrence of each repeated key.
fn duplicates(items: &[Value], path: &str, errors: &mut Vec<FieldError>, key: impl Fn(&Value) -> Value) {
    let mut seen: Vec<(Value, usize)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let key = key(item);
        match seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, times)) => {
                *times += 1;
                if *times == 2 {
                    let value =
                        if item.is_object() || item.is_array() { go_syntax(&key) } else { bad_value(&key) };
                    errors.push(FieldError {
                        kind: ErrorType::Duplicate,
                        field: format!("{path}[{i}]"),
                        value: Some(value),
                        detail: String::new(),
                    });
                }
            }
            None => seen.push((key, 1)),
        }
    }
}

fn list_map(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    if let Some(i) = items.iter().position(|x| !x.is_object() && !x.is_null()) {
        let detail = "must be an object for an array of list-type map".to_string();
        let value = Some(bad_value(&items[i]));
        errors.push(FieldError { kind: ErrorType::Invalid, field: format!("{path}[{i}]"), value, detail });
        return;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    duplicates(items, path, errors, |item| {
        let key: Map<String, Value> =
            keys.iter().filter_map(|k| item.get(*k).map(|v| (k.to_string(), v.clone()))).collect();
        Value::Object(key)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(schema: Value, value: Value) -> Vec<String> {
        let patterns = Patterns::compile(&schema);
        validate(&schema, &value, "", &patterns)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn messages_are_kube_openapis() {
        let schema = json!({ "type": "object", "required": ["b"], "properties": {
            "i": { "type": "integer", "format": "int32", "minimum": 1.0 },
            "s": { "type": "string", "maxLength": 3, "pattern": "^a" },
            "t": { "type": "string", "format": "date-time" },
            "e": { "type": "string", "enum": ["A", "B"] },
            "l": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
        }});
        let value = json!({ "i": 0, "s": "bcd", "t": "soon", "e": "C", "l": [] });
        assert_eq!(
            errors(schema.clone(), value),
            [
                "e: Unsupported value: \"C\": supported values: \"A\", \"B\"",
                "i: Invalid value: 0: i in body should be greater than or equal to 1",
                "l: Invalid value: 0: l in body should have at least 1 items",
                "s: Invalid value: \"bcd\": s in body should match '^a'",
                "t: Invalid value: \"soon\": t in body must be of type date-time: \"soon\"",
                "b: Required value",
            ]
        );
        assert_eq!(
            errors(schema, json!({ "b": 1, "i": "x", "s": "abcd", "l": "x" })),
            [
                "i: Invalid value: \"string\": i in body must be of type integer: \"string\"",
                "l: Invalid value: \"string\": l in body must be of type array: \"string\"",
                "s: Too long: may not be more than 3 bytes",
            ]
        );
    }

    #[test]
    fn list_sets_and_maps_refuse_duplicates() {
        let schema = json!({ "type": "object", "properties": {
            "s": { "type": "array", "x-kubernetes-list-type": "set", "items": { "type": "string" } },
            "m": { "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                   "items": { "type": "object" } },
        }});
        let value = json!({ "s": ["a", "b", "a", "a"], "m": [{ "name": "x" }, { "name": "x", "v": 1 }] });
        let found: Vec<String> =
            list_types(&schema, &value).iter().map(|e| format!("{}: {}", e.field, e.body())).collect();
        assert_eq!(
            found,
            [
                "m[1]: Duplicate value: map[string]interface {}{\"name\":\"x\"}",
                "s[2]: Duplicate value: \"a\"",
            ]
        );
    }
}
