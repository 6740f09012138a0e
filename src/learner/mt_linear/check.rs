//! MTLinear's state checks (a loaded state is validated before use) and equality.

use super::*;

impl MTLinear {
    /// Same hyper-parameters (task kernel, features, loss, rule, rate, intercept, hashing).
    pub fn same_settings(&self, other: &Self) -> bool {
        self.n_features == other.n_features && self.params == other.params && self.tasks.approx_eq(&other.tasks)
    }
}

impl CheckState for MTLinear {
    /// Everything `score` and `update` index or divide by: the factor's blocks exist, the cells
    /// fit the layout the parameters choose, the component counters exist; values finite.
    fn check_state(&self) -> Result<()> {
        self.tasks.check_state()?;
        ensure(self.n_tasks == self.tasks.n_tasks(), || {
            "n_tasks differs from the task kernel".into()
        })?;
        param(self.params.check())?;
        ensure((1..u32::MAX as usize).contains(&self.n_features), || {
            "n_features must be in [1, 2^32 - 1)".into()
        })?;
        check_counts("MTLinear", &[self.n_updates])?;
        let dense_t = matches!(self.tasks, TaskKernel::Dense { .. });
        let n_terms = if dense_t { self.n_tasks } else { 0 };
        check_len("MTLinear factor", self.terms.len(), n_terms)?;
        check_len("MTLinear components", self.component.len(), n_terms)?;
        check_len(
            "MTLinear component counters",
            self.stats.len(),
            self.tasks.n_components(),
        )?;
        for terms in &self.terms {
            for &(r, b) in terms {
                ensure((r as usize) < self.n_tasks && b.abs() <= MAX_MAGNITUDE, || {
                    format!(
                        "factor entry ({r}, {b}) outside the {} blocks or too large",
                        self.n_tasks
                    )
                })?;
            }
        }
        ensure(self.component.iter().all(|&c| (c as usize) < self.stats.len()), || {
            "a task's component has no counters".into()
        })?;
        for st in &self.stats {
            let counters = [st.n_examples, st.n_updates, st.sum_norm_x];
            check_finite("MTLinear component counters", &counters)?;
            // Negative counters would turn the multiplier √(n/S) into NaN.
            ensure(counters.iter().all(|&v| v >= 0.0), || {
                format!("negative MTLinear component counters {counters:?}")
            })?;
        }
        let stride = self.params.rule.stride();
        let width = self.n_features + usize::from(self.params.fit_intercept);
        let mut values: Vec<&[f32]> = Vec::new();
        match (&self.store, self.params.hash_bits) {
            (Store::Hashed { bits, table }, Some(b)) if *bits == b => {
                if let Some(t) = table {
                    check_len(
                        "MTLinear's weight table",
                        t.len(),
                        checked_size("the table", 1 << b, stride)?,
                    )?;
                    values.push(t);
                }
            }
            (Store::Dense { width: w, own, shared }, None)
                if *w == width && dense_fits(width, stride, self.n_blocks()) =>
            {
                check_len("MTLinear's dense blocks", own.len(), self.n_tasks)?;
                ensure(shared.is_none() || self.n_blocks() > self.n_tasks, || {
                    "a shared MTLinear block without the complete graph".into()
                })?;
                let len = checked_size("an MTLinear block", width, stride)?;
                for block in own.iter().chain(std::iter::once(shared)).flatten() {
                    check_len("an MTLinear block", block.len(), len)?;
                    values.push(block);
                }
            }
            (Store::Sparse(cells), None) if width > DENSE_MAX_WIDTH || self.params.max_bytes.is_some() => {
                let n_blocks = self.n_blocks();
                ensure(
                    cells.keys().iter().all(|&(r, key)| {
                        let block_ok = if r == SHARED {
                            n_blocks > self.n_tasks
                        } else {
                            (r as usize) < self.n_tasks
                        };
                        block_ok && (key as usize) < width
                    }),
                    || "a sparse MTLinear cell outside the blocks or the features".into(),
                )?;
                ensure(cells.cells().len() == cells.len() * stride, || {
                    "sparse MTLinear cells of the wrong size".into()
                })?;
                values.push(cells.cells());
            }
            _ => {
                return Err(Error::State(
                    "MTLinear's storage does not follow from its parameters".into(),
                ))
            }
        }
        self.check_budget_state()?;
        for data in values {
            ensure(data.iter().all(|v| v.is_finite()), || {
                "an MTLinear cell holds a value that is not finite".into()
            })?;
            // Σ g²u² and max |u| are never negative (a negative G makes a rate NaN).
            ensure(
                data.chunks_exact(stride)
                    .all(|cell| cell[1..].iter().all(|&v| v >= 0.0)),
                || "negative per-coordinate statistics in an MTLinear cell".into(),
            )?;
        }
        Ok(())
    }
}

impl PartialEq for MTLinear {
    /// The model state (scratch buffers and the journal are not part of it).
    fn eq(&self, other: &Self) -> bool {
        self.n_tasks == other.n_tasks
            && self.n_features == other.n_features
            && self.params == other.params
            && self.tasks == other.tasks
            && self.terms == other.terms
            && self.component == other.component
            && self.stats == other.stats
            && self.store == other.store
            && self.n_updates == other.n_updates
            && self.budget == other.budget
    }
}
