//! Vowpal Wabbit's text format: `label [importance] ['tag]|namespace[:scale] name[:value] ...`.

use std::borrow::Cow;

use crate::hashing::feature_column;

use super::{index_problem, parse_index, parse_label, parse_number, shown, Builder, LineParser, Options, Row};

pub struct Parser {
    width: u64,
    task_namespace: Option<Vec<u8>>,
    key: Vec<u8>,
}

impl Parser {
    pub fn new(opts: &Options) -> Self {
        Self {
            width: opts.n_features,
            task_namespace: opts.vw_task_namespace.as_ref().map(|s| s.as_bytes().to_vec()),
            key: Vec::new(),
        }
    }

    /// The column of feature `name` in namespace `ns` (`ns^name` hashed; digits: the index).
    #[inline]
    fn column(&mut self, ns: &[u8], name: &[u8]) -> Result<u32, String> {
        if name.first().is_some_and(u8::is_ascii_digit) && name.iter().all(u8::is_ascii_digit) {
            let j = parse_index(name).ok_or_else(|| index_problem(name))?;
            return Ok((j % self.width) as u32);
        }
        let key: &[u8] = if ns.is_empty() {
            name
        } else {
            self.key.clear();
            self.key.extend_from_slice(ns);
            self.key.push(b'^');
            self.key.extend_from_slice(name);
            &self.key
        };
        Ok(feature_column(key, self.width as usize) as u32)
    }
}

fn words(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(u8::is_ascii_whitespace).filter(|t| !t.is_empty())
}

impl LineParser for Parser {
    fn parse<'a>(&mut self, line: &'a [u8], out: &mut Builder) -> Result<Option<Row<'a>>, String> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let Some(bar) = memchr::memchr(b'|', line) else {
            return Err("no '|'; expected 'label [importance] ['tag]|namespace feature[:value] ...'".into());
        };
        // The label section: label, then an importance weight, then a tag ('tag, or a last word
        // that is not a number).
        let (mut label, mut tag, mut numbers) = (None, None, 0);
        for (k, w) in words(&line[..bar]).enumerate() {
            if let Some(t) = w.strip_prefix(b"'") {
                tag = Some(t);
            } else if k == 0 {
                label = Some(parse_label(w).ok_or_else(|| format!("label {} (expected -1/+1 or 0/1)", shown(w)))?);
            } else if let Some(x) = parse_number(w) {
                numbers += 1;
                if numbers > 1 {
                    return Err(format!(
                        "{} after the importance weight: a base prediction is not supported",
                        shown(w)
                    ));
                }
                if x != 1.0 {
                    return Err(format!(
                        "importance weight {} (omtl learns every example with weight 1)",
                        shown(w)
                    ));
                }
            } else {
                tag = Some(w);
            }
        }
        let mut task = None;
        for section in line[bar + 1..].split(|&c| c == b'|') {
            let (ns, scale, rest): (&[u8], f64, &[u8]) = if section.first().is_none_or(u8::is_ascii_whitespace) {
                (b"", 1.0, section)
            } else {
                let end = section
                    .iter()
                    .position(u8::is_ascii_whitespace)
                    .unwrap_or(section.len());
                let head = &section[..end];
                match memchr::memchr(b':', head) {
                    Some(i) => {
                        let s = parse_number(&head[i + 1..])
                            .ok_or_else(|| format!("namespace {}: scale is not a finite number", shown(head)))?;
                        (&head[..i], s, &section[end..])
                    }
                    None => (head, 1.0, &section[end..]),
                }
            };
            if self.task_namespace.as_deref() == Some(ns) && !ns.is_empty() {
                let mut names = words(rest);
                let name = names
                    .next()
                    .ok_or_else(|| format!("namespace {} names no task", shown(ns)))?;
                if names.next().is_some() || task.is_some() {
                    return Err(format!("namespace {} must hold exactly one name, the task", shown(ns)));
                }
                let end = memchr::memchr(b':', name).unwrap_or(name.len());
                task = Some(&name[..end]);
                continue;
            }
            for w in words(rest) {
                let (name, value) = match memchr::memrchr(b':', w) {
                    Some(i) => {
                        let v = parse_number(&w[i + 1..])
                            .ok_or_else(|| format!("feature {}: value is not a finite number", shown(w)))?;
                        (&w[..i], v)
                    }
                    None => (w, 1.0),
                };
                let v = value * scale;
                if !v.is_finite() {
                    return Err(format!(
                        "feature {}: value times the namespace scale overflows",
                        shown(w)
                    ));
                }
                let j = self.column(ns, name)?;
                out.push(j, v);
            }
        }
        if self.task_namespace.is_none() {
            task = tag;
        }
        Ok(Some(Row {
            label,
            task: task.map(Cow::Borrowed),
        }))
    }
}
