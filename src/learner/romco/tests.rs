//! Tests of ROMCO.

use super::*;
use crate::data::Rows;
use crate::learner::test_support::{stream, Csr};
use crate::learner::{learn, learn_rounds, predict_sign};

fn random_stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
    let sign = |task: usize| if task.is_multiple_of(2) { 1.0 } else { -1.0 };
    stream(n, d, k, seed, |x, task, _| sign(task) * x[0] + 0.3 * x[1] > 0.0)
}

fn model(k: usize, d: usize, e1: f64, e2: f64, l1: f64, l2: f64, trigger: RomcoTrigger) -> Romco {
    Romco::build(
        &RomcoParams {
            eta1: e1,
            eta2: e2,
            lambda1: l1,
            lambda2: l2,
            update: trigger,
            svt_route: SvtRoute::Auto,
        },
        &LinearSetting::new(k, d),
    )
    .unwrap()
}

/// INV-R1: with λ1 = λ2 = 0 each task is an independent "margin Perceptron" with step η1+η2.
#[test]
fn unregularised_romco_is_independent_margin_perceptrons() {
    let (n, d, k) = (500, 5, 3);
    let (x, tasks, y) = random_stream(n, d, k, 3);
    let rows = Rows::dense(&x, n, d);
    let mut a = model(k, d, 0.3, 0.2, 0.0, 0.0, RomcoTrigger::Loss);
    let mut b = model(k, d, 0.1, 0.4, 0.0, 0.0, RomcoTrigger::Loss);
    let sa = learn(&mut a, &rows, &tasks, &y).unwrap();
    let sb = learn(&mut b, &rows, &tasks, &y).unwrap();
    let replayed = independent_linear_scores(&x, &tasks, &y, d, k, 0.5, |margin| margin < 1.0);
    for (t, &f) in replayed.iter().enumerate() {
        assert!((f - sa[t]).abs() <= 1e-12 * f.abs().max(1.0));
        assert!((f - sb[t]).abs() <= 1e-12 * f.abs().max(1.0));
    }
    assert_eq!(a.rank(), k);
}

/// The scores of k independent linear learners replayed on a dense stream: task i's weights take
/// `step y x` after every example whose margin `y f` passes `updates`.
fn independent_linear_scores(
    x: &[f64],
    tasks: &[i64],
    y: &[f64],
    d: usize,
    k: usize,
    step: f64,
    updates: impl Fn(f64) -> bool,
) -> Vec<f64> {
    let mut z = vec![vec![0.0; d]; k];
    (0..y.len())
        .map(|t| {
            let (i, xt) = (tasks[t] as usize, &x[t * d..(t + 1) * d]);
            let f = dense_dot(&z[i], xt);
            if updates(y[t] * f) {
                z[i].iter_mut().zip(xt).for_each(|(w, &v)| *w += step * y[t] * v);
            }
            f
        })
        .collect()
}

fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
    num / b.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-300)
}

fn diagnostic(m: &Romco, name: &str) -> f64 {
    m.diagnostics().into_iter().find(|(n, _)| *n == name).unwrap().1
}

/// INV-R4 along a P1 stream with the default θ = 10⁻⁵ (below 10⁻⁶ σ_max): U stays well
/// conditioned, so route (b) is accurate and is taken, its eigendecomposition updated from
/// the previous one at nearly every update; it follows route (a) to 10⁻⁹ relative.
#[test]
fn updated_gram_route_follows_route_a() {
    let (n, d, k) = (3000, 40, 6);
    let (x, tasks, y) = random_stream(n, d, k, 21);
    let rows = Rows::dense(&x, n, d);
    let mut auto = model(k, d, 0.1, 0.1, 1e-4, 1e-4, RomcoTrigger::Loss);
    let mut qr = model(k, d, 0.1, 0.1, 1e-4, 1e-4, RomcoTrigger::Loss).with_route(SvtRoute::Qr);
    let chunk = 300;
    for start in (0..n).step_by(chunk) {
        let part = Rows::dense(&x[start * d..(start + chunk) * d], chunk, d);
        let (t, yy) = (&tasks[start..start + chunk], &y[start..start + chunk]);
        let (sa, sq) = (
            learn(&mut auto, &part, t, yy).unwrap(),
            learn(&mut qr, &part, t, yy).unwrap(),
        );
        assert_eq!(
            sa.iter().map(|&f| predict_sign(f)).collect::<Vec<_>>(),
            sq.iter().map(|&f| predict_sign(f)).collect::<Vec<_>>()
        );
        assert!(
            relative_difference(&auto.u_matrix(), &qr.u_matrix()) < 1e-9,
            "row {start}"
        );
    }
    let _ = rows;
    let updates = auto.n_updates as f64;
    assert!(updates > 500.0);
    assert_eq!(diagnostic(&auto, "n_gram_svt"), updates);
    // Full eigendecompositions only for the first updates of each column and after resyncs.
    assert!(diagnostic(&auto, "n_eigen_updates") >= updates - (k as f64 + updates / RESYNC_EVERY as f64) - 1.0);
    assert_eq!(diagnostic(&qr, "n_gram_svt"), 0.0);
}

/// The shape-driven forms follow route (a): wide U on the row side (`D = UUᵀ`,
/// eigendecomposition updated per example) and tall U held factored (`U = W Π`), on P1 and
/// on P2 rounds (of three tasks), on rows with and without many zeros.
#[test]
fn row_side_and_factored_forms_follow_route_a() {
    for &(d, k, zeros) in &[
        (5, 12, false),
        (5, 12, true),
        (8 * 16 + 1, 4, false),
        (8 * 16 + 1, 4, true),
    ] {
        let n = 1200;
        let (mut x, tasks, y) = random_stream(n, d, k, 33);
        if zeros {
            x.iter_mut().enumerate().for_each(|(j, v)| {
                if j % 4 != 0 {
                    *v = 0.0
                }
            });
        }
        let rows = Rows::Dense {
            data: &x,
            n_rows: n,
            n_cols: d,
        };
        let rounds: Vec<i64> = (0..n as i64).map(|t| t / 3).collect();
        for p2 in [false, true] {
            let mut auto = model(k, d, 0.2, 0.1, 0.05, 1e-3, RomcoTrigger::Loss);
            let mut qr = model(k, d, 0.2, 0.1, 0.05, 1e-3, RomcoTrigger::Loss).with_route(SvtRoute::Qr);
            let (sa, sq) = if p2 {
                (
                    learn_rounds(&mut auto, &rows, &tasks, &y, &rounds).unwrap(),
                    learn_rounds(&mut qr, &rows, &tasks, &y, &rounds).unwrap(),
                )
            } else {
                (
                    learn(&mut auto, &rows, &tasks, &y).unwrap(),
                    learn(&mut qr, &rows, &tasks, &y).unwrap(),
                )
            };
            let scale = sq.iter().fold(0.0f64, |a, &f| a.max(f.abs()));
            sa.iter()
                .zip(&sq)
                .for_each(|(a, q)| assert!((a - q).abs() <= 1e-9 * scale, "d={d} k={k} p2={p2}: {a} vs {q}"));
            assert!(
                relative_difference(&auto.u_matrix(), &qr.u_matrix()) < 1e-9,
                "d={d} k={k} p2={p2}"
            );
            let side = if d < k { "n_row_svt" } else { "u_factored" };
            assert!(
                diagnostic(&auto, side) > 0.0,
                "d={d} k={k} p2={p2}: {:?}",
                auto.diagnostics()
            );
            assert_eq!(diagnostic(&auto, "n_qr_svt"), 0.0);
            auto.check_state().unwrap();
        }
    }
}

/// Wide U whose `D̂` is ill-conditioned (two nearly collinear features) with a tiny θ: the
/// row side declines (inaccurate eigenvalues) and every SVT takes route (a); after the
/// first decline the row side is not attempted again (`row_side_hopeless`), and the model
/// follows route (a) forced. On a well-conditioned wide stream it is never ruled out.
#[test]
fn row_side_is_skipped_while_it_would_decline() {
    let (n, d, k) = (600, 5, 12);
    let (mut x, tasks, y) = random_stream(n, d, k, 5);
    x.chunks_exact_mut(d).for_each(|r| r[4] = r[3] + 1e-7 * r[4]);
    let mut auto = model(k, d, 0.2, 0.1, 1e-9, 1e-3, RomcoTrigger::Loss);
    let mut qr = model(k, d, 0.2, 0.1, 1e-9, 1e-3, RomcoTrigger::Loss).with_route(SvtRoute::Qr);
    let mut skipped = 0;
    for t in 0..n {
        let row = Rows::dense(&x[t * d..(t + 1) * d], 1, d);
        skipped += usize::from(auto.row_side_hopeless());
        learn(&mut auto, &row, &tasks[t..=t], &y[t..=t]).unwrap();
        learn(&mut qr, &row, &tasks[t..=t], &y[t..=t]).unwrap();
    }
    // Route (b) on the column side only while at most d columns were live.
    assert_eq!(diagnostic(&auto, "n_row_svt"), 0.0);
    assert!(diagnostic(&auto, "n_gram_svt") <= d as f64);
    assert!(diagnostic(&auto, "n_qr_svt") >= (auto.n_updates - d as u64) as f64);
    assert!(auto.row_side_hopeless());
    assert!(skipped > n / 2, "skipped {skipped}");
    assert!(relative_difference(&auto.u_matrix(), &qr.u_matrix()) < 1e-9);

    let (x, tasks, y) = random_stream(n, d, k, 5);
    let mut wide = model(k, d, 0.2, 0.1, 0.05, 1e-3, RomcoTrigger::Loss);
    for t in 0..n {
        let row = Rows::dense(&x[t * d..(t + 1) * d], 1, d);
        assert!(!wide.row_side_hopeless(), "row {t}");
        learn(&mut wide, &row, &tasks[t..=t], &y[t..=t]).unwrap();
    }
    assert!(diagnostic(&wide, "n_row_svt") > 0.0);
    assert_eq!(diagnostic(&wide, "n_qr_svt"), 0.0);
}

/// With two identical tasks U has two equal columns after every update of the second: `Ĉ`
/// is singular, its small eigenvalue inaccurate, and with `θ = 10⁻⁹ < 10⁻⁶ σ_max` route (b)
/// declines in favour of route (a) (on those updates: after an update of the first task the
/// columns differ by a step, which is well enough conditioned).
#[test]
fn gram_route_declines_an_ill_conditioned_gram_matrix() {
    let (n, d) = (400, 10);
    let (x, mut tasks, y) = random_stream(n, d, 2, 5);
    tasks.iter_mut().for_each(|t| *t = 0);
    // Every example twice, once per task: columns 0 and 1 of U stay equal.
    let x2: Vec<f64> = x.chunks(d).flat_map(|r| r.iter().chain(r).copied()).collect();
    let t2: Vec<i64> = (0..2 * n).map(|t| (t % 2) as i64).collect();
    let y2: Vec<f64> = y.iter().flat_map(|&v| [v, v]).collect();
    let rows = Rows::dense(&x2, 2 * n, d);
    let mut m = model(2, d, 0.1, 0.1, 1e-8, 1e-4, RomcoTrigger::Loss);
    learn(&mut m, &rows, &t2, &y2).unwrap();
    let updates = m.n_updates as f64;
    assert!(diagnostic(&m, "n_qr_svt") >= 0.4 * updates, "{:?}", m.diagnostics());
    assert!(diagnostic(&m, "n_gram_svt") >= 0.4 * updates, "{:?}", m.diagnostics());
    assert_eq!(m.rank(), 1);
    // A threshold above 10⁻⁶ σ_max thresholds the inaccurate values away: route (b) is fine.
    let mut strong = model(2, d, 0.1, 0.1, 1.0, 1e-4, RomcoTrigger::Loss);
    learn(&mut strong, &rows, &t2, &y2).unwrap();
    assert_eq!(diagnostic(&strong, "n_qr_svt"), 0.0);
}

/// INV-R2: mistake trigger, no regularisation, singleton rounds: k linear Perceptrons.
#[test]
fn mistake_trigger_equals_perceptrons() {
    let (n, d, k) = (400, 4, 4);
    let (x, tasks, y) = random_stream(n, d, k, 8);
    let rows = Rows::dense(&x, n, d);
    let mut m = model(k, d, 0.02, 3.0, 0.0, 0.0, RomcoTrigger::Mistake);
    let s = learn(&mut m, &rows, &tasks, &y).unwrap();
    let replayed = independent_linear_scores(&x, &tasks, &y, d, k, 1.0, |margin| margin <= 0.0);
    for (t, &f) in replayed.iter().enumerate() {
        assert_eq!(predict_sign(f), predict_sign(s[t]), "step {t}");
    }
}

/// INV-R3: a huge λ1 keeps U at 0 and a huge λ2 keeps V at 0.
#[test]
fn huge_regularisation_zeroes_the_parts() {
    let (n, d, k) = (200, 5, 3);
    let (x, tasks, y) = random_stream(n, d, k, 4);
    let rows = Rows::dense(&x, n, d);
    let mut m = model(k, d, 0.1, 0.1, 1e12, 1e-4, RomcoTrigger::Loss);
    learn(&mut m, &rows, &tasks, &y).unwrap();
    assert!(m.u_matrix().iter().all(|&v| v == 0.0));
    assert_eq!(m.rank(), 0);
    assert!(m.n_personalized() > 0);
    let mut m = model(k, d, 0.1, 0.1, 1e-4, 1e12, RomcoTrigger::Loss);
    learn(&mut m, &rows, &tasks, &y).unwrap();
    assert!(m.v_matrix().iter().all(|&v| v == 0.0));
    assert_eq!(m.n_personalized(), 0);
    assert!(m.rank() > 0);
}

/// INV-R5: a round without a trigger leaves U and V bit-identical.
#[test]
fn untriggered_rounds_change_nothing() {
    let d = 3;
    let mut m = model(2, d, 0.05, 0.05, 0.01, 0.01, RomcoTrigger::Mistake);
    let x = [1.0, 2.0, 0.0, 0.0, 1.0, 1.0];
    let rows = Rows::dense(&x, 2, d);
    learn_rounds(&mut m, &rows, &[0, 1], &[1.0, 1.0], &[0, 0]).unwrap();
    let before = m.clone();
    // Positive margin below 1: the loss trigger would fire, the mistake trigger does not.
    let s = learn_rounds(&mut m, &rows, &[0, 1], &[1.0, 1.0], &[0, 0]).unwrap();
    assert!(s.iter().all(|&f| f > 0.0 && f < 1.0), "{s:?}");
    assert_eq!(m.u, before.u);
    assert_eq!(m.v, before.v);
    assert_eq!(m.v_scale, before.v_scale);
    assert_eq!(m.n_updates, before.n_updates);
}

/// The maintained C and ||v||² stay close to exact, and the Gram route is the one used.
#[test]
fn maintained_quantities_track_exact_values() {
    let (n, d, k) = (700, 30, 6);
    let (x, tasks, y) = random_stream(n, d, k, 12);
    let rows = Rows::dense(&x, n, d);
    let rounds: Vec<i64> = (0..n as i64).map(|t| t / k as i64).collect();
    let mut m = model(k, d, 0.1, 0.1, 0.5, 0.05, RomcoTrigger::Loss);
    learn_rounds(&mut m, &rows, &tasks, &y, &rounds).unwrap();
    m.fresh_gram();
    let exact = svt::gram(&m.dense_u(), d, k);
    let scale = exact.iter().map(|a| a * a).sum::<f64>().sqrt();
    let drift = exact
        .iter()
        .zip(&m.gram)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    assert!(drift <= 1e-10 * scale, "C drifted: {drift} vs {scale}");
    let vm = m.v_matrix();
    for i in 0..k {
        let norm2: f64 = (0..d).map(|r| vm[r * k + i] * vm[r * k + i]).sum();
        assert!((norm2 - m.v_sq_norm[i]).abs() <= 1e-10 * norm2.max(1e-300));
    }
    assert!(m.svt_counts.n_gram_svt > 0);
    assert_eq!(m.svt_counts.n_numerical_failures, 0);
}

/// Rounds: all rows of a round see the same model, and singleton rounds equal `learn`.
#[test]
fn rounds_share_one_model_and_singletons_equal_p1() {
    let (n, d, k) = (240, 6, 4);
    let (x, tasks, y) = random_stream(n, d, k, 21);
    let rows = Rows::dense(&x, n, d);
    let mut a = model(k, d, 0.1, 0.2, 0.1, 0.05, RomcoTrigger::Loss);
    let mut b = a.clone();
    let singles: Vec<i64> = (0..n as i64).collect();
    assert_eq!(
        learn(&mut a, &rows, &tasks, &y).unwrap(),
        learn_rounds(&mut b, &rows, &tasks, &y, &singles).unwrap()
    );
    assert_eq!(a, b);
    let mut c = model(k, d, 0.1, 0.2, 0.1, 0.05, RomcoTrigger::Loss);
    let rounds: Vec<i64> = (0..n as i64).map(|t| t / k as i64).collect();
    let s = learn_rounds(&mut c, &rows, &tasks, &y, &rounds).unwrap();
    assert!(s[..k].iter().all(|&f| f == 0.0)); // the whole first round sees the zero model
    assert!(c.n_updates() > 0 && c.n_updates() as usize <= n / k);
}

#[test]
fn bad_rounds_are_rejected_before_any_change() {
    let (n, d, k) = (6, 3, 3);
    let (x, tasks, y) = random_stream(n, d, k, 2);
    let rows = Rows::dense(&x, n, d);
    let mut m = model(k, d, 0.1, 0.1, 0.1, 0.1, RomcoTrigger::Loss);
    let before = m.clone();
    assert!(learn_rounds(&mut m, &rows, &tasks, &y, &[0, 0, 1, 0, 2, 2]).is_err());
    assert!(learn_rounds(&mut m, &rows, &[0, 0, 1, 2, 0, 1], &y, &[0, 0, 1, 1, 2, 2]).is_err());
    assert!(learn_rounds(&mut m, &rows, &tasks, &y, &[0, 1]).is_err());
    assert_eq!(m, before);
}

#[test]
fn sparse_and_dense_agree_and_parameters_are_checked() {
    let (n, d, k) = (300, 8, 3);
    let (mut x, tasks, y) = random_stream(n, d, k, 5);
    x.iter_mut().enumerate().for_each(|(j, v)| {
        if j % 3 != 0 {
            *v = 0.0
        }
    });
    let dense = Rows::dense(&x, n, d);
    let csr = Csr::of_dense(&x, d);
    let sparse = csr.rows();
    let mut a = model(k, d, 0.1, 0.1, 0.2, 0.05, RomcoTrigger::Loss);
    let mut b = a.clone();
    let sa = learn(&mut a, &dense, &tasks, &y).unwrap();
    let sb = learn(&mut b, &sparse, &tasks, &y).unwrap();
    sa.iter()
        .zip(&sb)
        .for_each(|(p, q)| assert!((p - q).abs() <= 1e-10 * p.abs().max(1.0)));
    assert!(Romco::build(
        &RomcoParams {
            eta1: -1.0,
            eta2: 0.1,
            lambda1: 0.0,
            lambda2: 0.0,
            update: RomcoTrigger::Loss,
            svt_route: SvtRoute::Auto
        },
        &LinearSetting::new(2, 3)
    )
    .is_err());
    assert!(Romco::build(
        &RomcoParams {
            eta1: 0.1,
            eta2: 0.1,
            lambda1: f64::NAN,
            lambda2: 0.0,
            update: RomcoTrigger::Loss,
            svt_route: SvtRoute::Auto
        },
        &LinearSetting::new(2, 3)
    )
    .is_err());
    assert!(Romco::build(
        &RomcoParams {
            eta1: 0.1,
            eta2: 0.1,
            lambda1: 0.0,
            lambda2: 0.0,
            update: RomcoTrigger::Loss,
            svt_route: SvtRoute::Auto
        },
        &LinearSetting::new(0, 3)
    )
    .is_err());
    assert!(RomcoTrigger::parse("sometimes").is_err());
}

/// Every form of U and side of the Gram survives its saved state (the flat layout of
/// `layout.rs`) unchanged, and a combination of the flat fields no model writes is refused.
#[test]
fn every_form_round_trips_and_inconsistent_layouts_are_refused() {
    use crate::state::{decode, encode};
    let forms = [
        (10, 4, 0.05, SvtRoute::Auto),  // dense U, C explicit or as the SVT's factors
        (200, 3, 0.05, SvtRoute::Auto), // tall U: W Π
        (10, 4, 0.05, SvtRoute::Brand), // a thin SVD
        (3, 8, 0.02, SvtRoute::Auto),   // wide U: the row side
    ];
    let mut seen = Vec::new();
    for (d, k, lambda1, route) in forms {
        let (x, tasks, y) = random_stream(150, d, k, 11);
        let mut m = model(k, d, 0.1, 0.1, lambda1, 1e-4, RomcoTrigger::Loss).with_route(route);
        learn(&mut m, &Rows::dense(&x, 150, d), &tasks, &y).unwrap();
        let bytes = encode(&m).unwrap();
        let back: Romco = decode(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(encode(&back).unwrap(), bytes);
        seen.push((std::mem::discriminant(&m.u), std::mem::discriminant(&m.gram_side)));
    }
    seen.sort_by_key(|s| format!("{s:?}"));
    seen.dedup();
    assert_eq!(seen.len(), 4, "the streams reach every form: {seen:?}");

    // A thin SVD beside a dense U, a right factor without its inverse, a stale C on the row side.
    let (x, tasks, y) = random_stream(150, 10, 4, 11);
    let mut m = model(4, 10, 0.1, 0.1, 0.05, 1e-4, RomcoTrigger::Loss).with_route(SvtRoute::Brand);
    learn(&mut m, &Rows::dense(&x, 150, 10), &tasks, &y).unwrap();
    let UForm::ThinSvd(f) = &m.u else {
        panic!("route (c) holds a thin SVD")
    };
    let layout = |u: Vec<f64>, pi: Vec<f64>, pi_inv: Vec<f64>, brand: Option<&ThinSvd>, stale, rows| {
        let mut saved = layout::RomcoLayout::from(&m);
        saved.u = u.into();
        saved.u_right = pi.into();
        saved.u_right_inv = pi_inv.into();
        saved.brand = brand.map(std::borrow::Cow::Borrowed);
        (saved.gram_stale, saved.gram_unknown) = (stale, rows);
        Romco::try_from(saved)
    };
    assert!(layout(vec![], vec![], vec![], Some(f), false, false).is_ok());
    assert!(layout(vec![0.0; 40], vec![], vec![], Some(f), false, false).is_err());
    assert!(layout(vec![0.0; 40], vec![1.0; 16], vec![], None, false, false).is_err());
    assert!(layout(vec![0.0; 40], vec![], vec![], None, true, true).is_err());
    let mut rows = layout(vec![0.0; 40], vec![], vec![], None, false, true).unwrap();
    rows.check_state().unwrap();
    rows.gram_side = GramSide::Rows {
        vectors: vec![1.0],
        mu: vec![1.0],
    };
    assert!(rows.check_state().is_err(), "one eigenvalue of a 10 x 10 D");
}
