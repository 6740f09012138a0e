//! Memory floors: the least memory traffic a pass of a learner must cause, timed on the same
//! stream, so that a bench can say how far a pass is from what its state's size allows
//! (`benches/compare_vw.py`). Not a learner: nothing here is used by one.

use std::time::Instant;

use crate::alloc::Need;
use crate::data::{Row, Rows};
use crate::error::{invalid, Result};

/// One online pass's memory floor on the complete graph's feature map, with MTLinear's layout
/// (one block of `n_features + 1` cells per task and a shared block, `stride` f32 per cell, block
/// by block): for each row in order, read the weight of every non-zero (and the intercept) in the
/// shared block and in the row's task block and sum them (the score), then write every value of
/// both cells once (the update: `w += c u`, `G += u²`, `N = max(N, |u|)` for `stride = 3`), with
/// none of the rule's arithmetic. Every learner whose update writes each coordinate of `φ(x, i)`
/// with this state does at least this. Returns the seconds of the pass (the state is allocated
/// and zeroed before the clock starts) and the sum of the scores (so the reads are not elided).
pub fn complete_graph_pass(rows: &Rows, tasks: &[i64], n_tasks: usize, stride: usize) -> Result<(f64, f64)> {
    rows.validate()?;
    let (n_rows, n_features) = (rows.len(), rows.n_cols());
    if tasks.len() != n_rows || tasks.iter().any(|&t| t < 0 || t as usize >= n_tasks) {
        return Err(invalid("tasks", format!("need {n_rows} task ids in [0, {n_tasks})")));
    }
    if !(1..=3).contains(&stride) {
        return Err(invalid("stride", format!("must be 1, 2 or 3, got {stride}")));
    }
    let width = n_features + 1;
    let block_len = width * stride;
    let mut table =
        Need::new("n_features", width, "the floor's blocks").zeroed::<f32>(&[n_tasks.saturating_add(1), block_len])?;
    let (shared, own) = table.split_at_mut(block_len);
    let mut cells = Vec::<(usize, f64)>::new();
    let mut total = 0.0;
    let start = Instant::now();
    for i in 0..n_rows {
        // As the learners do: the next row's cells start loading while this row is learnt.
        if i + 1 < n_rows {
            prefetch_cells(
                rows.row(i + 1),
                shared,
                &own[tasks[i + 1] as usize * block_len..][..block_len],
                stride,
            );
        }
        cells.clear();
        match rows.row(i) {
            Row::Dense(v) => cells.extend(v.iter().enumerate().filter(|(_, &x)| x != 0.0).map(|(j, &x)| (j, x))),
            Row::Sparse { indices, values } => cells.extend(
                indices
                    .iter()
                    .zip(values)
                    .filter(|(_, &x)| x != 0.0)
                    .map(|(&j, &x)| (j as usize, x)),
            ),
        }
        cells.push((n_features, 1.0));
        let task = &mut own[tasks[i] as usize * block_len..][..block_len];
        let mut score = 0.0;
        for &(j, x) in &cells {
            score += x * (f64::from(shared[j * stride]) + f64::from(task[j * stride]));
        }
        let c = if score > 0.0 { -0.01 } else { 0.01 };
        for &(j, u) in &cells {
            for block in [&mut *shared, &mut *task] {
                let cell = &mut block[j * stride..(j + 1) * stride];
                cell[0] = (f64::from(cell[0]) + c * u) as f32;
                if stride >= 2 {
                    cell[1] = (f64::from(cell[1]) + u * u) as f32;
                }
                if stride >= 3 {
                    cell[2] = cell[2].max(u.abs() as f32);
                }
            }
        }
        total += score;
    }
    Ok((start.elapsed().as_secs_f64(), total))
}

/// Hints the cells of a sparse row's features in both blocks (a hint: no effect on results).
fn prefetch_cells(row: Row, shared: &[f32], own: &[f32], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Row::Sparse { indices, .. } = row {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for &j in indices {
            let at = j as usize * stride;
            for block in [shared, own] {
                if let Some(cell) = block.get(at..at + stride) {
                    // SAFETY: a prefetch is a hint on a valid address; it never faults.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(cell.as_ptr().cast()) };
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, shared, own, stride);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_reads_what_it_wrote() {
        // Two rows of task 0 sharing feature 1: the second row's score sees the first's writes.
        let (indptr, indices, data) = ([0i64, 1, 2], [1u32, 1], [1.0, 1.0]);
        let rows = Rows::Csr {
            indptr: &indptr,
            indices: &indices,
            data: &data,
            n_cols: 3,
        };
        let (secs, total) = complete_graph_pass(&rows, &[0, 0], 2, 3).unwrap();
        assert!(secs >= 0.0);
        // Row 1 scores 0 and steps +0.01 on feature 1 and the intercept of both blocks; row 2
        // then reads 4 weights of 0.01 (as f32).
        assert!((total - 4.0 * f64::from(0.01f32)).abs() < 1e-9, "{total}");
    }

    #[test]
    fn bad_task_ids_are_refused() {
        let rows = Rows::dense(&[1.0, 2.0], 1, 2);
        assert!(complete_graph_pass(&rows, &[2], 2, 3).is_err());
        assert!(complete_graph_pass(&rows, &[0], 2, 4).is_err());
    }
}
