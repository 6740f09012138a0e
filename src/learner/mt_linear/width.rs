//! Widening MTLinear's feature space in place, so that a stream whose largest feature index is
//! not known in advance (standard input, a pipe, a later file with new indices) is learned
//! without a first pass over it. A feature the model has never seen has every cell zero, so a
//! model widened from `d` to `d'` features predicts and learns exactly as one built with `d'`
//! features that saw the same rows (tested below). Only the intercept moves: its key is
//! `n_features` in the unhashed layouts (under hashing it has its own key and nothing moves).

use super::store::{dense_fits, Store};
use super::MTLinear;
use crate::alloc::{Need, ZeroedBuf};
use crate::error::{invalid, Error, Result};

impl MTLinear {
    /// Widens the feature space to `n_features` columns (at least the current number; below
    /// 2^32 - 1). Atomic: on `Err` (memory) the model is unchanged. The cost follows the
    /// cells already written: none under hashing, the intercepts of the sparse map, a copy of
    /// each allocated dense block (or, when dense blocks of the new width would no longer fit,
    /// one move of the written cells to the sparse map).
    pub fn grow_features(&mut self, n_features: usize) -> Result<()> {
        if n_features < self.n_features || n_features >= u32::MAX as usize {
            return Err(invalid(
                "n_features",
                format!(
                    "MTLinear widens from {} features to at most 2^32 - 2, got {n_features}",
                    self.n_features
                ),
            ));
        }
        if self.journal.active {
            return Err(Error::State(
                "MTLinear cannot widen its feature space inside a batch".into(),
            ));
        }
        if n_features == self.n_features {
            return Ok(());
        }
        if self.params.tail_bits.is_some() && self.params.fit_intercept {
            // The tail hashes the intercept by its column, which widening moves.
            return Err(invalid(
                "n_features",
                "MTLinear with tail_bits and an intercept cannot widen its feature space; give \
                 the width when the model is made",
            ));
        }
        let stride = self.params.rule.stride();
        let intercept = usize::from(self.params.fit_intercept);
        let (old_n, new_width) = (self.n_features, n_features + intercept);
        let n_blocks = self.n_blocks();
        match &mut self.store {
            Store::Hashed { .. } => {}
            Store::Sparse(cells) => {
                if intercept == 1 {
                    cells.rekey(old_n as u32, n_features as u32);
                }
            }
            Store::Dense { .. } if !dense_fits(new_width, stride, n_blocks) => {
                let mut cells = self.store.to_sparse(stride)?;
                if intercept == 1 {
                    cells.rekey(old_n as u32, n_features as u32);
                }
                self.store = Store::Sparse(cells);
            }
            Store::Dense { width, own, shared } => {
                // Every new block first (nothing changes if one cannot be had), then the swap.
                let widen = |old: &ZeroedBuf<f32>| -> Result<ZeroedBuf<f32>> {
                    let mut block =
                        Need::new("n_features", new_width, "an MTLinear weight block").zeroed(&[new_width, stride])?;
                    block[..old_n * stride].copy_from_slice(&old[..old_n * stride]);
                    if intercept == 1 {
                        let (from, to) = (old_n * stride, n_features * stride);
                        block[to..to + stride].copy_from_slice(&old[from..from + stride]);
                    }
                    Ok(block)
                };
                let grown_own: Vec<Option<ZeroedBuf<f32>>> = own
                    .iter()
                    .map(|b| b.as_ref().map(widen).transpose())
                    .collect::<Result<_>>()?;
                let grown_shared = shared.as_ref().map(widen).transpose()?;
                *own = grown_own;
                *shared = grown_shared;
                *width = new_width;
            }
        }
        self.n_features = n_features;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::data::Rows;
    use crate::kernel::TaskKernel;
    use crate::learner::mt_linear::{Loss, MTLinear, MTLinearParams, UpdateRule};
    use crate::learner::{decision, learn, Build, GraphSetting, OnlineLearner};
    use crate::rng::SplitMix64;
    use crate::state::CheckState;

    /// CSR rows (indptr, indices, data), their tasks and labels.
    type Stream = (Vec<i64>, Vec<u32>, Vec<f64>, Vec<i64>, Vec<f64>);

    /// `n` sparse rows over `k` tasks whose columns stay below `width`.
    fn rows(n: usize, width: u64, k: i64, seed: u64) -> Stream {
        let mut rng = SplitMix64::new(seed);
        let (mut indptr, mut indices, mut data, mut tasks, mut y) = (vec![0], vec![], vec![], vec![], vec![]);
        for _ in 0..n {
            let mut cols: Vec<u32> = (0..3).map(|_| rng.below(width) as u32).collect();
            cols.sort_unstable();
            cols.dedup();
            for &c in &cols {
                indices.push(c);
                data.push(0.5 + f64::from(c % 3));
            }
            indptr.push(indices.len() as i64);
            tasks.push(rng.below(k as u64) as i64);
            y.push(if cols[0].is_multiple_of(2) { 1.0 } else { -1.0 });
        }
        (indptr, indices, data, tasks, y)
    }

    /// Learns rows narrow then wide on a model grown in between, and on one built wide: the same
    /// scores, the same state, a valid state.
    fn grown_equals_built_wide(params: MTLinearParams, graph: &TaskKernel, narrow: usize, wide: usize) {
        let k = graph.n_tasks() as i64;
        let mut grown = MTLinear::build(&params, &GraphSetting::new(graph, narrow)).unwrap();
        let mut built = MTLinear::build(&params, &GraphSetting::new(graph, wide)).unwrap();
        let mut scores = (Vec::new(), Vec::new());
        for (part, width) in [(0u64, narrow), (1, wide)] {
            let (indptr, indices, data, tasks, y) = rows(300, width as u64, k, 7 + part);
            if width == wide {
                grown.grow_features(wide).unwrap();
            }
            let on = |n_cols| Rows::Csr {
                indptr: &indptr,
                indices: &indices,
                data: &data,
                n_cols,
            };
            scores.0.extend(learn(&mut grown, &on(width), &tasks, &y).unwrap());
            scores.1.extend(learn(&mut built, &on(wide), &tasks, &y).unwrap());
        }
        assert_eq!(scores.0, scores.1, "{params:?} {narrow} -> {wide}");
        let (indptr, indices, data, tasks, _) = rows(50, wide as u64, k, 99);
        let test = Rows::Csr {
            indptr: &indptr,
            indices: &indices,
            data: &data,
            n_cols: wide,
        };
        assert_eq!(
            decision(&grown, &test, &tasks).unwrap(),
            decision(&built, &test, &tasks).unwrap()
        );
        assert_eq!(grown.n_features(), wide);
        grown.check_state().unwrap();
        assert_eq!(
            std::mem::discriminant(&grown.store),
            std::mem::discriminant(&built.store)
        );
    }

    #[test]
    fn a_grown_model_is_the_model_built_wide_in_every_layout() {
        let graphs = [
            TaskKernel::complete_open(3).unwrap(),
            TaskKernel::disconnected(3).unwrap(),
        ];
        for graph in &graphs {
            for intercept in [true, false] {
                for (rule, bits) in [("normalized", None), ("adagrad", None), ("sgd", Some(12))] {
                    let params = MTLinearParams {
                        loss: Loss::Logistic,
                        rule: UpdateRule::parse(rule).unwrap(),
                        learning_rate: 0.5,
                        fit_intercept: intercept,
                        hash_bits: bits,
                        shared_rate: 1.0,
                        max_bytes: None,
                        tail_bits: None,
                    };
                    grown_equals_built_wide(params, graph, 5, 40); // dense to dense
                    grown_equals_built_wide(params, graph, 5, 90_000); // dense to wider dense
                    grown_equals_built_wide(params, graph, 6_000_000, 9_000_000); // sparse to sparse
                    grown_equals_built_wide(params, graph, 20, 30_000_000); // dense to sparse
                }
            }
        }
    }

    #[test]
    fn the_width_never_shrinks() {
        let mut m = MTLinear::build(
            &MTLinearParams::default(),
            &GraphSetting::new(&TaskKernel::complete_open(2).unwrap(), 10),
        )
        .unwrap();
        assert!(m.grow_features(9).is_err());
        assert!(m.grow_features(u32::MAX as usize).is_err());
        m.grow_features(10).unwrap();
        assert_eq!(m.n_features(), 10);
    }
}
