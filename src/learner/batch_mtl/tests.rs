//! MTFL and TRML: the solver against its optimality conditions, the learner's schedule,
//! atomicity and restored states.

use super::solver::Problem;
use super::*;
use crate::data::Rows;
use crate::learner::test_support::stream;

fn problem(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<u32>, Vec<f64>) {
    let (x, tasks, y) = stream(n, d, k, seed, |x, _, noise| x[0] + 0.4 * x[1] + 0.5 * noise > 0.0);
    (x, tasks.into_iter().map(|t| t as u32).collect(), y)
}

/// NaN in the stored examples (a tampered state, or X written by another thread) would make
/// the line search `loop { .. L *= 2 }` spin forever: the retrain that meets it
/// fails, the example that triggered it is not kept, and the model is unchanged.
#[test]
fn nan_in_stored_examples_ends_the_line_search_with_an_error() {
    let (d, k) = (3, 2);
    let (x, tasks, y) = problem(20, d, k, 7);
    for reg in [Regularizer::L21, Regularizer::Trace] {
        let mut m = BatchMtl::build(
            &BatchMtlParams {
                regularizer: reg,
                rho: 0.01,
                retrain_every: 10,
            },
            &LinearSetting {
                n_tasks: k,
                n_features: d,
                sparse: false,
            },
        )
        .unwrap();
        let mut scratch = Scratch::default();
        for t in 0..9 {
            m.update(
                Row::Dense(&x[t * d..(t + 1) * d]),
                tasks[t] as usize,
                y[t],
                0.0,
                &mut scratch,
            )
            .unwrap();
        }
        if let Store::Dense(data) = &mut m.store {
            data[4] = f32::NAN;
        }
        let before = m.clone();
        let err = m
            .update(
                Row::Dense(&x[9 * d..10 * d]),
                tasks[9] as usize,
                y[9],
                0.0,
                &mut scratch,
            )
            .unwrap_err();
        assert!(err.to_string().contains("line search"), "{err}");
        // (the stored NaN makes `==` false; the debug forms compare every bit that matters)
        assert_eq!(format!("{m:?}"), format!("{before:?}"));
    }
    // The public solver reports the failure and leaves (w, c) as they were.
    let (mut w, mut c) = (vec![0.5; d * k], vec![0.25; k]);
    let mut bad = x.clone();
    bad[0] = f64::NAN;
    let rows = Rows::dense(&bad, 20, d);
    let report = solve(
        &rows,
        &tasks,
        &y,
        k,
        Regularizer::L21,
        0.01,
        &mut w,
        &mut c,
        SolverOptions::default(),
    );
    assert!(report.is_err());
    assert_eq!((w, c), (vec![0.5; d * k], vec![0.25; k]));
}

#[test]
fn svt_shrinks_singular_values() {
    let (d, k) = (7, 3);
    let (x, _, _) = problem(d, k, 1, 3);
    let mut w = x.clone();
    let before = DMatrix::from_column_slice(d, k, &x).singular_values();
    svt(&mut w, d, k, 0.3);
    let after = DMatrix::from_column_slice(d, k, &w).singular_values();
    let mut b: Vec<f64> = before.iter().map(|s| (s - 0.3).max(0.0)).collect();
    let mut a: Vec<f64> = after.iter().copied().collect();
    b.sort_by(f64::total_cmp);
    a.sort_by(f64::total_cmp);
    a.iter()
        .zip(&b)
        .for_each(|(p, q)| assert!((p - q).abs() < 1e-12, "{a:?} {b:?}"));
}

#[test]
fn solver_decreases_the_objective_and_prox_zeroes_rows() {
    let (n, d, k) = (300, 6, 3);
    let (x, tasks, y) = problem(n, d, k, 9);
    let rows = Rows::dense(&x, n, d);
    for reg in [Regularizer::L21, Regularizer::Trace] {
        let (mut w, mut c) = (vec![0.0; d * k], vec![0.0; k]);
        let start = Problem::new(&rows, &tasks, &y, k).loss(&w, &c);
        let mut run = || {
            solve(
                &rows,
                &tasks,
                &y,
                k,
                reg,
                0.05,
                &mut w,
                &mut c,
                SolverOptions::default(),
            )
            .unwrap()
        };
        let rep = run();
        assert!(rep.objective < start && rep.n_iter >= 2);
        // Warm start from the solution: stops within a few iterations.
        let again = run();
        assert!(again.n_iter <= rep.n_iter && (again.objective - rep.objective).abs() <= 1e-3 * rep.objective);
    }
    let mut w = vec![1.0, 0.1, 2.0, 0.1];
    prox(Regularizer::L21, &mut w, 2, 2, 0.5);
    assert_eq!(w[1], 0.0);
    assert_eq!(w[3], 0.0);
    assert!(w[0] > 0.0 && w[2] > 0.0);
}

#[test]
fn an_interrupted_retrain_is_abandoned_with_its_example() {
    use crate::learner::OnlineLearner;
    let (n, d, k) = (400, 5, 2);
    let (x, tasks, y) = problem(n, d, k, 3);
    // No tolerance: the solver would run many iterations.
    let opts = SolverOptions {
        tol: 0.0,
        max_iter: 1_000_000,
    };
    for sparse in [false, true] {
        let mut model = BatchMtl::build(
            &BatchMtlParams {
                regularizer: Regularizer::Trace,
                rho: 0.01,
                retrain_every: n as u64,
            },
            &LinearSetting {
                n_tasks: k,
                n_features: d,
                sparse,
            },
        )
        .unwrap()
        .with_options(opts);
        let mut scratch = Scratch::default();
        for t in 0..n - 1 {
            let row = Row::Dense(&x[t * d..(t + 1) * d]);
            model.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
        }
        let before = model.clone();
        let last = Row::Dense(&x[(n - 1) * d..]);
        let start = std::time::Instant::now();
        let zero = std::time::Duration::ZERO; // poll at the first check: no race with the solver
        let outcome = crate::interrupt::with_hook_every(zero, Box::new(|| true), || {
            model.learn_one(last, tasks[n - 1] as usize, y[n - 1], &mut scratch)
        });
        assert!(matches!(outcome, Err(crate::Error::Interrupted { .. })), "{outcome:?}");
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(model, before, "the abandoned retrain left a trace");
    }
}
