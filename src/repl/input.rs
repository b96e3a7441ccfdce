//! Splits REPL input into statements: a statement ends at a `;` outside string literals, quoted
//! identifiers and comments, so one may span several lines and one line may hold several.

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    Single,
    Double,
    LineComment,
    BlockComment,
}

/// Takes the complete statements out of `buffer` (without their `;`), leaving an unfinished
/// rest in it. Statements holding only whitespace and comments are dropped.
pub fn take_statements(buffer: &mut String) -> Vec<String> {
    let mut out = Vec::new();
    let mut state = State::Normal;
    let mut start = 0;
    let bytes = buffer.as_bytes();
    let mut i = 0;
    let mut consumed = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied();
        match state {
            State::Normal => match b {
                b'\'' => state = State::Single,
                b'"' => state = State::Double,
                b'-' if next == Some(b'-') => {
                    state = State::LineComment;
                    i += 1;
                }
                b'/' if next == Some(b'*') => {
                    state = State::BlockComment;
                    i += 1;
                }
                b';' => {
                    let stmt = buffer[start..i].to_string();
                    if !is_blank(&stmt) {
                        out.push(stmt.trim().to_string());
                    }
                    start = i + 1;
                    consumed = i + 1;
                }
                _ => {}
            },
            State::Single => {
                if b == b'\'' {
                    state = State::Normal; // '' re-enters at once: fine for splitting
                }
            }
            State::Double => {
                if b == b'"' {
                    state = State::Normal;
                }
            }
            State::LineComment => {
                if b == b'\n' {
                    state = State::Normal;
                }
            }
            State::BlockComment => {
                if b == b'*' && next == Some(b'/') {
                    state = State::Normal;
                    i += 1;
                }
            }
        }
        i += 1;
    }
    buffer.replace_range(..consumed, "");
    if is_blank(buffer) {
        buffer.clear();
    }
    out
}

/// True when `text` holds nothing but whitespace and comments.
pub fn is_blank(text: &str) -> bool {
    let mut rest = text.trim_start();
    loop {
        if rest.is_empty() {
            return true;
        }
        if let Some(r) = rest.strip_prefix("--") {
            match r.find('\n') {
                Some(n) => rest = r[n + 1..].trim_start(),
                None => return true,
            }
        } else if let Some(r) = rest.strip_prefix("/*") {
            match r.find("*/") {
                Some(n) => rest = r[n + 2..].trim_start(),
                None => return false,
            }
        } else {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_unquoted_semicolons() {
        let mut b = String::from("SELECT 1,\n 2");
        assert!(take_statements(&mut b).is_empty());
        assert_eq!(b, "SELECT 1,\n 2");
        b.push_str(";\nSELECT ';' AS \"a;b\" -- c;\n; SELECT /* ; */ 3; SEL");
        let s = take_statements(&mut b);
        assert_eq!(
            s,
            vec![
                "SELECT 1,\n 2",
                "SELECT ';' AS \"a;b\" -- c;",
                "SELECT /* ; */ 3"
            ]
        );
        assert_eq!(b, " SEL");
        let mut c = String::from("-- only a comment\n;  ");
        assert!(take_statements(&mut c).is_empty());
        assert!(c.is_empty());
    }
}
