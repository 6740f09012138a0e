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

/// The `(index, value)` text of each feature token (for the quick width scan).
pub fn feature_tokens(line: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    tokens(line)
        .skip(1)
        .filter(|t| !t.starts_with(b"qid:"))
        .filter_map(|t| {
            let i = memchr::memchr(b':', t)?;
            Some((&t[..i], &t[i + 1..]))
        })
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
        for tok in toks {
            let Some(i) = memchr::memchr(b':', tok) else {
                return Err(format!("feature {} has no ':'; {EXPECTED}", shown(tok)));
            };
            let (index, value) = (&tok[..i], &tok[i + 1..]);
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
