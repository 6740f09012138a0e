//! What `omtl learn` prints on standard error: Vowpal Wabbit's progressive report while it
//! learns ([`Progress`]) and the summary at the end ([`finished`]).

use std::fmt::Write as _;

use crate::io::Chunk;
use crate::model::{ClassLabel, LabelForm, Predicted};

/// Vowpal Wabbit's progressive report: a line at examples 1, 2, 4, 8, ... with the average
/// loss so far and since the last line, the example's label, prediction and number of features.
/// The loss is 0/1 (each prediction made before the example is learned): every learner has it,
/// while the logistic loss needs a probabilistic score (docs/DECISIONS.md, "The CLI report").
/// It counts the examples of one run (the model's book counts every example it ever learned).
#[derive(Debug, Clone)]
pub struct Progress {
    /// Examples seen.
    pub n: u64,
    /// Mistakes made (predictions before the update).
    pub mistakes: u64,
    next_line: u64,
    last_n: u64,
    last_mistakes: u64,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            n: 0,
            mistakes: 0,
            next_line: 1,
            last_n: 0,
            last_mistakes: 0,
        }
    }
}

impl Progress {
    /// The two header lines.
    pub fn header() -> String {
        format!(
            "{:<12} {:<12} {:>12} {:>8} {:>8} {:>8}\n{:<12} {:<12} {:>12} {:>8} {:>8} {:>8}",
            "average",
            "since",
            "example",
            "current",
            "current",
            "current",
            "0/1 loss",
            "last",
            "counter",
            "label",
            "predict",
            "features"
        )
    }

    /// Counts the first `scores.len()` rows of a chunk (labels as written, a score >= 0
    /// predicting +1, written in `form`) and appends the report lines they reach to `out` (the
    /// header before the first), unless `quiet`.
    pub fn add(&mut self, chunk: &Chunk, scores: &[f64], form: &LabelForm, quiet: bool, out: &mut String) {
        let n0 = self.n;
        let mut total = self.mistakes;
        for (r, (&label, &score)) in chunk.labels.iter().zip(scores).enumerate() {
            total += u64::from((label == 1.0) != (score >= 0.0));
            let at = n0 + r as u64 + 1;
            if !quiet && at == self.next_line {
                if at == 1 {
                    out.push_str(&Self::header());
                    out.push('\n');
                }
                let since = (total - self.last_mistakes) as f64 / (at - self.last_n) as f64;
                let nnz = chunk.indptr[r + 1] - chunk.indptr[r];
                let mut predicted = String::new();
                push_label(&mut predicted, &form.predicted(score >= 0.0));
                let _ = writeln!(
                    out,
                    "{:<12.6} {:<12.6} {:>12} {:>8} {:>8} {:>8}",
                    total as f64 / at as f64,
                    since,
                    at,
                    label as i64,
                    predicted,
                    nnz
                );
                self.last_n = at;
                self.last_mistakes = total;
                self.next_line *= 2;
            }
        }
        self.n += scores.len() as u64;
        self.mistakes = total;
    }

    /// The average 0/1 loss so far.
    pub fn loss(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.mistakes as f64 / self.n as f64
        }
    }
}

/// Appends a predicted label as `omtl` writes it: -1/1, 0/1, True/False, or the model's own
/// class.
pub fn push_label(out: &mut String, p: &Predicted) {
    match p {
        Predicted::Int(1) => out.push('1'),
        Predicted::Int(0) => out.push('0'),
        Predicted::Int(-1) => out.push_str("-1"),
        Predicted::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Predicted::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Predicted::Class(ClassLabel::Number(n)) => {
            let _ = write!(out, "{n}");
        }
        Predicted::Class(ClassLabel::Str(s)) => out.push_str(s),
    }
}

/// What the last lines of `omtl learn` say.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    /// Examples learned in this run (every pass).
    pub n: u64,
    /// Passes made.
    pub passes: usize,
    /// The progressive 0/1 loss of the run.
    pub loss: f64,
    /// The model's tasks.
    pub n_tasks: usize,
    /// The model's feature columns.
    pub n_features: usize,
    /// Wall time of the run.
    pub seconds: f64,
    /// Lines skipped (`--skip-bad-lines`) and the first one's message.
    pub skipped: u64,
    /// The first skipped line's message.
    pub first_skipped: Option<String>,
    /// Where the outputs went: the predictions, the raw scores, the model.
    pub written: Vec<String>,
}

/// The last lines of `omtl learn` (VW's "finished run"; with `quiet`, only the skipped lines).
pub fn finished(f: &Finished, quiet: bool) -> String {
    let mut out = String::new();
    if quiet {
        if f.skipped > 0 {
            let first = f.first_skipped.as_deref().unwrap_or("");
            let _ = write!(out, "omtl learn: skipped {} bad lines (first: {first})", f.skipped);
        }
        return out;
    }
    let _ = write!(
        out,
        "\nfinished run\nnumber of examples = {}\npasses = {}\naverage 0/1 loss = {:.6} (each prediction made before \
         learning the example)\ntasks = {}\nfeature columns = {}\nseconds = {:.3} ({} examples/s)",
        f.n,
        f.passes,
        f.loss,
        f.n_tasks,
        f.n_features,
        f.seconds,
        thousands((f.n as f64 / f.seconds.max(1e-9)).round() as u64)
    );
    if f.skipped > 0 {
        let first = f.first_skipped.as_deref().unwrap_or("");
        let _ = write!(out, "\nskipped bad lines = {} (first: {first})", f.skipped);
    }
    for line in &f.written {
        out.push('\n');
        out.push_str(line);
    }
    out
}

/// `n` with commas between thousands, as Python's `f"{n:,}"`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated_as_python_does() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
