//! CSV with a header row: a task column, a label column, every other column a numeric feature
//! (or the columns a model names). Fields may be quoted (`"a,b"`, `""` for a quote); a quoted
//! field does not span lines.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{parse_label, parse_number, shown, Builder, LineParser, Options, Row};

pub struct Parser {
    opts_task: String,
    opts_label: String,
    wanted: Option<Vec<String>>,
    require_labels: bool,
    width: u64,
    /// From the header: the number of fields, where the task and label are, and the column of
    /// each field that is a feature.
    n_fields: usize,
    task_at: usize,
    label_at: Option<usize>,
    column_of: Vec<Option<u32>>,
    names: Vec<String>,
    fields: Vec<(usize, usize)>,
    unquoted: Vec<Vec<u8>>,
    header_failed: bool,
}

impl Parser {
    pub fn new(opts: &Options) -> Self {
        Self {
            opts_task: opts.csv_task_column.clone(),
            opts_label: opts.csv_label_column.clone(),
            wanted: opts.csv_feature_columns.clone(),
            require_labels: opts.require_labels,
            width: opts.n_features,
            n_fields: 0,
            task_at: 0,
            label_at: None,
            column_of: Vec::new(),
            names: Vec::new(),
            fields: Vec::new(),
            unquoted: Vec::new(),
            header_failed: false,
        }
    }

    /// Splits a line into field spans; quoted fields are unquoted into `self.unquoted` and their
    /// span then points there (marked by an offset past the line's end).
    fn split(&mut self, line: &[u8]) -> Result<(), String> {
        self.fields.clear();
        self.unquoted.clear();
        let mut i = 0;
        loop {
            if line.get(i) == Some(&b'"') {
                let mut text = Vec::new();
                let mut k = i + 1;
                loop {
                    match line.get(k) {
                        None => return Err("a quoted field is not closed on its line".into()),
                        Some(b'"') if line.get(k + 1) == Some(&b'"') => {
                            text.push(b'"');
                            k += 2;
                        }
                        Some(b'"') => break,
                        Some(&c) => {
                            text.push(c);
                            k += 1;
                        }
                    }
                }
                k += 1;
                if k < line.len() && line[k] != b',' {
                    return Err("text after a quoted field".into());
                }
                self.fields.push((usize::MAX, self.unquoted.len()));
                self.unquoted.push(text);
                i = k;
            } else {
                let end = memchr::memchr(b',', &line[i..]).map_or(line.len(), |e| i + e);
                self.fields.push((i, end));
                i = end;
            }
            if i >= line.len() {
                return Ok(());
            }
            i += 1; // the comma
        }
    }

    fn field<'a>(&'a self, line: &'a [u8], k: usize) -> &'a [u8] {
        let (a, b) = self.fields[k];
        if a == usize::MAX {
            &self.unquoted[b]
        } else {
            &line[a..b]
        }
    }

    fn header(&mut self, line: &[u8]) -> Result<(), String> {
        self.split(line)?;
        let names: Vec<String> = (0..self.fields.len())
            .map(|k| String::from_utf8_lossy(self.field(line, k)).trim().to_string())
            .collect();
        // One pass over the header: a map from name to column (a wide header has 10⁵ columns).
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(names.len());
        for (k, n) in names.iter().enumerate() {
            if index.insert(n.as_str(), k).is_some() {
                return Err(format!("column {n:?} appears twice in the header"));
            }
        }
        let at = |name: &str| index.get(name).copied();
        self.task_at = at(&self.opts_task).ok_or_else(|| {
            format!(
                "no task column {:?} (columns: {}); name it with --task-column",
                self.opts_task,
                names.join(", ")
            )
        })?;
        self.label_at = at(&self.opts_label);
        if self.require_labels && self.label_at.is_none() {
            return Err(format!(
                "no label column {:?} (columns: {}); name it with --label-column",
                self.opts_label,
                names.join(", ")
            ));
        }
        let features: Vec<String> = match &self.wanted {
            Some(w) => w.clone(),
            None => names
                .iter()
                .filter(|n| **n != self.opts_task && **n != self.opts_label)
                .cloned()
                .collect(),
        };
        if features.is_empty() {
            return Err(format!(
                "no feature columns besides {:?} and {:?}",
                self.opts_task, self.opts_label
            ));
        }
        let missing: Vec<&String> = features.iter().filter(|f| at(f).is_none()).collect();
        if !missing.is_empty() {
            return Err(format!("feature columns {missing:?} of the model are missing"));
        }
        if features.len() as u64 > self.width {
            return Err(format!(
                "{} feature columns, more than the {} expected",
                features.len(),
                self.width
            ));
        }
        self.column_of = vec![None; names.len()];
        for (c, f) in features.iter().enumerate() {
            self.column_of[at(f).expect("checked above")] = Some(c as u32);
        }
        self.n_fields = names.len();
        self.names = features;
        Ok(())
    }
}

impl LineParser for Parser {
    fn parse<'a>(&mut self, line: &'a [u8], out: &mut Builder) -> Result<Option<Row<'a>>, String> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        if self.n_fields == 0 {
            self.header_failed = true;
            self.header(line)?;
            self.header_failed = false;
            return Ok(None);
        }
        self.split(line)?;
        if self.fields.len() != self.n_fields {
            return Err(format!(
                "{} fields, the header has {}",
                self.fields.len(),
                self.n_fields
            ));
        }
        for k in 0..self.n_fields {
            if let Some(c) = self.column_of[k] {
                let text = self.field(line, k).trim_ascii();
                let v = parse_number(text).ok_or_else(|| {
                    format!(
                        "column {:?} holds {}; expected a finite number",
                        self.names[c as usize],
                        shown(text)
                    )
                })?;
                out.push(c, v);
            }
        }
        let label = match self.label_at {
            Some(k) => {
                let text = self.field(line, k).trim_ascii();
                Some(parse_label(text).ok_or_else(|| {
                    format!(
                        "label {} in column {:?}; expected -1/+1 or 0/1",
                        shown(text),
                        self.opts_label
                    )
                })?)
            }
            None => None,
        };
        let (a, b) = self.fields[self.task_at];
        let task = if a == usize::MAX {
            Cow::Owned(self.unquoted[b].trim_ascii().to_vec())
        } else {
            Cow::Borrowed(line[a..b].trim_ascii())
        };
        if task.is_empty() {
            return Err(format!("empty task in column {:?}", self.opts_task));
        }
        Ok(Some(Row {
            label,
            task: Some(task),
        }))
    }

    fn feature_columns(&self) -> Vec<String> {
        self.names.clone()
    }

    fn fatal(&self) -> bool {
        self.header_failed
    }
}
