//! The SIMD kernels against naive loops, under every level this CPU runs.

use super::*;
use crate::rng::SplitMix64;

#[test]
fn levels_parse_order_and_never_exceed_the_cpu() {
    for level in [SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512] {
        assert_eq!(SimdLevel::parse(level.name()), Some(level));
        assert_eq!(
            SimdLevel::parse(&format!(" {} ", level.name().to_uppercase())),
            Some(level)
        );
    }
    assert_eq!(SimdLevel::parse("sse9"), None);
    assert!(SimdLevel::Portable < SimdLevel::Avx2 && SimdLevel::Avx2 < SimdLevel::Avx512);
    assert!(level() <= detected_level());
}

fn random(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect()
}

#[test]
fn columns_dot_matches_naive_dots_in_every_build() {
    for &(d, m) in &[(0, 3), (1, 1), (7, 5), (8, 4), (17, 6), (400, 12), (401, 13), (33, 1)] {
        let b = random(d * m, (d * 31 + m) as u64);
        let x = random(d, 7);
        for level in runnable_levels() {
            let name = level.name();
            let mut out = vec![f64::NAN; m];
            with_level(level, || columns_dot(&b, d, m, &x, &mut out));
            for j in 0..m {
                let terms: Vec<f64> = (0..d).map(|i| b[j * d + i] * x[i]).collect();
                let want: f64 = terms.iter().sum();
                let scale: f64 = 1.0 + terms.iter().map(|t| t.abs()).sum::<f64>();
                assert!((out[j] - want).abs() <= 1e-13 * scale, "{name} d={d} m={m} j={j}");
            }
        }
    }
}

#[test]
fn symmetric_kernels_match_naive_loops_in_every_build() {
    for &(n, cap) in &[(0, 0), (1, 1), (3, 5), (8, 8), (13, 16), (40, 41)] {
        let q = random(cap * cap.max(1), n as u64 + 1);
        let x = random(n, 2);
        let v = random(n, 3);
        // Q as the symmetric matrix its lower triangle defines.
        let sym = |q: &[f64], i: usize, j: usize| if j <= i { q[i * cap + j] } else { q[j * cap + i] };
        let want: Vec<f64> = (0..n).map(|i| (0..n).map(|j| sym(&q, i, j) * x[j]).sum()).collect();
        let mut want_q = q.clone();
        for i in 0..n {
            for j in 0..=i {
                want_q[i * cap + j] = (q[i * cap + j] + x[i] * x[j]) - v[i] * v[j];
            }
        }
        let mut y = vec![f64::NAN; n];
        for level in runnable_levels() {
            let name = level.name();
            let mut qq = q.clone();
            let diag = with_level(level, || {
                sym_lower_matvec(&q, cap, n, &x, &mut y);
                lower_rank2_update(&mut qq, cap, n, &x, &v)
            });
            for i in 0..n {
                assert!(
                    (y[i] - want[i]).abs() <= 1e-13 * (1.0 + n as f64),
                    "{name} n={n} y[{i}]"
                );
                for j in 0..cap {
                    let (got, exp) = (qq[i * cap + j], want_q[i * cap + j]);
                    assert!((got - exp).abs() <= 1e-15 * 4.0, "{name} n={n} q[{i},{j}]");
                }
            }
            let want_diag: f64 = (0..n).map(|i| want_q[i * cap + i]).sum();
            assert!((diag - want_diag).abs() <= 1e-13 * (1.0 + n as f64), "{name} diag");
        }
    }
}

#[test]
fn matmul_matches_naive_products_in_every_build() {
    for &(rows, inner, cols) in &[
        (1, 1, 1),
        (12, 12, 12),
        (5, 3, 13),
        (9, 0, 4),
        (3, 7, 2),
        (16, 16, 17),
        (11, 28, 28),
    ] {
        let a = random(rows * inner, 3);
        let b = random(inner * cols, 4);
        for level in runnable_levels() {
            let name = level.name();
            let mut out = vec![f64::NAN; rows * cols];
            with_level(level, || matmul(&a, &b, rows, inner, cols, &mut out));
            for i in 0..rows {
                for c in 0..cols {
                    let want: f64 = (0..inner).map(|k| a[i * inner + k] * b[k * cols + c]).sum();
                    assert!(
                        (out[i * cols + c] - want).abs() <= 1e-13 * (1.0 + inner as f64),
                        "{name} {rows}x{inner}x{cols}"
                    );
                }
            }
        }
    }
}
