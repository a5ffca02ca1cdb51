//! Values printed the way kube-apiserver's Go code prints them in error messages: `%q` for
//! strings, `%v` for numbers and booleans, `%#v` for maps and lists (`field.Error.ErrorBody`).

use serde_json::{Number, Value};

/// A bad value as `field.Error` prints it: strings quoted, `null` as `"null"`, numbers and
/// booleans bare, objects and lists in Go syntax.
pub(crate) fn bad_value(value: &Value) -> String {
    match value {
        Value::Null => quote("null"),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(_) | Value::Object(_) => go_syntax(value),
    }
}

/// Go's `strconv.Quote`: double quotes, backslash escapes for quotes, backslashes and control
/// characters.
pub(crate) fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// `%v` of an unstructured number: int64 as it is, float64 in Go's shortest `%g` form.
pub(crate) fn number(n: &Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (None, Some(u), _) => u.to_string(),
        (_, _, Some(f)) => float(f),
        _ => n.to_string(),
    }
}

/// Go's `%v` of a float64: the shortest digits, in exponent form below 1e-4 and from 1e6 on.
pub(crate) fn float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as Go's shortest formatting does.
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} has a decimal exponent");
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let mut plain = f.to_string();
    if plain.ends_with(".0") {
        plain.truncate(plain.len() - 2);
    }
    plain
}

/// `%#v` of an unstructured value, as `field.Error` prints maps and lists.
pub(crate) fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            // Go prints map keys sorted, as serde_json keeps them.
            let entries: Vec<String> =
                map.iter().map(|(k, v)| format!("{}:{}", quote(k), go_syntax(v))).collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_as_go_prints_them() {
        assert_eq!(bad_value(&json!("a\"b")), r#""a\"b""#);
        assert_eq!(bad_value(&json!(null)), r#""null""#);
        assert_eq!(bad_value(&json!(-3)), "-3");
        assert_eq!(bad_value(&json!(0.5)), "0.5");
        assert_eq!(bad_value(&json!(45.0)), "45");
        assert_eq!(float(1_000_000.0), "1e+06");
        assert_eq!(float(123_456.0), "123456");
        assert_eq!(float(0.00001), "1e-05");
        assert_eq!(float(1_234_567.0), "1.234567e+06");
        assert_eq!(bad_value(&json!({"b": 1, "a": "x"})), r#"map[string]interface {}{"a":"x", "b":1}"#);
        assert_eq!(bad_value(&json!(["x", 2])), r#"[]interface {}{"x", 2}"#);
    }
}
