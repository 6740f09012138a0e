//! svmlight/libsvm lines: `label [qid:task] index:value ... [# comment]`.

use std::borrow::Cow;

use super::{index_problem, parse_index, parse_label, parse_number, shown, Builder, LineParser, Options, Row};

const EXPECTED: &str = "expected '<label> [qid:<task>] <index>:<value> ...' (label -1/+1 or 0/1)";

pub struct Parser {
    width: u64,
    zero_based: bool,
}

impl Parser {
    pub fn new(opts: &Options) -> Self {
        Self {
            width: opts.n_features,
            zero_based: opts.zero_based,
        }
    }
}

/// The part of a line before its comment, split on ASCII whitespace.
fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = match memchr::memchr(b'#', line) {
        Some(i) => &line[..i],
        None => line,
    };
    body.split(u8::is_ascii_whitespace).filter(|t| !t.is_empty())
}

/// The index text of each `index:value` token of a line (for the quick width scan): the digits
/// before each ':' outside the comment, `qid:` left out.
pub fn feature_indices(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = match memchr::memchr(b'#', line) {
        Some(i) => &line[..i],
        None => line,
    };
    memchr::memchr_iter(b':', body).filter_map(move |colon| {
        let start = body[..colon]
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(0, |p| p + 1);
        let index = &body[start..colon];
        (index != b"qid").then_some(index)
    })
}

/// The `qid:` task of a line, if its second token is one.
pub fn task_of(line: &[u8]) -> Option<&[u8]> {
    let task = tokens(line).nth(1)?.strip_prefix(b"qid:")?;
    (!task.is_empty()).then_some(task)
}

impl LineParser for Parser {
    fn parse<'a>(&mut self, line: &'a [u8], out: &mut Builder) -> Result<Option<Row<'a>>, String> {
        let mut toks = tokens(line).peekable();
        let Some(first) = toks.next() else { return Ok(None) };
        let label = parse_label(first).ok_or_else(|| format!("label {}; {EXPECTED}", shown(first)))?;
        let mut task = None;
        if let Some(t) = toks.peek() {
            if let Some(q) = t.strip_prefix(b"qid:") {
                if q.is_empty() {
                    return Err(format!("empty qid:; {EXPECTED}"));
                }
                task = Some(Cow::Borrowed(q));
                toks.next();
            }
        }
        // The features: one fused pass over the bytes (the hot loop of a large file).
        let rest = match toks.next() {
            Some(t) => &line[t.as_ptr() as usize - line.as_ptr() as usize..],
            None => &[][..],
        };
        let body = match memchr::memchr(b'#', rest) {
            Some(i) => &rest[..i],
            None => rest,
        };
        let (mut i, n) = (0, body.len());
        loop {
            while i < n && body[i].is_ascii_whitespace() {
                i += 1;
            }
            if i == n {
                break;
            }
            let start = i;
            while i < n && !body[i].is_ascii_whitespace() {
                i += 1;
            }
            let tok = &body[start..i];
            let Some(colon) = memchr::memchr(b':', tok) else {
                return Err(format!("feature {} has no ':'; {EXPECTED}", shown(tok)));
            };
            let (index, value) = (&tok[..colon], &tok[colon + 1..]);
            let j = parse_index(index).ok_or_else(|| index_problem(index))?;
            let v = parse_number(value)
                .ok_or_else(|| format!("feature {}: value {} is not a finite number", shown(tok), shown(value)))?;
            let column = if self.zero_based {
                j
            } else if j == 0 {
                return Err("feature index 0 in a 1-based file (pass --zero-based, or index from 1)".into());
            } else {
                j - 1
            };
            if column >= self.width {
                return Err(format!(
                    "feature index {j} beyond the {} feature columns (--n-features; the engine takes at most {})",
                    self.width,
                    super::MAX_COLUMNS
                ));
            }
            out.push(column as u32, v);
        }
        Ok(Some(Row {
            label: Some(label),
            task,
        }))
    }
}
