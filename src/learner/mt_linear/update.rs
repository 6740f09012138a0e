//! MTLinear's score and update: gathering an example's coordinates, the step, and the writes
//! (journaled when a batch is).

use super::*;

impl MTLinear {
    /// How the store finds block `r`'s cells, and its data.
    #[inline]
    pub(super) fn block_view(&self, r: u32) -> (Loc<'_>, Option<&[f32]>) {
        match &self.store {
            Store::Hashed { bits, table } => (Loc::Hashed(1 << bits), table.as_deref()),
            Store::Dense { .. } => (Loc::Direct, self.store.dense_block(r)),
            Store::Sparse(cells) => (Loc::Sparse(cells), Some(cells.cells())),
        }
    }

    /// `<w_r, x̃>` for block `r`, summed term by term in the order of [`Self::gather`] (nonzero
    /// features, then the intercept), so that `decision` reproduces `learn`'s scores.
    pub(super) fn block_score(&self, x: &Row, r: u32) -> f64 {
        let (loc, data) = self.block_view(r);
        if data.is_none() {
            return 0.0;
        }
        let stride = self.params.rule.stride();
        let hashed = matches!(loc, Loc::Hashed(_));
        let weight = |key: usize| {
            let at = match stride {
                3 => loc.at::<3>(r, key),
                2 => loc.at::<2>(r, key),
                _ => loc.at::<1>(r, key),
            };
            cell_at::<1>(data, at)[0]
        };
        let mut s = 0.0;
        let mut add = |j: usize, value: f64| {
            if value != 0.0 {
                s += value * f64::from(weight(j));
            }
        };
        match *x {
            Row::Dense(v) => v.iter().enumerate().for_each(|(j, &value)| add(j, value)),
            Row::Sparse { indices, values } => indices
                .iter()
                .zip(values)
                .for_each(|(&j, &value)| add(j as usize, value)),
        }
        if self.params.fit_intercept {
            let key = if hashed {
                INTERCEPT_KEY as usize
            } else {
                self.n_features
            };
            s += f64::from(weight(key));
        }
        s
    }

    /// The nonzero coordinates `(key, value)` of `x̃ = (x, 1)` (VW stores no zero features): the
    /// feature index, and for the intercept [`INTERCEPT_KEY`] under hashing, else `n_features`. Gathered once per update so
    /// that the loops over blocks run without branches.
    pub(super) fn gather_entries(&mut self, x: &Row) {
        self.entries.clear();
        match *x {
            Row::Dense(v) => {
                self.entries.resize(v.len(), (0, 0.0));
                let mut n = 0;
                for (j, &value) in v.iter().enumerate() {
                    // Branch-free compaction: dense rows often hold unpredictable zeros.
                    self.entries[n] = (j, value);
                    n += usize::from(value != 0.0);
                }
                self.entries.truncate(n);
            }
            Row::Sparse { indices, values } => self.entries.extend(
                indices
                    .iter()
                    .zip(values)
                    .filter(|&(_, &value)| value != 0.0)
                    .map(|(&j, &value)| (j as usize, value)),
            ),
        }
        let hashed = matches!(self.store, Store::Hashed { .. });
        if self.params.fit_intercept {
            let key = if hashed {
                INTERCEPT_KEY as usize
            } else {
                self.n_features
            };
            self.entries.push((key, 1.0));
        }
    }

    /// One pass over the coordinates of `φ(x, task)`: records each one's slot, value `u` and the
    /// slot's `G` and `N` (zeros where no cell exists yet) in the scratchpad, and returns the
    /// score `Σ_r B[r, task] Σ_j x̃_j w_r[j]`. The update then reads the scratchpad instead of the
    /// cells, so an example's weights come from memory once (the write pass finds them in cache).
    pub(super) fn gather(&mut self, x: &Row, task: usize) -> f64 {
        self.gather_entries(x);
        let mut pad = std::mem::take(&mut self.pad);
        let terms = self.terms(task);
        let n_coords = self.entries.len() * terms.len();
        pad.set_len(n_coords);
        let m = self.entries.len();
        let stride = self.params.rule.stride();
        let entries = &self.entries[..];
        if let [(r0, b0), (r1, b1)] = terms[..] {
            // Two blocks (the complete graph): one loop over the entries reads both, so the two
            // slots of an entry are fetched together and the two sums run side by side.
            let (coords0, coords1) = pad.split(m);
            let ((loc, d0), (_, d1)) = (self.block_view(r0), self.block_view(r1));
            let (blocks, bs, ids) = ((d0, d1), (b0, b1), (r0, r1));
            let (s0, s1) = match stride {
                3 => gather_pair::<3>(entries, ids, bs, loc, blocks, coords0, coords1),
                2 => gather_pair::<2>(entries, ids, bs, loc, blocks, coords0, coords1),
                _ => gather_pair::<1>(entries, ids, bs, loc, blocks, coords0, coords1),
            };
            self.pad = pad;
            let score = 0.0 + b0 * s0 + b1 * s1;
            return if self.budget.is_some() {
                score + self.tail_offset(task)
            } else {
                score
            };
        }
        let mut score = 0.0;
        for (term, &(r, b)) in terms.iter().enumerate() {
            let (loc, block) = self.block_view(r);
            let span = term * m..(term + 1) * m;
            let coords = Coords {
                slot: &mut pad.slot[span.clone()],
                u: &mut pad.u[span.clone()],
                w: &mut pad.w[span.clone()],
                g: &mut pad.g[span.clone()],
                n: &mut pad.n[span],
            };
            let s = match stride {
                3 => gather_block::<3>(entries, r, b, loc, block, coords),
                2 => gather_block::<2>(entries, r, b, loc, block, coords),
                _ => gather_block::<1>(entries, r, b, loc, block, coords),
            };
            score += b * s;
        }
        self.pad = pad;
        if self.budget.is_some() {
            return score + self.tail_offset(task);
        }
        score
    }

    /// Once the log of a journaled call would outgrow a copy of the model's cells, the model as
    /// it was at the start is kept instead: a copy of the model now, with the logged writes undone
    /// (O(model), once, in a call that has already written more than the model holds), and the
    /// call goes on without logging. So a journal costs at most about a copy of the model.
    pub(super) fn bound_journal(&mut self) -> Result<()> {
        let entry = std::mem::size_of::<(CellAt, store::Cell)>();
        let log = self.journal.cells.len().saturating_mul(entry);
        // The model's size is counted once per call, and only past 1 MiB of log (it walks the
        // dense block slots, one per task).
        if !self.journal.logging() || log <= 1 << 20 {
            return Ok(());
        }
        if self.journal.limit == 0 {
            self.journal.limit = self.store.memory_bytes(self.params.rule.stride()).max(1 << 20);
        }
        if log <= self.journal.limit {
            return Ok(());
        }
        let journal = std::mem::take(&mut self.journal);
        let mut start = self.clone(); // its journal is empty: taken above
        start.journal = journal;
        start.journal_rollback();
        let mut journal = std::mem::take(&mut start.journal);
        journal.cells = Vec::new(); // its room is a copy's worth of memory: given back
        journal.active = true;
        journal.snapshot = Some(Box::new(start));
        self.journal = journal;
        Ok(())
    }

    /// Sets component `c`'s counters, logging the old ones when a batch is journaled.
    pub(super) fn set_stats(&mut self, c: usize, stats: ComponentStats) -> Result<()> {
        if self.journal.logging() {
            Need::new("rows", self.journal.stats.len() + 1, "MTLinear's undo journal")
                .reserve(&mut self.journal.stats, 1)?;
            let old = self.stats[c];
            self.journal
                .stats
                .push((c, [old.n_examples, old.n_updates, old.sum_norm_x]));
        }
        self.stats[c] = stats;
        Ok(())
    }

    /// Phase one computes every rate and the step from the gathered state (see [`Self::gather`])
    /// without writing; phase two writes only if all of it is finite, so a refused update leaves
    /// the model unchanged.
    pub(super) fn apply_update(&mut self, task: usize, y: f64, score: f64) -> Result<()> {
        let MTLinearParams {
            loss,
            rule,
            learning_rate,
            shared_rate,
            ..
        } = self.params;
        let shared = self.shared_term(task).filter(|_| shared_rate != 1.0);
        let c = self.component_of(task);
        let stats = self.stats[c];
        let t = stats.n_examples + 1.0;
        let seen = ComponentStats { n_examples: t, ..stats };
        // Every loss here has ℓ > 0 exactly where ∂ℓ/∂p ≠ 0.
        let g = loss.derivative(y, score);
        // A derivative whose square underflows (|g| < 1.5e-154: a logistic margin beyond ~354)
        // teaches nothing in double precision, and would give a coordinate never updated the rate
        // 1/√0 (a NaN sensitivity): such an example counts as one without loss.
        if g * g < f64::MIN_POSITIVE {
            return self.set_stats(c, seen);
        }
        // What each coordinate's second statistic accumulates per update: g²u² (AdaGrad's G) or,
        // for AROW, u² (its precision grows by u²/r whatever the loss, as in the paper).
        let g2 = if rule == UpdateRule::Arow { 1.0 } else { g * g };
        let (_, u, ws, gs, ns) = self.pad.view();
        self.rates.resize(u.len(), 0.0);
        let (h, norm_x) = match rule {
            UpdateRule::Normalized => normalized_rates(g2, u, gs, ns, &mut self.rates),
            UpdateRule::Adagrad => {
                let mut h = 0.0;
                for ((rate, &u), &g_old) in self.rates.iter_mut().zip(u.iter()).zip(gs.iter()) {
                    *rate = 1.0 / (g_old + g2 * u * u).sqrt();
                    h += u * u * *rate;
                }
                (h, 0.0)
            }
            UpdateRule::Sgd => {
                let rate = 1.0 / t.sqrt();
                self.rates.fill(rate);
                (rate * u.iter().map(|u| u * u).sum::<f64>(), 0.0)
            }
            UpdateRule::Arow => arow_variances(learning_rate, u, gs, &mut self.rates),
        };
        // ρ ≠ 1 only (ρ = 1 is the rule above, bit for bit): the shared block's rates times ρ.
        let h = match shared {
            Some(term) => {
                let span = term * self.entries.len()..(term + 1) * self.entries.len();
                h + scale_shared_rates(shared_rate, &u[span.clone()], &mut self.rates[span])
            }
            None => h,
        };
        let (n_norm, sum_norm) = (stats.n_updates + 1.0, stats.sum_norm_x + norm_x);
        let multiplier = match rule {
            UpdateRule::Normalized => (n_norm / sum_norm).sqrt(),
            _ => 1.0,
        };
        let h = h * multiplier;
        if h == 0.0 {
            // x̃ = 0: nothing to learn from.
            return self.set_stats(c, seen);
        }
        let scale = match rule {
            UpdateRule::Arow => loss.proximal_step(y, score, learning_rate, h),
            _ => loss.invariant_step(y, score, learning_rate, h) * multiplier,
        };
        let WriteBounds {
            max_w,
            max_g,
            max_u,
            sum_ur,
            sum_u2,
            rates_finite,
        } = write_bounds(u, &self.rates, ws, gs);
        if !(h.is_finite() && scale.is_finite() && rates_finite) {
            return Err(Error::Numerical(format!(
                "MTLinear: non-finite step (sensitivity {h}, step {scale}) on a task-{task} example; update refused"
            )));
        }
        // Every value written must fit f32. Bounds that hold even when coordinates collide in one
        // slot (each adds its own change): |w'| <= max |w| + Σ |Δw|, G' <= max G + g² Σ u²,
        // N' <= max |u| (rescaling only shrinks w).
        let bounds = [max_w + scale.abs() * sum_ur, max_g + g2 * sum_u2, max_u];
        if !bounds.iter().all(|&b| b < f64::from(f32::MAX)) {
            return Err(Error::Numerical(format!(
                "MTLinear: a weight or statistic would exceed single precision ({bounds:?}) on a task-{task} \
                 example; update refused"
            )));
        }
        self.write_phase(task, g2, scale)?;
        self.set_stats(
            c,
            ComponentStats {
                n_examples: t,
                n_updates: n_norm,
                sum_norm_x: sum_norm,
            },
        )?;
        self.n_updates += 1;
        Ok(())
    }

    /// Phase two: allocates what the example needs (on `Err` nothing has changed), logs the
    /// cells' values when journaled, then writes the coordinates in gather order, `n_entries`
    /// per block of the task's terms.
    pub(super) fn write_phase(&mut self, task: usize, g2: f64, scale: f64) -> Result<()> {
        let mut term_buf = std::mem::take(&mut self.term_buf);
        term_buf.clear();
        term_buf.extend_from_slice(&self.terms(task));
        let outcome = self
            .prepare_writes(task, &term_buf)
            .and_then(|()| self.write_terms(&term_buf, g2, scale));
        self.term_buf = term_buf;
        outcome
    }

    pub(super) fn write_terms(&mut self, terms: &[(u32, f64)], g2: f64, scale: f64) -> Result<()> {
        let stride = self.params.rule.stride();
        let n_entries = self.entries.len();
        let n_coords = n_entries * terms.len();
        self.bound_journal()?;
        // Under a budget a created record is logged too.
        let logged = if self.budget.is_some() { 2 * n_coords } else { n_coords };
        self.journal.reserve_cells(logged)?;
        if self.tracker.is_some() {
            self.note_shared_writes(terms);
        }
        let journal = &mut self.journal;
        let pad = &mut self.pad;
        match &mut self.store {
            Store::Hashed { bits, table } => {
                if table.is_none() {
                    let n = 1usize << *bits;
                    *table =
                        Some(Need::new("hash_bits", *bits as usize, "MTLinear's weight table").zeroed(&[n, stride])?);
                    journal.new_table |= journal.logging();
                }
                let data = table.as_mut().expect("allocated above");
                if journal.logging() && !journal.new_table {
                    for &at in &pad.slot[..n_coords] {
                        journal.cells.push((CellAt::Flat(at), read_cell(data, at, stride)));
                    }
                }
                // Colliding coordinates share a slot: each reads what the previous one wrote.
                let (slot, u) = (&pad.slot[..n_coords], &pad.u[..n_coords]);
                let rates = &self.rates[..n_coords];
                match stride {
                    3 => write_block::<3>(data, slot, u, rates, g2, scale),
                    2 => write_block::<2>(data, slot, u, rates, g2, scale),
                    _ => write_block::<1>(data, slot, u, rates, g2, scale),
                }
            }
            store @ Store::Dense { .. } => {
                // The blocks this example touches, allocated before anything is written.
                let width = self.n_features + usize::from(self.params.fit_intercept);
                let mut fresh = [false; 8];
                for (i, &(r, _)) in terms.iter().enumerate() {
                    if store.dense_block(r).is_none() {
                        let block =
                            Need::new("n_features", width, "an MTLinear weight block").zeroed(&[width, stride])?;
                        if journal.logging() {
                            Need::new("rows", journal.new_blocks.len() + 1, "MTLinear's undo journal")
                                .reserve(&mut journal.new_blocks, 1)?;
                            journal.new_blocks.push(r);
                        }
                        *store.dense_slot(r) = Some(block);
                        if let Some(f) = fresh.get_mut(i) {
                            *f = true;
                        }
                    }
                }
                for (term, &(r, _)) in terms.iter().enumerate() {
                    let data = store.dense_block_mut(r).expect("allocated above");
                    let span = term * n_entries..(term + 1) * n_entries;
                    // A block allocated by this update is dropped on rollback: nothing to log.
                    if journal.logging() && !fresh.get(term).copied().unwrap_or(false) {
                        for &at in &pad.slot[span.clone()] {
                            journal.cells.push((CellAt::Block(r, at), read_cell(data, at, stride)));
                        }
                    }
                    let args = WriteArgs {
                        slot: &pad.slot[span.clone()],
                        u: &pad.u[span.clone()],
                        w: &pad.w[span.clone()],
                        g: &pad.g[span.clone()],
                        n: &pad.n[span.clone()],
                        rates: &self.rates[span],
                        g2,
                        scale,
                    };
                    write_distinct(data, stride, &args);
                }
            }
            Store::Sparse(cells) => {
                // Cells for the pairs that have none, created before anything is written (an
                // allocation failure removes those created so far).
                let before = cells.len();
                // Under a budget records also move (evictions): their creation is logged.
                let (log_inserts, log_len) = (journal.logging() && cells.chains.is_some(), journal.cells.len());
                for (term, &(r, _)) in terms.iter().enumerate() {
                    for i in 0..n_entries {
                        let at = &mut pad.slot[term * n_entries + i];
                        if *at == ABSENT {
                            match cells.insert(r, self.entries[i].0 as u32) {
                                Ok(new) => {
                                    *at = new;
                                    if log_inserts {
                                        journal.cells.push((CellAt::Inserted, [0.0; 3]));
                                    }
                                }
                                Err(e) => {
                                    while cells.len() > before {
                                        cells.pop();
                                    }
                                    journal.cells.truncate(log_len);
                                    return Err(e);
                                }
                            }
                        }
                    }
                }
                let data = cells.cells_mut();
                if journal.logging() {
                    let existing = journal.sparse_len * stride;
                    for &at in &pad.slot[..n_coords] {
                        if at < existing {
                            journal.cells.push((CellAt::Flat(at), read_cell(data, at, stride)));
                        }
                    }
                }
                // Distinct pairs, distinct cells: one vectorised write over every block.
                let args = WriteArgs {
                    slot: &pad.slot[..n_coords],
                    u: &pad.u[..n_coords],
                    w: &pad.w[..n_coords],
                    g: &pad.g[..n_coords],
                    n: &pad.n[..n_coords],
                    rates: &self.rates[..n_coords],
                    g2,
                    scale,
                };
                write_distinct(data, stride, &args);
            }
        }
        Ok(())
    }
}

/// The values of the cell at `at` (padded to three floats).
#[inline(always)]
pub(super) fn read_cell(data: &[f32], at: usize, stride: usize) -> store::Cell {
    let mut cell = [0.0f32; 3];
    cell[..stride].copy_from_slice(&data[at..at + stride]);
    cell
}
