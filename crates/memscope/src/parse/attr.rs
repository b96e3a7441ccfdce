//! The Attr mini-language of msMemScope dumps: `{key:value,key:value,...}`.
//!
//! Values may contain commas (`shape:[1,5,]`, `torch.Size([2, 3])`,
//! `inefficient_type:early_allocation,late_deallocation`), so splitting on commas is wrong. The
//! parser follows the rule the tool itself uses when it converts Attr to JSON (docs/formats/memscope.md
//! §3.2): each `:` ends a key, and that key starts after the last `,` between the previous colon
//! and this one. A candidate key must look like an identifier (`[A-Za-z_][A-Za-z0-9_ ]*`),
//! otherwise the colon belongs to the value. Tool-written `.db` files hold Attr as a JSON object
//! of strings; [`parse`] accepts that form too.

/// The `key:value` items of one Attr cell, in order. Keys and values are trimmed slices of the
/// input (JSON input yields owned strings through [`parse_owned`]).
pub fn parse(cell: &str) -> Vec<(&str, &str)> {
    let mut items = Vec::new();
    parse_into(cell, &mut items);
    items
}

/// Like [`parse`], reusing `items` to avoid an allocation per row.
pub fn parse_into<'a>(cell: &'a str, items: &mut Vec<(&'a str, &'a str)>) {
    items.clear();
    let body = strip_braces(cell);
    if body.is_empty() {
        return;
    }
    let bytes = body.as_bytes();
    let mut key: Option<&str> = None;
    let mut value_start = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if b != b':' {
            continue;
        }
        match key {
            None => {
                let candidate = body[..i].trim();
                if is_key(candidate) {
                    key = Some(candidate);
                    value_start = i + 1;
                }
            }
            Some(k) => {
                let Some(comma) = body[value_start..i].rfind(',') else {
                    continue; // no comma since the previous colon: the colon is part of a value
                };
                let comma = value_start + comma;
                let candidate = body[comma + 1..i].trim();
                if is_key(candidate) {
                    items.push((k, body[value_start..comma].trim()));
                    key = Some(candidate);
                    value_start = i + 1;
                }
            }
        }
    }
    if let Some(k) = key {
        items.push((k, body[value_start..].trim()));
    }
}

/// Parses either the mini-language or a JSON object (the `.db` form), returning owned pairs.
pub fn parse_owned(cell: &str) -> Vec<(String, String)> {
    if let Some(pairs) = parse_json_object(cell) {
        return pairs;
    }
    parse(cell)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The value of `key` in an Attr cell (either form), if present.
pub fn lookup(cell: &str, key: &str) -> Option<String> {
    if cell.trim_start().starts_with("{\"") {
        return parse_owned(cell)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v);
    }
    parse(cell)
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

/// A JSON object (all values rendered as text) in key order, or `None` when `cell` is not one.
pub fn parse_json_object(cell: &str) -> Option<Vec<(String, String)>> {
    let t = cell.trim();
    if !t.starts_with('{') || !(t.len() == 2 || t[1..].trim_start().starts_with('"')) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(t).ok()?;
    let obj = value.as_object()?;
    Some(
        obj.iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect(),
    )
}

/// Renders pairs in the dump's own form: `{k:v,k:v}` (empty for no pairs).
pub fn render(pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push(':');
        out.push_str(v);
    }
    out.push('}');
    out
}

/// Renders pairs as the tool's db writes them: a compact JSON object of string values.
pub fn render_json(pairs: &[(&str, &str)]) -> String {
    let mut map = serde_json::Map::new();
    for (k, v) in pairs {
        map.insert(k.to_string(), serde_json::Value::String(v.to_string()));
    }
    serde_json::Value::Object(map).to_string()
}

/// Integer value as Python's `int()` reads trimmed text: optional sign, decimal digits,
/// `_` separators between digits. Hex, floats and empty text are not integers.
pub fn parse_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') {
        return None;
    }
    let mut value: i64 = 0;
    let mut prev_underscore = false;
    for b in digits.bytes() {
        match b {
            b'0'..=b'9' => {
                value = value.checked_mul(10)?.checked_add((b - b'0') as i64)?;
                prev_underscore = false;
            }
            b'_' if !prev_underscore => prev_underscore = true,
            _ => return None,
        }
    }
    Some(if neg { -value } else { value })
}

/// An address: `0x`-hex or decimal.
pub fn parse_addr(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse::<u64>().ok()
    }
}

fn strip_braces(cell: &str) -> &str {
    let t = cell.trim();
    let t = t.strip_prefix('{').unwrap_or(t);
    let t = t.strip_suffix('}').unwrap_or(t);
    t.trim()
}

fn is_key(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_commas_stay_whole() {
        let cell = "{allocation_id:12,addr:0x000012c041a00000,size:2048,type:ATB,dtype:ACL_FLOAT16,format:ACL_FORMAT_ND,shape:[1,1024,]}";
        let items = parse(cell);
        assert_eq!(items.len(), 7);
        assert_eq!(items[0], ("allocation_id", "12"));
        assert_eq!(items[6], ("shape", "[1,1024,]"));
        let items = parse("{size:4,shape:torch.Size([2, 3]),dtype:torch.float32}");
        assert_eq!(items[1], ("shape", "torch.Size([2, 3])"));
        let items = parse("{inefficient_type:early_allocation,late_deallocation,page_type:huge}");
        assert_eq!(
            items,
            vec![
                ("inefficient_type", "early_allocation,late_deallocation"),
                ("page_type", "huge")
            ]
        );
    }

    #[test]
    fn empty_values_and_cells() {
        assert_eq!(parse(""), vec![]);
        assert_eq!(parse("{}"), vec![]);
        assert_eq!(
            parse("{addr:20,size:-512,owner:,MID:7}"),
            vec![
                ("addr", "20"),
                ("size", "-512"),
                ("owner", ""),
                ("MID", "7")
            ]
        );
    }

    #[test]
    fn colon_inside_value_is_kept_when_no_key_precedes_it() {
        // `@x:y` cannot be a key (it contains `@`), so the colon stays in the owner.
        let items = parse("{owner:PTA@a:b,size:3}");
        assert_eq!(items, vec![("owner", "PTA@a:b"), ("size", "3")]);
        let items = parse("{path:0_1/0:x,workspace ptr:0x0,workspace size:16}");
        assert_eq!(items[1], ("workspace ptr", "0x0"));
        assert_eq!(items[2], ("workspace size", "16"));
    }

    #[test]
    fn json_form_reads_the_same() {
        let cell = r#"{"allocation_id":"4","size":"16778240","shadow":"true"}"#;
        assert_eq!(lookup(cell, "size").as_deref(), Some("16778240"));
        let pairs = parse_owned(cell);
        assert_eq!(
            render(&pairs),
            "{allocation_id:4,size:16778240,shadow:true}"
        );
        assert_eq!(lookup("{}", "size"), None);
    }

    #[test]
    fn python_int_rules() {
        assert_eq!(parse_int(" 42 "), Some(42));
        assert_eq!(parse_int("-512"), Some(-512));
        assert_eq!(parse_int("+1_000"), Some(1000));
        assert_eq!(parse_int("1__0"), None);
        assert_eq!(parse_int("0x10"), None);
        assert_eq!(parse_int("1.5"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_addr("0x000012c041400000"), Some(0x12c041400000));
        assert_eq!(parse_addr("20616935636992"), Some(20616935636992));
        assert_eq!(parse_addr("N/A"), None);
    }
}
