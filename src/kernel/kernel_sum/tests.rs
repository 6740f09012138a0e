//! The kernel sums against the generic path, for every kernel, storage and window.

use super::dense::{dense_score_generic, exp_poly};
use super::*;
use crate::kernel::KernelKind;
use crate::rng::SplitMix64;

fn unif(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

fn kernels() -> Vec<BaseKernel> {
    vec![
        BaseKernel::linear(),
        BaseKernel::poly(3, 0.5, 1.0).unwrap(),
        BaseKernel::new(
            KernelKind::Poly {
                degree: 2,
                gamma: 1.0,
                coef0: 0.5,
            },
            true,
        )
        .unwrap(),
        BaseKernel::rbf(0.7).unwrap(),
    ]
}

fn task_kernels(k: usize) -> Vec<TaskKernel> {
    vec![
        TaskKernel::complete(k).unwrap(),
        TaskKernel::disconnected(k).unwrap(),
        TaskKernel::from_edges(k, &[(0, 1, 1.0), (2, 3, 0.5)]).unwrap(),
    ]
}

/// Fills a set with `n` random rows (sparse ones with ~30% non-zeros) and random evictions.
fn random_set(
    n: usize,
    d: usize,
    k: usize,
    sparse: bool,
    kernel: &BaseKernel,
    rng: &mut SplitMix64,
) -> (ActiveSet, SparseIndex) {
    let mut set = ActiveSet::new(d, sparse);
    let mut index = SparseIndex::with_threshold(sparse, 0);
    index.ensure(&set);
    assert_eq!(index.is_built(), sparse);
    let mut t = 0;
    while set.len() < n {
        t += 1;
        let (mut idx, mut val) = (Vec::new(), Vec::new());
        for j in 0..d as u32 {
            if !sparse || unif(rng) < -0.4 {
                idx.push(j);
                val.push(unif(rng));
            }
        }
        let dense: Vec<f64> = {
            let mut v = vec![0.0; d];
            idx.iter().zip(&val).for_each(|(&j, &x)| v[j as usize] = x);
            v
        };
        let row = if sparse {
            Row::Sparse {
                indices: &idx,
                values: &val,
            }
        } else {
            Row::Dense(&dense)
        };
        let task = rng.below(k as u64) as usize;
        let slot = set.push(row, task, 1.0, t, unif(rng), kernel);
        index.add(&set, slot);
        // Every third insertion also evicts a random element (exercises the slot moves).
        if t % 3 == 0 {
            let position = rng.below(set.len() as u64) as usize;
            index.remove(&set, set.slot_at(position));
            set.remove_at(position);
        }
    }
    (set, index)
}

#[test]
fn fast_paths_match_the_row_store_loop() {
    let (d, k) = (9, 5);
    let mut rng = SplitMix64::new(11);
    let mut scratch = Scratch::default();
    for sparse in [false, true] {
        for kernel in kernels() {
            for n in [0, 1, 3, 4, 5, 63, 64, 65, 130] {
                let (set, index) = random_set(n, d, k, sparse, &kernel, &mut rng);
                let stale = SparseIndex::default();
                for tasks in task_kernels(k) {
                    for _ in 0..4 {
                        let xq: Vec<f64> = (0..d)
                            .map(|_| if unif(&mut rng) < 0.0 { 0.0 } else { unif(&mut rng) })
                            .collect();
                        let (qi, qv): (Vec<u32>, Vec<f64>) = (0..d as u32)
                            .filter(|&j| xq[j as usize] != 0.0)
                            .map(|j| (j, xq[j as usize]))
                            .unzip();
                        let task = rng.below(k as u64) as usize;
                        for row in [
                            Row::Dense(&xq),
                            Row::Sparse {
                                indices: &qi,
                                values: &qv,
                            },
                        ] {
                            let q = Query::new(row, &kernel);
                            let expect = generic_score(&set, &kernel, &tasks, &q, task, &mut scratch);
                            let tol = 1e-12 * expect.abs().max(1.0);
                            let got = weighted_score(&set, &index, &kernel, &tasks, &q, task, &mut scratch);
                            assert!((got - expect).abs() <= tol, "{got} {expect}");
                            // Sparse rows without a built index: the row-store loop itself.
                            let plain = weighted_score(&set, &stale, &kernel, &tasks, &q, task, &mut scratch);
                            if sparse {
                                assert_eq!(plain.to_bits(), expect.to_bits());
                                if matches!(row, Row::Sparse { .. }) {
                                    // The index adds the same terms in the same order.
                                    assert_eq!(got.to_bits(), expect.to_bits());
                                }
                            }
                            if let (Row::Dense(x), false) = (row, sparse) {
                                let generic = dense_score_generic::<false>(&set, &kernel, &tasks, x, &q, task);
                                assert!((generic - expect).abs() <= tol, "{generic} {expect}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn dense_kernel_rows_and_coefficient_sums_match_the_row_store_loop() {
    let (d, k) = (9, 3);
    let mut rng = SplitMix64::new(23);
    let mut scratch = Scratch::default();
    for kernel in kernels() {
        for n in [0, 1, 5, 64, 130] {
            let (set, _) = random_set(n, d, k, false, &kernel, &mut rng);
            let xq: Vec<f64> = (0..d).map(|_| unif(&mut rng)).collect();
            let q = Query::new(Row::Dense(&xq), &kernel);
            let mut want = vec![0.0; n];
            set.rows()
                .for_each_kernel(&kernel, &q, &mut scratch, |_| true, |slot, kv| want[slot] = kv);
            let mut got = vec![f64::NAN; n];
            assert!(dense_kernel_row(set.rows(), &kernel, &q, &mut got));
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} {w}");
            }
            let coefs: Vec<f64> = (0..n).map(|_| unif(&mut rng)).collect();
            let sum: f64 = coefs.iter().zip(&want).map(|(c, w)| c * w).sum();
            let fast = dense_coef_sum(set.rows(), &kernel, &q, &coefs).unwrap();
            assert!((fast - sum).abs() <= 1e-12 * sum.abs().max(1.0), "{fast} {sum}");
        }
    }
    // A sparse store or query takes the row-store loop.
    let kernel = BaseKernel::rbf(0.5).unwrap();
    let (set, _) = random_set(10, d, k, true, &kernel, &mut rng);
    let xq = vec![0.5; d];
    let q = Query::new(Row::Dense(&xq), &kernel);
    assert!(!dense_kernel_row(set.rows(), &kernel, &q, &mut [0.0; 10]));
    assert!(dense_coef_sum(set.rows(), &kernel, &q, &[0.0; 10]).is_none());
}

#[test]
fn a_rebuilt_index_equals_the_incremental_one() {
    let kernel = BaseKernel::poly(2, 1.0, 1.0).unwrap();
    let mut rng = SplitMix64::new(5);
    let (set, index) = random_set(80, 12, 3, true, &kernel, &mut rng);
    let mut rebuilt = SparseIndex::with_threshold(true, 0);
    rebuilt.ensure(&set);
    assert!(rebuilt.is_built());
    let tasks = TaskKernel::complete(3).unwrap();
    let (qi, qv) = (vec![0u32, 3, 4, 7, 11], vec![0.5, -1.0, 2.0, 0.25, 1.0]);
    let q = Query::new(
        Row::Sparse {
            indices: &qi,
            values: &qv,
        },
        &kernel,
    );
    let mut scratch = Scratch::default();
    let a = weighted_score(&set, &index, &kernel, &tasks, &q, 1, &mut scratch);
    let b = weighted_score(&set, &rebuilt, &kernel, &tasks, &q, 1, &mut scratch);
    let c = generic_score(&set, &kernel, &tasks, &q, 1, &mut scratch);
    assert_eq!(a.to_bits(), b.to_bits());
    assert_eq!(a.to_bits(), c.to_bits());
}

#[test]
fn polynomial_exp_is_accurate() {
    let mut worst: f64 = 0.0;
    for i in 0..200_000 {
        let x = -708.0 + 1417.0 * i as f64 / 200_000.0;
        let e = x.exp();
        for got in [exp_poly::<false>(x), exp_poly::<true>(x)] {
            worst = worst.max(((got - e) / e).abs());
        }
    }
    assert!(worst < 5e-16, "{worst:e}");
    assert_eq!(exp_poly::<false>(0.0), 1.0);
    assert_eq!(exp_poly::<false>(-800.0), 0.0);
}

#[test]
fn columns_and_lists_add_the_gathers_terms_through_promotions_and_demotions() {
    // Feature shares from every row down to rare ones, shifting over time, in a set that grows
    // and is churned: features move from lists to columns and back, and every score keeps the
    // gather's bits.
    let kernel = BaseKernel::poly(3, 0.5, 1.0).unwrap();
    let tasks = TaskKernel::complete(3).unwrap();
    let mut rng = SplitMix64::new(7);
    let d = 120usize;
    let mut set = ActiveSet::new(d, true);
    let mut index = SparseIndex::with_threshold(true, 16);
    let mut scratch = Scratch::default();
    let (mut most, mut fewer_later, mut scored) = (0, false, 0);
    let random_row = |rng: &mut SplitMix64, shift: usize| -> (Vec<u32>, Vec<f64>) {
        (0..d as u32)
            .filter_map(|j| {
                let rank = (j as usize + shift) % d;
                let share = 1.0 / (1.0 + rank as f64).powf(0.8);
                ((unif(rng) + 1.0) / 2.0 < share).then(|| (j, unif(rng)))
            })
            .unzip()
    };
    for t in 0..2400u64 {
        let shift = (t as usize / 400) * 37;
        let (idx, val) = random_row(&mut rng, shift);
        let row = Row::Sparse {
            indices: &idx,
            values: &val,
        };
        index.ensure(&set);
        if set.len() >= 150 {
            let position = rng.below(set.len() as u64) as usize;
            index.remove(&set, set.slot_at(position));
            set.remove_at(position);
        }
        let slot = set.push(row, rng.below(3) as usize, 1.0, t, unif(&mut rng), &kernel);
        index.add(&set, slot);
        fewer_later |= index.n_columns() < most;
        most = most.max(index.n_columns());
        if t % 7 == 0 && index.is_built() {
            let (qi, qv) = random_row(&mut rng, shift);
            let q = Query::new(
                Row::Sparse {
                    indices: &qi,
                    values: &qv,
                },
                &kernel,
            );
            let task = rng.below(3) as usize;
            let expect = generic_score(&set, &kernel, &tasks, &q, task, &mut scratch);
            let got = weighted_score(&set, &index, &kernel, &tasks, &q, task, &mut scratch);
            assert_eq!(got.to_bits(), expect.to_bits(), "t = {t}");
            scored += 1;
        }
    }
    assert!(
        most > 0 && fewer_later && scored > 300,
        "{most} columns at most; fewer later: {fewer_later}"
    );
    // A query with a non-finite value is left to the gather.
    let (qi, qv) = (vec![0u32, 1], vec![1.0, f64::INFINITY]);
    let row = Row::Sparse {
        indices: &qi,
        values: &qv,
    };
    assert!(index
        .score(&set, &kernel, &tasks, &qi, &qv, &Query::new(row, &kernel), 0)
        .is_none());
    // The same index rebuilt from the set gives the same numbers.
    let mut rebuilt = SparseIndex::with_threshold(true, 0);
    rebuilt.ensure(&set);
    let (qi, qv) = random_row(&mut rng, 0);
    let q = Query::new(
        Row::Sparse {
            indices: &qi,
            values: &qv,
        },
        &kernel,
    );
    let a = weighted_score(&set, &index, &kernel, &tasks, &q, 1, &mut scratch);
    let b = weighted_score(&set, &rebuilt, &kernel, &tasks, &q, 1, &mut scratch);
    assert_eq!(a.to_bits(), b.to_bits());
}
